// SPDX-License-Identifier: Apache-2.0
// The circuit breaker's asynchronous face: async_execute (any Asio completion token). Included
// by <r4c/asio.hpp>.
//
// A call takes the breaker's permission when it starts; a breaker that does not permit it
// completes the caller at once with CallNotPermittedException (counted in not_permitted_calls),
// without starting the operation. When the operation completes, its outcome is recorded with
// its duration to that completion, classified as execute() classifies (ignore_on, then
// record_on, by type and by predicate; a result through record_result). Every state behaves as
// for execute(): forced_open rejects, disabled and metrics_only permit. Cancelling the caller
// completes it at once with operation_aborted, gives the permission back without recording anything
// (a half-open trial returns), and forwards the cancellation to the operation.
#pragma once

#include <asio/async_result.hpp>
#include <chrono>
#include <type_traits>
#include <utility>

#include "r4c/circuit_breaker.hpp"
#include "r4c/clock.hpp"
#include "r4c/detail/async_call.hpp"

namespace r4c {
namespace detail {

// An asynchronous call's permission: an outcome when the operation completes, none when the
// call was cancelled or the operation abandoned.
struct BreakerHold {
  CircuitBreakerPermit permit;
  CircuitBreaker* breaker;
  std::chrono::nanoseconds start;  // on the breaker's clock

  template <class T>
  void completed(const AsyncOutcome<T>& outcome) noexcept {
    const std::chrono::nanoseconds duration = breaker->clock()->now() - start;
    if constexpr (!std::is_void_v<T>) {
      if (!outcome.failure && outcome.value) {
        try {
          breaker->record_result<std::remove_cvref_t<T>>(permit, *outcome.value, duration);
        } catch (...) {
          // A throwing result predicate gave the permit back; the caller still gets the
          // result (the completion is under way: there is no call left to fail).
        }
        return;
      }
    }
    breaker->record_outcome(permit, outcome.failure, duration);
  }
  void cancelled() noexcept { permit.release(); }
};

template <class T>
struct BreakerInitiation {
  CircuitBreaker* breaker;

  template <class Handler, class Op>
  void operator()(Handler handler, Op op) const {
    CircuitBreakerPermit permit = breaker->try_acquire();  // a refusal is counted
    if (!permit) [[unlikely]] {
      fail_at_once<T>(std::move(handler), breaker->rejection());
      return;
    }
    GuardedCall<T, Handler, BreakerHold>::start(
        std::move(handler), op, BreakerHold{std::move(permit), breaker, breaker->clock()->now()});
  }
};

}  // namespace detail

template <class T, class Op, class Token>
auto CircuitBreaker::async_execute(Op&& op, Token&& token) {
  return asio::async_initiate<Token, detail::AsyncSignature<T>>(detail::BreakerInitiation<T>{this},
                                                                token, std::forward<Op>(op));
}

}  // namespace r4c
