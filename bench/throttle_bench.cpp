// SPDX-License-Identifier: Apache-2.0
// The throttle's admitted call, against the bulkhead's (BM_BulkheadExecute in
// policies_bench.cpp), the cheapest policy that admits and completes a call:
//
//   BM_ThrottleExecute   Throttle::execute of a trivial lambda, the backend accepting every
//                        call (p = 0: no draw)
//
// The throttle is shared by the benchmark's threads (default SystemClock).
#include <benchmark/benchmark.h>

#include "r4c/throttle.hpp"
#include "threads.hpp"

namespace {

void BM_ThrottleExecute(benchmark::State& state) {
  static r4c::Throttle throttle("bench-throttle");
  for (auto _ : state) {
    int result = throttle.execute([] { return 42; });
    benchmark::DoNotOptimize(result);
  }
}

}  // namespace

BENCHMARK(BM_ThrottleExecute)->Apply(r4c::bench::on_1_2_4_threads);
