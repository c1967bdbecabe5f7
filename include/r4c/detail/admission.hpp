// SPDX-License-Identifier: Apache-2.0
// The adaptive limit's wait queue: calls that wait for a slot, by priority class, in the order
// the limit's config chooses. Internal to <r4c/adaptive_limit.hpp>.
//
// Every waiter is listed under the queue's mutex and taken off it under the same mutex by
// exactly one of: the grant (a freed slot or a raise handed to it), its timer (timed out), its
// caller (cancelled) or a newcomer of a higher class (evicted). Whoever takes it off sets its
// end and wakes it, once; a waiter off the list is never touched by the limit again. The mutex
// is taken only by calls that wait or find someone waiting, never by an admitted call of a
// limit without waiters.
#pragma once

#include <array>
#include <cstdint>
#include <exception>
#include <mutex>

#include "r4c/adaptive_limit_config.hpp"

namespace r4c::detail {

/// How a wait ended: pending before it is queued, waiting while it is.
enum class WaitEnd : std::uint8_t { pending, waiting, granted, timed_out, cancelled, evicted };

/// One call waiting for a slot: a synchronous caller's (on its stack) or an asynchronous
/// call's (in its state). The members belong to the queue while the waiter is listed.
class LimitWaiter {
 public:
  LimitWaiter() = default;
  LimitWaiter(const LimitWaiter&) = delete;
  LimitWaiter& operator=(const LimitWaiter&) = delete;

  /// Called once, under the queue's mutex, right after end() was set: wakes the waiter. Must
  /// not call into the limit.
  virtual void wake() noexcept = 0;

  WaitEnd end() const noexcept { return end_; }

  LimitWaiter* prev = nullptr;
  LimitWaiter* next = nullptr;
  CallClass cls = CallClass::critical;
  std::int64_t since = 0;       // ticks when it began waiting
  std::int64_t until = 0;       // ticks when its wait times out
  std::int64_t granted_at = 0;  // granted: when (the latency sample starts there)
  std::int32_t admitted = 0;    // granted: calls in flight then, itself included
  WaitEnd end_ = WaitEnd::pending;

 protected:
  ~LimitWaiter() = default;
};

/// An intrusive list of waiters, oldest first.
class WaitList {
 public:
  bool empty() const noexcept { return head_ == nullptr; }
  LimitWaiter* oldest() const noexcept { return head_; }
  LimitWaiter* newest() const noexcept { return tail_; }
  void push(LimitWaiter& waiter) noexcept {
    waiter.prev = tail_;
    waiter.next = nullptr;
    (tail_ != nullptr ? tail_->next : head_) = &waiter;
    tail_ = &waiter;
  }
  void remove(LimitWaiter& waiter) noexcept {
    (waiter.prev != nullptr ? waiter.prev->next : head_) = waiter.next;
    (waiter.next != nullptr ? waiter.next->prev : tail_) = waiter.prev;
    waiter.prev = waiter.next = nullptr;
  }

 private:
  LimitWaiter* head_ = nullptr;
  LimitWaiter* tail_ = nullptr;
};

/// The waiters of one limit, one list per class; guarded by `mutex`.
struct WaitQueue {
  std::mutex mutex;
  std::array<WaitList, kLimitedClasses> lists;
  int size = 0;
  // adaptive_lifo: the last time the queue was seen empty; it stands once that is older than
  // the CoDel interval.
  std::int64_t last_empty = 0;
  // The limit's exception for each RejectReason a wait may end with (AdaptiveLimit::rejection).
  std::array<std::exception_ptr, 8> rejections{};

  void push(LimitWaiter& waiter) noexcept {
    lists[static_cast<int>(waiter.cls)].push(waiter);
    ++size;
  }
  void remove(LimitWaiter& waiter, std::int64_t now) noexcept {
    lists[static_cast<int>(waiter.cls)].remove(waiter);
    if (--size == 0) last_empty = now;
  }
  /// Whether someone of class `cls` or a higher one waits (a newcomer of `cls` must queue
  /// behind them: no barging).
  bool waits_at_or_above(CallClass cls) const noexcept {
    for (int c = 0; c <= static_cast<int>(cls) && c < kLimitedClasses; ++c) {
      if (!lists[c].empty()) return true;
    }
    return false;
  }
  /// The highest class with someone waiting; nullptr when nobody is.
  WaitList* highest() noexcept {
    for (WaitList& list : lists) {
      if (!list.empty()) return &list;
    }
    return nullptr;
  }
  /// The oldest waiter of the lowest class with someone waiting (the one a full queue evicts).
  LimitWaiter* lowest_oldest() const noexcept {
    for (int c = kLimitedClasses - 1; c >= 0; --c) {
      if (!lists[c].empty()) return lists[c].oldest();
    }
    return nullptr;
  }
};

}  // namespace r4c::detail
