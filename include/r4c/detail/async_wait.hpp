// SPDX-License-Identifier: Apache-2.0
// An asynchronous call that waits on an r4c clock before it starts its (next) operation, one
// operation at a time: the rate limiter's wait for a reserved permit, the retry's backoff, and
// the adaptive limit's and the bulkhead's waits in their queues (QueueWaitingCall). Included by
// their async faces.
//
// The wait holds no thread: a timer on the policy's clock posts the end of the wait to the
// caller's executor. While it waits, the call keeps work on that executor, as an Asio timer
// would (io_context::run() does not return). Cancelling completes the caller at once with
// operation_aborted, removes the timer or, when it already fired, lets its posted step find
// the call answered; a running operation gets the cancellation through its slot. When the
// caller's context is destroyed during the wait, the call ends without an answer (its handler
// destroyed uncalled, the wait given back), whether the timer had fired (its posted step is
// destroyed unrun) or not (the context's ContextTimers takes it off the clock).
#pragma once

#include <asio/bind_allocator.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>
#include <atomic>
#include <chrono>
#include <optional>
#include <utility>

#include "r4c/clock.hpp"
#include "r4c/detail/async_call.hpp"
#include "r4c/detail/async_context.hpp"
#include "r4c/detail/timer.hpp"

namespace r4c::detail {

/// The base of such a call (CRTP: `Derived` is the final state type), for `Policy` (whose clock
/// times the waits) and the operation `Op`. `Derived` provides
///   void wait_ended() noexcept   the wait is over or abandoned: leave the policy's count
///   void resume()                the wait is over and the call stands: start the operation
///                                (start_operation())
///   void inner_completed(int tag, AsyncOutcome<T>)
///
/// References: the answer's, the operation's (while one runs) and the timer's (from arm()
/// until its posted step has run or was destroyed, or until a cancellation or the context's
/// shutdown removed it before it fired). Whoever gives back the timer's reference also ends
/// the wait's work and takes the call off its context's list (end_timer()).
template <class Derived, class T, class Handler, class Policy, class Op>
class WaitingCall : public AsyncCallBase<Derived, T, Handler> {
  using Base = AsyncCallBase<Derived, T, Handler>;

 public:
  /// `waiting`: the call starts counted as waiting by the policy (see begin_waiting()).
  WaitingCall(Handler handler, Policy& policy, Op op, bool waiting)
      : Base(std::move(handler)),
        clock_(policy.clock().get()),
        policy_(&policy),
        op_(std::move(op)),
        timer_(this),
        waiting_(waiting),
        listing_(
            this->caller_executor(), this,
            [](ContextLink& link) noexcept {
              // Under the list's lock: the timer's reference is ours only if it had not fired.
              WaitingCall* call = from_link(link);
              return call->clock_->cancel(call->timer_);
            },
            [](ContextLink& link) noexcept { from_link(link)->end_unanswered(); }) {}

  void on_cancel() {
    stop_waiting();
    inner_cancel_.emit(asio::cancellation_type::all);  // reaches a running operation
    if (clock_->cancel(timer_)) {
      // Removed before firing: the timer's reference and work are ours (the reference keeps
      // this alive past the answer). The work ends after the answer is posted, so that the
      // caller's context never runs out of work in between.
      this->answer_later(aborted_exception());
      end_timer();
    } else {
      this->answer_later(aborted_exception());
    }
  }

  void inner_abandoned(int) noexcept {
    if (this->claim()) {
      // No answer will come: the caller's handler is destroyed uncalled, as Asio does.
      this->stop_watching_caller();
      this->release();  // the answer's
    }
    this->release();  // the operation's
  }

  GuardedSlot inner_slot(int) noexcept { return inner_cancel_.slot(); }

 protected:
  /// Starts the operation with r4c's handler, tagged `tag`, taking the operation's reference.
  void start_operation(int tag) {
    this->add_ref();  // the operation's
    op_(InnerHandler<Derived, T>(static_cast<Derived*>(this), tag));
  }

  /// Starts a wait until `deadline` on the clock (counted by the policy as waiting: set
  /// `waiting` first with begin_waiting()). A deadline already reached fires at once: its step
  /// is posted. If scheduling throws, the timer's reference and work are given back and the
  /// exception leaves arm(); the wait is still counted (stop_waiting() ends it).
  void arm(std::chrono::nanoseconds deadline) {
    this->add_ref();  // the timer's
    work_.emplace(this->caller_executor());
    try {
      if (!listing_.list()) {
        throw asio::system_error(asio::error::shut_down);  // its context is being destroyed
      }
      clock_->schedule(timer_, deadline);
    } catch (...) {
      end_timer();
      throw;
    }
  }

  /// arm() from a start() that has watched the caller: if scheduling throws (std::bad_alloc),
  /// the call ends here, its handler destroyed uncalled, and the exception leaves.
  void arm_or_end(std::chrono::nanoseconds deadline) {
    try {
      arm(deadline);
    } catch (...) {
      stop_waiting();
      this->claim();
      this->stop_watching_caller();
      this->release();  // the answer's
      throw;
    }
  }

  /// A cancellation on another thread may have come between the decision to wait and arm():
  /// the clock's lock orders its removal of the timer after arm().
  void disarm_if_answered() noexcept {
    if (!this->answered()) return;
    stop_waiting();
    if (clock_->cancel(timer_)) end_timer();
  }

  /// Ends the wait before its deadline: the timer fires now unless it has fired already (its
  /// step then runs as at the deadline). Touches only the clock, so a policy may call it under
  /// its own lock. The task's place in the clock's queue was just freed, so rescheduling it
  /// does not allocate.
  void fire_now(std::chrono::nanoseconds now) noexcept {
    if (clock_->cancel(timer_)) clock_->schedule(timer_, now);
  }

  void begin_waiting() noexcept { waiting_.store(true, std::memory_order_release); }
  void stop_waiting() noexcept {
    if (waiting_.exchange(false, std::memory_order_acq_rel)) {
      static_cast<Derived*>(this)->wait_ended();
    }
  }

  void end_timer() noexcept {
    work_.reset();
    listing_.unlist();
    this->release();  // the timer's
  }

  /// With the timer's reference, once its timer will not fire (any more): the caller's context
  /// is gone, so no answer will come; the caller's handler is destroyed uncalled, as Asio
  /// destroys the handlers of a context it destroys.
  void end_unanswered() noexcept {
    stop_waiting();
    if (this->claim()) {
      this->stop_watching_caller();
      this->release();  // the answer's
    }
    end_timer();
  }

  /// Gives back a reference when it goes out of scope.
  struct ReleaseOnExit {
    WaitingCall* call;
    ~ReleaseOnExit() { call->release(); }
  };

  Clock* clock_;
  GuardedSignal inner_cancel_;
  Policy* policy_;
  Op op_;

 private:
  class Timer final : public TimerTask {
   public:
    explicit Timer(WaitingCall* call) noexcept : call_(call) {}
    // On the timer thread (or in ManualClock::advance): acts on the caller's executor, with
    // the timer's reference.
    void fire() noexcept override {
      WaitingCall* call = call_;
      asio::post(call->caller_executor(),
                 asio::bind_allocator(call->allocator(), WaitedStep(call)));
    }

   private:
    WaitingCall* call_;
  };

  static WaitingCall* from_link(ContextLink& link) noexcept {
    return static_cast<WaitingCall*>(link.owner);
  }

  // The wait is over: the operation starts unless the caller cancelled meanwhile. An
  // operation that throws destroyed its handler (abandoned): the call ends without an answer
  // and the exception leaves this step, as any handler's does.
  void waited() {
    // The timer's reference keeps the call alive across resume(); its work and its place in
    // the context's list end here, before resume() may arm the next wait (a retry's).
    ReleaseOnExit release_timer{this};
    // fire() may still be returning on the timer thread: this waits for it, so that nothing
    // touches the clock once the caller is answered (the clock may be gone by then).
    clock_->cancel(timer_);
    stop_waiting();
    work_.reset();  // this step is work of its own
    listing_.unlist();
    if (this->answered()) return;
    static_cast<Derived*>(this)->resume();
  }
  // The end of the wait's step destroyed unrun (its context shut down): the call ends without
  // an answer and gives the wait back.
  void waited_unrun() noexcept {
    clock_->cancel(timer_);  // fire() may still be returning
    end_unanswered();
  }
  // The end of the wait, posted with the timer's reference.
  using WaitedStep = PostedStep<WaitingCall, &WaitingCall::waited, &WaitingCall::waited_unrun>;

  Timer timer_;
  std::optional<asio::executor_work_guard<typename Base::CallerExecutor>> work_;
  std::atomic<bool> waiting_;  // counted in the policy's waiting_calls; ended once per wait
  ContextListing listing_;     // from arm() until the timer's reference ends
};

/// For a call that waits for a slot and then runs its operation: whether the operation
/// started or the caller cancelled first, decided once (a caller cancelled before its
/// operation started is the wait's `cancelled` refusal, and its operation never starts).
class StartOrCancel {
 public:
  /// True once, for the first of start() and cancel().
  bool start() noexcept { return decide(kStarted); }
  bool cancel() noexcept { return decide(kCancelled); }

 private:
  static constexpr int kUndecided = 0, kStarted = 1, kCancelled = 2;
  bool decide(int to) noexcept {
    int undecided = kUndecided;
    // acq_rel: whoever loses sees what the winner did before deciding.
    return phase_.compare_exchange_strong(undecided, to, std::memory_order_acq_rel);
  }
  std::atomic<int> phase_{kUndecided};
};

/// A call that waits in its policy's queue for a slot (the adaptive limit's, the bulkhead's),
/// then runs its operation in the slot it was handed. The wait is an Asio operation holding no
/// thread, bounded by a timer on the policy's clock; a grant, an eviction or the queue's own
/// timeout wakes the waiter, which fires the timer now. `Access` is what the wait needs of the
/// policy's queue:
///   Policy, Waiter (the queue's waiter type), Permit (the slot; empty: none), Reason (why a
///   call got none), kUnrefused (no reason yet), kCancelled (the caller cancelled)
///   static Permit end_wait(Policy&, Waiter&, bool timed_out, Reason& reason) noexcept
///       takes the waiter off the queue: the granted slot, or none and `reason` set
///   static void count_refusal(Policy&, const Waiter&, Reason) noexcept
///   static std::exception_ptr rejection(Policy&, Reason)
/// `Derived` provides start() (create(), then wait_in_queue()) and inner_completed().
template <class Derived, class T, class Handler, class Access, class Op>
class QueueWaitingCall : public WaitingCall<Derived, T, Handler, typename Access::Policy, Op> {
  using Base = WaitingCall<Derived, T, Handler, typename Access::Policy, Op>;
  using Reason = typename Access::Reason;
  friend Base;

 public:
  QueueWaitingCall(Handler handler, typename Access::Policy& policy, Op op)
      : Base(std::move(handler), policy, std::move(op), /*waiting=*/true), waiter_(*this) {}

  // The caller cancelled (and this call claimed its answer): answered operation_aborted, as
  // Asio operations are. Before its operation started, that is the wait's refusal, counted
  // `cancelled` however the wait itself ended (a granted slot goes back unused when the call
  // ends).
  void on_cancel() {
    if (phase_.cancel()) Access::count_refusal(*this->policy_, waiter_, Access::kCancelled);
    Base::on_cancel();
  }

 protected:
  /// Waits at most `max_wait`: `queue()` puts the waiter in the policy's queue and returns
  /// whether its wait ended at once (granted or refused: the timer then fires now).
  template <class Queue>
  void wait_in_queue(std::chrono::nanoseconds max_wait, Queue&& queue) {
    this->watch_caller();
    // This function's own reference: once armed, the wait may fire, the operation complete
    // and the caller be answered on other threads before disarm_if_answered() looks at the
    // call.
    this->add_ref();
    typename Base::ReleaseOnExit release_start{this};
    const std::chrono::nanoseconds now = this->clock_->now();
    deadline_ = now + max_wait;
    // Armed before the call is queued, so that a grant always finds the timer to fire.
    this->arm_or_end(deadline_);
    // Once queued, the waiter belongs to the queue: a grant, eviction or timeout on another
    // thread may end it at any moment (its wake() fires the timer then).
    if (queue()) this->fire_now(now);
    this->disarm_if_answered();
  }

  class Waiter final : public Access::Waiter {
   public:
    explicit Waiter(QueueWaitingCall& call) noexcept : call_(call) {}
    void wake() noexcept override { call_.fire_now(call_.clock_->now()); }

   private:
    QueueWaitingCall& call_;
  };

  Waiter waiter_;
  typename Access::Permit permit_;
  Reason reason_ = Access::kUnrefused;  // why, when it gets no slot

 private:
  void wait_ended() noexcept {
    // The timer ends the wait at its deadline; anything earlier is the caller's cancellation.
    const bool timed_out = this->clock_->now() >= deadline_;
    permit_ = Access::end_wait(*this->policy_, waiter_, timed_out, reason_);
  }
  void resume() {
    if (!permit_) {
      // Losing the claim, the caller was cancelled: on_cancel() counted that.
      if (this->claim()) {
        Access::count_refusal(*this->policy_, waiter_, reason_);
        this->answer(Access::rejection(*this->policy_, reason_));
      }
      return;
    }
    // A cancellation between the grant and here answered operation_aborted: the operation
    // never starts, and the slot goes back when the call ends.
    if (!phase_.start()) return;
    this->start_operation(0);
  }

  std::chrono::nanoseconds deadline_{0};
  StartOrCancel phase_;
};

}  // namespace r4c::detail
