// SPDX-License-Identifier: Apache-2.0
// The pipeline: its fixed order, and what resilience4cata 0.6.0's "Adaptive limit" page says of
// the limit among its neighbours ("Con otras políticas", "Lo mismo con Pipeline").
#include "r4c/pipeline.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_seed.hpp"
#include "test_support.hpp"
#include "wait_stress_support.hpp"

namespace {

using namespace std::chrono_literals;

struct NotFound : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class PipelineTest : public ::testing::Test {
 protected:
  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
  r4c::ResilienceRegistry registry_ =
      r4c::testing::registry(clock_)
          .adaptive_limit_defaults([](r4c::AdaptiveLimitConfig& a) { a.min_window_samples(1); })
          .build();

  // What the registry holds after `build` failed with the error `code`.
  r4c::RegistrySnapshot after_a_failed_build(const std::string& code,
                                             const std::function<void()>& build) {
    EXPECT_EQ(r4c::test::config_error(build).code(), code);
    return registry_.snapshot();
  }
};

TEST_F(PipelineTest, ThePipelinesIdIsTheInstanceIdOfEachOfItsPolicies) {
  auto search = r4c::Pipeline<std::string>::builder(registry_, "search")
                    .adaptive_limit([](r4c::AdaptiveLimitConfig& a) { a.max_limit(100); })
                    .timeout([](r4c::TimeoutConfig& t) { t.timeout(2s); })
                    .bulkhead([](r4c::BulkheadConfig& b) { b.max_concurrent(10); })
                    .rate_limiter([](r4c::RateLimiterConfig& r) {
                      r.limit_for_period(100).refresh_period(1s);
                    })
                    .build();
  EXPECT_EQ(search.execute([] { return std::string("java"); }), "java");
  EXPECT_EQ(search.execute([](std::stop_token) { return std::string("c++"); }), "c++");
  EXPECT_EQ(registry_.adaptive_limit("search").snapshot().max_limit, 100);
  EXPECT_EQ(registry_.bulkhead("search").max_concurrent(), 10);
  EXPECT_EQ(registry_.rate_limiter("search").snapshot().limit_for_period, 100);
  EXPECT_EQ(registry_.timeout("search").snapshot().timeout, 2s);
  EXPECT_EQ(search.adaptive_limit()->instance_id(), "search");
  EXPECT_EQ(registry_.snapshot().adaptive_limits().count("search"), 1u);
}

TEST_F(PipelineTest, PipelineOfVoidWorks) {
  auto pipeline = r4c::Pipeline<void>::builder(registry_, "fire").adaptive_limit().build();
  int calls = 0;
  pipeline.execute([&] { ++calls; });
  pipeline.execute([&](std::stop_token) { ++calls; });
  EXPECT_EQ(calls, 2);
}

TEST_F(PipelineTest, APipelineWithoutPoliciesJustCalls) {
  auto pipeline = r4c::Pipeline<int>::builder(registry_, "bare").build();
  EXPECT_EQ(pipeline.execute([] { return 4; }), 4);
  EXPECT_EQ(pipeline.execute([](std::stop_token stop) { return stop.stop_possible() ? 0 : 5; }), 5);
}

// Builders called in two different orders must give the same pipeline.
class PipelineOrderTest : public PipelineTest, public ::testing::WithParamInterface<bool> {
 protected:
  r4c::Pipeline<int> build(const std::string& id) {
    auto builder = r4c::Pipeline<int>::builder(registry_, id);
    auto limit = [](r4c::AdaptiveLimitConfig& a) {
      a.algorithm(r4c::LimitAlgorithm::aimd).initial_limit(10);
    };
    auto timeout = [](r4c::TimeoutConfig& t) { t.timeout(2s); };
    auto bulkhead = [](r4c::BulkheadConfig& b) { b.max_concurrent(1); };
    auto rate = [](r4c::RateLimiterConfig& r) { r.limit_for_period(5); };
    if (GetParam()) {
      builder.adaptive_limit(limit).timeout(timeout).bulkhead(bulkhead).rate_limiter(rate);
    } else {
      builder.bulkhead(bulkhead).rate_limiter(rate).timeout(timeout).adaptive_limit(limit);
    }
    return builder.build();
  }
};

TEST_P(PipelineOrderTest, EveryPolicyHoldsTheCallWhileItRuns) {
  auto pipeline = build("orders");
  pipeline.execute([&](std::stop_token stop) {
    EXPECT_TRUE(stop.stop_possible());  // the timeout's token reaches the call
    EXPECT_EQ(pipeline.adaptive_limit()->in_flight(), 1);
    EXPECT_EQ(pipeline.bulkhead()->in_flight(), 1);
    EXPECT_EQ(pipeline.rate_limiter()->snapshot().available_permissions, 4);
    return 0;
  });
}

// 1. A timeout inside the limit is a drop: its latency (the timeout) enters the window and
// AIMD backs off.
TEST_P(PipelineOrderTest, ATimeoutInsideTheLimitIsADropAndAimdBacksOff) {
  auto pipeline = build("orders");
  EXPECT_THROW(pipeline.execute([&](std::stop_token stop) {
    clock_->advance(2s);  // the deadline fires
    return stop.stop_requested() ? 0 : 1;
  }),
               r4c::CallTimeoutException);
  const r4c::AdaptiveLimitSnapshot snap = pipeline.adaptive_limit()->snapshot();
  EXPECT_EQ(snap.windows, 1u);
  EXPECT_TRUE(snap.window_dropped);
  EXPECT_EQ(snap.window_latency, 2s);
  EXPECT_EQ(snap.limit, 9);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
}

// 2. A full bulkhead inside is a drop too.
TEST_P(PipelineOrderTest, AFullBulkheadInsideTheLimitIsADrop) {
  auto pipeline = build("orders");
  r4c::BulkheadPermit held = pipeline.bulkhead()->try_acquire();  // another call's slot
  clock_->advance(1s);
  EXPECT_THROW(pipeline.execute([] { return 0; }), r4c::BulkheadFullException);
  const r4c::AdaptiveLimitSnapshot snap = pipeline.adaptive_limit()->snapshot();
  EXPECT_TRUE(snap.window_dropped);
  EXPECT_EQ(snap.limit, 9);
  EXPECT_EQ(pipeline.adaptive_limit()->in_flight(), 0);
}

// 3. Calls rejected by the adaptive limit have already taken a rate-limiter permit; 4. the
// policies outside see LimitExceededException.
TEST_P(PipelineOrderTest, ACallTheLimitRejectsHasAlreadyTakenARatePermit) {
  auto pipeline = build("orders");
  std::vector<r4c::Permit> held;
  for (int i = 0; i < 10; ++i) held.push_back(pipeline.adaptive_limit()->try_acquire());
  bool called = false;
  EXPECT_THROW(pipeline.execute([&] { return called = true; }), r4c::LimitExceededException);
  EXPECT_FALSE(called);
  EXPECT_EQ(pipeline.rate_limiter()->snapshot().available_permissions, 4);
}

TEST_P(PipelineOrderTest, ARateLimiterRefusalReachesNothingInside) {
  auto pipeline = build("orders");
  for (int i = 0; i < 5; ++i) pipeline.execute([] { return 0; });
  bool called = false;
  EXPECT_THROW(pipeline.execute([&] { return called = true; }), r4c::RequestNotPermittedException);
  EXPECT_FALSE(called);
  EXPECT_EQ(pipeline.adaptive_limit()->snapshot().rejected, 0u);
  EXPECT_EQ(pipeline.bulkhead()->snapshot().rejected, 0u);
}

INSTANTIATE_TEST_SUITE_P(BothBuilderOrders, PipelineOrderTest, ::testing::Bool());

// 5. Each attempt is measured on its own.
TEST_F(PipelineTest, EachCallIsASampleOfItsOwn) {
  auto pipeline = r4c::Pipeline<int>::builder(registry_, "orders")
                      .adaptive_limit([](r4c::AdaptiveLimitConfig& a) { a.min_window_samples(3); })
                      .timeout()
                      .build();
  pipeline.execute([&] {
    clock_->advance(100ms);
    return 0;
  });
  pipeline.execute([&] {
    clock_->advance(200ms);
    return 0;
  });
  clock_->advance(1s);
  pipeline.execute([&] {
    clock_->advance(300ms);
    return 0;
  });
  const r4c::AdaptiveLimitSnapshot snap = pipeline.adaptive_limit()->snapshot();
  EXPECT_EQ(snap.window_samples, 3u);
  EXPECT_EQ(snap.window_latency, 200ms);
}

// The breaker, the rate limiter, the limit and the timeout of one call share its clock
// readings (one at the start, one at the end): each still measures the call's whole duration.
TEST_F(PipelineTest, EveryTimedPolicyMeasuresTheCallFromTheReadingsItShares) {
  auto pipeline =
      r4c::Pipeline<int>::builder(registry_, "orders")
          .circuit_breaker([](r4c::CircuitBreakerConfig& c) {
            c.slow_call_duration(150ms).sliding_window_size(10).minimum_number_of_calls(10);
          })
          .rate_limiter()
          .adaptive_limit([](r4c::AdaptiveLimitConfig& a) { a.min_window_samples(3); })
          .timeout([](r4c::TimeoutConfig& t) { t.timeout(250ms); })
          .build();
  const auto taking = [&](std::chrono::nanoseconds span) {
    return pipeline.try_execute([&, span] {
      clock_->advance(span);
      return 0;
    });
  };
  EXPECT_TRUE(taking(100ms).has_value());
  EXPECT_TRUE(taking(200ms).has_value());
  clock_->advance(1s);
  const r4c::Outcome<int> late = taking(300ms);  // past the timeout: a drop, and a failure
  ASSERT_TRUE(late.failed());
  EXPECT_THROW(std::rethrow_exception(late.error()), r4c::CallTimeoutException);
  const r4c::AdaptiveLimitSnapshot limit = pipeline.adaptive_limit()->snapshot();
  EXPECT_EQ(limit.window_samples, 3u);
  EXPECT_EQ(limit.window_latency, 200ms);
  EXPECT_TRUE(limit.window_dropped);
  const r4c::CircuitBreakerSnapshot breaker = pipeline.circuit_breaker()->snapshot();
  EXPECT_EQ(breaker.buffered_calls, 3u);
  EXPECT_EQ(breaker.slow_calls, 2u);  // 200 ms and 300 ms
  EXPECT_EQ(breaker.failed_calls, 1u);
  EXPECT_EQ(pipeline.timeout()->snapshot().timed_out, 1u);
}

// Readings are shared only between policies of one clock: each of these two reads its own.
TEST(PipelineClockTest, PoliciesOnDifferentClocksEachReadTheirOwn) {
  const auto limit_clock = std::make_shared<r4c::ManualClock>();
  const auto timeout_clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("orders", r4c::AdaptiveLimitConfig().min_window_samples(1), limit_clock);
  r4c::Timeout timeout("orders", r4c::TimeoutConfig().timeout(50ms), timeout_clock);
  const r4c::detail::PipelineStages<int> stages = r4c::detail::make_stages<int>(&limit, &timeout);
  const auto advancing = [&](r4c::ManualClock& clock) {
    auto call = [&clock] {
      clock.advance(100ms);
      return 0;
    };
    return stages.try_execute(call);
  };
  // 100 ms on the limit's clock only: not late on the timeout's.
  EXPECT_TRUE(advancing(*limit_clock).has_value());
  // 100 ms on the timeout's clock only: late there, and no time at all on the limit's.
  const r4c::Outcome<int> late = advancing(*timeout_clock);
  ASSERT_TRUE(late.failed());
  EXPECT_THROW(std::rethrow_exception(late.error()), r4c::CallTimeoutException);
  limit_clock->advance(1s);
  EXPECT_TRUE(advancing(*timeout_clock).failed());
  const r4c::AdaptiveLimitSnapshot snap = limit.snapshot();
  // The window the third call closed: 100 ms on the limit's clock, then 0 and 0 (had the limit
  // taken the timeout's readings: 0, 100 and 100 ms).
  EXPECT_EQ(snap.window_samples, 3u);
  EXPECT_EQ(snap.window_latency, std::chrono::nanoseconds(100ms) / 3);
}

// A call that waits in the rate limiter for a permit starts, for the policies inside, when the
// wait is over: the wait is neither the timeout's time nor a latency of the limit.
class RateLimiterWaitTest : public PipelineTest, public ::testing::WithParamInterface<bool> {};

TEST_P(RateLimiterWaitTest, IsNotTheTimeOfThePoliciesInside) {
  const bool with_limit = GetParam();
  auto builder = r4c::Pipeline<int>::builder(registry_, "orders");
  builder
      .rate_limiter([](r4c::RateLimiterConfig& r) {
        r.limit_for_period(1).refresh_period(1s).timeout_duration(5s);
      })
      .timeout([](r4c::TimeoutConfig& t) { t.timeout(500ms); });
  if (with_limit) builder.adaptive_limit();
  auto pipeline = builder.build();
  EXPECT_TRUE(pipeline.try_execute([] { return 1; }).has_value());  // the period's one permit
  std::atomic<bool> done{false};
  r4c::Outcome<int> second = r4c::Outcome<int>::success(0);
  std::thread caller([&] {
    second = pipeline.try_execute([&] {
      clock_->advance(100ms);
      return 2;
    });
    done.store(true);
  });
  while (!done.load()) {
    if (pipeline.rate_limiter()->snapshot().waiting_calls > 0 && clock_->pending_tasks() > 0) {
      clock_->advance(1s);  // the next period: the waiter's permit
    }
    std::this_thread::yield();
  }
  caller.join();
  ASSERT_TRUE(second.has_value());  // 100 ms in the call, after a wait of up to 1 s
  EXPECT_EQ(second.value(), 2);
  EXPECT_EQ(pipeline.timeout()->snapshot().timed_out, 0u);
  if (with_limit) {
    // The second call ended past the first window's end: the window had both, 0 and 100 ms.
    const r4c::AdaptiveLimitSnapshot snap = pipeline.adaptive_limit()->snapshot();
    EXPECT_EQ(snap.windows, 1u);
    EXPECT_EQ(snap.window_samples, 2u);
    EXPECT_EQ(snap.window_latency, 50ms);
  }
}

INSTANTIATE_TEST_SUITE_P(TimeoutAlone, RateLimiterWaitTest, ::testing::Values(false));
INSTANTIATE_TEST_SUITE_P(LimitAndTimeout, RateLimiterWaitTest, ::testing::Values(true));

TEST_F(PipelineTest, TheCallersExceptionReachesItUnchangedAfterEveryPolicyRecordedIt) {
  auto pipeline = r4c::Pipeline<int>::builder(registry_, "orders")
                      .adaptive_limit()
                      .timeout()
                      .bulkhead()
                      .rate_limiter()
                      .build();
  const std::exception_ptr original = std::make_exception_ptr(NotFound("404"));
  // The same object, not a copy.
  ASSERT_TRUE(r4c::test::throws_the_original<NotFound>(original, [&] {
    (void)pipeline.execute([&](std::stop_token) -> int { std::rethrow_exception(original); });
  }));
  EXPECT_EQ(pipeline.adaptive_limit()->in_flight(), 0);
  EXPECT_EQ(pipeline.bulkhead()->in_flight(), 0);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
}

TEST_F(PipelineTest, APipelineRebuiltWithOtherSettingsFailsWithReg008) {
  r4c::Pipeline<int>::builder(registry_, "orders")
      .bulkhead([](r4c::BulkheadConfig& b) { b.max_concurrent(5); })
      .build();
  try {
    r4c::Pipeline<int>::builder(registry_, "orders")
        .bulkhead([](r4c::BulkheadConfig& b) { b.max_concurrent(6); })
        .build();
    FAIL();
  } catch (const r4c::ConfigException& e) {
    EXPECT_EQ(e.code(), "R4C-REG-008");
    EXPECT_NE(std::string(e.what()).find("bulkhead 'orders' is shared by pipeline 'orders'"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(PipelineTest, ABuildThatFailsOnAnInnerPolicyCreatesNoneOfTheOuterOnes) {
  // The retry and the circuit breaker come first in the pipeline; the limit's bounds fail.
  const r4c::RegistrySnapshot snapshot = after_a_failed_build("R4C-ATR-009", [&] {
    r4c::Pipeline<int>::builder(registry_, "orders")
        .retry([](r4c::RetryConfig& r) { r.max_attempts(2); })
        .circuit_breaker()
        .adaptive_limit([](r4c::AdaptiveLimitConfig& a) { a.initial_limit(300); })
        .build();
  });
  EXPECT_TRUE(snapshot.retries().empty());
  EXPECT_TRUE(snapshot.circuit_breakers().empty());
  EXPECT_TRUE(snapshot.adaptive_limits().empty());
  EXPECT_EQ(r4c::test::config_error([&] { (void)registry_.retry("orders"); }).code(),
            "R4C-REG-009");
}

TEST_F(PipelineTest, ABuildThatConflictsWithAnExistingPolicyCreatesNothing) {
  r4c::Pipeline<int>::builder(registry_, "orders")
      .bulkhead([](r4c::BulkheadConfig& b) { b.max_concurrent(5); })
      .build();
  const r4c::RegistrySnapshot snapshot = after_a_failed_build("R4C-REG-008", [&] {
    r4c::Pipeline<int>::builder(registry_, "orders")
        .retry()
        .timeout([](r4c::TimeoutConfig& t) { t.timeout(1s); })
        .bulkhead([](r4c::BulkheadConfig& b) { b.max_concurrent(6); })
        .build();
  });
  EXPECT_TRUE(snapshot.retries().empty());
  EXPECT_TRUE(snapshot.timeouts().empty());
  EXPECT_EQ(snapshot.bulkheads().size(), 1u);
}

TEST(PipelineNamedConfigTest, EachPolicyMayNameAConfigOfTheRegistry) {
  auto registry =
      r4c::ResilienceRegistry::builder()
          .adaptive_limit("backend", [](r4c::AdaptiveLimitConfig& a) { a.max_limit(50); })
          .config_text(
              "configs.slow.timeout.timeout = 5s\n"
              "configs.slow.bulkhead.maxConcurrent = 7")
          .build();
  auto pipeline =
      r4c::Pipeline<int>::builder(registry, "orders")
          .adaptive_limit("backend", [](r4c::AdaptiveLimitConfig& a) { a.initial_limit(10); })
          .timeout("slow")
          .with<r4c::BulkheadKind>({}, "slow")
          .build();
  EXPECT_EQ(pipeline.adaptive_limit()->config().max_limit(), 50);      // the named config
  EXPECT_EQ(pipeline.adaptive_limit()->config().initial_limit(), 10);  // the pipeline's own
  EXPECT_EQ(pipeline.timeout()->config().timeout(), 5s);
  EXPECT_EQ(pipeline.bulkhead()->config().max_concurrent(), 7);
  EXPECT_EQ(pipeline.policy<r4c::BulkheadKind>(), pipeline.bulkhead());
}

TEST(PipelineNamedConfigTest, AnUnknownNamedConfigIsReg004AndCreatesNothing) {
  auto registry = r4c::ResilienceRegistry::builder()
                      .timeout("slow", [](r4c::TimeoutConfig& t) { t.timeout(5s); })
                      .build();
  const auto e = r4c::test::config_error(
      [&] { r4c::Pipeline<int>::builder(registry, "orders").retry().timeout("slwo").build(); });
  EXPECT_EQ(e.code(), "R4C-REG-004");
  EXPECT_THAT(e.what(), ::testing::HasSubstr("did you mean 'slow'"));
  EXPECT_TRUE(registry.snapshot().retries().empty());
}

TEST_F(PipelineTest, AnyRefusalIsCaughtInOneClauseWithItsKindAndInstance) {
  auto orders = r4c::Pipeline<int>::builder(registry_, "orders")
                    .bulkhead([](r4c::BulkheadConfig& b) { b.max_concurrent(1); })
                    .build();
  const r4c::BulkheadPermit held = orders.bulkhead()->try_acquire();
  ASSERT_TRUE(held);
  try {
    orders.execute([] { return 1; });
    FAIL() << "the full bulkhead let the call through";
  } catch (const r4c::RejectedException& e) {
    EXPECT_EQ(e.kind(), "bulkhead");
    EXPECT_EQ(e.instance_id(), "orders");
    EXPECT_NE(dynamic_cast<const r4c::BulkheadFullException*>(&e), nullptr);
  }
}

// Every slot and permit is returned on every path.
TEST(PipelineConcurrencyTest, RandomFailuresTimeoutsAndRejectionsReturnEverySlot) {
  auto clock = std::make_shared<r4c::ManualClock>();
  auto registry = r4c::testing::registry(clock).build();
  auto pipeline = r4c::Pipeline<int>::builder(registry, "stress")
                      .adaptive_limit([](r4c::AdaptiveLimitConfig& a) {
                        r4c::test::aimd_per_millisecond(a, 4, 8, 3);
                      })
                      .timeout([](r4c::TimeoutConfig& t) { t.timeout(5ms); })
                      .bulkhead([](r4c::BulkheadConfig& b) { b.max_concurrent(3); })
                      .rate_limiter([](r4c::RateLimiterConfig& r) {
                        r.limit_for_period(20).refresh_period(1ms).timeout_duration(2ms);
                      })
                      .build();
  constexpr int kThreads = 8;
  constexpr int kCalls = 1500;
  std::atomic<bool> done{false};
  std::thread driver([&] {
    while (!done.load()) {
      clock->advance(100us);
      std::this_thread::yield();
    }
  });
  std::atomic<int> outcomes{0};
  std::vector<std::thread> threads;
  const std::uint64_t seed = r4c::test::test_seed();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(static_cast<unsigned>(seed + static_cast<std::uint64_t>(t) + 7));
      for (int i = 0; i < kCalls; ++i) {
        const unsigned roll = random() % 6;
        try {
          pipeline.execute([&](std::stop_token stop) -> int {
            if (roll == 0) throw NotFound("404");
            if (roll == 1) throw r4c::CallTimeoutException("inner");
            if (roll == 2) {  // runs until its deadline
              while (!stop.stop_requested()) std::this_thread::yield();
            }
            return 1;
          });
          outcomes.fetch_add(1);
        } catch (const std::exception&) {
          outcomes.fetch_add(1);
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  done.store(true);
  driver.join();

  EXPECT_EQ(outcomes.load(), kThreads * kCalls);  // exactly one outcome per call
  EXPECT_EQ(pipeline.adaptive_limit()->in_flight(), 0);
  EXPECT_EQ(pipeline.bulkhead()->in_flight(), 0);
  EXPECT_EQ(pipeline.rate_limiter()->snapshot().waiting_calls, 0);
  EXPECT_EQ(clock->pending_tasks(), 0u);
  const r4c::AdaptiveLimitSnapshot snap = pipeline.adaptive_limit()->snapshot();
  EXPECT_GT(snap.windows, 0u);
  EXPECT_GE(snap.limit, 1);
  EXPECT_LE(snap.limit, 8);
  EXPECT_GT(pipeline.timeout()->snapshot().timed_out, 0u);
}

// ---- the outer policies: how a retry and a circuit breaker see the limit -------------------

class OuterPolicyTest : public PipelineTest {
 protected:
  // Advances the clock by `step` whenever the pipeline's retry waits, until `done`.
  void drive_retry_waits(const r4c::Pipeline<int>& pipeline, std::chrono::nanoseconds step,
                         const std::atomic<bool>& done) {
    while (!done.load()) {
      if (pipeline.retry()->snapshot().waiting_calls > 0 && clock_->pending_tasks() > 0) {
        clock_->advance(step);
      }
      std::this_thread::yield();
    }
  }
};

// 1. By default a retry outside retries LimitExceededException after its wait.
TEST_F(OuterPolicyTest, ARetryOutsideRetriesAFullLimitAfterItsWaitWhichHoldsNoSlot) {
  auto pipeline = r4c::Pipeline<int>::builder(registry_, "orders")
                      .retry([](r4c::RetryConfig& r) { r.max_attempts(3).wait(100ms); })
                      .adaptive_limit([](r4c::AdaptiveLimitConfig& a) { a.initial_limit(1); })
                      .build();
  r4c::Permit held = pipeline.adaptive_limit()->try_acquire();  // another call's slot
  std::atomic<int> result{0};
  std::thread caller([&] { result.store(pipeline.execute([] { return 7; })); });
  while (pipeline.retry()->snapshot().waiting_calls == 0) std::this_thread::yield();
  EXPECT_EQ(pipeline.adaptive_limit()->in_flight(), 1);  // the waiting call holds no slot
  held.on_ignore();
  clock_->advance(100ms);
  caller.join();
  EXPECT_EQ(result.load(), 7);
  EXPECT_EQ(pipeline.adaptive_limit()->snapshot().rejected, 1u);
  EXPECT_EQ(pipeline.retry()->snapshot().successful_with_retry, 1u);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
}

// 1. With LimitExceededException in abort_on the call fails at once.
TEST_F(OuterPolicyTest, ARetryThatAbortsOnAFullLimitFailsAtOnce) {
  auto pipeline = r4c::Pipeline<int>::builder(registry_, "orders")
                      .retry([](r4c::RetryConfig& r) {
                        r.max_attempts(3).wait(100ms).abort_on<r4c::LimitExceededException>();
                      })
                      .adaptive_limit([](r4c::AdaptiveLimitConfig& a) { a.initial_limit(1); })
                      .build();
  r4c::Permit held = pipeline.adaptive_limit()->try_acquire();
  EXPECT_THROW(pipeline.execute([] { return 7; }), r4c::LimitExceededException);
  EXPECT_EQ(pipeline.adaptive_limit()->snapshot().rejected, 1u);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
}

// 2. By default a circuit breaker outside records LimitExceededException as a failure.
TEST_F(OuterPolicyTest, ACircuitBreakerOutsideOpensOnAFullLimit) {
  auto pipeline =
      r4c::Pipeline<int>::builder(registry_, "orders")
          .circuit_breaker([](r4c::CircuitBreakerConfig& c) {
            c.failure_rate_threshold(50).minimum_number_of_calls(2).sliding_window_size(2);
          })
          .adaptive_limit([](r4c::AdaptiveLimitConfig& a) { a.initial_limit(1); })
          .build();
  r4c::Permit held = pipeline.adaptive_limit()->try_acquire();
  EXPECT_THROW(pipeline.execute([] { return 1; }), r4c::LimitExceededException);
  EXPECT_THROW(pipeline.execute([] { return 1; }), r4c::LimitExceededException);
  EXPECT_EQ(pipeline.circuit_breaker()->state(), r4c::CircuitBreakerState::open);
  EXPECT_THROW(pipeline.execute([] { return 1; }), r4c::CallNotPermittedException);
  EXPECT_EQ(pipeline.adaptive_limit()->snapshot().rejected, 2u);  // the open breaker kept it out
}

// 2. With LimitExceededException in ignore_on a full limit never opens the breaker.
TEST_F(OuterPolicyTest, ACircuitBreakerIgnoringAFullLimitStaysClosed) {
  auto pipeline = r4c::Pipeline<int>::builder(registry_, "orders")
                      .circuit_breaker([](r4c::CircuitBreakerConfig& c) {
                        c.failure_rate_threshold(50)
                            .minimum_number_of_calls(2)
                            .sliding_window_size(2)
                            .ignore_on<r4c::LimitExceededException>();
                      })
                      .adaptive_limit([](r4c::AdaptiveLimitConfig& a) { a.initial_limit(1); })
                      .build();
  r4c::Permit held = pipeline.adaptive_limit()->try_acquire();
  for (int i = 0; i < 10; ++i) {
    EXPECT_THROW(pipeline.execute([] { return 1; }), r4c::LimitExceededException);
  }
  EXPECT_EQ(pipeline.circuit_breaker()->state(), r4c::CircuitBreakerState::closed);
  EXPECT_EQ(pipeline.adaptive_limit()->snapshot().rejected, 10u);
}

// 4. Each attempt is measured on its own: a retried call adds one sample per attempt.
TEST_F(OuterPolicyTest, ARetriedCallAddsOneSamplePerAttempt) {
  auto pipeline = r4c::Pipeline<int>::builder(registry_, "orders")
                      .retry([](r4c::RetryConfig& r) { r.max_attempts(3).wait(10ms); })
                      .adaptive_limit([](r4c::AdaptiveLimitConfig& a) { a.min_window_samples(3); })
                      .build();
  std::atomic<int> attempts{0};
  std::atomic<bool> done{false};
  std::thread caller([&] {
    pipeline.execute([&] {
      if (attempts.fetch_add(1) < 2) throw r4c::CallTimeoutException("slow");  // a drop
      clock_->advance(1s);  // the window ends with this third sample
      return 0;
    });
    done.store(true);
  });
  drive_retry_waits(pipeline, 10ms, done);
  caller.join();
  const r4c::AdaptiveLimitSnapshot snap = pipeline.adaptive_limit()->snapshot();
  EXPECT_EQ(attempts.load(), 3);
  EXPECT_EQ(snap.windows, 1u);
  EXPECT_EQ(snap.window_samples, 3u);
  EXPECT_TRUE(snap.window_dropped);
}

TEST_F(OuterPolicyTest, TheOuterPoliciesHaveTheirPlaceWhateverTheBuilderOrder) {
  auto pipeline = r4c::Pipeline<int>::builder(registry_, "orders")
                      .adaptive_limit()
                      .circuit_breaker()
                      .rate_limiter()
                      .retry([](r4c::RetryConfig& r) { r.max_attempts(1); })
                      .build();
  EXPECT_EQ(pipeline.execute([&] {
    EXPECT_EQ(pipeline.adaptive_limit()->in_flight(), 1);
    return 3;
  }),
            3);
  EXPECT_EQ(registry_.retry("orders").instance_id(), "orders");
  EXPECT_EQ(registry_.circuit_breaker("orders").state(), r4c::CircuitBreakerState::closed);
  EXPECT_EQ(registry_.snapshot().retries().count("orders"), 1u);
  EXPECT_EQ(registry_.snapshot().circuit_breakers().count("orders"), 1u);
}

// ---- the hedge: between the retry and the circuit breaker ----------------------------------

// What the attempts of one hedged call share with the test; the callable holds it by
// shared_ptr, as a losing attempt may outlive the call.
struct HedgedAttempts {
  std::atomic<int> started{0};
  std::atomic<int> ended{0};
  std::atomic<bool> release{false};
  std::atomic<bool> first_saw_stop{false};
};

class HedgedPipelineTest : public PipelineTest {
 protected:
  // Until `attempts` attempts have started and the caller's hedge timer is on the clock.
  void wait_for_timer(const HedgedAttempts& attempts, int started) {
    while (attempts.started.load() != started || clock_->pending_tasks() == 0) {
      std::this_thread::yield();
    }
  }
  static void wait_until(const std::function<bool()>& done) {
    while (!done()) std::this_thread::yield();
  }
};

// The callable of the tests below: attempt 1 runs until it is released or its token stops,
// every later attempt returns at once.
auto first_attempt_is_slow(std::shared_ptr<HedgedAttempts> attempts) {
  return [attempts](std::stop_token stop) {
    const int attempt = attempts->started.fetch_add(1) + 1;
    if (attempt == 1) {
      while (!attempts->release.load() && !stop.stop_requested()) std::this_thread::yield();
      attempts->first_saw_stop = stop.stop_requested();
    }
    attempts->ended.fetch_add(1);
    return attempt;
  };
}

enum class Rejecter { adaptive_limit, circuit_breaker, bulkhead };

class HedgeStopsOnRejectionTest : public HedgedPipelineTest,
                                  public ::testing::WithParamInterface<Rejecter> {};

// 3. A hedge stops launching attempts when the limit rejects one, as with an open breaker or a
// full bulkhead.
TEST_P(HedgeStopsOnRejectionTest, AnInnerRejectionEndsTheLaunching) {
  auto builder = r4c::Pipeline<int>::builder(registry_, "reads");
  builder.hedge([](r4c::HedgeConfig& h) { h.delay(100ms).max_attempts(3); });
  if (GetParam() == Rejecter::adaptive_limit) {
    builder.adaptive_limit([](r4c::AdaptiveLimitConfig& a) { a.initial_limit(1); });
  } else if (GetParam() == Rejecter::bulkhead) {
    builder.bulkhead([](r4c::BulkheadConfig& b) { b.max_concurrent(1); });
  } else {
    builder.circuit_breaker();
  }
  const auto pipeline = builder.build();
  auto attempts = std::make_shared<HedgedAttempts>();
  std::atomic<int> result{0};
  std::thread caller([&] { result = pipeline.execute(first_attempt_is_slow(attempts)); });
  wait_for_timer(*attempts, 1);
  if (GetParam() == Rejecter::circuit_breaker) pipeline.circuit_breaker()->transition_to_open();
  clock_->advance(100ms);  // launches attempt 2, which the inner policy rejects
  const r4c::Hedge& hedge = *pipeline.hedge();
  wait_until([&] { return hedge.executor()->completed() == 1 && clock_->pending_tasks() == 1; });
  clock_->advance(100ms);  // a third attempt would be due: none is launched
  clock_->advance(1s);
  attempts->release = true;
  caller.join();
  EXPECT_EQ(result.load(), 1);
  EXPECT_EQ(attempts->started.load(), 1);  // the rejected attempt never reached the call
  EXPECT_EQ(hedge.snapshot().hedges_launched, 1u);
  EXPECT_EQ(hedge.snapshot().won_by_hedge, 0u);
  if (GetParam() == Rejecter::adaptive_limit) {
    EXPECT_EQ(pipeline.adaptive_limit()->snapshot().rejected, 1u);
    EXPECT_EQ(pipeline.adaptive_limit()->in_flight(), 0);
  } else if (GetParam() == Rejecter::bulkhead) {
    EXPECT_EQ(pipeline.bulkhead()->in_flight(), 0);
  } else {
    EXPECT_EQ(pipeline.circuit_breaker()->snapshot().not_permitted_calls, 1u);
  }
  EXPECT_EQ(clock_->pending_tasks(), 0u);
}

INSTANTIATE_TEST_SUITE_P(LimitBreakerAndBulkhead, HedgeStopsOnRejectionTest,
                         ::testing::Values(Rejecter::adaptive_limit, Rejecter::circuit_breaker,
                                           Rejecter::bulkhead));

// The winner's success stops the loser's token, which passes through the timeout: the loser
// sees stop long before its deadline, and its slot comes back.
TEST_F(HedgedPipelineTest, TheWinnerStopsTheLoserThroughTheTimeout) {
  const auto pipeline = r4c::Pipeline<int>::builder(registry_, "reads")
                            .hedge([](r4c::HedgeConfig& h) { h.delay(100ms); })
                            .adaptive_limit()
                            .timeout([](r4c::TimeoutConfig& t) { t.timeout(10s); })
                            .build();
  auto attempts = std::make_shared<HedgedAttempts>();
  std::atomic<int> result{0};
  std::thread caller([&] { result = pipeline.execute(first_attempt_is_slow(attempts)); });
  // Attempt 1's deadline and the hedge's delay are both on the clock.
  while (attempts->started.load() != 1 || clock_->pending_tasks() != 2) std::this_thread::yield();
  clock_->advance(100ms);
  caller.join();
  EXPECT_EQ(result.load(), 2);
  wait_until([&] { return attempts->ended.load() == 2; });
  EXPECT_TRUE(attempts->first_saw_stop.load());
  wait_until([&] { return pipeline.adaptive_limit()->in_flight() == 0; });
  EXPECT_EQ(pipeline.timeout()->snapshot().timed_out, 0u);  // stopped by the hedge, not the clock
  EXPECT_EQ(pipeline.hedge()->snapshot().won_by_hedge, 1u);
  wait_until([&] { return clock_->pending_tasks() == 0; });  // the loser's deadline is cancelled
}

// The timeout's deadline still reaches a hedged attempt's token; with every attempt timed out,
// the caller gets the CallTimeoutException.
TEST_F(HedgedPipelineTest, TheDeadlineStopsAHedgedAttempt) {
  const auto pipeline = r4c::Pipeline<int>::builder(registry_, "reads")
                            .hedge([](r4c::HedgeConfig& h) { h.delay(1s); })
                            .timeout([](r4c::TimeoutConfig& t) { t.timeout(100ms); })
                            .build();
  auto attempts = std::make_shared<HedgedAttempts>();
  std::atomic<bool> timed_out{false};
  std::thread caller([&] {
    try {
      pipeline.execute(first_attempt_is_slow(attempts));
    } catch (const r4c::CallTimeoutException&) {
      timed_out = true;
    }
  });
  while (attempts->started.load() != 1 || clock_->pending_tasks() != 2) std::this_thread::yield();
  clock_->advance(100ms);
  caller.join();
  EXPECT_TRUE(timed_out.load());
  EXPECT_TRUE(attempts->first_saw_stop.load());
  EXPECT_EQ(pipeline.hedge()->snapshot().hedges_launched, 0u);
  EXPECT_EQ(pipeline.hedge()->snapshot().failed, 1u);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
}

// Retry outside the hedge: each retried attempt is a whole hedged call.
TEST_F(HedgedPipelineTest, EachAttemptOfTheRetryIsAWholeHedgedCall) {
  const auto pipeline = r4c::Pipeline<int>::builder(registry_, "reads")
                            .retry([](r4c::RetryConfig& r) { r.max_attempts(2).wait(10ms); })
                            .hedge([](r4c::HedgeConfig& h) { h.delay(100ms); })
                            .build();
  auto calls = std::make_shared<std::atomic<int>>(0);
  std::atomic<int> result{0};
  std::thread caller([&] {
    result = pipeline.execute([calls] {
      if (calls->fetch_add(1) == 0) throw NotFound("not yet replicated");
      return 9;
    });
  });
  // The retry's wait is the only task on the clock: the hedged call took its timer off.
  wait_until([&] {
    return pipeline.retry()->snapshot().waiting_calls == 1 && clock_->pending_tasks() == 1;
  });
  clock_->advance(10ms);
  caller.join();
  EXPECT_EQ(result.load(), 9);
  const r4c::HedgeSnapshot hedge = registry_.hedge("reads").snapshot();
  EXPECT_EQ(hedge.calls, 2u);
  EXPECT_EQ(hedge.failed, 1u);
  EXPECT_EQ(hedge.hedges_launched, 0u);
  EXPECT_EQ(registry_.retry("reads").snapshot().successful_with_retry, 1u);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
}

TEST_F(HedgedPipelineTest, ACallableThatCannotBeCopiedIsRefusedWithAMessage) {
  const auto pipeline = r4c::Pipeline<int>::builder(registry_, "reads").hedge().build();
  auto move_only = [value = std::make_unique<int>(4)] { return *value; };
  try {
    pipeline.execute(move_only);
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("hedge 'reads': the callable cannot be copied"),
              std::string::npos)
        << e.what();
  }
  // A copyable callable is copied once per call, and the hedge runs it.
  EXPECT_EQ(pipeline.execute([value = std::make_shared<int>(5)] { return *value; }), 5);
  EXPECT_EQ(pipeline.hedge()->snapshot().calls, 1u);
}

}  // namespace
