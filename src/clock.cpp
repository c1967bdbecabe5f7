// SPDX-License-Identifier: Apache-2.0
#include "r4c/clock.hpp"

#include <condition_variable>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace r4c {
namespace detail {
namespace {

#if defined(__x86_64__)
bool cpu_has_invariant_tsc() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (static_cast<unsigned>(__get_cpuid_max(0x80000000, nullptr)) < 0x80000007u) return false;
  __get_cpuid(0x80000007, &eax, &ebx, &ecx, &edx);
  return (edx & (1u << 8)) != 0;
}

// The kernel drops the TSC as its clocksource when it sees it drift (unsynchronised sockets,
// some migrations); follow its judgement where it is visible.
bool kernel_trusts_tsc() {
  std::ifstream in("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string source;
  if (!(in >> source)) return true;  // not Linux or not readable: the CPUID bit decides
  return source == "tsc";
}

struct Pair {
  std::uint64_t ticks;
  std::int64_t ns;
};

// A counter read bracketed by two steady_clock reads; the tightest of a few bracket pairs the
// counter with the steady time to within tens of nanoseconds.
Pair paired_read() {
  Pair best{0, 0};
  std::int64_t best_width = INT64_MAX;
  for (int i = 0; i < 7; ++i) {
    const std::int64_t before = steady_now_ns();
    const std::uint64_t ticks = read_tsc();
    const std::int64_t after = steady_now_ns();
    if (after - before < best_width) {
      best_width = after - before;
      best = {ticks, before + (after - before) / 2};
    }
  }
  return best;
}

const TscConversion* calibrate() {
  if (!cpu_has_invariant_tsc() || !kernel_trusts_tsc()) return nullptr;
  const Pair first = paired_read();
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const Pair second = paired_read();
  if (second.ticks <= first.ticks || second.ns <= first.ns) return nullptr;
  const long double ns_per_tick = static_cast<long double>(second.ns - first.ns) /
                                  static_cast<long double>(second.ticks - first.ticks);
  static TscConversion conversion;
  conversion.base_ticks = second.ticks;
  conversion.base_ns = second.ns;
  conversion.mult = static_cast<std::uint64_t>(ns_per_tick * 4294967296.0L + 0.5L);
  return &conversion;
}
#endif

}  // namespace

const TscConversion* tsc_conversion() noexcept {
#if defined(__x86_64__)
  static const TscConversion* const conversion = calibrate();
  return conversion;
#else
  return nullptr;
#endif
}

ClockReader::ClockReader(const Clock* clock) noexcept
    : clock_(clock), source_(reinterpret_cast<std::uintptr_t>(clock)), mode_(Mode::kVirtual) {
  if (const auto* system = dynamic_cast<const SystemClock*>(clock)) {
    ns_per_tick_ = static_cast<std::int64_t>(system->tsc_.mult);
    base_ticks_ = static_cast<std::int64_t>(system->tsc_.base_ticks);
    base_ns_ = system->tsc_.base_ns;
    mode_ = system->uses_tsc_ ? Mode::kTsc : Mode::kSteady;
    // Odd, so never a clock's address: every SystemClock reads the same time.
    source_ = system->uses_tsc_ ? 1 : 3;
  }
}

std::int64_t ClockReader::to_ticks(std::int64_t span_ns) const noexcept {
  if (mode_ != Mode::kTsc) return span_ns;
  return static_cast<std::int64_t>((static_cast<__int128>(span_ns) << 32) / ns_per_tick_);
}

}  // namespace detail

SystemClock::SystemClock() noexcept {
  if (const detail::TscConversion* conversion = detail::tsc_conversion()) {
    tsc_ = *conversion;
    uses_tsc_ = true;
  }
}

Clock::~Clock() = default;

void Clock::schedule(TimerTask& task, std::chrono::nanoseconds deadline) {
  // The timer thread waits in steady_clock time.
  timers_.schedule_threaded(task, detail::steady_now_ns() + (deadline - now()).count());
}

bool Clock::cancel(TimerTask& task) noexcept { return timers_.cancel(task); }

std::size_t Clock::pending_tasks() const { return timers_.pending(); }

namespace {
struct Wakeup final : detail::TimerTask {
  std::mutex mutex;
  std::condition_variable woken;
  bool fired = false;
  void fire() noexcept override {
    std::lock_guard<std::mutex> lock(mutex);
    fired = true;
    woken.notify_one();
  }
};
}  // namespace

void Clock::sleep_until(std::chrono::nanoseconds deadline) {
  if (now() >= deadline) return;
  Wakeup wakeup;
  schedule(wakeup, deadline);
  {
    std::unique_lock<std::mutex> lock(wakeup.mutex);
    wakeup.woken.wait(lock, [&] { return wakeup.fired; });
  }
  cancel(wakeup);  // returns once the timer is done with it
}

SystemClock::~SystemClock() = default;

ManualClock::~ManualClock() = default;

void ManualClock::schedule(TimerTask& task, std::chrono::nanoseconds deadline) {
  timers().schedule_manual(task, deadline.count(), now_);
}

void ManualClock::advance(std::chrono::nanoseconds by) {
  if (by.count() < 0) {
    throw std::invalid_argument("ManualClock::advance: duration is " + std::to_string(by.count()) +
                                " ns; valid: >= 0 (a monotonic clock never goes back)");
  }
  std::lock_guard<std::mutex> lock(advance_mutex_);
  const std::int64_t target = now_.load(std::memory_order_relaxed) + by.count();
  timers().fire_due(
      target,
      [](void* self, std::int64_t time) {
        auto& now = static_cast<ManualClock*>(self)->now_;
        if (time > now.load(std::memory_order_relaxed)) now.store(time, std::memory_order_relaxed);
      },
      this);
}

}  // namespace r4c
