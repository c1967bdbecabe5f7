// SPDX-License-Identifier: Apache-2.0
// The bulkhead's asynchronous face: async_execute (any Asio completion token). Included by
// <r4c/asio.hpp>.
//
// A call holds its slot until its operation completes. A full bulkhead completes the caller at
// once with BulkheadFullException, without starting the operation; with max_wait set, the call
// waits for a slot first, as the adaptive limit's async wait does: an Asio operation holding
// no thread, FIFO, a release handing its slot to the oldest waiter, the wait timed on the
// bulkhead's clock (BulkheadFullException at max_wait) and ended by the caller's cancellation
// (terminal or partial: operation_aborted, counted `cancelled`). Cancelling the caller of a
// running operation completes it at once with operation_aborted, frees the slot, and forwards
// the cancellation to the operation.
#pragma once

#include <asio/async_result.hpp>
#include <atomic>
#include <chrono>
#include <utility>

#include "r4c/bulkhead.hpp"
#include "r4c/detail/async_call.hpp"
#include "r4c/detail/async_wait.hpp"

namespace r4c {
namespace detail {

// An asynchronous call's slot in a bulkhead: freed however the call ends.
struct BulkheadHold {
  BulkheadPermit permit;

  template <class Outcome>
  void completed(const Outcome&) noexcept {
    permit.release();
  }
  void cancelled() noexcept { permit.release(); }
};

// What a waiting call may ask of its bulkhead.
struct BulkheadQueueAccess {
  using State = BulkheadWaiter::State;
  static BulkheadPermit admit_now(Bulkhead& bulkhead) noexcept { return bulkhead.admit_now(); }
  static auto begin_wait(Bulkhead& bulkhead, BulkheadWaiter& waiter) noexcept {
    return bulkhead.begin_wait(waiter, false);
  }
  static State end_wait(Bulkhead& bulkhead, BulkheadWaiter& waiter, State end) noexcept {
    return bulkhead.end_wait(waiter, end);
  }
  static BulkheadPermit admitted(Bulkhead& bulkhead) noexcept {
    return bulkhead.admitted(bulkhead.in_flight());
  }
  static void refused(Bulkhead& bulkhead, BulkheadRejectReason reason) noexcept {
    (void)bulkhead.refused(bulkhead.in_flight(), reason);
  }
};

// A call waiting in a full bulkhead's queue, then running its operation in the slot a release
// handed it. Its refusal is counted (and published) as it is answered, so the count says what
// the caller was told: a cancellation that races the timeout or the grant is `cancelled`.
template <class T, class Handler, class Op>
class BulkheadWaitCall final : public WaitingCall<BulkheadWaitCall<T, Handler, Op>, T, Handler> {
  using Base = WaitingCall<BulkheadWaitCall, T, Handler>;
  using State = BulkheadWaiter::State;
  friend Base;

 public:
  BulkheadWaitCall(Handler handler, Bulkhead& bulkhead, Op op)
      : Base(std::move(handler), bulkhead.clock().get(), /*waiting=*/true),
        bulkhead_(&bulkhead),
        op_(std::move(op)),
        waiter_(*this) {}

  static void start(Handler handler, Op op, Bulkhead& bulkhead) {
    BulkheadWaitCall* call = Base::create(std::move(handler), bulkhead, std::move(op));
    call->watch_caller();
    // start()'s own reference, as in LimitWaitCall::start.
    call->add_ref();
    typename Base::ReleaseOnExit release_start{call};
    const std::chrono::nanoseconds now = call->clock_->now();
    call->deadline_ = now + bulkhead.config().max_wait();
    // Armed before the call is queued, so that a grant always finds the timer to fire.
    call->arm_or_end(call->deadline_);
    // Once queued, the waiter is the queue's: a release or the timer on another thread may
    // end it at once (its wake() fires the timer then). Granted or refused at once, the timer
    // fires now.
    const auto begun = BulkheadQueueAccess::begin_wait(bulkhead, call->waiter_);
    if (begun.state != State::waiting) call->fire_now(now);
    call->disarm_if_answered();
  }

  // The caller cancelled (this call claimed its answer): operation_aborted. Before the
  // operation started, that is the wait's refusal, counted `cancelled` however the wait ended
  // (a granted slot goes back unused when the call ends).
  void on_cancel() {
    if (phase_.cancel()) BulkheadQueueAccess::refused(*bulkhead_, BulkheadRejectReason::cancelled);
    Base::on_cancel();
  }

  void inner_completed(int, AsyncOutcome<T> outcome) {
    permit_.release();
    if (this->claim()) this->answer(std::move(outcome.failure), std::move(outcome.value));
    this->release();  // the operation's
  }

 private:
  class Waiter final : public BulkheadWaiter {
   public:
    explicit Waiter(BulkheadWaitCall& call) noexcept : call_(call) {}
    void wake() noexcept override { call_.fire_now(call_.clock_->now()); }

   private:
    BulkheadWaitCall& call_;
  };

  void wait_ended() noexcept {
    // The timer ends the wait at its deadline; anything earlier is the caller's cancellation.
    const State end = this->clock_->now() >= deadline_ ? State::timed_out : State::cancelled;
    const State ended = BulkheadQueueAccess::end_wait(*bulkhead_, waiter_, end);
    if (ended == State::granted) {
      permit_ = BulkheadQueueAccess::admitted(*bulkhead_);
    } else {
      reason_ = ended == State::timed_out ? BulkheadRejectReason::wait_timeout
                                          : BulkheadRejectReason::cancelled;
    }
  }
  void resume() {
    if (!permit_) {
      // Losing the claim, the caller was cancelled: on_cancel() counted that.
      if (this->claim()) {
        BulkheadQueueAccess::refused(*bulkhead_, reason_);
        this->answer(bulkhead_->rejection());
      }
      return;
    }
    if (!phase_.start()) return;
    this->add_ref();  // the operation's
    op_(InnerHandler<BulkheadWaitCall, T>(this, 0));
  }

  Bulkhead* bulkhead_;
  Op op_;
  Waiter waiter_;
  BulkheadPermit permit_;
  BulkheadRejectReason reason_ = BulkheadRejectReason::cancelled;
  std::chrono::nanoseconds deadline_{0};
  StartOrCancel phase_;
};

template <class T>
struct BulkheadInitiation {
  Bulkhead* bulkhead;

  template <class Handler, class Op>
  void operator()(Handler handler, Op op) const {
    // A refusal of try_acquire() is counted in `rejected`; a bulkhead that waits counts its
    // waiters' refusals as they are answered.
    BulkheadPermit permit =
        bulkhead->waits() ? BulkheadQueueAccess::admit_now(*bulkhead) : bulkhead->try_acquire();
    if (!permit) [[unlikely]] {
      if (bulkhead->waits()) {
        BulkheadWaitCall<T, Handler, Op>::start(std::move(handler), std::move(op), *bulkhead);
      } else {
        fail_at_once<T>(std::move(handler), bulkhead->rejection());
      }
      return;
    }
    GuardedCall<T, Handler, BulkheadHold>::start(std::move(handler), op,
                                                 BulkheadHold{std::move(permit)});
  }
};

}  // namespace detail

template <class T, class Op, class Token>
auto Bulkhead::async_execute(Op&& op, Token&& token) {
  return asio::async_initiate<Token, detail::AsyncSignature<T>>(detail::BulkheadInitiation<T>{this},
                                                                token, std::forward<Op>(op));
}

}  // namespace r4c
