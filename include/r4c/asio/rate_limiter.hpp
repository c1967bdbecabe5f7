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
// Cancelling a waiting call completes it at once with operation_aborted and cancels its timer;
// the operation never starts. Its reserved permit stays taken, as a synchronous waiter's would:
// the permit belongs to a coming period, and giving it back would let a later caller overtake
// those already waiting. The limiter holds nothing while the operation runs: cancelling then
// completes the caller at once and forwards the cancellation to the operation, whose late
// completion is ignored.
#pragma once

#include <asio/async_result.hpp>
#include <asio/bind_allocator.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>
#include <atomic>
#include <chrono>
#include <exception>
#include <optional>
#include <utility>

#include "r4c/clock.hpp"
#include "r4c/detail/async_call.hpp"
#include "r4c/detail/timer.hpp"
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
//
// References: the answer's, the timer's (from scheduling until its posted step has run, or
// until a cancellation removed it before it fired) and the operation's. Whoever gives back
// the timer's reference also ends the wait's work on the caller's executor.
template <class T, class Handler, class Op>
class RateLimitedCall final : public AsyncCallBase<RateLimitedCall<T, Handler, Op>, T, Handler> {
  using Base = AsyncCallBase<RateLimitedCall, T, Handler>;

 public:
  RateLimitedCall(Handler handler, RateLimiter& limiter, Op op)
      : Base(std::move(handler)),
        limiter_(&limiter),
        clock_(limiter.clock().get()),
        op_(std::move(op)),
        timer_(this) {}

  /// Waits until `ready_at` on the limiter's clock (the reservation's wait, already counted in
  /// waiting_calls), then starts `op`.
  static void start(Handler handler, Op op, RateLimiter& limiter,
                    std::chrono::nanoseconds ready_at) {
    RateLimitedCall* call;
    try {
      call = Base::create(std::move(handler), limiter, std::move(op));
    } catch (...) {
      limiter.end_wait();
      throw;
    }
    call->wait_until(ready_at);
  }

  void on_cancel() {
    stop_waiting();
    inner_cancel_.emit(asio::cancellation_type::all);  // reaches the operation if it started
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

  void inner_completed(int, AsyncOutcome<T> outcome) {
    if (this->claim()) this->answer(std::move(outcome.failure), std::move(outcome.value));
    this->release();  // the operation's
  }

  void inner_abandoned(int) noexcept {
    if (this->claim()) {
      // No answer will come: the caller's handler is destroyed uncalled, as Asio does.
      this->stop_watching_caller();
      this->release();  // the answer's
    }
    this->release();  // the operation's
  }

  asio::cancellation_slot inner_slot(int) noexcept { return inner_cancel_.slot(); }

 private:
  class Timer final : public TimerTask {
   public:
    explicit Timer(RateLimitedCall* call) noexcept : call_(call) {}
    // On the timer thread (or in ManualClock::advance): acts on the caller's executor, with
    // the timer's reference.
    void fire() noexcept override {
      RateLimitedCall* call = call_;
      asio::post(call->caller_executor(),
                 asio::bind_allocator(call->allocator(), [call] { call->waited(); }));
    }

   private:
    RateLimitedCall* call_;
  };

  struct ReleaseOnExit {
    RateLimitedCall* call;
    ~ReleaseOnExit() { call->release(); }
  };

  void wait_until(std::chrono::nanoseconds ready_at) {
    this->add_ref();  // the timer's
    // A waiting call keeps its caller's context running (io_context::run() does not return),
    // as an Asio timer would.
    work_.emplace(this->caller_executor());
    this->watch_caller();
    try {
      clock_->schedule(timer_, ready_at);  // a deadline already reached fires at once: it posts
    } catch (...) {
      // Not scheduled (std::bad_alloc): the call ends here, its handler destroyed uncalled.
      stop_waiting();
      this->claim();
      this->stop_watching_caller();
      work_.reset();
      this->release();  // the timer's
      this->release();  // the answer's
      throw;
    }
  }

  // The permit's time came: starts the operation unless the caller cancelled meanwhile. An
  // operation that throws destroyed its handler (abandoned): the call ends without an answer
  // and the exception leaves this step, as any handler's does.
  void waited() {
    ReleaseOnExit release_timer{this};
    // fire() may still be returning on the timer thread: this waits for it, so that nothing
    // touches the clock once the caller is answered (the clock may be gone by then).
    clock_->cancel(timer_);
    stop_waiting();
    work_.reset();  // this step is work of its own
    if (this->answered()) return;
    this->add_ref();  // the operation's
    op_(InnerHandler<RateLimitedCall, T>(this, 0));
  }

  void stop_waiting() noexcept {
    if (waiting_.exchange(false, std::memory_order_acq_rel)) limiter_->end_wait();
  }

  using WorkGuard = std::optional<asio::executor_work_guard<typename Base::CallerExecutor>>;

  RateLimiter* limiter_;
  Clock* clock_;
  Op op_;
  Timer timer_;
  WorkGuard work_;  // while the timer's reference is held
  asio::cancellation_signal inner_cancel_;
  std::atomic<bool> waiting_{true};  // counted in waiting_calls; ended once
};

template <class T>
struct RateLimiterInitiation {
  RateLimiter* limiter;

  template <class Handler, class Op>
  void operator()(Handler handler, Op op) const {
    const RateLimiter::Reservation reservation = limiter->reserve_permit();
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
  return asio::async_initiate<Token, detail::AsyncSignature<T>>(
      detail::RateLimiterInitiation<T>{this}, token, std::forward<Op>(op));
}

}  // namespace r4c
