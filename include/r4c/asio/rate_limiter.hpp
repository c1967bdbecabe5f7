// SPDX-License-Identifier: Apache-2.0
// The rate limiter's asynchronous face: async_execute (any Asio completion token). Included by
// <r4c/asio.hpp>.
//
// A call takes its permit as RateLimiter::acquire() does, in the same accounting. With a permit
// free now the operation starts at once. With one reserved in a coming period (within
// timeout_duration) the call waits on a timer on the limiter's clock, holding no thread and
// counted in waiting_calls, then starts the operation through the caller's executor. With none
// it completes at once with the limiter's RequestNotPermittedException, the operation not
// started.
//
// A weighted call (async_execute(n, op, token)) takes its n permits from one reservation; a
// weight out of range completes the caller at once with ConfigException R4C-USE-001.
//
// Cancelling a waiting call completes it at once with operation_aborted and cancels its timer;
// the operation never starts. Its reserved permit stays taken, as a synchronous waiter's would:
// the permit belongs to a coming period, and giving it back would let a later caller overtake
// those already waiting. The limiter holds nothing while the operation runs: cancelling then
// completes the caller at once and forwards the cancellation to the operation, whose late
// completion is ignored.
#pragma once

#include <chrono>
#include <exception>
#include <utility>

#include "r4c/detail/async_call.hpp"
#include "r4c/detail/async_wait.hpp"
#include "r4c/rate_limiter.hpp"

namespace r4c {
namespace detail {

// A call that got its permit at once: the limiter holds nothing while the operation runs.
template <class T>
struct NoRateLimiterHold {
  void completed(const AsyncOutcome<T>&) noexcept {}
  void cancelled() noexcept {}
};

// A call waiting for a permit reserved in a coming period, then running its operation.
template <class T, class Handler, class Op>
class RateLimitedCall final
    : public WaitingCall<RateLimitedCall<T, Handler, Op>, T, Handler, RateLimiter, Op> {
  using Base = WaitingCall<RateLimitedCall, T, Handler, RateLimiter, Op>;
  friend Base;

 public:
  using Base::Base;

  /// Waits until `ready_at` on the limiter's clock (the reservation's wait, already counted in
  /// waiting_calls), then starts `op`.
  static void start(Handler handler, Op op, RateLimiter& limiter,
                    std::chrono::nanoseconds ready_at) {
    RateLimitedCall* call;
    try {
      call = Base::create(std::move(handler), limiter, std::move(op), /*waiting=*/true);
    } catch (...) {
      limiter.end_wait();
      throw;
    }
    call->watch_caller();
    // start()'s own reference: once armed, the wait may fire, the operation complete and the
    // caller be answered on other threads before disarm_if_answered() has looked at the call.
    call->add_ref();
    typename Base::ReleaseOnExit release_start{call};
    try {
      call->arm(ready_at);
    } catch (...) {
      // Not scheduled (std::bad_alloc): the call ends here, its handler destroyed uncalled.
      call->stop_waiting();
      call->claim();
      call->stop_watching_caller();
      call->release();  // the answer's
      throw;
    }
    call->disarm_if_answered();
  }

  void inner_completed(int, AsyncOutcome<T> outcome) {
    if (this->claim()) this->answer(std::move(outcome.failure), std::move(outcome.value));
    this->release();  // the operation's
  }

 private:
  void wait_ended() noexcept { this->policy_->end_wait(); }
  void resume() { this->start_operation(0); }
};

template <class T>
struct RateLimiterInitiation {
  RateLimiter* limiter;
  int permits = 1;

  template <class Handler, class Op>
  void operator()(Handler handler, Op op) const {
    RateLimiter::Reservation reservation;
    if (permits == 1) [[likely]] {
      reservation = limiter->reserve_permit();
    } else {
      try {
        reservation = limiter->reserve_permit(permits);
      } catch (const ConfigException&) {
        // A weight no period can grant: the caller's answer, not the initiator's exception.
        fail_at_once<T>(std::move(handler), std::current_exception());
        return;
      }
    }
    using Kind = RateLimiter::Reservation::Kind;
    if (reservation.kind == Kind::now) [[likely]] {
      GuardedCall<T, Handler, NoRateLimiterHold<T>>::start(std::move(handler), op,
                                                           NoRateLimiterHold<T>{});
    } else if (reservation.kind == Kind::refused) {
      fail_at_once<T>(std::move(handler), limiter->rejection());
    } else {
      RateLimitedCall<T, Handler, Op>::start(std::move(handler), std::move(op), *limiter,
                                             reservation.ready_at);
    }
  }
};

}  // namespace detail

template <class T, class Op, class Token>
auto RateLimiter::async_execute(Op&& op, Token&& token) {
  return detail::initiate<T>(detail::RateLimiterInitiation<T>{this}, std::forward<Token>(token),
                             std::forward<Op>(op));
}

template <class T, class Op, class Token>
auto RateLimiter::async_execute(int permits, Op&& op, Token&& token) {
  return detail::initiate<T>(detail::RateLimiterInitiation<T>{this, permits},
                             std::forward<Token>(token), std::forward<Op>(op));
}

}  // namespace r4c
