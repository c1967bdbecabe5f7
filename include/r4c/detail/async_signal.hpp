// SPDX-License-Identifier: Apache-2.0
// The cancellation signal r4c gives every inner operation (<r4c/asio.hpp>).
//
// Asio's cancellation_signal leaves ordering to its users: emit() must not run while the slot's
// handler is installed or cleared on another thread, which Asio arranges by running both in
// one strand. r4c cannot: a caller without a strand (a plain callback, asio::use_future) lets an
// operation complete, and clear its slot, on whatever thread it completes on, while r4c emits on
// that slot from another (a hedge cancelling its losers, a timeout's deadline, a caller's
// cancellation forwarded inward). GuardedSignal orders them itself: emit() and every change of
// the slot's handler hold one spin lock of the signal's, held for a handler's install, clear or
// run only. A handler that, run by emit(), changes its own slot (an operation that completes at
// once when cancelled) or emits inward does so on the emitting thread, which already holds the
// lock: each thread remembers the signals it holds, so that is not a deadlock.
//
// Lock order: a call emits inward only, never on its caller's slot, and only once it has
// claimed its answer, so no inner completion then reaches a lock held further out.
#pragma once

#include <asio/cancellation_signal.hpp>
#include <asio/cancellation_type.hpp>
#include <atomic>
#include <thread>
#include <type_traits>
#include <utility>

namespace r4c::detail {

class GuardedSlot;

/// A cancellation signal that may be emitted from any thread (see the top of this file).
class GuardedSignal {
 public:
  GuardedSignal() = default;
  GuardedSignal(const GuardedSignal&) = delete;
  GuardedSignal& operator=(const GuardedSignal&) = delete;

  /// Runs the slot's handler, if any, with `type`. Thread safety: any thread, concurrently with
  /// the slot's changes. Blocking: while another thread installs, clears or runs the handler.
  void emit(asio::cancellation_type type) {
    Hold hold(*this);
    signal_.emit(type);
  }

  GuardedSlot slot() noexcept;

 private:
  friend class GuardedSlot;

  // Holds the signal's lock unless this thread already does (a handler run by emit()).
  class Hold {
   public:
    explicit Hold(GuardedSignal& signal) noexcept : signal_(&signal), outer_(held_) {
      for (const Hold* h = held_; h != nullptr; h = h->outer_) {
        if (h->signal_ == signal_) {
          reentered_ = true;
          return;
        }
      }
      // acquire: the previous holder's changes to the handler happen before ours.
      while (signal_->locked_.exchange(true, std::memory_order_acquire)) {
        while (signal_->locked_.load(std::memory_order_relaxed)) std::this_thread::yield();
      }
      held_ = this;
    }
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    ~Hold() {
      if (reentered_) return;
      held_ = outer_;
      signal_->locked_.store(false, std::memory_order_release);  // our changes to the next holder
    }

   private:
    GuardedSignal* signal_;
    const Hold* outer_;
    bool reentered_ = false;
  };

  // The signals this thread holds, innermost first (a pipeline's depth at most).
  static inline thread_local const Hold* held_ = nullptr;

  asio::cancellation_signal signal_;
  std::atomic<bool> locked_{false};
};

/// The slot of a GuardedSignal: Asio's cancellation slot interface, each change under the
/// signal's lock. What the handler r4c gives an operation returns as its cancellation slot.
class GuardedSlot {
 public:
  GuardedSlot() noexcept = default;

  template <class CancellationHandler, class... Args>
  std::decay_t<CancellationHandler>& emplace(Args&&... args) {
    GuardedSignal::Hold hold(*signal_);
    return signal_->signal_.slot().template emplace<CancellationHandler>(
        std::forward<Args>(args)...);
  }
  template <class CancellationHandler>
  std::decay_t<CancellationHandler>& assign(CancellationHandler&& handler) {
    GuardedSignal::Hold hold(*signal_);
    return signal_->signal_.slot().assign(std::forward<CancellationHandler>(handler));
  }
  void clear() {
    if (signal_ == nullptr) return;
    GuardedSignal::Hold hold(*signal_);
    signal_->signal_.slot().clear();
  }
  bool is_connected() const noexcept { return signal_ != nullptr; }
  bool has_handler() const noexcept {
    if (signal_ == nullptr) return false;
    GuardedSignal::Hold hold(*signal_);
    return signal_->signal_.slot().has_handler();
  }

  /// Asio's own slot of the same signal, for code that names asio::cancellation_slot (kept so
  /// that it compiles): unguarded, it must install and clear its handler where no emission
  /// runs at the same time (one thread, one strand), as Asio's rule is. Keep the handler's
  /// slot as `asio::associated_cancellation_slot_t<Handler>` (or `auto`) to be guarded.
  operator asio::cancellation_slot() const noexcept {
    return signal_ == nullptr ? asio::cancellation_slot() : signal_->signal_.slot();
  }

  friend bool operator==(const GuardedSlot& a, const GuardedSlot& b) noexcept {
    return a.signal_ == b.signal_;
  }
  friend bool operator!=(const GuardedSlot& a, const GuardedSlot& b) noexcept {
    return a.signal_ != b.signal_;
  }

 private:
  friend class GuardedSignal;
  explicit GuardedSlot(GuardedSignal* signal) noexcept : signal_(signal) {}
  GuardedSignal* signal_ = nullptr;
};

inline GuardedSlot GuardedSignal::slot() noexcept { return GuardedSlot(this); }

}  // namespace r4c::detail
