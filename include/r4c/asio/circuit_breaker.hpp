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

  // The permission try_acquire() gave (a refusal is counted there), timed from now.
  static BreakerHold of(CircuitBreaker& breaker, CircuitBreakerPermit permit) {
    return {std::move(permit), &breaker, breaker.clock()->now()};
  }
};

}  // namespace detail

template <class T, class Op, class Token>
auto CircuitBreaker::async_execute(Op&& op, Token&& token) {
  return detail::initiate<T>(detail::AdmitInitiation<T, CircuitBreaker, detail::BreakerHold>{this},
                             std::forward<Token>(token), std::forward<Op>(op));
}

}  // namespace r4c
