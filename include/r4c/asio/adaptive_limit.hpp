// SPDX-License-Identifier: Apache-2.0
// The adaptive limit's asynchronous face: async_execute (any Asio completion token) and
// co_execute (a coroutine). Included by <r4c/asio.hpp>.
//
// A call holds its slot until its operation completes, and its latency is measured to that
// completion. A full limit completes the caller at once with LimitExceededException, without
// starting the operation. Cancelling the caller completes it at once with operation_aborted,
// frees the slot without a sample, and forwards the cancellation to the operation.
#pragma once

#include <asio/async_result.hpp>
#include <asio/awaitable.hpp>
#include <asio/error.hpp>
#include <asio/system_error.hpp>
#include <exception>
#include <type_traits>
#include <utility>

#include "r4c/adaptive_limit.hpp"
#include "r4c/detail/async_call.hpp"

namespace r4c {
namespace detail {

// An asynchronous call's hold on a limit: a sample when the operation completes, nothing when
// it was cancelled.
template <class T>
struct LimitHold {
  Permit permit;
  const AdaptiveLimit* limit;

  void completed(const AsyncOutcome<T>& outcome) noexcept {
    if (!outcome.failure) {
      permit.on_success();
    } else if (outcome.code != nullptr ? limit->is_drop(*outcome.code)
                                       : limit->is_drop(outcome.failure)) {
      permit.on_drop();
    } else {
      permit.on_ignore();
    }
  }
  void cancelled() noexcept { permit.on_ignore(); }
};

template <class T>
struct LimitInitiation {
  AdaptiveLimit* limit;

  template <class Handler, class Op>
  void operator()(Handler handler, Op&& op) const {
    Permit permit = limit->try_acquire();
    if (!permit) [[unlikely]] {
      fail_at_once<T>(std::move(handler), limit->rejection());
      return;
    }
    GuardedCall<T, Handler, LimitHold<T>>::start(std::move(handler), op,
                                                 LimitHold<T>{std::move(permit), limit});
  }
};

template <class T, class F>
asio::awaitable<T> co_execute_under(AdaptiveLimit& limit, F f) {
  Permit permit = limit.try_acquire();
  if (!permit) std::rethrow_exception(limit.rejection());
  try {
    if constexpr (std::is_void_v<T>) {
      co_await f();
      permit.on_success();
      co_return;
    } else {
      T result = co_await f();
      permit.on_success();
      co_return result;
    }
  } catch (const asio::system_error& e) {
    // A cancelled coroutine says nothing about the dependency.
    if (e.code() == asio::error::operation_aborted) {
      permit.on_ignore();
    } else if (limit.is_drop(e.code()) || limit.is_drop(std::current_exception())) {
      permit.on_drop();
    } else {
      permit.on_ignore();
    }
    throw;
  } catch (...) {
    if (limit.is_drop(std::current_exception())) {
      permit.on_drop();
    } else {
      permit.on_ignore();
    }
    throw;
  }
}

}  // namespace detail

template <class T, class Op, class Token>
auto AdaptiveLimit::async_execute(Op&& op, Token&& token) {
  return asio::async_initiate<Token, detail::AsyncSignature<T>>(detail::LimitInitiation<T>{this},
                                                                token, std::forward<Op>(op));
}

template <class F>
auto AdaptiveLimit::co_execute(F f) {
  using T = typename std::invoke_result_t<F&>::value_type;
  return detail::co_execute_under<T>(*this, std::move(f));
}

}  // namespace r4c
