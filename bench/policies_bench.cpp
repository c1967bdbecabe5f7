// SPDX-License-Identifier: Apache-2.0
// The admitted call of the rate limiter and of the bulkhead on their own, the paths issue 20
// must leave as they were (a weight-1 permit; a bulkhead nobody listens to):
//
//   BM_RateLimiterTryAcquire   RateLimiter::try_acquire() with permits to spare
//   BM_RateLimiterExecute      RateLimiter::execute of a trivial lambda
//   BM_BulkheadExecute         Bulkhead::execute of a trivial lambda, no listener
//
// Each benchmark's policy is shared by its threads (default SystemClock).
#include <benchmark/benchmark.h>

#include "r4c/bulkhead.hpp"
#include "r4c/rate_limiter.hpp"
#include "threads.hpp"

namespace {

// The most permits a period holds, every millisecond: never refuses here.
r4c::RateLimiter& generous_limiter() {
  static r4c::RateLimiter limiter("bench-rate",
                                  r4c::RateLimiterConfig()
                                      .limit_for_period(r4c::RateLimiterConfig::kMaxLimitForPeriod)
                                      .refresh_period(std::chrono::milliseconds(1)));
  return limiter;
}

void BM_RateLimiterTryAcquire(benchmark::State& state) {
  r4c::RateLimiter& limiter = generous_limiter();
  for (auto _ : state) {
    bool admitted = limiter.try_acquire();
    benchmark::DoNotOptimize(admitted);
  }
}

void BM_RateLimiterExecute(benchmark::State& state) {
  r4c::RateLimiter& limiter = generous_limiter();
  for (auto _ : state) {
    int result = limiter.execute([] { return 42; });
    benchmark::DoNotOptimize(result);
  }
}

void BM_BulkheadExecute(benchmark::State& state) {
  static r4c::Bulkhead bulkhead("bench-bulkhead", r4c::BulkheadConfig().max_concurrent(1000));
  for (auto _ : state) {
    int result = bulkhead.execute([] { return 42; });
    benchmark::DoNotOptimize(result);
  }
}

}  // namespace

using r4c::bench::on_1_2_4_threads;
BENCHMARK(BM_RateLimiterTryAcquire)->Apply(on_1_2_4_threads);
BENCHMARK(BM_RateLimiterExecute)->Apply(on_1_2_4_threads);
BENCHMARK(BM_BulkheadExecute)->Apply(on_1_2_4_threads);
