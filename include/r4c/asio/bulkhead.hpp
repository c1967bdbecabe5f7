// SPDX-License-Identifier: Apache-2.0
// The bulkhead's asynchronous face: async_execute (any Asio completion token). Included by
// <r4c/asio.hpp>.
//
// A call holds its slot until its operation completes. A full bulkhead completes the caller at
// once with BulkheadFullException, without starting the operation. Cancelling the caller
// completes it at once with operation_aborted, frees the slot, and forwards the cancellation to
// the operation.
#pragma once

#include <asio/async_result.hpp>
#include <utility>

#include "r4c/bulkhead.hpp"
#include "r4c/detail/async_call.hpp"

namespace r4c {
namespace detail {

// An asynchronous call's slot in a bulkhead: freed however the call ends.
struct BulkheadHold {
  BulkheadPermit permit;

  template <class Outcome>
  void completed(const Outcome&) noexcept {
    permit.release();
  }
  void cancelled() noexcept { permit.release(); }
};

template <class T>
struct BulkheadInitiation {
  Bulkhead* bulkhead;

  template <class Handler, class Op>
  void operator()(Handler handler, Op op) const {
    BulkheadPermit permit = bulkhead->try_acquire();  // a refusal is counted in `rejected`
    if (!permit) [[unlikely]] {
      fail_at_once<T>(std::move(handler), bulkhead->rejection());
      return;
    }
    GuardedCall<T, Handler, BulkheadHold>::start(std::move(handler), op,
                                                 BulkheadHold{std::move(permit)});
  }
};

}  // namespace detail

template <class T, class Op, class Token>
auto Bulkhead::async_execute(Op&& op, Token&& token) {
  return asio::async_initiate<Token, detail::AsyncSignature<T>>(detail::BulkheadInitiation<T>{this},
                                                                token, std::forward<Op>(op));
}

}  // namespace r4c
