// SPDX-License-Identifier: Apache-2.0
// The pipeline's cost, policy by policy, against the bare AdaptiveLimit::execute it wraps:
//
//   BM_PipelineBareExecute    AdaptiveLimit::execute of a trivial lambda (the baseline)
//   BM_PipelineLimit          a pipeline with only an adaptive limit
//   BM_PipelineLimitRate      + a rate limiter
//   BM_PipelineLimitTimeout   + a timeout, callable without a token (no timer)
//   BM_PipelineLimitTimeoutToken  + a timeout, callable taking a std::stop_token (a timer)
//   BM_PipelineLimitBulkhead  + a bulkhead
//   BM_PipelineAll            all four, callable taking a token
//   BM_PipelineLimitRetry     + a retry (every call succeeds: its first attempt is its last)
//   BM_PipelineLimitBreaker   + a circuit breaker (closed)
//   BM_PipelineLimitHedge     + a hedge whose delay never passes: each call's one attempt runs
//                             on the registry's executor while the caller waits
//   BM_ExecutorRoundTrip      the hedge's baseline: post a task to an r4c::Executor and wait
//                             for its result through a std::promise (the bare hand-off)
//   BM_PipelineTryExecuteRejected  try_execute of retry (aborting on LimitExceededException) +
//                             circuit breaker (ignoring it) + rate limiter + adaptive limit +
//                             timeout, the limit full: the refusal as a value, no throw
//   BM_PipelineExecuteRejected     execute of the same pipeline, catching the one throw
//   BM_PipelineTryExecuteAdmitted  try_execute of the same policies, the limit with room
//   BM_PipelineTryExecuteCodeFailure  the same policies, the call failing with an error code
//                             (timed_out) as a value: the retry's code predicate gives up, the
//                             breaker records a failure, the limit counts a drop; 1 call in 16
//                             succeeds so that the breaker (failure threshold 100 %) stays closed
//
// Each pipeline has its own registry and policies (default SystemClock), shared by the
// benchmark's threads.
#include <benchmark/benchmark.h>

#include <future>
#include <stop_token>
#include <system_error>

#include "alloc_counter.hpp"
#include "r4c/pipeline.hpp"
#include "threads.hpp"

namespace {

using r4c::bench::AllocCount;
using r4c::bench::report_allocations;
using r4c::bench::thread_alloc_count;

// Permits enough that the rate limiter never refuses here.
void generous(r4c::RateLimiterConfig& r) {
  r.limit_for_period(8'000'000).refresh_period(std::chrono::milliseconds(1));
}
void roomy(r4c::AdaptiveLimitConfig& a) { a.initial_limit(100).max_limit(1000); }
void wide(r4c::BulkheadConfig& b) { b.max_concurrent(1000); }

struct Fixture {
  r4c::ResilienceRegistry registry = r4c::ResilienceRegistry::builder().build();
  r4c::Pipeline<int> pipeline;
  explicit Fixture(void (*configure)(r4c::Pipeline<int>::Builder&))
      : pipeline([&] {
          auto builder = r4c::Pipeline<int>::builder(registry, "bench");
          configure(builder);
          return builder.build();
        }()) {}
};

template <void (*Configure)(r4c::Pipeline<int>::Builder&)>
Fixture& fixture() {
  static Fixture instance(Configure);
  return instance;
}

void limit_only(r4c::Pipeline<int>::Builder& b) { b.adaptive_limit(roomy); }
void limit_rate(r4c::Pipeline<int>::Builder& b) { b.adaptive_limit(roomy).rate_limiter(generous); }
void limit_timeout(r4c::Pipeline<int>::Builder& b) { b.adaptive_limit(roomy).timeout(); }
void limit_bulkhead(r4c::Pipeline<int>::Builder& b) { b.adaptive_limit(roomy).bulkhead(wide); }
void all(r4c::Pipeline<int>::Builder& b) {
  b.adaptive_limit(roomy).timeout().bulkhead(wide).rate_limiter(generous);
}

void limit_retry(r4c::Pipeline<int>::Builder& b) { b.adaptive_limit(roomy).retry(); }
void limit_breaker(r4c::Pipeline<int>::Builder& b) { b.adaptive_limit(roomy).circuit_breaker(); }
void limit_hedge(r4c::Pipeline<int>::Builder& b) {
  b.adaptive_limit(roomy).hedge([](r4c::HedgeConfig& h) { h.delay(std::chrono::seconds(10)); });
}

// The pipeline of issue 21: a refusal by the limit must pass the breaker unrecorded and end
// the retry at once.
void refusing(r4c::Pipeline<int>::Builder& b) {
  b.retry([](r4c::RetryConfig& r) { r.abort_on<r4c::LimitExceededException>(); })
      .circuit_breaker(
          [](r4c::CircuitBreakerConfig& c) { c.ignore_on<r4c::LimitExceededException>(); })
      .rate_limiter(generous)
      .timeout();
}
void refusing_full(r4c::Pipeline<int>::Builder& b) {
  refusing(b);
  b.adaptive_limit(
      [](r4c::AdaptiveLimitConfig& a) { a.initial_limit(1).min_limit(1).max_limit(1); });
}
void refusing_roomy(r4c::Pipeline<int>::Builder& b) {
  refusing(b);
  b.adaptive_limit(roomy);
}

// The refusing pipeline, its retry deciding codes and its breaker opening only at 100 % failures:
// what a call that fails with a code meets. A min_limit of 20 keeps 4 threads admitted while
// the drops push the limit down.
void code_failing(r4c::Pipeline<int>::Builder& b) {
  b.retry([](r4c::RetryConfig& r) {
     r.abort_on<r4c::LimitExceededException>().retry_on_error_code(
         [](const std::error_code& code) { return code == std::errc::connection_refused; });
   })
      .circuit_breaker([](r4c::CircuitBreakerConfig& c) {
        c.ignore_on<r4c::LimitExceededException>().failure_rate_threshold(100).sliding_window_size(
            1000);
      })
      .rate_limiter(generous)
      .adaptive_limit(
          [](r4c::AdaptiveLimitConfig& a) { a.initial_limit(100).min_limit(20).max_limit(1000); })
      .timeout();
}

template <void (*Configure)(r4c::Pipeline<int>::Builder&), bool kToken>
void run_pipeline(benchmark::State& state) {
  const r4c::Pipeline<int>& pipeline = fixture<Configure>().pipeline;
  // Warm: the thread's stripe slot, and (with a token) its spare stop_source and the timer
  // queue's capacity.
  if constexpr (kToken) {
    pipeline.execute([](std::stop_token) { return 0; });
  } else {
    pipeline.execute([] { return 0; });
  }
  const AllocCount start = thread_alloc_count();
  for (auto _ : state) {
    int result;
    if constexpr (kToken) {
      result = pipeline.execute([](std::stop_token) { return 42; });
    } else {
      result = pipeline.execute([] { return 42; });
    }
    benchmark::DoNotOptimize(result);
  }
  report_allocations(state, start);
}

void BM_PipelineBareExecute(benchmark::State& state) {
  static r4c::AdaptiveLimit limit("bench-bare",
                                  r4c::AdaptiveLimitConfig().initial_limit(100).max_limit(1000));
  limit.execute([] { return 0; });
  const AllocCount start = thread_alloc_count();
  for (auto _ : state) {
    int result = limit.execute([] { return 42; });
    benchmark::DoNotOptimize(result);
  }
  report_allocations(state, start);
}

void BM_PipelineLimit(benchmark::State& state) { run_pipeline<limit_only, false>(state); }
void BM_PipelineLimitRate(benchmark::State& state) { run_pipeline<limit_rate, false>(state); }
void BM_PipelineLimitTimeout(benchmark::State& state) { run_pipeline<limit_timeout, false>(state); }
void BM_PipelineLimitTimeoutToken(benchmark::State& state) {
  run_pipeline<limit_timeout, true>(state);
}
void BM_PipelineLimitBulkhead(benchmark::State& state) {
  run_pipeline<limit_bulkhead, false>(state);
}
void BM_PipelineAll(benchmark::State& state) { run_pipeline<all, true>(state); }
void BM_PipelineLimitRetry(benchmark::State& state) { run_pipeline<limit_retry, false>(state); }
void BM_PipelineLimitBreaker(benchmark::State& state) { run_pipeline<limit_breaker, false>(state); }
void BM_PipelineLimitHedge(benchmark::State& state) { run_pipeline<limit_hedge, true>(state); }

// The refusing pipeline with its limit's one slot held for the whole process.
struct FullPipeline {
  Fixture& setup = fixture<refusing_full>();
  r4c::Permit held = setup.pipeline.adaptive_limit()->try_acquire();
};
FullPipeline& full_pipeline() {
  static FullPipeline full;
  return full;
}

void BM_PipelineTryExecuteRejected(benchmark::State& state) {
  FullPipeline& full = full_pipeline();
  const r4c::Pipeline<int>& pipeline = full.setup.pipeline;
  if (!full.held || pipeline.try_execute([] { return 0; }).has_value()) {
    state.SkipWithError("could not fill the limit");
    return;
  }
  const AllocCount start = thread_alloc_count();
  for (auto _ : state) {
    r4c::Outcome<int> outcome = pipeline.try_execute([] { return 42; });
    if (!outcome.refused()) [[unlikely]] {
      state.SkipWithError("a full limit admitted a call");
      break;
    }
    benchmark::DoNotOptimize(outcome);
  }
  report_allocations(state, start);
}

void BM_PipelineExecuteRejected(benchmark::State& state) {
  FullPipeline& full = full_pipeline();
  const r4c::Pipeline<int>& pipeline = full.setup.pipeline;
  if (!full.held) {
    state.SkipWithError("could not fill the limit");
    return;
  }
  (void)pipeline.try_execute([] { return 0; });  // the thread's stripe slot
  const AllocCount start = thread_alloc_count();
  for (auto _ : state) {
    try {
      int result = pipeline.execute([] { return 42; });
      benchmark::DoNotOptimize(result);
      state.SkipWithError("a full limit admitted a call");
      break;
    } catch (const r4c::LimitExceededException& rejected) {
      benchmark::DoNotOptimize(&rejected);
    }
  }
  report_allocations(state, start);
}

void BM_PipelineTryExecuteAdmitted(benchmark::State& state) {
  const r4c::Pipeline<int>& pipeline = fixture<refusing_roomy>().pipeline;
  (void)pipeline.try_execute([] { return 0; });
  const AllocCount start = thread_alloc_count();
  for (auto _ : state) {
    r4c::Outcome<int> outcome = pipeline.try_execute([] { return 42; });
    if (!outcome) [[unlikely]] {
      state.SkipWithError("the roomy pipeline refused a call");
      break;
    }
    benchmark::DoNotOptimize(outcome.value());
  }
  report_allocations(state, start);
}

void BM_PipelineTryExecuteCodeFailure(benchmark::State& state) {
  const r4c::Pipeline<int>& pipeline = fixture<code_failing>().pipeline;
  (void)pipeline.try_execute([] { return 0; });
  const AllocCount start = thread_alloc_count();
  unsigned calls = 0;
  for (auto _ : state) {
    // 1 in 16 succeeds: a window of 1000 calls without a success (which would open the breaker)
    // has a chance of (15/16)^1000.
    const bool fail = (++calls & 15U) != 0;
    r4c::Outcome<int> outcome = pipeline.try_execute([fail] {
      return fail ? r4c::Outcome<int>::failure(std::errc::timed_out)
                  : r4c::Outcome<int>::success(42);
    });
    if (fail ? outcome.code() != std::errc::timed_out : !outcome) [[unlikely]] {
      state.SkipWithError("the call did not end as it said (breaker open or limit full?)");
      break;
    }
    benchmark::DoNotOptimize(outcome);
  }
  report_allocations(state, start);
}

void BM_ExecutorRoundTrip(benchmark::State& state) {
  // As many threads as the registry's executor has (4), like the hedge's.
  static r4c::Executor executor(r4c::ResilienceRegistry::kDefaultExecutorThreads);
  const AllocCount start = thread_alloc_count();
  for (auto _ : state) {
    std::promise<int> promise;
    std::future<int> result = promise.get_future();
    if (!executor.try_post([&promise] { promise.set_value(42); })) promise.set_value(42);
    benchmark::DoNotOptimize(result.get());
  }
  report_allocations(state, start);
}

using r4c::bench::on_1_2_4_threads;

BENCHMARK(BM_PipelineBareExecute)->Apply(on_1_2_4_threads);
BENCHMARK(BM_PipelineLimit)->Apply(on_1_2_4_threads);
BENCHMARK(BM_PipelineLimitRate)->Apply(on_1_2_4_threads);
BENCHMARK(BM_PipelineLimitTimeout)->Apply(on_1_2_4_threads);
BENCHMARK(BM_PipelineLimitTimeoutToken)->Apply(on_1_2_4_threads);
BENCHMARK(BM_PipelineLimitBulkhead)->Apply(on_1_2_4_threads);
BENCHMARK(BM_PipelineAll)->Apply(on_1_2_4_threads);
BENCHMARK(BM_PipelineLimitRetry)->Apply(on_1_2_4_threads);
BENCHMARK(BM_PipelineLimitBreaker)->Apply(on_1_2_4_threads);
BENCHMARK(BM_PipelineLimitHedge)->Apply(on_1_2_4_threads);
BENCHMARK(BM_ExecutorRoundTrip)->Apply(on_1_2_4_threads);
BENCHMARK(BM_PipelineTryExecuteRejected)->Apply(on_1_2_4_threads);
BENCHMARK(BM_PipelineExecuteRejected)->Apply(on_1_2_4_threads);
BENCHMARK(BM_PipelineTryExecuteAdmitted)->Apply(on_1_2_4_threads);
BENCHMARK(BM_PipelineTryExecuteCodeFailure)->Apply(on_1_2_4_threads);

}  // namespace
