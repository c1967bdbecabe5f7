// SPDX-License-Identifier: Apache-2.0
// Benchmarks of r4c::AdaptiveLimit's hot path, each beside what it is measured against:
//
//   BM_Floor            the irreducible work of an admitted call, written out by hand
//   BM_AdmittedCall     try_acquire() + on_success() on a shared limit with default settings
//   BM_AdmittedCallObserved  the same on a limit with a limit-change listener subscribed
//   BM_Rejection        try_acquire() on a full limit
//   BM_ExecuteAdmitted  execute() of a trivial lambda
//   BM_ExecuteRejected  execute() on a full limit, catching LimitExceededException
//   BM_FixedBulkhead    a counting bulkhead with a fixed maximum (baselines.hpp)
//   BM_ClockDefault     one read of the limit's default clock (SystemClock via ClockReader)
//   BM_ClockSteady      one std::chrono::steady_clock::now()
//   BM_MutexLimiter     a windowed limiter behind one mutex (baselines.hpp)
//
// Each runs on 1, 2 and 4 threads that share one limiter, timed in real (wall) time; bench/run
// turns Google Benchmark's figures into nanoseconds per call per thread (docs/performance.md).
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdint>

#include "alloc_counter.hpp"
#include "baselines.hpp"
#include "r4c/adaptive_limit.hpp"
#include "r4c/clock.hpp"
#include "r4c/detail/cache_line.hpp"
#include "r4c/events.hpp"
#include "threads.hpp"

namespace {

using r4c::bench::AllocCount;
using r4c::bench::thread_alloc_count;

const r4c::SystemClock& system_clock() {
  static const r4c::SystemClock clock;
  return clock;
}

// The limit's own non-virtual path to its default clock.
const r4c::detail::ClockReader& default_clock() {
  static const r4c::detail::ClockReader reader(&system_clock());
  return reader;
}

// Counts the calling thread's allocations from construction to report(). Summed over threads
// and divided by all threads' iterations (kAvgIterations), they are per call.
class AllocScope {
 public:
  AllocScope() noexcept : start_(thread_alloc_count()) {}
  void report(benchmark::State& state) const {
    const AllocCount end = thread_alloc_count();  // before the counter map allocates
    const auto per_call = [](std::uint64_t count) {
      return benchmark::Counter(static_cast<double>(count), benchmark::Counter::kAvgIterations);
    };
    state.counters["allocs_per_call"] = per_call(end.news - start_.news);
    state.counters["bytes_per_call"] = per_call(end.new_bytes - start_.new_bytes);
    state.counters["mallocs_per_call"] = per_call(end.mallocs - start_.mallocs);
  }

 private:
  AllocCount start_;
};

// ---- the floor ---------------------------------------------------------------------------

// Far above any thread count here: the floor's admission never fails.
constexpr std::int32_t kFloorMaxInFlight = 1000;

struct alignas(r4c::detail::kCacheLine) FloorInFlight {
  std::atomic<std::int32_t> value{0};
};
FloorInFlight floor_in_flight;  // shared by all threads, alone on its cache line

struct FloorTotals {
  std::uint64_t latency_sum_ns = 0;
};
constinit thread_local FloorTotals floor_totals;

// Two clock reads, one CAS admission, one decrement, one plain add: what any limit that
// measures latency must do per admitted call.
void BM_Floor(benchmark::State& state) {
  const r4c::detail::ClockReader& clock = default_clock();
  std::atomic<std::int32_t>& in_flight = floor_in_flight.value;
  for (auto _ : state) {
    std::int32_t running = in_flight.load(std::memory_order_relaxed);
    do {
      if (running >= kFloorMaxInFlight) [[unlikely]] {
        state.SkipWithError("the floor's admission failed");
        break;
      }
    } while (!in_flight.compare_exchange_weak(running, running + 1, std::memory_order_relaxed,
                                              std::memory_order_relaxed));
    const std::int64_t start = clock.ticks();
    const std::int64_t end = clock.ticks();
    in_flight.fetch_sub(1, std::memory_order_relaxed);
    floor_totals.latency_sum_ns += static_cast<std::uint64_t>(clock.to_ns(end - start));
  }
  benchmark::DoNotOptimize(floor_totals);
}

// ---- the adaptive limit ------------------------------------------------------------------

// Default settings: the limit starts at 20 and gradient2 keeps it there while fewer than half
// its slots are used, so 4 threads are never rejected.
r4c::AdaptiveLimit& default_limit() {
  static r4c::AdaptiveLimit limit("bench-admitted");
  return limit;
}

r4c::AdaptiveLimit& execute_limit() {
  static r4c::AdaptiveLimit limit("bench-execute");
  return limit;
}

// A limit of one whose only slot is held for the life of the process.
struct FullLimit {
  r4c::AdaptiveLimit limit{"bench-full",
                           r4c::AdaptiveLimitConfig().initial_limit(1).min_limit(1).max_limit(1)};
  r4c::Permit held = limit.try_acquire();
};

FullLimit& full_limit() {
  static FullLimit full;
  return full;
}

// One call before timing: a thread's first call, admitted or rejected, takes the thread's
// stripe slot (a mutex and a thread-exit registration that callocs), once per thread.
void warm_up(r4c::AdaptiveLimit& limit) {
  if (r4c::Permit permit = limit.try_acquire()) permit.on_success();
}

// The full limit, warmed up on this thread; null, the benchmark skipped, if it could not be
// filled.
r4c::AdaptiveLimit* warmed_full_limit(benchmark::State& state) {
  FullLimit& full = full_limit();
  if (!full.held) {
    state.SkipWithError("could not fill the limit");
    return nullptr;
  }
  warm_up(full.limit);
  return &full.limit;
}

// The timed loop of the admitted-call benchmarks: each call's permit from `acquire()`, its success
// reported; a rejection ends the benchmark with `rejected`. The allocations are counted.
template <class Acquire>
void admitted_calls(benchmark::State& state, Acquire acquire, const char* rejected) {
  const AllocScope allocs;
  for (auto _ : state) {
    r4c::Permit permit = acquire();
    if (!permit) [[unlikely]] {
      state.SkipWithError(rejected);
      break;
    }
    permit.on_success();
  }
  allocs.report(state);
}

void BM_AdmittedCall(benchmark::State& state) {
  r4c::AdaptiveLimit& limit = default_limit();
  warm_up(limit);
  const r4c::AdaptiveLimitSnapshot before = limit.snapshot();
  admitted_calls(
      state, [&limit] { return limit.try_acquire(); }, "the default limit rejected a call");
  if (state.thread_index() == 0) {
    // The other threads have left the loop too: Google Benchmark joins them at its end.
    const r4c::AdaptiveLimitSnapshot after = limit.snapshot();
    state.counters["windows"] = static_cast<double>(after.windows - before.windows);
    state.counters["limit"] = after.limit;
  }
}

// A limit like default_limit() with a listener: subscribing must cost admitted calls nothing.
struct ObservedLimit {
  r4c::AdaptiveLimit limit{"bench-observed"};
  std::atomic<std::uint64_t> changes{0};
  r4c::Subscription subscription = limit.on_limit_change(
      [this](const r4c::LimitChangeEvent&) { changes.fetch_add(1, std::memory_order_relaxed); });
};

void BM_AdmittedCallObserved(benchmark::State& state) {
  static ObservedLimit observed;
  r4c::AdaptiveLimit& limit = observed.limit;
  warm_up(limit);
  admitted_calls(
      state, [&limit] { return limit.try_acquire(); }, "the observed limit rejected a call");
  if (state.thread_index() == 0) {
    state.counters["limit_changes_heard"] =
        static_cast<double>(observed.changes.load(std::memory_order_relaxed));
  }
}

// The same admitted call with a priority class (issue #17: at most 1.1x BM_AdmittedCall), and
// on a limit whose calls may wait (max_wait set, nobody waiting).
void admitted_loop(benchmark::State& state, r4c::AdaptiveLimit& limit, r4c::CallClass cls) {
  warm_up(limit);
  admitted_calls(
      state, [&limit, cls] { return limit.try_acquire(cls); }, "the limit rejected a call");
}

void BM_AdmittedCallWithClass(benchmark::State& state) {
  static r4c::AdaptiveLimit limit{"bench-class"};
  admitted_loop(state, limit, r4c::CallClass::best_effort);
}

void BM_AdmittedCallWaitConfigured(benchmark::State& state) {
  static r4c::AdaptiveLimit limit{
      "bench-wait", r4c::AdaptiveLimitConfig().max_wait(std::chrono::milliseconds(20))};
  admitted_loop(state, limit, r4c::CallClass::critical);
}

// Observe mode (issue #19): an admitted call must cost what it costs in enforce mode
// (BM_AdmittedCall); the mode is read only by a call the limit would reject.
void BM_AdmittedCallObserveMode(benchmark::State& state) {
  static r4c::AdaptiveLimit limit{"bench-observe-mode",
                                  r4c::AdaptiveLimitConfig().mode(r4c::PolicyMode::observe)};
  admitted_loop(state, limit, r4c::CallClass::critical);
}

// Observe mode on a full limit: every call is one it would have rejected, admitted and
// counted apart (compare with BM_AdmittedCall and BM_Rejection).
void BM_ObservedOverLimit(benchmark::State& state) {
  struct ObservedFullLimit {
    r4c::AdaptiveLimit limit{
        "bench-observe-full",
        r4c::AdaptiveLimitConfig().initial_limit(1).min_limit(1).max_limit(1).mode(
            r4c::PolicyMode::observe)};
    r4c::Permit held = limit.try_acquire();
  };
  static ObservedFullLimit full;
  admitted_loop(state, full.limit, r4c::CallClass::critical);
  if (state.thread_index() == 0) {
    state.counters["would_have_rejected"] =
        static_cast<double>(full.limit.snapshot().would_have_rejected);
  }
}

void BM_Rejection(benchmark::State& state) {
  r4c::AdaptiveLimit* full = warmed_full_limit(state);
  if (full == nullptr) return;
  const AllocScope allocs;
  for (auto _ : state) {
    r4c::Permit permit = full->try_acquire();
    if (permit) [[unlikely]] {
      state.SkipWithError("a full limit admitted a call");
      break;
    }
  }
  allocs.report(state);
}

void BM_ExecuteAdmitted(benchmark::State& state) {
  r4c::AdaptiveLimit& limit = execute_limit();
  warm_up(limit);
  const AllocScope allocs;
  try {
    for (auto _ : state) {
      int result = limit.execute([] { return 42; });
      benchmark::DoNotOptimize(result);
    }
  } catch (const r4c::LimitExceededException&) {
    state.SkipWithError("the default limit rejected a call");
  }
  allocs.report(state);
}

void BM_ExecuteRejected(benchmark::State& state) {
  r4c::AdaptiveLimit* full = warmed_full_limit(state);
  if (full == nullptr) return;
  const AllocScope allocs;
  for (auto _ : state) {
    try {
      int result = full->execute([] { return 42; });
      benchmark::DoNotOptimize(result);
      state.SkipWithError("a full limit admitted a call");
      break;
    } catch (const r4c::LimitExceededException& rejected) {
      benchmark::DoNotOptimize(&rejected);
    }
  }
  allocs.report(state);
}

// ---- baselines ---------------------------------------------------------------------------

r4c::bench::FixedBulkhead& fixed_bulkhead() {
  static r4c::bench::FixedBulkhead bulkhead(kFloorMaxInFlight);
  return bulkhead;
}

void BM_FixedBulkhead(benchmark::State& state) {
  r4c::bench::FixedBulkhead& bulkhead = fixed_bulkhead();
  for (auto _ : state) {
    if (!bulkhead.try_acquire()) [[unlikely]] {
      state.SkipWithError("the bulkhead rejected a call");
      break;
    }
    bulkhead.release();
  }
}

void BM_ClockDefault(benchmark::State& state) {
  const r4c::detail::ClockReader& clock = default_clock();
  for (auto _ : state) benchmark::DoNotOptimize(clock.ticks());
}

void BM_ClockSteady(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(std::chrono::steady_clock::now());
}

// Starts at 100 and never goes below 10: 4 threads are never rejected.
r4c::bench::MutexLimiter& mutex_limiter() {
  static r4c::bench::MutexLimiter limiter(100, 10, 1000);
  return limiter;
}

void BM_MutexLimiter(benchmark::State& state) {
  r4c::bench::MutexLimiter& limiter = mutex_limiter();
  const AllocScope allocs;
  for (auto _ : state) {
    r4c::bench::MutexLimiter::Clock::time_point start;
    if (!limiter.try_acquire(start)) [[unlikely]] {
      state.SkipWithError("the mutex limiter rejected a call");
      break;
    }
    limiter.on_success(start);
  }
  allocs.report(state);
}

using r4c::bench::on_1_2_4_threads;

// Windows end every second: run long enough that several close within each measurement.
constexpr double kWindowedMinTime = 2.0;

BENCHMARK(BM_Floor)->Apply(on_1_2_4_threads);
BENCHMARK(BM_AdmittedCall)->Apply(on_1_2_4_threads)->MinTime(kWindowedMinTime);
BENCHMARK(BM_AdmittedCallObserved)->Apply(on_1_2_4_threads)->MinTime(kWindowedMinTime);
BENCHMARK(BM_AdmittedCallWithClass)->Apply(on_1_2_4_threads)->MinTime(kWindowedMinTime);
BENCHMARK(BM_AdmittedCallWaitConfigured)->Apply(on_1_2_4_threads)->MinTime(kWindowedMinTime);
BENCHMARK(BM_AdmittedCallObserveMode)->Apply(on_1_2_4_threads)->MinTime(kWindowedMinTime);
BENCHMARK(BM_ObservedOverLimit)->Apply(on_1_2_4_threads)->MinTime(kWindowedMinTime);
BENCHMARK(BM_Rejection)->Apply(on_1_2_4_threads);
BENCHMARK(BM_ExecuteAdmitted)->Apply(on_1_2_4_threads)->MinTime(kWindowedMinTime);
BENCHMARK(BM_ExecuteRejected)->Apply(on_1_2_4_threads);
BENCHMARK(BM_FixedBulkhead)->Apply(on_1_2_4_threads);
BENCHMARK(BM_ClockDefault)->Apply(on_1_2_4_threads);
BENCHMARK(BM_ClockSteady)->Apply(on_1_2_4_threads);
BENCHMARK(BM_MutexLimiter)->Apply(on_1_2_4_threads)->MinTime(kWindowedMinTime);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  // bench/run judges the default clock against steady_clock only where it reads the TSC.
  benchmark::AddCustomContext("r4c_system_clock_uses_tsc",
                              system_clock().uses_tsc() ? "true" : "false");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
