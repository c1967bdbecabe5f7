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

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>

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
  // The partition it asked for (AdaptiveLimit::partition_slot: index + 1, 0 for none), resolved
  // against the partitions current when it is granted: a reconfigure may change them meanwhile.
  std::uint8_t partition = 0;
  // An asynchronous call counts its own rejection when it answers (with the reason its caller
  // is answered with: a cancellation racing a timeout or a grant is `cancelled`); the queue
  // counts a synchronous waiter's.
  bool counted_by_caller = false;
  std::int64_t since = 0;         // ticks when it began waiting
  std::int64_t until = 0;         // ticks when its wait times out
  std::int64_t granted_at = 0;    // granted: when (the latency sample starts there)
  std::int32_t admitted = 0;      // granted: calls in flight then, itself included
  std::uint32_t granted_tag = 0;  // granted: where it counts (Permit::partition_)
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

/// One layout of the partitions of a limit and their calls in flight. Slot 0 is what no
/// partition reserves (calls that name none); slot i + 1 is the config's partition i. A
/// partitioned limit admits and releases under its partitions' mutex (AdaptiveLimit), and
/// changes the limit's own in-flight count under it too, so that the check (the total, the
/// partition's count, the unused guarantees of the partitions with demand) and the increment
/// are one step. A reconfigure replaces the layout, carrying the counts over by name.
///
/// A partition has demand while it has calls in flight or has asked for a slot within the last
/// `demand_ticks` (the limit's window): only then is its unused guarantee kept from borrowers.
/// An idle partition's share is lent; once it asks again, nobody borrows until it has its
/// guarantee, so the slots it lent come back to it as their calls end.
struct LimitPartitions {
  int slots = 1;
  bool borrow = true;
  std::int64_t demand_ticks = 0;
  std::array<double, kMaxPartitions + 1> shares{};
  std::array<std::int32_t, kMaxPartitions + 1> in_flight{};
  std::array<std::int64_t, kMaxPartitions + 1> asked_until{};  // ticks: demand lasts till then
  std::array<std::uint64_t, kMaxPartitions + 1> rejected{};
  std::array<std::string, kMaxPartitions + 1> names{};  // slot 0: ""

  LimitPartitions(const AdaptiveLimitConfig& config, std::int64_t window_ticks)
      : slots(static_cast<int>(config.partitions().size()) + 1),
        borrow(config.partition_borrow()),
        demand_ticks(window_ticks) {
    double reserved = 0.0;
    for (int i = 1; i < slots; ++i) {
      shares[i] = config.partitions()[i - 1].share;
      names[i] = config.partitions()[i - 1].name;
      reserved += shares[i];
    }
    shares[0] = std::max(0.0, 1.0 - reserved);
  }
  /// The slot of this layout partition `name` has ("" and a name it lacks: slot 0).
  int slot_of(const std::string& name) const noexcept {
    for (int i = 1; i < slots; ++i) {
      if (names[i] == name) return i;
    }
    return 0;
  }
  /// The slots partition `slot` is guaranteed under `limit`.
  std::int32_t guaranteed(int slot, std::int32_t limit) const noexcept {
    // The slack lets 0.3 × 10 be 3 (decimal shares are a hair below their value as doubles);
    // it is far too small to make the guarantees sum above the limit.
    return static_cast<std::int32_t>(std::max(limit, 0) * shares[slot] + 1e-9);
  }
  /// Whether partition `slot` may take one more slot of `limit` at `now`, under `mutex` (the
  /// caller checks the total against the limit): below its guarantee it may; at or above it,
  /// only when borrowing is on and the slot is none that a partition with demand still needs
  /// for its guarantee. Asking is demand.
  bool allows(int slot, std::int32_t limit, std::int64_t now) noexcept {
    asked_until[slot] = now + demand_ticks;
    if (in_flight[slot] < guaranteed(slot, limit)) return true;
    if (!borrow) return false;
    std::int64_t committed = 0;  // slots in use, and kept for the guarantees of those with demand
    for (int i = 0; i < slots; ++i) {
      committed += in_flight[i];
      if (in_flight[i] > 0 || asked_until[i] > now)
        committed += std::max(0, guaranteed(i, limit) - in_flight[i]);
    }
    return committed < limit;
  }
};

}  // namespace r4c::detail
