// SPDX-License-Identifier: Apache-2.0
// What operating features cost an admitted call (issue #19, docs/performance.md "Operating it"):
//
//   BM_AdmittedCallLatencyHistogram  BM_AdmittedCall (adaptive_limit_bench.cpp) on a limit with
//                                    latencyHistogram on: target <= 1.15 x BM_AdmittedCall
//
// Each runs on 1, 2 and 4 threads that share one policy, timed in real time (bench/threads.hpp).
#include <benchmark/benchmark.h>

#include <cstdint>

#include "alloc_counter.hpp"
#include "r4c/adaptive_limit.hpp"
#include "threads.hpp"

namespace {

using r4c::bench::AllocCount;
using r4c::bench::on_1_2_4_threads;
using r4c::bench::thread_alloc_count;

// As BM_AdmittedCall: windows close while it runs, so it runs as long.
constexpr double kWindowedMinTime = 2.0;

// Allocations per call of the calling thread, as the other benchmarks count them.
void report_allocations(benchmark::State& state, const AllocCount& start) {
  const AllocCount end = thread_alloc_count();
  state.counters["allocs_per_call"] = benchmark::Counter(static_cast<double>(end.news - start.news),
                                                         benchmark::Counter::kAvgIterations);
}

// Default settings with the histogram on: every admitted call records its latency in its
// thread's stripe.
void BM_AdmittedCallLatencyHistogram(benchmark::State& state) {
  static r4c::AdaptiveLimit limit{"bench-latency-histogram",
                                  r4c::AdaptiveLimitConfig().latency_histogram(true)};
  // A thread's first call takes its stripe slot (once per thread): before timing.
  if (r4c::Permit permit = limit.try_acquire()) permit.on_success();
  const AllocCount start = thread_alloc_count();
  for (auto _ : state) {
    r4c::Permit permit = limit.try_acquire();
    if (!permit) [[unlikely]] {
      state.SkipWithError("the limit rejected a call");
      break;
    }
    permit.on_success();
  }
  report_allocations(state, start);
  if (state.thread_index() == 0) {
    state.counters["recorded"] = static_cast<double>(limit.snapshot().latency.total.count) /
                                 static_cast<double>(state.iterations());
  }
}

BENCHMARK(BM_AdmittedCallLatencyHistogram)->Apply(on_1_2_4_threads)->MinTime(kWindowedMinTime);

}  // namespace
