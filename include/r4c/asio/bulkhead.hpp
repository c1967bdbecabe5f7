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

// What a waiting call may ask of its bulkhead (see QueueWaitingCall).
struct BulkheadQueueAccess {
  using Policy = Bulkhead;
  using Waiter = BulkheadWaiter;
  using Permit = BulkheadPermit;
  using Reason = BulkheadRejectReason;
  using State = BulkheadWaiter::State;
  static constexpr Reason kUnrefused = BulkheadRejectReason::cancelled;
  static constexpr Reason kCancelled = BulkheadRejectReason::cancelled;

  static BulkheadPermit admit_now(Bulkhead& bulkhead) noexcept { return bulkhead.admit_now(); }
  static auto begin_wait(Bulkhead& bulkhead, BulkheadWaiter& waiter) noexcept {
    return bulkhead.begin_wait(waiter, false);
  }
  static BulkheadPermit end_wait(Bulkhead& bulkhead, BulkheadWaiter& waiter, bool timed_out,
                                 BulkheadRejectReason& reason) noexcept {
    const State ended = bulkhead.end_wait(waiter, timed_out ? State::timed_out : State::cancelled);
    if (ended == State::granted) return bulkhead.admitted(bulkhead.in_flight());
    reason = ended == State::timed_out ? BulkheadRejectReason::wait_timeout
                                       : BulkheadRejectReason::cancelled;
    return BulkheadPermit();
  }
  static void count_refusal(Bulkhead& bulkhead, const BulkheadWaiter&,
                            BulkheadRejectReason reason) noexcept {
    (void)bulkhead.refused(bulkhead.in_flight(), reason);
  }
  static std::exception_ptr rejection(Bulkhead& bulkhead, BulkheadRejectReason) {
    return bulkhead.rejection();
  }
};

// A call waiting in a full bulkhead's queue, then running its operation in the slot a release
// handed it. Its refusal is counted (and published) as it is answered, so the count says what
// the caller was told: a cancellation that races the timeout or the grant is `cancelled`.
template <class T, class Handler, class Op>
class BulkheadWaitCall final : public QueueWaitingCall<BulkheadWaitCall<T, Handler, Op>, T, Handler,
                                                       BulkheadQueueAccess, Op> {
  using Base = QueueWaitingCall<BulkheadWaitCall, T, Handler, BulkheadQueueAccess, Op>;
  using State = BulkheadWaiter::State;

 public:
  using Base::Base;

  static void start(Handler handler, Op op, Bulkhead& bulkhead) {
    BulkheadWaitCall* call = Base::create(std::move(handler), bulkhead, std::move(op));
    call->wait_in_queue(bulkhead.config().max_wait(), [&] {
      return BulkheadQueueAccess::begin_wait(bulkhead, call->waiter_).state != State::waiting;
    });
  }

  void inner_completed(int, AsyncOutcome<T> outcome) {
    this->permit_.release();
    if (this->claim()) this->answer(std::move(outcome.failure), std::move(outcome.value));
    this->release();  // the operation's
  }
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
  return detail::initiate<T>(detail::BulkheadInitiation<T>{this}, std::forward<Token>(token),
                             std::forward<Op>(op));
}

}  // namespace r4c
