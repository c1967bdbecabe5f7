// SPDX-License-Identifier: Apache-2.0
// The adaptive limit's only source of time.
//
// A limit reads its clock twice per admitted call (when the call takes its slot and when it
// ends) and never on a rejection. `SystemClock` is the default and is built for that hot path;
// `ManualClock` makes tests deterministic: time moves only when the test says so.
//
//   auto clock = std::make_shared<r4c::ManualClock>();
//   r4c::AdaptiveLimit limit("orders", r4c::AdaptiveLimitConfig{}, clock);
//   clock->advance(std::chrono::seconds(1));   // every latency is what the clock says
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "r4c/detail/timer.hpp"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace r4c {

/// Work a clock runs once at a deadline (a timeout's expiry, the end of a wait). The policies own
/// their tasks; a clock that implements its own timers calls `fire()` once per schedule.
using TimerTask = detail::TimerTask;

/// A monotonic source of time in nanoseconds since an arbitrary epoch, and the deadlines on it.
/// Every policy reads its time and schedules its deadlines and waits through its clock only, so a
/// clock of your own drives all of them.
///
/// Only now() must be implemented. The timers' default implementation suits a clock whose time
/// moves with real time at steady_clock's rate: one timer thread per clock, started on first use,
/// waiting in steady_clock time until now() should have reached the deadline. A clock whose time
/// moves otherwise (simulated, replayed, paused) overrides schedule(), cancel() and
/// pending_tasks() so that tasks fire when its own time reaches them, as ManualClock does.
/// Thread safety: implementations must be safe to call from any thread.
class Clock {
 public:
  Clock() = default;
  Clock(const Clock&) = delete;
  Clock& operator=(const Clock&) = delete;
  virtual ~Clock();
  /// Monotonic time in nanoseconds; never goes back.
  virtual std::chrono::nanoseconds now() const noexcept = 0;

  /// Runs `task.fire()` once, when now() reaches `deadline` (at once, on this thread, when it
  /// already has). The caller owns the task and must cancel() it before destroying it or
  /// scheduling it again. An override must never fire a task from inside schedule() while
  /// holding a lock that cancel() takes. Allocation: none once the default queue has grown to
  /// its working size.
  virtual void schedule(TimerTask& task, std::chrono::nanoseconds deadline);
  /// Unschedules a task; if it is firing right now, waits until it has fired. Returns whether
  /// it was removed before firing. After it returns, the clock no longer touches the task.
  virtual bool cancel(TimerTask& task) noexcept;
  /// How many tasks are scheduled and not yet fired. A policy leaves none once its calls end.
  virtual std::size_t pending_tasks() const;
  /// Blocks the calling thread until now() reaches `deadline` (for a ManualClock: until another
  /// thread advances it there). Built on schedule() and cancel().
  void sleep_until(std::chrono::nanoseconds deadline);

 protected:
  /// The default timers' queue, for a derived clock that fires tasks in its own time with
  /// TimerQueue::schedule_manual() and fire_due().
  detail::TimerQueue& timers() const noexcept { return timers_; }

 private:
  mutable detail::TimerQueue timers_;
};

namespace detail {

/// Converts time stamp counter ticks to nanoseconds with a multiply and a shift:
/// `ns = base_ns + ((ticks - base_ticks) * mult) >> 32`, `mult` being ns per tick in 32.32.
struct TscConversion {
  std::uint64_t base_ticks = 0;
  std::int64_t base_ns = 0;
  std::uint64_t mult = 0;

  std::int64_t to_ns(std::uint64_t ticks) const noexcept {
    // Signed: a core whose counter lags slightly may read just before the calibration point.
    const auto delta = static_cast<__int128>(static_cast<std::int64_t>(ticks - base_ticks));
    return base_ns + static_cast<std::int64_t>((delta * static_cast<__int128>(mult)) >> 32);
  }
};

/// The process-wide calibration of the time stamp counter against `steady_clock`, measured once
/// on first use (about 10 ms), or nullptr where the counter is not usable as a clock: not
/// x86-64, no invariant TSC (CPUID 0x80000007 EDX bit 8), or a Linux kernel that does not use it
/// as its own clocksource (it stops trusting a TSC that drifts between cores).
const TscConversion* tsc_conversion() noexcept;

inline std::uint64_t read_tsc() noexcept {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return 0;
#endif
}

inline std::int64_t steady_now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class ClockReader;

}  // namespace detail

/// The default clock. On x86-64 with an invariant time stamp counter that the kernel itself uses
/// as its clocksource, it reads the counter and converts with a calibrated multiplier (several
/// times cheaper than `clock_gettime`, agreeing with `std::chrono::steady_clock` within 0.1%);
/// elsewhere it is `std::chrono::steady_clock`. Its epoch is `steady_clock`'s.
class SystemClock final : public Clock {
 public:
  SystemClock() noexcept;
  ~SystemClock() override;
  std::chrono::nanoseconds now() const noexcept override {
    return std::chrono::nanoseconds(now_ns());
  }
  /// Whether this clock reads the time stamp counter (else it reads `steady_clock`).
  bool uses_tsc() const noexcept { return uses_tsc_; }

 private:
  friend class detail::ClockReader;
  std::int64_t now_ns() const noexcept {
    if (uses_tsc_) return tsc_.to_ns(detail::read_tsc());
    return detail::steady_now_ns();
  }
  detail::TscConversion tsc_;
  bool uses_tsc_ = false;
};

/// A clock for tests: `now()` moves only by `advance`, so latencies are exactly what the test
/// says and windows end when the clock passes them, the same way on every run.
/// Thread safety: `now()` and `advance()` may be called from any thread.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(std::chrono::nanoseconds start = std::chrono::nanoseconds::zero()) noexcept
      : now_(start.count()) {}
  ~ManualClock() override;
  std::chrono::nanoseconds now() const noexcept override {
    return std::chrono::nanoseconds(now_.load(std::memory_order_relaxed));
  }
  /// Moves the clock forward by `by`, firing on this thread, in deadline order, every timer it
  /// passes or reaches (now() reads each task's deadline while it fires). Throws
  /// std::invalid_argument for a negative duration: a monotonic clock never goes back.
  /// Concurrent advances are serialised.
  void advance(std::chrono::nanoseconds by);

  /// Fires the task inside the advance() that reaches `deadline`, or at once when now() has.
  void schedule(TimerTask& task, std::chrono::nanoseconds deadline) override;

 private:
  std::atomic<std::int64_t> now_;  // relaxed: the value guards no other data
  std::mutex advance_mutex_;
};

namespace detail {

/// Reads a `Clock` on the hot path without a virtual call when it is a `SystemClock`, in the
/// clock's own unit: a limit keeps time stamps and its window end as raw counter ticks and
/// converts only the one span it needs (a latency) to nanoseconds.
class ClockReader {
 public:
  explicit ClockReader(const Clock* clock) noexcept;
  /// A reading in ticks: time stamp counter ticks for a SystemClock on the TSC, nanoseconds
  /// otherwise. Only differences and comparisons of readings mean anything.
  // always_inline: GCC kept it a call in the breaker's outcome path (a call and a return around
  // one rdtsc, 1 to 2 ns of a refused pipeline call, bench target 12).
  [[gnu::always_inline]] std::int64_t ticks() const noexcept {
    if (mode_ == Mode::kTsc) [[likely]]
      return static_cast<std::int64_t>(read_tsc());
    if (mode_ == Mode::kSteady) return steady_now_ns();
    return clock_->now().count();
  }
  /// Whether the readings are a SystemClock's (the counter or steady_clock, the same time for
  /// every SystemClock of the process) rather than a call to the clock's now().
  bool system_time() const noexcept { return mode_ != Mode::kVirtual; }
  /// A span of ticks in nanoseconds.
  std::int64_t to_ns(std::int64_t span) const noexcept {
    if (mode_ == Mode::kTsc) [[likely]]
      return static_cast<std::int64_t>((static_cast<__int128>(span) * ns_per_tick_) >> 32);
    return span;
  }
  /// A span of nanoseconds in ticks.
  std::int64_t to_ticks(std::int64_t span_ns) const noexcept;
  /// A reading as the clock's own now(), in nanoseconds (for Clock::schedule and sleep_until).
  std::int64_t to_clock_ns(std::int64_t reading) const noexcept {
    if (mode_ == Mode::kTsc) return base_ns_ + to_ns(reading - base_ticks_);
    return reading;
  }
  /// Who the readings come from, never 0: readers with the same source read the same time in
  /// the same unit (every SystemClock of the process, or one virtual clock).
  std::uintptr_t source() const noexcept { return source_; }

 private:
  enum class Mode : std::uint8_t { kTsc, kSteady, kVirtual };
  std::int64_t ns_per_tick_ = 0;  // 32.32 fixed point
  std::int64_t base_ticks_ = 0;
  std::int64_t base_ns_ = 0;
  const Clock* clock_;
  std::uintptr_t source_;
  Mode mode_;
};

/// The clock readings that the policies of one pipeline call share. Each timed policy reads
/// the clock when the call starts and most of them again when it ends, 6 to 7 ns a reading
/// (rdtsc on an Intel Xeon VM), while a pipeline's stages start, and end, within nanoseconds of
/// one another: the first policy to need a start reads it and the ones inside take it, the
/// innermost to need an end reads it and the ones around take it. A policy takes a reading only
/// from a reader of the same source, and a stage that waits (a permit reserved for later, a
/// queue) calls waited(), so that a wait is never taken for part of an inner call's latency.
class SharedReadings {
 public:
  /// The call's start on `clock`: the reading an outer policy took, or a new one.
  [[gnu::always_inline]] std::int64_t start(const ClockReader& clock) noexcept {
    if (start_source_ != clock.source()) {
      start_ = clock.ticks();
      start_source_ = clock.source();
    }
    return start_;
  }
  /// The stage waited: the policies inside read their own start.
  void waited() noexcept { start_source_ = 0; }
  /// The call's end on `clock`, once it returned to the caller's stage: the reading a policy
  /// inside took, or a new one.
  [[gnu::always_inline]] std::int64_t end(const ClockReader& clock) noexcept {
    if (end_source_ != clock.source()) {
      end_ = clock.ticks();
      end_source_ = clock.source();
    }
    return end_;
  }

 private:
  // Read only once their source is set: left unset, a pipeline call makes two stores, not four.
  std::int64_t start_;
  std::int64_t end_;
  std::uintptr_t start_source_ = 0;  // 0: no reading yet
  std::uintptr_t end_source_ = 0;
};

/// SharedReadings' interface for a policy called on its own: every reading is its own.
struct OwnReadings {
  [[gnu::always_inline]] static std::int64_t start(const ClockReader& clock) noexcept {
    return clock.ticks();
  }
  static void waited() noexcept {}
  [[gnu::always_inline]] static std::int64_t end(const ClockReader& clock) noexcept {
    return clock.ticks();
  }
};

}  // namespace detail
}  // namespace r4c
