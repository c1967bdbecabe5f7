// SPDX-License-Identifier: Apache-2.0
// The hedge's asynchronous face: Hedge::async_execute (any Asio completion token). Included by
// <r4c/asio.hpp>.
//
// The call starts attempt 1 at once and arms a delay on the hedge's clock. Whenever the delay
// passes with no attempt finished, another attempt is launched on the caller's executor (an
// asio::post; the hedge's r4c::Executor is not used: an Asio operation needs no thread of its
// own), up to max_attempts, and the delay is armed again. The first success answers the caller
// and every other running attempt is cancelled through its own cancellation slot; their late
// completions are ignored. A failure does not end the call while another attempt is in flight;
// when every launched attempt has failed the caller gets the last failure (the same object). An
// attempt failing with an inner rejection (LimitExceededException, CallNotPermittedException,
// BulkheadFullException, RequestNotPermittedException, or a type derived from one) stops the
// launching. Cancelling the caller completes it at once with operation_aborted, takes the delay
// off the clock and cancels every running attempt. The counters are the synchronous path's; a
// cancelled call counts in `calls` and `failed` (its caller got a failure).
#pragma once

#include <asio/bind_allocator.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/post.hpp>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#include "r4c/clock.hpp"
#include "r4c/detail/async_call.hpp"
#include "r4c/detail/async_context.hpp"
#include "r4c/detail/timer.hpp"
#include "r4c/hedge.hpp"

namespace r4c {
namespace detail {

struct HedgeAsyncAccess {
  static void hedge_launched(Hedge& hedge) noexcept { hedge.hedges_launched_.increment(); }
  static void call_ended(Hedge& hedge, bool failed, bool won_by_hedge) noexcept {
    if (won_by_hedge) hedge.won_by_hedge_.increment();
    if (failed) hedge.failed_.increment();
    hedge.calls_.increment();
  }
};

/// One hedged asynchronous call: the caller's answer (AsyncCallBase), the operation, one
/// cancellation signal per attempt, and the delay timer.
///
/// The attempts' bookkeeping (how many run, the last failure, which attempt started, ended or
/// must be cancelled, whether the call is over, whether the delay is re-armed) sits behind one
/// mutex per call. It changes from several threads at once (attempt completions, the launch
/// step, the caller's cancellation), and the decisions read several fields together ("this
/// failure was the last running attempt and no launch is in progress"), which separate atomics
/// would not make atomic. It is held for a few instructions (and to re-arm the delay), contended
/// only by one call's own attempts, and never while running foreign code: the operation, a
/// cancellation, the caller's handler.
///
/// Attempts are launched one after the other: the delay is armed again only after the previous
/// launch returned, so the operation is never invoked concurrently with itself within one call.
template <class T, class Handler, class Op>
class HedgeAsyncCall final : public AsyncCallBase<HedgeAsyncCall<T, Handler, Op>, T, Handler> {
  using Base = AsyncCallBase<HedgeAsyncCall, T, Handler>;
  using Outcome = AsyncOutcome<T>;
  using Value = decltype(Outcome::value);

 public:
  template <class O>
  HedgeAsyncCall(Handler handler, O&& op, Hedge& hedge)
      : Base(std::move(handler)),
        op_(std::forward<O>(op)),
        hedge_(&hedge),
        clock_(hedge.clock().get()),
        delay_(hedge.config().delay()),
        max_attempts_(hedge.config().max_attempts()),
        timer_(*this),
        // The caller's context shuts down: the delay must not fire into it later, and is never
        // armed again. The attempts running end the call (the context destroys their handlers).
        listing_(
            this->caller_executor(), this,
            [](ContextLink& link) noexcept {
              auto* call = static_cast<HedgeAsyncCall*>(link.owner);
              std::lock_guard<std::mutex> lock(call->mutex_);
              call->context_gone_ = true;
              call->clock_->cancel(call->timer_);
              return false;
            },
            [](ContextLink&) noexcept {}) {
    AttemptAllocator allocator(this->allocator());
    attempts_ = std::allocator_traits<AttemptAllocator>::allocate(allocator, max_attempts_);
    for (int i = 0; i < max_attempts_; ++i) ::new (static_cast<void*>(attempts_ + i)) Attempt();
    // Unlisted (the context is being destroyed): no delay is ever armed.
    if (!listing_.list()) context_gone_ = true;
  }
  ~HedgeAsyncCall() {
    // First: while listed, the context's shutdown may still look at this call.
    listing_.unlist();
    // Every attempt has ended (each held a reference), and the delay is off the clock: every
    // path that gives the answer's reference back cancelled it first.
    for (int i = 0; i < max_attempts_; ++i) attempts_[i].~Attempt();
    AttemptAllocator allocator(this->allocator());
    std::allocator_traits<AttemptAllocator>::deallocate(allocator, attempts_, max_attempts_);
  }

  /// Starts attempt 1 and arms the delay. If `op` throws, the exception leaves start() and the
  /// caller's handler is destroyed uncalled (as GuardedCall does).
  template <class O>
  static void start(Handler handler, O&& op, Hedge& hedge) {
    HedgeAsyncCall* call = Base::create(std::move(handler), std::forward<O>(op), hedge);
    call->add_ref();  // the starter's, across the operation and the arming
    call->launched_ = 1;
    call->running_ = 1;
    call->add_ref();  // attempt 1's
    call->watch_caller();
    try {
      call->op_(InnerHandler<HedgeAsyncCall, T>(call, 1));
    } catch (...) {
      call->launch_returned(1, std::current_exception());
      call->release();
      throw;
    }
    call->launch_returned(1, nullptr);
    call->release();
  }

  // The caller cancelled; the base has claimed the answer.
  void on_cancel() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      close_locked();
    }
    end_call(Ending::kCancelled, Value());
    this->answer_later(aborted_exception());
  }

  void inner_completed(int tag, Outcome outcome) {
    // Classified outside the lock: it rethrows the failure.
    const bool rejection = outcome.failure && is_inner_rejection(outcome.failure);
    Ending ending;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ending = attempt_ended(tag, &outcome, rejection);
    }
    if (ending != Ending::kNone) end_call(ending, std::move(outcome.value));
    this->release();  // the attempt's
  }

  void inner_abandoned(int tag) noexcept {
    Ending ending = Ending::kNone;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      Attempt& attempt = attempts_[tag - 1];
      if (!attempt.launched) {
        // Dropped inside the operation's initiation: the launcher, which may be about to
        // catch an exception from it, accounts for the attempt once the initiation returns.
        attempt.dropped = true;
      } else {
        ending = attempt_ended(tag, nullptr, false);
      }
    }
    if (ending != Ending::kNone) end_call(ending, Value());
    this->release();  // the attempt's
  }

  GuardedSlot inner_slot(int tag) noexcept { return attempts_[tag - 1].signal.slot(); }

 private:
  enum class Ending : std::uint8_t { kNone, kWon, kFailed, kAbandoned, kCancelled };

  struct Attempt {
    GuardedSignal signal;   // this attempt's own slot
    bool launched = false;  // its operation's initiation returned
    bool done = false;      // its handler reported (or was dropped)
    bool dropped = false;   // its handler was destroyed uncalled inside the initiation
    bool cancel = false;    // to be cancelled by the thread that closed the call; only it writes
  };
  using AttemptAllocator =
      typename std::allocator_traits<typename Base::Allocator>::template rebind_alloc<Attempt>;

  // Launches the next attempt when the delay passes: from the clock's thread, through the
  // caller's executor.
  class LaunchTimer final : public TimerTask {
   public:
    explicit LaunchTimer(HedgeAsyncCall& call) noexcept : call_(&call) {}
    void fire() noexcept override {
      call_->add_ref();  // the posted step's
      try {
        asio::post(call_->caller_executor(),
                   asio::bind_allocator(call_->allocator(), LaunchStep(call_)));
      } catch (...) {
        // The step could not be queued and its reference went with it: no more attempts for
        // this call; those running still end it.
      }
    }

   private:
    HedgeAsyncCall* call_;
  };

  // A posted launch holding a reference, given back once it ran or when it is destroyed
  // uncalled (its executor shut down). The answer's reference outlives it: the delay is
  // cancelled (waiting for a fire in progress) before the call is answered.
  void launch_posted() noexcept {
    launch_next();
    this->release();
  }
  void launch_unrun() noexcept { this->release(); }
  using LaunchStep =
      PostedStep<HedgeAsyncCall, &HedgeAsyncCall::launch_posted, &HedgeAsyncCall::launch_unrun>;

  // On the caller's executor, when the delay passed.
  void launch_next() noexcept {
    int index = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (over_ || rejected_ || launched_ >= max_attempts_) return;
      index = ++launched_;
      ++running_;  // counted before it can end, so that running_ never reaches 0 meanwhile
    }
    this->add_ref();  // the attempt's
    HedgeAsyncAccess::hedge_launched(*hedge_);
    std::exception_ptr thrown;
    try {
      op_(InnerHandler<HedgeAsyncCall, T>(this, index));
    } catch (...) {
      // No caller is on this stack to receive it: it is this attempt's failure, if the
      // operation dropped the handler (it usually has).
      thrown = std::current_exception();
    }
    launch_returned(index, std::move(thrown));
  }

  // Attempt `index`'s initiation returned (or threw `thrown`): settles an attempt dropped
  // inside it, cancels it if the call ended meanwhile, or arms the delay for the next one.
  void launch_returned(int index, std::exception_ptr thrown) noexcept {
    const bool rejection = thrown && index > 1 && is_inner_rejection(thrown);
    Ending ending = Ending::kNone;
    bool cancel = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      Attempt& attempt = attempts_[index - 1];
      attempt.launched = true;
      if (attempt.dropped) {
        if (thrown && index > 1) {
          Outcome outcome;
          outcome.failure = thrown;
          ending = attempt_ended(index, &outcome, rejection);
        } else {
          // Attempt 1's exception goes to the caller of async_execute instead.
          ending = attempt_ended(index, nullptr, false);
        }
      } else if (over_) {
        // The call ended while this attempt was being launched; its closer did not see it.
        cancel = !attempt.done;
      }
      if (!over_ && !rejected_ && !(thrown && index == 1) && launched_ < max_attempts_) {
        arm_locked();
      }
    }
    if (cancel) attempts_[index - 1].signal.emit(asio::cancellation_type::all);
    if (ending != Ending::kNone) end_call(ending, Value());
  }

  // Under mutex_: the delay starts again. A deadline already due fires on this thread, which
  // only posts a step; a fire in progress is waited for, and takes no lock of this call.
  void arm_locked() noexcept {
    if (context_gone_) return;
    try {
      clock_->cancel(timer_);
      clock_->schedule(timer_, clock_->now() + delay_);
    } catch (...) {
      // The clock's queue could not grow: no more attempts; those running still end the call.
    }
  }

  // Under mutex_: attempt `index` ended, with `outcome` (null: abandoned). Returns how the call
  // ends now, kNone when it goes on or had already ended.
  Ending attempt_ended(int index, Outcome* outcome, bool rejection) {
    attempts_[index - 1].done = true;
    --running_;
    if (over_) return Ending::kNone;  // a late completion: ignored
    if (outcome != nullptr && !outcome->failure) {
      if (!this->claim()) return Ending::kNone;  // the caller cancelled first
      winner_ = index;
      close_locked();
      return Ending::kWon;
    }
    if (outcome != nullptr) {
      failure_ = outcome->failure;
      if (rejection) rejected_ = true;
    }
    if (running_ > 0 || !this->claim()) return Ending::kNone;
    close_locked();
    return failure_ ? Ending::kFailed : Ending::kAbandoned;
  }

  // Under mutex_, by the thread that claimed the answer: nothing launches or re-arms from now
  // on, and the attempts that run are marked for this thread to cancel.
  void close_locked() noexcept {
    over_ = true;
    for (int i = 0; i < launched_; ++i) {
      Attempt& attempt = attempts_[i];
      if (attempt.launched && !attempt.done) attempt.cancel = true;
    }
  }

  // Outside mutex_, by the thread that closed the call: takes the delay off the clock, cancels
  // the losers, counts, and answers. launched_, winner_, failure_ and the cancel marks no
  // longer change.
  void end_call(Ending ending, Value value) {
    clock_->cancel(timer_);
    for (int i = 0; i < launched_; ++i) {
      if (attempts_[i].cancel) attempts_[i].signal.emit(asio::cancellation_type::all);
    }
    if (ending == Ending::kAbandoned) {
      // Every attempt was dropped uncalled (their context shut down): no answer will come, so
      // the caller's handler is destroyed uncalled, as Asio does.
      this->stop_watching_caller();
      this->release();  // the answer's
      return;
    }
    HedgeAsyncAccess::call_ended(*hedge_, ending != Ending::kWon,
                                 ending == Ending::kWon && winner_ > 1);
    if (ending != Ending::kCancelled) {
      this->answer(ending == Ending::kWon ? std::exception_ptr() : failure_, std::move(value));
    }
    // kCancelled: on_cancel() answers, from the cancellation handler, through a post.
  }

  Op op_;
  Hedge* hedge_;
  Clock* clock_;
  const std::chrono::nanoseconds delay_;
  const int max_attempts_;
  Attempt* attempts_ = nullptr;  // max_attempts_ of them, with the handler's allocator
  LaunchTimer timer_;

  std::mutex mutex_;
  int launched_ = 0;            // attempts launched (1-based indexes 1..launched_)
  int running_ = 0;             // launched and not ended
  int winner_ = 0;              // the winning attempt; 0: none
  bool over_ = false;           // the answer is claimed: no launch, no re-arm
  bool rejected_ = false;       // an attempt failed with an inner rejection
  std::exception_ptr failure_;  // the last failure before the call ended
  bool context_gone_ = false;   // the caller's context shut down: the delay is never armed

  ContextListing listing_;  // for the call's lifetime
};

}  // namespace detail

/// See the declaration in <r4c/hedge.hpp>. `op` is decay-copied into the call's state and
/// invoked (as an lvalue) once per attempt, never concurrently with itself within one call;
/// what it refers to must outlive the call's attempts, and the hedge must outlive its calls.
/// Attempt 1 starts inside this function; later attempts are started through the caller's
/// executor. An exception from attempt 1's initiation leaves this function (the caller's
/// handler is destroyed uncalled); one from a later attempt's is that attempt's failure.
/// Allocation: the call's state and its attempts' signals, with the handler's allocator (r4c's
/// per-thread blocks, detail::CallAllocator, when it has none), and one posted step per hedge.
template <class T, class Op, class Token>
auto Hedge::async_execute(Op&& op, Token&& token) {
  return detail::initiate<T>(detail::StartInitiation<detail::HedgeAsyncCall, T, Hedge>{this},
                             std::forward<Token>(token), std::forward<Op>(op));
}

}  // namespace r4c
