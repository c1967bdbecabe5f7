// SPDX-License-Identifier: Apache-2.0
// try_execute (issue 21): every policy passes a refusal as a value, each decides on it as
// execute() decides on the exception, and execute() of a pipeline is try_execute plus one throw.
#include "r4c/outcome.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <system_error>
#include <vector>

#include "alloc_counter.hpp"
#include "r4c/pipeline.hpp"

namespace {

using namespace std::chrono_literals;

struct NotFound : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What execute() threw, or nullptr.
template <class F>
std::exception_ptr thrown_by(F&& f) {
  try {
    f();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

class OutcomeTest : public ::testing::Test {
 protected:
  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
  r4c::ResilienceRegistry registry_ = r4c::testing::registry(clock_).build();
};

TEST(OutcomeValueTest, GetReturnsTheResultOrThrowsTheSameObject) {
  EXPECT_EQ(r4c::Outcome<int>::success(7).get(), 7);
  const std::exception_ptr error = std::make_exception_ptr(NotFound("x"));
  auto failed = r4c::Outcome<int>::failure(error);
  EXPECT_TRUE(failed.failed());
  EXPECT_FALSE(failed.stock());
  EXPECT_EQ(thrown_by([&] { (void)std::move(failed).get(); }), error);
  r4c::Outcome<void> done = r4c::Outcome<void>::success();
  EXPECT_TRUE(done.has_value());
  EXPECT_EQ(done.error(), nullptr);
}

TEST_F(OutcomeTest, AFullLimitRefusesAsAValueWithItsKindAndId) {
  r4c::AdaptiveLimit limit(
      "orders", r4c::AdaptiveLimitConfig().initial_limit(1).min_limit(1).max_limit(1), clock_);
  r4c::Permit held = limit.try_acquire();
  ASSERT_TRUE(held);
  int calls = 0;
  r4c::Outcome<int> outcome = limit.try_execute([&] { return ++calls; });
  ASSERT_TRUE(outcome.refused());
  EXPECT_EQ(outcome.refusal().kind(), "adaptivelimit");
  EXPECT_EQ(outcome.refusal().instance_id(), "orders");
  EXPECT_EQ(outcome.error(), limit.rejection());
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(limit.snapshot().rejected, 1u);
}

TEST_F(OutcomeTest, AFullBulkheadRefusesAsAValue) {
  r4c::Bulkhead bulkhead("pool", r4c::BulkheadConfig().max_concurrent(1));
  r4c::BulkheadPermit held = bulkhead.try_acquire();
  ASSERT_TRUE(held);
  r4c::Outcome<int> outcome = bulkhead.try_execute([] { return 1; });
  ASSERT_TRUE(outcome.refused());
  EXPECT_EQ(outcome.refusal().kind(), "bulkhead");
  EXPECT_EQ(outcome.refusal().instance_id(), "pool");
  EXPECT_EQ(outcome.error(), bulkhead.rejection());
}

TEST_F(OutcomeTest, ARateLimiterWithoutPermitsRefusesAsAValue) {
  r4c::RateLimiter limiter(
      "rate", r4c::RateLimiterConfig().limit_for_period(1).refresh_period(1s).timeout_duration(0s),
      clock_);
  EXPECT_EQ(limiter.try_execute([] { return 1; }).value(), 1);
  r4c::Outcome<int> outcome = limiter.try_execute([] { return 2; });
  ASSERT_TRUE(outcome.refused());
  EXPECT_EQ(outcome.refusal().kind(), "ratelimiter");
  EXPECT_EQ(outcome.error(), limiter.rejection());
  EXPECT_EQ(limiter.snapshot().rejected, 1u);
  clock_->advance(1s);
  EXPECT_TRUE(limiter.try_execute([] { return 3; }).has_value());
}

TEST_F(OutcomeTest, AnOpenBreakerRefusesAsAValue) {
  r4c::CircuitBreaker breaker("cb", {}, clock_);
  breaker.transition_to_open();
  r4c::Outcome<void> outcome = breaker.try_execute([] {});
  ASSERT_TRUE(outcome.refused());
  EXPECT_EQ(outcome.refusal().kind(), "circuitbreaker");
  EXPECT_EQ(outcome.error(), breaker.rejection());
  EXPECT_EQ(breaker.snapshot().not_permitted_calls, 1u);
}

TEST_F(OutcomeTest, TheBreakerRecordsAnInnerRefusalAsAFailureUnlessItIgnoresIt) {
  auto recording = r4c::Pipeline<int>::builder(registry_, "recording")
                       .circuit_breaker([](r4c::CircuitBreakerConfig& c) {
                         c.sliding_window_size(4).minimum_number_of_calls(4);
                       })
                       .bulkhead([](r4c::BulkheadConfig& b) { b.max_concurrent(1); })
                       .build();
  auto ignoring = r4c::Pipeline<int>::builder(registry_, "ignoring")
                      .circuit_breaker([](r4c::CircuitBreakerConfig& c) {
                        c.sliding_window_size(4)
                            .minimum_number_of_calls(4)
                            .ignore_on<r4c::BulkheadFullException>();
                      })
                      .bulkhead([](r4c::BulkheadConfig& b) { b.max_concurrent(1); })
                      .build();
  r4c::BulkheadPermit full_a = recording.bulkhead()->try_acquire();
  r4c::BulkheadPermit full_b = ignoring.bulkhead()->try_acquire();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(recording.try_execute([] { return 1; }).refusal().kind(), "bulkhead");
    EXPECT_EQ(ignoring.try_execute([] { return 1; }).refusal().kind(), "bulkhead");
  }
  EXPECT_EQ(recording.circuit_breaker()->state(), r4c::CircuitBreakerState::open);
  EXPECT_EQ(recording.try_execute([] { return 1; }).refusal().kind(), "circuitbreaker");
  EXPECT_EQ(ignoring.circuit_breaker()->state(), r4c::CircuitBreakerState::closed);
  EXPECT_EQ(ignoring.circuit_breaker()->snapshot().buffered_calls, 0u);
}

TEST_F(OutcomeTest, TheRetryRetriesAnInnerRefusalOrAbortsOnIt) {
  auto retrying = r4c::Pipeline<int>::builder(registry_, "retrying")
                      .retry([](r4c::RetryConfig& r) { r.max_attempts(3).wait(0s); })
                      .bulkhead([](r4c::BulkheadConfig& b) { b.max_concurrent(1); })
                      .build();
  auto aborting = r4c::Pipeline<int>::builder(registry_, "aborting")
                      .retry([](r4c::RetryConfig& r) {
                        r.max_attempts(3).wait(0s).abort_on<r4c::RejectedException>();
                      })
                      .bulkhead([](r4c::BulkheadConfig& b) { b.max_concurrent(1); })
                      .build();
  r4c::BulkheadPermit full_a = retrying.bulkhead()->try_acquire();
  r4c::BulkheadPermit full_b = aborting.bulkhead()->try_acquire();
  for (int i = 0; i < 2; ++i) {  // the second call classifies from the kept verdict
    EXPECT_TRUE(retrying.try_execute([] { return 1; }).refused());
    EXPECT_TRUE(aborting.try_execute([] { return 1; }).refused());
  }
  EXPECT_EQ(retrying.retry()->snapshot().retries, 4u);
  EXPECT_EQ(retrying.retry()->snapshot().failed_with_retry, 2u);
  EXPECT_EQ(aborting.retry()->snapshot().retries, 0u);
  EXPECT_EQ(aborting.retry()->snapshot().failed_without_retry, 2u);
  full_a = r4c::BulkheadPermit();
  EXPECT_EQ(retrying.try_execute([] { return 5; }).value(), 5);
}

TEST_F(OutcomeTest, TheRetryRetriesAFailureTheCallReturns) {
  r4c::Retry retry("ret", r4c::RetryConfig().max_attempts(3).wait(0s), clock_);
  int calls = 0;
  r4c::Outcome<int> outcome = retry.try_execute([&] {
    return ++calls < 3 ? r4c::Outcome<int>::failure(std::make_exception_ptr(NotFound("no")))
                       : r4c::Outcome<int>::success(calls);
  });
  EXPECT_EQ(outcome.value(), 3);
  EXPECT_EQ(retry.snapshot().successful_with_retry, 1u);
}

TEST_F(OutcomeTest, ALateCallIsTheTimeoutsFailureWithAndWithoutAToken) {
  r4c::Timeout timeout("t", r4c::TimeoutConfig().timeout(1s), clock_);
  r4c::Outcome<int> late = timeout.try_execute([&] {
    clock_->advance(2s);
    return 1;
  });
  ASSERT_TRUE(late.failed());
  EXPECT_TRUE(late.stock());
  EXPECT_EQ(late.error(), timeout.count_timed_out());  // the same object (counted once more)
  bool stopped = false;
  r4c::Outcome<int> late_token = timeout.try_execute([&](std::stop_token stop) {
    clock_->advance(2s);
    stopped = stop.stop_requested();
    return 1;
  });
  EXPECT_TRUE(stopped);
  EXPECT_EQ(late_token.error(), late.error());
  EXPECT_EQ(timeout.try_execute([](std::stop_token) { return 4; }).value(), 4);
  EXPECT_EQ(timeout.snapshot().timed_out, 3u);
}

TEST_F(OutcomeTest, AHedgeStopsOnAnInnerRefusal) {
  auto hedged = r4c::Pipeline<int>::builder(registry_, "hedged")
                    .hedge([](r4c::HedgeConfig& h) { h.delay(10ms).max_attempts(3); })
                    .bulkhead([](r4c::BulkheadConfig& b) { b.max_concurrent(1); })
                    .build();
  r4c::BulkheadPermit full = hedged.bulkhead()->try_acquire();
  r4c::Outcome<int> outcome = hedged.try_execute([] { return 1; });
  ASSERT_FALSE(outcome.has_value());
  EXPECT_EQ(outcome.error(), hedged.bulkhead()->rejection());
  EXPECT_EQ(hedged.hedge()->snapshot().hedges_launched, 0u);
  EXPECT_EQ(hedged.hedge()->snapshot().failed, 1u);
}

// Issue 21's pipeline: retry aborting on a full limit, breaker ignoring it, rate limiter,
// limit, timeout.
r4c::Pipeline<int> refusing(r4c::ResilienceRegistry& registry, const std::string& id) {
  return r4c::Pipeline<int>::builder(registry, id)
      .retry([](r4c::RetryConfig& r) { r.wait(0s).abort_on<r4c::LimitExceededException>(); })
      .circuit_breaker(
          [](r4c::CircuitBreakerConfig& c) { c.ignore_on<r4c::LimitExceededException>(); })
      .rate_limiter([](r4c::RateLimiterConfig& r) { r.limit_for_period(1000).refresh_period(1s); })
      .adaptive_limit(
          [](r4c::AdaptiveLimitConfig& a) { a.initial_limit(1).min_limit(1).max_limit(1); })
      .timeout([](r4c::TimeoutConfig& t) { t.timeout(1s); })
      .build();
}

TEST_F(OutcomeTest, ExecuteThrowsWhatTryExecuteReturnsAndCountsTheSame) {
  r4c::Pipeline<int> a = refusing(registry_, "a");
  r4c::Pipeline<int> b = refusing(registry_, "b");
  EXPECT_EQ(a.try_execute([] { return 1; }).value(), b.execute([] { return 1; }));
  const std::exception_ptr own = std::make_exception_ptr(NotFound("gone"));
  EXPECT_EQ(a.try_execute([&]() -> int { std::rethrow_exception(own); }).error(), own);
  EXPECT_EQ(thrown_by([&] { b.execute([&]() -> int { std::rethrow_exception(own); }); }), own);
  // A late call: the timeout's exception either way.
  const auto slow = [&] {
    clock_->advance(2s);
    return 1;
  };
  EXPECT_EQ(a.try_execute(slow).error(), a.timeout()->count_timed_out());
  EXPECT_EQ(thrown_by([&] { b.execute(slow); }), b.timeout()->count_timed_out());
  // A full limit: the limit's refusal either way, the retry aborted, the breaker untouched.
  r4c::Permit held_a = a.adaptive_limit()->try_acquire();
  r4c::Permit held_b = b.adaptive_limit()->try_acquire();
  r4c::Outcome<int> refused = a.try_execute([] { return 1; });
  ASSERT_TRUE(refused.refused());
  EXPECT_EQ(refused.error(), a.adaptive_limit()->rejection());
  EXPECT_EQ(thrown_by([&] { b.execute([] { return 1; }); }), b.adaptive_limit()->rejection());
  for (r4c::Pipeline<int>* p : {&a, &b}) {
    const r4c::RetrySnapshot retry = p->retry()->snapshot();
    // NotFound and the timeout retried (3 attempts each), the refusal aborted at once.
    EXPECT_EQ(retry.successful_without_retry, 1u) << p->id();
    EXPECT_EQ(retry.failed_with_retry, 2u) << p->id();
    EXPECT_EQ(retry.failed_without_retry, 1u) << p->id();
    EXPECT_EQ(retry.retries, 4u) << p->id();
    const r4c::CircuitBreakerSnapshot breaker = p->circuit_breaker()->snapshot();
    EXPECT_EQ(breaker.buffered_calls, 7u) << p->id();  // the refusal was ignored
    EXPECT_EQ(breaker.failed_calls, 6u) << p->id();
    EXPECT_EQ(p->adaptive_limit()->snapshot().rejected, 1u) << p->id();
    EXPECT_EQ(p->timeout()->snapshot().timed_out, 4u) << p->id();  // count_timed_out() above
  }
}

TEST_F(OutcomeTest, ARefusalThroughThePipelineNeitherThrowsNorAllocates) {
  r4c::Pipeline<int> pipeline = refusing(registry_, "quiet");
  r4c::Permit held = pipeline.adaptive_limit()->try_acquire();
  // The first refusal classifies the limit's exception (one rethrow in each classifying
  // policy) and keeps the verdicts; the thread takes its stripe slots.
  ASSERT_TRUE(pipeline.try_execute([] { return 1; }).refused());
  const r4c::bench::AllocCount before = r4c::bench::thread_alloc_count();
  for (int i = 0; i < 100; ++i) {
    r4c::Outcome<int> outcome = pipeline.try_execute([] { return 1; });
    ASSERT_TRUE(outcome.refused());
  }
  const r4c::bench::AllocCount after = r4c::bench::thread_alloc_count();
  EXPECT_EQ(after.news, before.news);
  // A throw mallocs its exception's header: none means no throw (where malloc is counted).
  EXPECT_EQ(after.mallocs, before.mallocs);
  (void)thrown_by([&] { pipeline.execute([] { return 1; }); });
  const r4c::bench::AllocCount thrown = r4c::bench::thread_alloc_count();
  if (thrown.mallocs == after.mallocs) GTEST_SKIP() << "malloc is not counted in this build";
  EXPECT_EQ(thrown.mallocs - after.mallocs, 1u);  // execute(): the one throw at the end
}

// A failure the call returns as an error code (issue 21): a value through every policy, no
// exception until one is asked for.
TEST(OutcomeValueTest, ACodeFailureIsAValueUntilAnExceptionIsAskedFor) {
  auto failed = r4c::Outcome<int>::failure(std::errc::timed_out);
  EXPECT_TRUE(failed.failed());
  EXPECT_TRUE(failed.has_code());
  EXPECT_FALSE(failed.stock());
  EXPECT_EQ(failed.code(), std::errc::timed_out);
  const std::exception_ptr& error = failed.error();  // made now, kept
  EXPECT_EQ(&failed.error(), &error);
  try {
    std::rethrow_exception(error);
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), std::errc::timed_out);
  }
  auto thrown = r4c::Outcome<int>::failure(std::make_error_code(std::errc::connection_refused));
  try {
    (void)std::move(thrown).get();
    ADD_FAILURE() << "get() returned";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), std::errc::connection_refused);
  }
  EXPECT_FALSE(r4c::Outcome<int>::success(1).has_code());
  EXPECT_FALSE(r4c::Outcome<int>::failure(std::make_exception_ptr(NotFound("x"))).has_code());
}

TEST_F(OutcomeTest, TheLimitClassifiesACodeByDropOnError) {
  const auto config = r4c::AdaptiveLimitConfig().min_window_samples(1);
  r4c::AdaptiveLimit dropping("dropping", config, clock_);
  r4c::AdaptiveLimit freeing("freeing", config, clock_);
  clock_->advance(1s);
  // The default drop_on_error: timed_out is a drop, operation_canceled frees the slot only.
  const r4c::Outcome<int> drop =
      dropping.try_execute([] { return r4c::Outcome<int>::failure(std::errc::timed_out); });
  EXPECT_EQ(drop.code(), std::errc::timed_out);
  EXPECT_TRUE(dropping.snapshot().window_dropped);
  EXPECT_EQ(dropping.snapshot().samples, 1u);
  // A call with no result returns the code itself.
  const r4c::Outcome<void> ignored =
      freeing.try_execute([] { return std::make_error_code(std::errc::operation_canceled); });
  EXPECT_EQ(ignored.code(), std::errc::operation_canceled);
  EXPECT_EQ(freeing.snapshot().samples, 0u);
  EXPECT_EQ(freeing.in_flight(), 0);
  EXPECT_TRUE(freeing.try_execute([] { return std::error_code(); }).has_value());
  EXPECT_EQ(freeing.snapshot().samples, 1u);
  EXPECT_FALSE(freeing.snapshot().window_dropped);
}

TEST_F(OutcomeTest, TheBreakerRecordsACodeFailureAsAFailure) {
  r4c::CircuitBreaker breaker(
      "cb", r4c::CircuitBreakerConfig().sliding_window_size(2).minimum_number_of_calls(2), clock_);
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(
        breaker.try_execute([] { return std::make_error_code(std::errc::io_error); }).has_code());
  }
  EXPECT_EQ(breaker.snapshot().failed_calls, 2u);
  EXPECT_EQ(breaker.state(), r4c::CircuitBreakerState::open);
}

TEST_F(OutcomeTest, TheRetryDecidesACodeFailureByItsCodePredicate) {
  const auto failing = [](int& calls, std::errc code) {
    return [&calls, code] {
      ++calls;
      return r4c::Outcome<int>::failure(code);
    };
  };
  int calls = 0;
  // Nothing set: every failure is retried, a code as any other.
  r4c::Retry every("every", r4c::RetryConfig().max_attempts(3).wait(0s), clock_);
  EXPECT_EQ(every.try_execute(failing(calls, std::errc::timed_out)).code(), std::errc::timed_out);
  EXPECT_EQ(calls, 3);
  // The code predicate decides.
  r4c::Retry by_code("by_code",
                     r4c::RetryConfig().max_attempts(3).wait(0s).retry_on_error_code(
                         [](const std::error_code& code) { return code == std::errc::timed_out; }),
                     clock_);
  calls = 0;
  (void)by_code.try_execute(failing(calls, std::errc::timed_out));
  EXPECT_EQ(calls, 3);
  calls = 0;
  (void)by_code.try_execute(failing(calls, std::errc::connection_refused));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(by_code.snapshot().failed_with_retry, 1u);
  EXPECT_EQ(by_code.snapshot().failed_without_retry, 1u);
  // Retrying by exception type only: no type matches a code; aborting by type only: retried.
  r4c::Retry typed("typed", r4c::RetryConfig().max_attempts(3).wait(0s).retry_on<NotFound>(),
                   clock_);
  calls = 0;
  (void)typed.try_execute(failing(calls, std::errc::timed_out));
  EXPECT_EQ(calls, 1);
  r4c::Retry aborting("aborting", r4c::RetryConfig().max_attempts(3).wait(0s).abort_on<NotFound>(),
                      clock_);
  calls = 0;
  (void)aborting.try_execute(failing(calls, std::errc::timed_out));
  EXPECT_EQ(calls, 3);
  // A listener is given the failure as a std::system_error.
  std::vector<std::error_code> seen;
  r4c::Subscription listening = every.on_attempt([&](const r4c::RetryAttemptEvent& event) {
    try {
      std::rethrow_exception(event.failure);
    } catch (const std::system_error& e) {
      seen.push_back(e.code());
    } catch (...) {
    }
  });
  calls = 0;
  (void)every.try_execute(failing(calls, std::errc::io_error));
  EXPECT_EQ(seen, std::vector<std::error_code>(3, std::make_error_code(std::errc::io_error)));
  EXPECT_THROW(r4c::RetryConfig().retry_on_error_code({}), r4c::ConfigException);
}

TEST_F(OutcomeTest, AHedgePassesACodeFailureOnAsTheCode) {
  auto hedged = r4c::Pipeline<int>::builder(registry_, "hedged_code")
                    .hedge([](r4c::HedgeConfig& h) { h.delay(10ms).max_attempts(2); })
                    .bulkhead([](r4c::BulkheadConfig& b) { b.max_concurrent(2); })
                    .build();
  const r4c::Outcome<int> outcome =
      hedged.try_execute([] { return r4c::Outcome<int>::failure(std::errc::timed_out); });
  EXPECT_EQ(outcome.code(), std::errc::timed_out);
  EXPECT_EQ(hedged.hedge()->snapshot().failed, 1u);
}

// Issue 21's pipeline and a bulkhead, the call failing with a code: every policy decides on
// the code as a value (the retry retries it once, the breaker records it, the limit counts it
// a drop), with no allocation and no throw; execute() throws one std::system_error.
r4c::Pipeline<int> code_failing(r4c::ResilienceRegistry& registry, const std::string& id) {
  return r4c::Pipeline<int>::builder(registry, id)
      .retry([](r4c::RetryConfig& r) { r.max_attempts(2).wait(0s); })
      .circuit_breaker([](r4c::CircuitBreakerConfig& c) {
        c.sliding_window_size(1000).minimum_number_of_calls(1000);
      })
      .rate_limiter([](r4c::RateLimiterConfig& r) { r.limit_for_period(1000).refresh_period(1s); })
      .adaptive_limit([](r4c::AdaptiveLimitConfig& a) { a.min_window_samples(1); })
      .timeout([](r4c::TimeoutConfig& t) { t.timeout(1s); })
      .bulkhead([](r4c::BulkheadConfig& b) { b.max_concurrent(4); })
      .build();
}

TEST_F(OutcomeTest, ACodeFailureThroughEveryPolicyNeitherThrowsNorAllocates) {
  r4c::Pipeline<int> pipeline = code_failing(registry_, "coded");
  const auto fail = [] { return r4c::Outcome<int>::failure(std::errc::timed_out); };
  clock_->advance(1s);
  ASSERT_EQ(pipeline.try_execute(fail).code(), std::errc::timed_out);  // stripe slots taken
  EXPECT_TRUE(pipeline.adaptive_limit()->snapshot().window_dropped);
  const r4c::bench::AllocCount before = r4c::bench::thread_alloc_count();
  for (int i = 0; i < 100; ++i) {
    r4c::Outcome<int> outcome = pipeline.try_execute(fail);
    ASSERT_EQ(outcome.code(), std::errc::timed_out);
  }
  const r4c::bench::AllocCount after = r4c::bench::thread_alloc_count();
  EXPECT_EQ(after.news, before.news);
  EXPECT_EQ(after.mallocs, before.mallocs);  // a throw mallocs its exception's header
  const r4c::RetrySnapshot retry = pipeline.retry()->snapshot();
  EXPECT_EQ(retry.failed_with_retry, 101u);
  EXPECT_EQ(retry.retries, 101u);
  EXPECT_EQ(pipeline.circuit_breaker()->snapshot().failed_calls, 202u);
  EXPECT_EQ(pipeline.timeout()->snapshot().timed_out, 0u);
  EXPECT_EQ(pipeline.adaptive_limit()->in_flight(), 0);
  std::error_code thrown;
  try {
    (void)pipeline.execute(fail);
  } catch (const std::system_error& e) {
    thrown = e.code();
  }
  EXPECT_EQ(thrown, std::errc::timed_out);
  const r4c::bench::AllocCount end = r4c::bench::thread_alloc_count();
  if (end.mallocs == after.mallocs) GTEST_SKIP() << "malloc is not counted in this build";
  // execute(): the one throw at the end, which mallocs what one std::system_error's throw does
  // (its header and its message).
  try {
    throw std::system_error(std::make_error_code(std::errc::timed_out));
  } catch (const std::system_error&) {
  }
  const r4c::bench::AllocCount one_throw = r4c::bench::thread_alloc_count();
  EXPECT_EQ(end.mallocs - after.mallocs, one_throw.mallocs - end.mallocs);
}

TEST_F(OutcomeTest, APipelineOfVoidTakesTheCodeTheCallReturns) {
  auto pipeline = r4c::Pipeline<void>::builder(registry_, "void_code")
                      .adaptive_limit([](r4c::AdaptiveLimitConfig&) {})
                      .build();
  EXPECT_TRUE(pipeline.try_execute([] { return std::error_code(); }).has_value());
  EXPECT_EQ(pipeline.try_execute([] { return std::make_error_code(std::errc::io_error); }).code(),
            std::errc::io_error);
  EXPECT_THROW(pipeline.execute([] { return std::make_error_code(std::errc::io_error); }),
               std::system_error);
}

// A stock exception's verdict is kept per config: another config decides it again, once.
TEST(StockVerdictsTest, KeepsEachVerdictWithTheConfigItWasDecidedBy) {
  r4c::detail::StockVerdicts verdicts;
  const std::exception_ptr stock = std::make_exception_ptr(std::runtime_error("full"));
  struct Config {
    int verdict;
  };
  const Config first{1}, second{2};
  int classified = 0;
  auto verdict = [&](const Config& config) {
    return verdicts.verdict(
        stock, true,
        [&](const std::exception_ptr&) {
          ++classified;
          return config.verdict;
        },
        &config);
  };
  EXPECT_EQ(verdict(first), 1);
  EXPECT_EQ(verdict(first), 1);
  EXPECT_EQ(classified, 1);  // kept
  EXPECT_EQ(verdict(second), 2);
  EXPECT_EQ(verdict(second), 2);
  EXPECT_EQ(classified, 2);                     // decided again by the new config, then kept
  EXPECT_EQ(verdicts.find(stock, &first), -1);  // one entry per exception: the latest config's
  EXPECT_EQ(verdict(first), 1);
  EXPECT_EQ(classified, 3);
  // Without a config the verdict is kept for good, as before.
  r4c::detail::StockVerdicts plain;
  plain.remember(stock, 3);
  EXPECT_EQ(plain.find(stock), 3);
  EXPECT_EQ(plain.find(stock, &first), -1);
}

}  // namespace
