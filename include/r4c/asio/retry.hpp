// SPDX-License-Identifier: Apache-2.0
// The retry's asynchronous face: async_execute (any Asio completion token). Included by
// <r4c/asio.hpp>.
//
// A call runs its operation; on a failure it decides exactly as Retry::execute does (retry_on /
// abort_on by type and predicate, the result predicates, max_attempts, fail_after_max_attempts,
// the interval functions, on_attempt's events) and waits the same backoff on a timer on the
// retry's clock, holding no thread and counted in waiting_calls, then invokes the operation
// again (as an lvalue) through the caller's executor. The final failure is the last attempt's,
// the same exception object; an error code reaches the caller as asio::system_error, and
// retry_on / abort_on match it as one. The counters are exactly those of synchronous calls.
//
// Cancelling completes the caller at once with operation_aborted and starts no further
// attempt: during a wait the timer is cancelled; during an attempt the cancellation is
// forwarded to it and its late completion is ignored. A cancelled call counts in no outcome
// counter (it says nothing about the dependency); a wait it began counts in `retries`, as a
// synchronous wait does when it begins.
//
// An operation that throws instead of completing its handler is not an attempt's failure: the
// call ends without an answer (its handler destroyed uncalled, nothing counted) and the
// exception leaves async_execute for the first attempt, or the executor's run() for a later one,
// as any Asio handler's exception does.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <type_traits>
#include <utility>

#include "r4c/detail/async_call.hpp"
#include "r4c/detail/async_wait.hpp"
#include "r4c/retry.hpp"

namespace r4c {
namespace detail {

// One asynchronous retried call. Attempts run one at a time; each is tagged with its number.
//
// The decision after an attempt, the start of a wait and the start of the next attempt run in
// the attempt's completion and the timer's posted step, on the caller's executor; the caller's
// cancellation is emitted there too (Asio's rule for cancellation slots), and the answered()
// checks after each step cover a cancellation on another thread.
template <class T, class Handler, class Op>
class RetryCall final : public WaitingCall<RetryCall<T, Handler, Op>, T, Handler, Retry, Op> {
  using Base = WaitingCall<RetryCall, T, Handler, Retry, Op>;
  friend Base;

 public:
  using Base::Base;

  /// Starts the first attempt, inside the initiating function.
  static void start(Handler handler, Op op, Retry& retry) {
    RetryCall* call = Base::create(std::move(handler), retry, std::move(op), /*waiting=*/false);
    call->watch_caller();
    call->resume();
  }

  void inner_completed(int tag, AsyncOutcome<T> outcome) {
    ReleaseOnExit release_attempt{this};
    if (tag != attempt_ || this->answered()) return;  // cancelled: ignored, never counted
    const int attempt = attempt_;
    const int max_attempts = retry()->max_attempts_.load(std::memory_order_relaxed);
    std::chrono::nanoseconds span{0};
    try {
      if (outcome.failure) {
        if (attempt >= max_attempts || !retry()->retryable(outcome.failure)) {
          return end(attempt, std::move(outcome.failure));  // the same exception object
        }
        RetryOutcome retried;
        if (retry()->wants_failure()) retried.failure = outcome.failure;
        span = retry()->begin_retry(attempt, retried, true);
      } else {
        RetryOutcome retried;
        bool wanted = true;
        if constexpr (std::is_void_v<T>) {
          const std::function<bool()>* retry_void = retry()->config_->void_result_predicate();
          wanted = retry_void == nullptr || !(*retry_void)();
        } else {
          using Value = std::remove_cvref_t<T>;
          const std::function<bool(const Value&)>* retry_result =
              retry()->config_->template result_predicate<Value>();
          const Value& value = *outcome.value;
          wanted = retry_result == nullptr || !(*retry_result)(value);
          retried = RetryOutcome{{}, &value, &typeid(Value)};
        }
        if (wanted) {
          if (this->claim()) {
            retry()->succeeded(attempt);
            this->answer(std::exception_ptr(), std::move(outcome.value));
          }
          return;
        }
        if (attempt >= max_attempts) {  // out of attempts: the last result, or the failure
          if (this->claim()) {
            if (retry()->gave_up_on_result(attempt)) {
              this->answer(retry()->max_retries_exceeded(attempt));
            } else {
              this->answer(std::exception_ptr(), std::move(outcome.value));
            }
          }
          return;
        }
        span = retry()->begin_retry(attempt, retried, false);
      }
    } catch (...) {
      // A throwing predicate or interval function is not the operation's failure: it ends the
      // call, as in execute().
      return end(attempt, std::current_exception());
    }
    outcome = {};  // the failure or unwanted result is destroyed before the wait, as in execute()
    wait_after(attempt, span);
  }

 private:
  using ReleaseOnExit = typename Base::ReleaseOnExit;

  void end(int attempt, std::exception_ptr failure) {
    if (this->claim()) {
      retry()->failed(attempt, failure);
      this->answer(std::move(failure));
    }
  }
  Retry* retry() const noexcept { return this->policy_; }
  void wait_ended() noexcept { retry()->end_wait(); }
  void resume() { this->start_operation(attempt_); }  // throwing: abandoned (see the top)

  // Waits the retry's `span` (counted in retries and waiting_calls) on the clock, as
  // Retry::sleep_for does.
  void wait_after(int failed_attempt, std::chrono::nanoseconds span) {
    this->begin_waiting();
    attempt_ = failed_attempt + 1;
    try {
      this->arm(this->clock_->now() + span);
    } catch (...) {
      // Not scheduled (std::bad_alloc): the call ends here, as a failed sleep ends execute().
      this->stop_waiting();
      if (this->claim()) {
        retry()->count_failure(failed_attempt + 1);
        this->answer(std::current_exception());
      }
      return;
    }
    this->disarm_if_answered();
  }

  int attempt_ = 1;  // the running or next attempt's number, the first being 1
};

}  // namespace detail

template <class T, class Op, class Token>
auto Retry::async_execute(Op&& op, Token&& token) {
  return detail::initiate<T>(detail::StartInitiation<detail::RetryCall, T, Retry>{this},
                             std::forward<Token>(token), std::forward<Op>(op));
}

}  // namespace r4c
