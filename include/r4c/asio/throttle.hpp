// SPDX-License-Identifier: Apache-2.0
// The throttle's asynchronous face: async_execute (any Asio completion token). Included by
// <r4c/asio.hpp>.
//
// A call is let through or rejected locally when it starts; a rejected one completes the
// caller at once with ThrottledException, without starting the operation. When the operation
// completes, its outcome counts as execute() counts it (an accept, the backend's refusal, or
// nothing for an inner policy's rejection). Cancelling the caller completes it at once with
// operation_aborted and forwards the cancellation to the operation; the call then counts as
// nothing, its answer unknown.
#pragma once

#include <type_traits>
#include <utility>

#include "r4c/detail/async_call.hpp"
#include "r4c/throttle.hpp"

namespace r4c {
namespace detail {

// An asynchronous call let through: its outcome, when the operation completes.
struct ThrottleHold {
  ThrottlePermit permit;

  template <class T>
  void completed(const AsyncOutcome<T>& outcome) noexcept {
    if constexpr (!std::is_void_v<T>) {
      if (!outcome.failure && outcome.value) {
        try {
          permit.on_result<std::remove_cvref_t<T>>(*outcome.value);
        } catch (...) {
          // A throwing refused_result left the call unanswered; the caller still gets the
          // result (the completion is under way: there is no call left to fail).
        }
        return;
      }
    }
    permit.on_failure(outcome.failure);  // no failure: an accept
  }
  void cancelled() noexcept { permit = ThrottlePermit(); }

  // The call try_acquire() let through (a local rejection is counted there).
  static ThrottleHold of(Throttle&, ThrottlePermit permit) noexcept { return {std::move(permit)}; }
};

}  // namespace detail

template <class T, class Op, class Token>
auto Throttle::async_execute(Op&& op, Token&& token) {
  return detail::initiate<T>(detail::AdmitInitiation<T, Throttle, detail::ThrottleHold>{this},
                             std::forward<Token>(token), std::forward<Op>(op));
}

}  // namespace r4c
