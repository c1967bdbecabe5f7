// SPDX-License-Identifier: Apache-2.0
// What operating features cost an admitted call (issue #19, docs/performance.md "Operating it"):
//
//   BM_AdmittedCallLatencyHistogram  BM_AdmittedCall (adaptive_limit_bench.cpp) on a limit with
//                                    latencyHistogram on: target <= 1.15 x BM_AdmittedCall
//   BM_RateLimiterEnforce            try_acquire() with permits to spare (enforce mode)
//   BM_RateLimiterObserveMode        the same in observe mode: target <= 1.1 x the enforce one
//   BM_BreakerEnforce                try_acquire() + on_success() on a closed breaker
//   BM_BreakerObserveMode            the same in observe mode: target <= 1.1 x the enforce one
//   BM_BulkheadEnforce               try_acquire() + release() with slots to spare (enforce)
//   BM_BulkheadObserveMode           the same in observe mode: target <= 1.1 x the enforce one
//   BM_BulkheadTimed                 BM_BulkheadEnforce plus two readings of the bulkhead's
//                                    clock around the call: what timing a call costs at least
//   BM_BulkheadLatencyHistogram      BM_BulkheadEnforce with latencyHistogram on: target
//                                    <= 1.15 x BM_BulkheadTimed (and, as issue 19 words it,
//                                    against BM_BulkheadEnforce: see docs/performance.md)
//
// Each runs on 1, 2 and 4 threads that share one policy, timed in real time (bench/threads.hpp).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "alloc_counter.hpp"
#include "r4c/adaptive_limit.hpp"
#include "r4c/bulkhead.hpp"
#include "r4c/circuit_breaker.hpp"
#include "r4c/clock.hpp"
#include "r4c/rate_limiter.hpp"
#include "threads.hpp"

namespace {

using r4c::bench::AllocCount;
using r4c::bench::on_1_2_4_threads;
using r4c::bench::thread_alloc_count;

// As BM_AdmittedCall: windows close while it runs, so it runs as long.
constexpr double kWindowedMinTime = 2.0;

// Operator new calls per call of the calling thread (allocs_per_call), as the other benchmarks
// count them; these benchmarks do not report mallocs_per_call.
void report_operator_news(benchmark::State& state, const AllocCount& start) {
  const AllocCount end = thread_alloc_count();
  state.counters["allocs_per_call"] = benchmark::Counter(static_cast<double>(end.news - start.news),
                                                         benchmark::Counter::kAvgIterations);
}

// One permit per iteration, taken and ended with `end`; the caller's thread has made its first
// call (which takes its stripe slot, once per thread) before.
template <class Policy, class End>
void permit_loop(benchmark::State& state, Policy& policy, End end) {
  const AllocCount start = thread_alloc_count();
  for (auto _ : state) {
    auto permit = policy.try_acquire();
    if (!permit) [[unlikely]] {
      state.SkipWithError("the policy refused a call");
      break;
    }
    end(permit);
  }
  report_operator_news(state, start);
}

// Default settings with the histogram on: every admitted call records its latency in its
// thread's stripe.
void BM_AdmittedCallLatencyHistogram(benchmark::State& state) {
  static r4c::AdaptiveLimit limit{"bench-latency-histogram",
                                  r4c::AdaptiveLimitConfig().latency_histogram(true)};
  if (r4c::Permit permit = limit.try_acquire()) permit.on_success();
  permit_loop(state, limit, [](r4c::Permit& permit) { permit.on_success(); });
}

// Observe mode costs a permitted call nothing: the mode is read only by a call it would refuse.
// Far more permits per period than any run takes: every call is permitted.
r4c::RateLimiterConfig plentiful(r4c::PolicyMode mode) {
  return r4c::RateLimiterConfig()
      .limit_for_period(r4c::RateLimiterConfig::kMaxLimitForPeriod)
      .refresh_period(std::chrono::milliseconds(1))
      .mode(mode);
}

// A rate limiter's permit is a bool: nothing to end.
void rate_limiter_loop(benchmark::State& state, r4c::RateLimiter& limiter) {
  (void)limiter.try_acquire();
  permit_loop(state, limiter, [](bool) {});
}

// The name of the policy a benchmark of `mode` uses: "<prefix>-enforce" or "<prefix>-observe".
std::string in_mode(const std::string& prefix, r4c::PolicyMode mode) {
  return prefix + (mode == r4c::PolicyMode::enforce ? "-enforce" : "-observe");
}

// BM_RateLimiterEnforce and BM_RateLimiterObserveMode: one loop, a limiter of each mode.
template <r4c::PolicyMode Mode>
void BM_RateLimiter(benchmark::State& state) {
  static r4c::RateLimiter limiter(in_mode("bench-rate", Mode), plentiful(Mode));
  rate_limiter_loop(state, limiter);
}

// A closed breaker's success (not slow): the lock-free path.
void breaker_loop(benchmark::State& state, r4c::CircuitBreaker& breaker) {
  permit_loop(state, breaker, [](r4c::CircuitBreakerPermit& permit) {
    permit.on_success(std::chrono::nanoseconds(1));
  });
}

void BM_BreakerEnforce(benchmark::State& state) {
  static r4c::CircuitBreaker breaker("bench-breaker-enforce");
  breaker_loop(state, breaker);
}

void BM_BreakerObserveMode(benchmark::State& state) {
  static r4c::CircuitBreaker breaker("bench-breaker-observe",
                                     r4c::CircuitBreakerConfig().mode(r4c::PolicyMode::observe));
  breaker_loop(state, breaker);
}

// Slots to spare for every thread: every call is admitted. Observe mode is read only by a call
// a full bulkhead would reject.
r4c::BulkheadConfig roomy(r4c::PolicyMode mode) {
  return r4c::BulkheadConfig().max_concurrent(64).mode(mode);
}

void bulkhead_loop(benchmark::State& state, r4c::Bulkhead& bulkhead) {
  permit_loop(state, bulkhead, [](r4c::BulkheadPermit& permit) { permit.release(); });
}

// BM_BulkheadEnforce and BM_BulkheadObserveMode: one loop, a bulkhead of each mode.
template <r4c::PolicyMode Mode>
void BM_Bulkhead(benchmark::State& state) {
  static r4c::Bulkhead bulkhead(in_mode("bench-bulkhead", Mode), roomy(Mode));
  bulkhead_loop(state, bulkhead);
}

// Each call reads the bulkhead's clock when it takes its slot and when it gives it back (the
// bulkhead times nothing else), then records the latency in its thread's stripe.
void BM_BulkheadLatencyHistogram(benchmark::State& state) {
  static r4c::Bulkhead bulkhead("bench-bulkhead-latency",
                                roomy(r4c::PolicyMode::enforce).latency_histogram(true));
  bulkhead.try_acquire().release();  // the thread's stripe slot, once
  bulkhead_loop(state, bulkhead);
}

// The floor of any latency of a bulkhead call: the call and two readings of the bulkhead's clock
// in the cheapest way r4c reads a clock (a ClockReader: the counter itself, one conversion of
// the span), the span kept from the optimiser. BM_BulkheadLatencyHistogram pays this and the
// record into its thread's stripe.
void BM_BulkheadTimed(benchmark::State& state) {
  static r4c::Bulkhead bulkhead("bench-bulkhead-timed", roomy(r4c::PolicyMode::enforce));
  const r4c::detail::ClockReader clock(bulkhead.clock().get());
  bulkhead.try_acquire().release();
  const AllocCount start = thread_alloc_count();
  for (auto _ : state) {
    r4c::BulkheadPermit permit = bulkhead.try_acquire();
    const std::int64_t granted = clock.ticks();
    if (!permit) [[unlikely]] {
      state.SkipWithError("the bulkhead refused a call");
      break;
    }
    permit.release();
    benchmark::DoNotOptimize(clock.to_ns(clock.ticks() - granted));
  }
  report_operator_news(state, start);
}

// The templates' instances keep the names docs/performance.md and bench/report.py know them by.
using enum r4c::PolicyMode;
BENCHMARK(BM_AdmittedCallLatencyHistogram)->Apply(on_1_2_4_threads)->MinTime(kWindowedMinTime);
BENCHMARK(BM_RateLimiter<enforce>)->Name("BM_RateLimiterEnforce")->Apply(on_1_2_4_threads);
BENCHMARK(BM_RateLimiter<observe>)->Name("BM_RateLimiterObserveMode")->Apply(on_1_2_4_threads);
BENCHMARK(BM_BreakerEnforce)->Apply(on_1_2_4_threads);
BENCHMARK(BM_BreakerObserveMode)->Apply(on_1_2_4_threads);
BENCHMARK(BM_Bulkhead<enforce>)->Name("BM_BulkheadEnforce")->Apply(on_1_2_4_threads);
BENCHMARK(BM_Bulkhead<observe>)->Name("BM_BulkheadObserveMode")->Apply(on_1_2_4_threads);
BENCHMARK(BM_BulkheadTimed)->Apply(on_1_2_4_threads);
BENCHMARK(BM_BulkheadLatencyHistogram)->Apply(on_1_2_4_threads);

}  // namespace
