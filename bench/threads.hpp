// SPDX-License-Identifier: Apache-2.0
// How every r4c benchmark runs: on 1, 2 and 4 threads sharing one policy, timed in real time
// (a thread's time per call includes waiting for a shared cache line or a mutex, and, on 4
// threads over 2 cores, for a core).
#pragma once

#include <benchmark/benchmark.h>

namespace r4c::bench {

inline void on_1_2_4_threads(benchmark::internal::Benchmark* benchmark) {
  benchmark->Threads(1)->Threads(2)->Threads(4)->UseRealTime();
}

}  // namespace r4c::bench
