// SPDX-License-Identifier: Apache-2.0
// The timeout's asynchronous face: async_execute (any Asio completion token). Included by
// <r4c/asio.hpp>.
//
// The deadline is armed on the timeout's clock when the operation starts (never an Asio timer:
// a ManualClock's advance() fires it). If it passes first, the caller completes with this
// timeout's CallTimeoutException (counted in timed_out), the operation is asked to cancel through
// its slot, and its late completion is ignored. If the operation completes first, the deadline
// is unscheduled and the outcome passes through unchanged. Cancelling the caller completes it at
// once with operation_aborted, unschedules the deadline and forwards the cancellation.
#pragma once

#include <asio/bind_allocator.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/post.hpp>
#include <atomic>
#include <cstdint>
#include <exception>
#include <type_traits>
#include <utility>

#include "r4c/clock.hpp"
#include "r4c/detail/async_call.hpp"
#include "r4c/detail/async_context.hpp"
#include "r4c/detail/timer.hpp"
#include "r4c/timeout.hpp"

namespace r4c {
namespace detail {

// One asynchronous call under a timeout. Not a GuardedCall: the deadline claims the call on the
// timer's thread as it fires, so whatever completes after that instant loses (as the
// synchronous path discards a late result), and the timeout is counted only when the caller is
// answered with it.
//
// References: the answer's, the inner operation's, the deadline's and start()'s own. The
// deadline's is given back by whoever claims the call, after Clock::cancel has returned (the
// clock's queue no longer touches the task then). Like every call, it keeps work on the
// caller's executor until answered (AsyncCallBase), so an operation that registers no work of
// its own does not let the caller's io_context run out of work before the deadline answers.
template <class T, class Handler>
class TimeoutCall final : public AsyncCallBase<TimeoutCall<T, Handler>, T, Handler> {
  using Base = AsyncCallBase<TimeoutCall, T, Handler>;

 public:
  TimeoutCall(Handler handler, Timeout& timeout)
      : Base(std::move(handler)),
        timeout_(&timeout),
        deadline_(this),
        // The caller's context shuts down: the deadline must not fire into it later. Taken off
        // the clock before it fired, it claims nothing; the operation, whose handler the
        // context destroys (or which completes), ends the call as without a deadline.
        listing_(
            this->caller_executor(), this,
            [](ContextLink& link) noexcept {
              static_cast<TimeoutCall*>(link.owner)->unschedule();
              return false;
            },
            [](ContextLink&) noexcept {}) {}

  /// Arms the deadline and starts `op`. If `op` throws, the exception leaves start() and the
  /// caller's handler is destroyed uncalled.
  template <class Op>
  static void start(Handler handler, Op op, Timeout& timeout) {
    TimeoutCall* call = Base::create(std::move(handler), timeout);
    call->add_ref();  // the inner operation's
    call->add_ref();  // the deadline's
    call->add_ref();  // start()'s: the operation may end the call before it returns
    Clock& clock = *timeout.clock();
    try {
      if (!call->listing_.list()) {
        throw asio::system_error(asio::error::shut_down);  // its context is being destroyed
      }
      clock.schedule(call->deadline_, clock.now() + timeout.config().timeout());
    } catch (...) {
      call->listing_.unlist();
      for (int i = 0; i < 4; ++i) call->release();  // nothing started
      throw;
    }
    call->watch_caller();
    try {
      op(InnerHandler<TimeoutCall, T>(call, 0));  // a throwing op destroyed it: abandoned
    } catch (...) {
      call->op_started(true);
      throw;
    }
    call->op_started(false);
  }

  void on_cancel() {
    unschedule();
    inner_cancel_.emit(asio::cancellation_type::all);
    this->answer_later(aborted_exception());
    end_deadline();
  }

  void inner_completed(int, AsyncOutcome<T> outcome) {
    if (this->claim()) {
      unschedule();
      this->answer(std::move(outcome.failure), std::move(outcome.value));
      end_deadline();
    }
    this->release();  // the inner operation's
  }

  void inner_abandoned(int) noexcept {
    if (this->claim()) {
      unschedule();
      this->stop_watching_caller();
      this->release();  // the answer's: the caller's handler is destroyed uncalled
      end_deadline();
    }
    this->release();  // the inner operation's
  }

  GuardedSlot inner_slot(int) noexcept { return inner_cancel_.slot(); }

 private:
  struct Deadline final : TimerTask {
    explicit Deadline(TimeoutCall* owner) noexcept : call(owner) {}
    void fire() noexcept override { call->deadline_passed(); }
    TimeoutCall* call;
  };

  // A deadline that fires while `op` is still being started (a very short timeout, or an op
  // that advances a ManualClock) must not answer or emit on the operation's slot before the
  // operation has installed its handler there: whichever of the two comes second acts.
  static constexpr std::uint8_t kStarted = 1;
  static constexpr std::uint8_t kExpired = 2;

  // On the timer's thread, or inside ManualClock::advance.
  void deadline_passed() noexcept {
    if (!this->claim()) return;  // the operation or the caller came first: they unschedule
    // acq_rel: the claim happens before start()'s reading, and start()'s writes before ours.
    if (state_.fetch_or(kExpired, std::memory_order_acq_rel) & kStarted) post_timed_out();
  }

  void op_started(bool threw) {
    if (state_.fetch_or(kStarted, std::memory_order_acq_rel) & kExpired) {
      if (threw) {
        // The exception leaves start(): no answer, as when the operation throws in time.
        unschedule();  // waits for the fire in progress
        this->stop_watching_caller();
        this->release();  // the answer's
        end_deadline();
      } else {
        post_timed_out();
      }
    }
    this->release();  // start()'s
  }

  // The deadline won: on the caller's executor, the operation is asked to cancel and the
  // caller is answered. Takes over the deadline's reference.
  void post_timed_out() {
    asio::post(this->caller_executor(),
               asio::bind_allocator(this->allocator(), TimedOutStep(this)));
  }

  // post_timed_out()'s step run, with the deadline's reference.
  void timed_out() {
    unschedule();  // the queue may still be marking it fired
    inner_cancel_.emit(asio::cancellation_type::all);
    this->answer(timeout_->count_timed_out());
    end_deadline();
  }
  // post_timed_out()'s step destroyed unrun (the caller's context shut down): the call ends
  // without an answer, as Asio destroys the handlers of a context it destroys: the caller's
  // handler is destroyed uncalled (the operation's, destroyed by the same context or completed
  // later, finds the call claimed).
  void timed_out_unrun() noexcept {
    unschedule();  // the queue may still be marking it fired
    this->stop_watching_caller();
    this->release();  // the answer's
    end_deadline();
  }
  using TimedOutStep =
      PostedStep<TimeoutCall, &TimeoutCall::timed_out, &TimeoutCall::timed_out_unrun>;

  // Unschedules the deadline, waiting for a fire in progress (which found the call claimed);
  // once it returns the clock's queue no longer touches the task.
  void unschedule() noexcept { timeout_->clock()->cancel(deadline_); }
  // Gives back the deadline's reference (the last one, only in the posted step), leaving the
  // context's list first: the list holds the call only while the deadline does.
  void end_deadline() noexcept {
    listing_.unlist();
    this->release();
  }

  Timeout* timeout_;
  Deadline deadline_;
  std::atomic<std::uint8_t> state_{0};
  GuardedSignal inner_cancel_;
  ContextListing listing_;  // while the deadline holds the call
};

// The call's type does not depend on the operation's (the operation is invoked at once and
// never kept): one TimeoutCall per handler type, whatever the operations.
template <class T, class Handler, class Op>
using TimeoutCallFor = TimeoutCall<T, Handler>;

}  // namespace detail

template <class T, class Op, class Token>
auto Timeout::async_execute(Op&& op, Token&& token) {
  return detail::initiate<T>(detail::StartInitiation<detail::TimeoutCallFor, T, Timeout>{this},
                             std::forward<Token>(token), std::forward<Op>(op));
}

}  // namespace r4c
