// SPDX-License-Identifier: Apache-2.0
// The adaptive limit's asynchronous face: async_execute (any Asio completion token) and
// co_execute (a coroutine). Included by <r4c/asio.hpp>.
//
// A call holds its slot until its operation completes, and its latency is measured to that
// completion. A full limit completes the caller at once with LimitExceededException, without
// starting the operation. Cancelling the caller completes it at once with operation_aborted,
// frees the slot without a sample, and forwards the cancellation to the operation.
//
// With max_wait set, a call that finds the limit full waits in the limit's queue, holding no
// thread: a timer on the limit's clock bounds the wait, a freed slot or a raise is handed to it
// directly and its operation then starts through the caller's executor. Cancelling a waiting
// call (terminal or partial) completes it at once with operation_aborted and takes it off the
// queue; a slot granted in the same instant is given back. A wait that times out, is evicted or
// finds the queue full completes with LimitExceededException, the operation not started.
// co_execute waits the same way (its coroutine is the operation).
#pragma once

#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/error.hpp>
#include <asio/system_error.hpp>
#include <asio/use_awaitable.hpp>
#include <atomic>
#include <chrono>
#include <exception>
#include <type_traits>
#include <utility>

#include "r4c/adaptive_limit.hpp"
#include "r4c/detail/async_call.hpp"
#include "r4c/detail/async_wait.hpp"

namespace r4c {
namespace detail {

// An asynchronous call's hold on a limit: a sample when the operation completes, nothing when
// it was cancelled.
template <class T>
struct LimitHold {
  Permit permit;
  const AdaptiveLimit* limit;

  void completed(const AsyncOutcome<T>& outcome) noexcept {
    if (!outcome.failure) {
      permit.on_success();
    } else if (outcome.code != nullptr ? limit->is_drop(*outcome.code)
                                       : limit->is_drop(outcome.failure)) {
      permit.on_drop();
    } else {
      permit.on_ignore();
    }
  }
  void cancelled() noexcept { permit.on_ignore(); }
};

// What the asynchronous wait needs of the limit's queue (see QueueWaitingCall).
struct LimitQueueAccess {
  using Policy = AdaptiveLimit;
  using Waiter = LimitWaiter;
  using Permit = r4c::Permit;
  using Reason = RejectReason;
  static constexpr Reason kUnrefused = RejectReason::none;
  static constexpr Reason kCancelled = RejectReason::cancelled;

  static Permit admit_now(AdaptiveLimit& limit, CallClass cls, LimitPartition partition) noexcept {
    return limit.admit_now(cls, limit.partition_slot(partition));
  }
  static auto begin_wait(AdaptiveLimit& limit, LimitWaiter& waiter,
                         const Admission& admission) noexcept {
    return limit.begin_wait(waiter, admission);
  }
  static Permit end_wait(AdaptiveLimit& limit, LimitWaiter& waiter, bool timed_out,
                         RejectReason& reason) noexcept {
    const WaitEnd ended =
        limit.end_wait(waiter, timed_out ? WaitEnd::timed_out : WaitEnd::cancelled);
    if (ended == WaitEnd::granted) return limit.permit_of(waiter);
    // Not refused before it was queued: how its wait ended.
    if (reason == RejectReason::none) reason = reason_of(ended);
    return Permit();
  }
  static void count_refusal(AdaptiveLimit& limit, const LimitWaiter& waiter,
                            RejectReason reason) noexcept {
    limit.count_rejection(waiter.cls, reason, waiter.partition);
  }
  static std::exception_ptr rejection(AdaptiveLimit& limit, RejectReason reason) {
    return limit.rejection(reason);
  }
};

// A call waiting in the limit's queue, then running its operation under the granted slot.
template <class T, class Handler, class Op>
class LimitWaitCall final
    : public QueueWaitingCall<LimitWaitCall<T, Handler, Op>, T, Handler, LimitQueueAccess, Op> {
  using Base = QueueWaitingCall<LimitWaitCall, T, Handler, LimitQueueAccess, Op>;

 public:
  LimitWaitCall(Handler handler, AdaptiveLimit& limit, Op op)
      : Base(std::move(handler), limit, std::move(op)) {
    this->waiter_.counted_by_caller = true;
  }

  static void start(Handler handler, Op op, AdaptiveLimit& limit, const Admission& admission) {
    LimitWaitCall* call = Base::create(std::move(handler), limit, std::move(op));
    call->wait_in_queue(limit.config().max_wait(), [&] {
      // What begin_wait() decided under the queue's mutex.
      const auto begun = LimitQueueAccess::begin_wait(limit, call->waiter_, admission);
      if (begun.refused != RejectReason::none) call->reason_ = begun.refused;
      return begun.refused != RejectReason::none || begun.granted;
    });
  }

  void inner_completed(int, AsyncOutcome<T> outcome) {
    if (this->claim()) {
      LimitHold<T>{std::move(this->permit_), this->policy_}.completed(outcome);
      this->answer(std::move(outcome.failure), std::move(outcome.value));
    } else {
      this->permit_.on_ignore();  // the caller was cancelled: the slot frees without a sample
    }
    this->release();  // the operation's
  }
};

// kSays: the call says a class or a partition; without, the admission is try_acquire()'s plain
// path, known at compile time (the async call's hot path, bench target 9).
template <class T, bool kSays = true>
struct LimitInitiation {
  AdaptiveLimit* limit;
  CallClass cls = CallClass::critical;
  LimitPartition partition = {};

  Permit admit() const noexcept {
    if (limit->waits()) return LimitQueueAccess::admit_now(*limit, cls, partition);
    if constexpr (kSays) {
      return limit->try_acquire(partition, cls);
    } else {
      return limit->try_acquire();
    }
  }

  template <class Handler, class Op>
  void operator()(Handler handler, Op&& op) const {
    Permit permit = admit();
    if (!permit) [[unlikely]] {
      if (limit->waits()) {
        LimitWaitCall<T, Handler, std::decay_t<Op>>::start(std::move(handler), std::forward<Op>(op),
                                                           *limit, Admission{cls, partition});
      } else {
        fail_at_once<T>(std::move(handler), limit->rejection());
      }
      return;
    }
    GuardedCall<T, Handler, LimitHold<T>>::start(std::move(handler), op,
                                                 LimitHold<T>{std::move(permit), limit});
  }
};

template <class T, class F>
asio::awaitable<T> co_execute_under(AdaptiveLimit& limit, F f) {
  if (limit.waits()) {
    // The wait is an Asio operation: the coroutine runs as the operation, once granted.
    co_return co_await limit.async_execute<T>(
        [f = std::move(f)](auto handler) mutable {
          auto executor = asio::get_associated_executor(handler);
          asio::co_spawn(executor, f(), std::move(handler));
        },
        asio::use_awaitable);
  }
  Permit permit = limit.try_acquire();
  if (!permit) std::rethrow_exception(limit.rejection());
  try {
    if constexpr (std::is_void_v<T>) {
      co_await f();
      permit.on_success();
      co_return;
    } else {
      T result = co_await f();
      permit.on_success();
      co_return result;
    }
  } catch (const asio::system_error& e) {
    // A cancelled coroutine says nothing about the dependency.
    if (e.code() == asio::error::operation_aborted) {
      permit.on_ignore();
    } else if (limit.is_drop(e.code()) || limit.is_drop(std::current_exception())) {
      permit.on_drop();
    } else {
      permit.on_ignore();
    }
    throw;
  } catch (...) {
    if (limit.is_drop(std::current_exception())) {
      permit.on_drop();
    } else {
      permit.on_ignore();
    }
    throw;
  }
}

}  // namespace detail

template <class T, class Op, class Token>
auto AdaptiveLimit::async_execute(Op&& op, Token&& token) {
  return detail::initiate<T>(detail::LimitInitiation<T, false>{this}, std::forward<Token>(token),
                             std::forward<Op>(op));
}

template <class T, class Op, class Token>
auto AdaptiveLimit::async_execute(CallClass cls, Op&& op, Token&& token) {
  return detail::initiate<T>(detail::LimitInitiation<T>{this, cls}, std::forward<Token>(token),
                             std::forward<Op>(op));
}

template <class T, class Op, class Token>
auto AdaptiveLimit::async_execute(LimitPartition partition, Op&& op, Token&& token) {
  return detail::initiate<T>(detail::LimitInitiation<T>{this, CallClass::critical, partition},
                             std::forward<Token>(token), std::forward<Op>(op));
}

template <class T, class Op, class Token>
auto AdaptiveLimit::async_execute(CallClass cls, LimitPartition partition, Op&& op, Token&& token) {
  return detail::initiate<T>(detail::LimitInitiation<T>{this, cls, partition},
                             std::forward<Token>(token), std::forward<Op>(op));
}

template <class F>
auto AdaptiveLimit::co_execute(F f) {
  using T = typename std::invoke_result_t<F&>::value_type;
  return detail::co_execute_under<T>(*this, std::move(f));
}

}  // namespace r4c
