// SPDX-License-Identifier: Apache-2.0
// How every r4c benchmark runs: on 1, 2 and 4 threads sharing one policy, timed in real time
// (a thread's time per call includes waiting for a shared cache line or a mutex, and, on 4
// threads over 2 cores, for a core), and how they report each thread's allocations per call.
#pragma once

#include <benchmark/benchmark.h>

#include "alloc_counter.hpp"

namespace r4c::bench {

inline void on_1_2_4_threads(benchmark::internal::Benchmark* benchmark) {
  benchmark->Threads(1)->Threads(2)->Threads(4)->UseRealTime();
}

/// The calling thread's allocations since `start`, per iteration: operator new calls
/// (allocs_per_call) and malloc-family calls (mallocs_per_call).
inline void report_allocations(benchmark::State& state, const AllocCount& start) {
  const AllocCount end = thread_alloc_count();
  state.counters["allocs_per_call"] = benchmark::Counter(static_cast<double>(end.news - start.news),
                                                         benchmark::Counter::kAvgIterations);
  state.counters["mallocs_per_call"] = benchmark::Counter(
      static_cast<double>(end.mallocs - start.mallocs), benchmark::Counter::kAvgIterations);
}

}  // namespace r4c::bench
