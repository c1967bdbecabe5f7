// The retry's asynchronous face: async_execute (any Asio completion token). Included by
// <r4c/asio.hpp>.
//
// A call runs its operation; on a failure it decides exactly as Retry::execute does (retry_on /
// abort_on, the result predicate, max_attempts) and waits the same backoff on a timer on the
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

#include <asio/async_result.hpp>
#include <asio/bind_allocator.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>
#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <optional>
#include <type_traits>
#include <utility>

#include "r4c/clock.hpp"
#include "r4c/detail/async_call.hpp"
#include "r4c/detail/timer.hpp"
#include "r4c/retry.hpp"

namespace r4c {
namespace detail {

// One asynchronous retried call. Attempts run one at a time; each is tagged with its number.
//
// References: the answer's, the attempt's (while an attempt runs) and the timer's (from
// scheduling until its posted step has run, or until a cancellation removed it before it
// fired). Whoever gives back the timer's reference also ends the wait's work on the caller's
// executor. The decision after an attempt, the start of a wait and the start of the next
// attempt run in the attempt's completion and the timer's posted step, on the caller's
// executor; the caller's cancellation is emitted there too (Asio's rule for cancellation
// slots), and the answered() checks after each step cover a cancellation on another thread.
template <class T, class Handler, class Op>
class RetryCall final : public AsyncCallBase<RetryCall<T, Handler, Op>, T, Handler> {
  using Base = AsyncCallBase<RetryCall, T, Handler>;

 public:
  RetryCall(Handler handler, Retry& retry, Op op)
      : Base(std::move(handler)),
        retry_(&retry),
        clock_(retry.clock().get()),
        op_(std::move(op)),
        timer_(this) {}

  /// Starts the first attempt, inside the initiating function.
  static void start(Handler handler, Op op, Retry& retry) {
    RetryCall* call = Base::create(std::move(handler), retry, std::move(op));
    call->watch_caller();
    call->start_attempt();
  }

  void on_cancel() {
    stop_waiting();
    inner_cancel_.emit(asio::cancellation_type::all);  // reaches a running attempt
    if (clock_->cancel(timer_)) {
      // Removed before firing: the timer's reference and work are ours (the reference keeps
      // this alive past the answer). The work ends after the answer is posted, so that the
      // caller's context never runs out of work in between.
      this->answer_later(aborted_exception());
      work_.reset();
      this->release();  // the timer's
    } else {
      this->answer_later(aborted_exception());
    }
  }

  void inner_completed(int tag, AsyncOutcome<T> outcome) {
    ReleaseOnExit release_attempt{this};
    if (tag != attempt_ || this->answered()) return;  // cancelled: ignored, never counted
    const int attempt = attempt_;
    const int max_attempts = retry_->max_attempts_;
    if (outcome.failure) {
      if (attempt >= max_attempts || !retry_->retryable(outcome.failure)) {
        if (this->claim()) {
          retry_->count_failure(attempt);
          this->answer(std::move(outcome.failure));  // the same exception object
        }
        return;
      }
    } else {
      bool wanted = true;
      if constexpr (!std::is_void_v<T>) {
        using Value = std::remove_cvref_t<T>;
        const std::function<bool(const Value&)>* retry_result =
            retry_->config_.template result_predicate<Value>();
        if (retry_result != nullptr) [[unlikely]] {
          try {
            wanted = !(*retry_result)(static_cast<const Value&>(*outcome.value));
          } catch (...) {
            // A throwing predicate is not the operation's failure: it ends the call.
            if (this->claim()) {
              retry_->count_failure(attempt);
              this->answer(std::current_exception());
            }
            return;
          }
        }
      }
      if (wanted || attempt >= max_attempts) {
        if (this->claim()) {
          if (wanted) {
            retry_->count_success(attempt);
          } else {
            retry_->count_failure(attempt);  // out of attempts: the last result is returned
          }
          this->answer(std::exception_ptr(), std::move(outcome.value));
        }
        return;
      }
    }
    outcome = {};  // the failure or unwanted result is destroyed before the wait, as in execute()
    wait_after(attempt);
  }

  void inner_abandoned(int) noexcept {
    if (this->claim()) {
      // No answer will come: the caller's handler is destroyed uncalled, as Asio does.
      this->stop_watching_caller();
      this->release();  // the answer's
    }
    this->release();  // the attempt's
  }

  asio::cancellation_slot inner_slot(int) noexcept { return inner_cancel_.slot(); }

 private:
  class Timer final : public TimerTask {
   public:
    explicit Timer(RetryCall* call) noexcept : call_(call) {}
    // On the timer thread (or in ManualClock::advance): acts on the caller's executor, with
    // the timer's reference.
    void fire() noexcept override {
      RetryCall* call = call_;
      asio::post(call->caller_executor(),
                 asio::bind_allocator(call->allocator(), [call] { call->waited(); }));
    }

   private:
    RetryCall* call_;
  };

  struct ReleaseOnExit {
    RetryCall* call;
    ~ReleaseOnExit() { call->release(); }
  };

  using WorkGuard = std::optional<asio::executor_work_guard<typename Base::CallerExecutor>>;

  void start_attempt() {
    this->add_ref();                                  // the attempt's
    op_(InnerHandler<RetryCall, T>(this, attempt_));  // throwing: abandoned (see the top)
  }

  // Counts the retry and waits its backoff on the clock, as Retry::wait_after does.
  void wait_after(int failed_attempt) {
    std::chrono::nanoseconds span;
    try {
      span = retry_->begin_wait(failed_attempt);  // counts in retries and waiting_calls
    } catch (...) {
      if (this->claim()) {
        retry_->count_failure(failed_attempt);
        this->answer(std::current_exception());
      }
      return;
    }
    waiting_.store(true, std::memory_order_release);
    attempt_ = failed_attempt + 1;
    this->add_ref();  // the timer's
    // A waiting call keeps its caller's context running (io_context::run() does not return),
    // as an Asio timer would.
    work_.emplace(this->caller_executor());
    try {
      // A deadline already reached (no wait on a ManualClock) fires at once: it posts.
      clock_->schedule(timer_, clock_->now() + span);
    } catch (...) {
      // Not scheduled (std::bad_alloc): the call ends here, as a failed sleep ends execute().
      stop_waiting();
      if (this->claim()) {
        retry_->count_failure(failed_attempt + 1);
        this->answer(std::current_exception());
      }
      work_.reset();
      this->release();  // the timer's
      return;
    }
    if (this->answered()) {
      // A cancellation on another thread came between the decision and the schedule. The
      // clock's lock orders its removal of the timer (and of work_) after the lines above.
      stop_waiting();
      if (clock_->cancel(timer_)) {
        work_.reset();
        this->release();  // the timer's
      }
    }
  }

  // The wait is over: starts the next attempt unless the caller cancelled meanwhile.
  void waited() {
    ReleaseOnExit release_timer{this};
    // fire() may still be returning on the timer thread: this waits for it, so that nothing
    // touches the clock once the caller is answered (the clock may be gone by then).
    clock_->cancel(timer_);
    stop_waiting();
    work_.reset();  // this step is work of its own
    if (this->answered()) return;
    start_attempt();
  }

  void stop_waiting() noexcept {
    if (waiting_.exchange(false, std::memory_order_acq_rel)) retry_->end_wait();
  }

  Retry* retry_;
  Clock* clock_;
  Op op_;
  int attempt_ = 1;  // the running or next attempt's number, the first being 1
  Timer timer_;
  WorkGuard work_;  // while the timer's reference is held
  asio::cancellation_signal inner_cancel_;
  std::atomic<bool> waiting_{false};  // counted in waiting_calls; ended once per wait
};

template <class T>
struct RetryInitiation {
  Retry* retry;

  template <class Handler, class Op>
  void operator()(Handler handler, Op op) const {
    RetryCall<T, Handler, Op>::start(std::move(handler), std::move(op), *retry);
  }
};

}  // namespace detail

template <class T, class Op, class Token>
auto Retry::async_execute(Op&& op, Token&& token) {
  return asio::async_initiate<Token, detail::AsyncSignature<T>>(detail::RetryInitiation<T>{this},
                                                                token, std::forward<Op>(op));
}

}  // namespace r4c
