// SPDX-License-Identifier: Apache-2.0
// Operating the rate limiter, the circuit breaker, the timeout and the bulkhead
// (docs/operations.md): observe mode and live reconfiguration through registry.reconfigure(),
// the bulkhead's latency histogram, on a ManualClock; the loop tests reconfigure while 8
// threads call and run under TSan.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "r4c/metrics.hpp"
#include "r4c/registry.hpp"
#include "reconfigure_loop.hpp"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

struct Fixture {
  std::shared_ptr<r4c::ManualClock> clock = std::make_shared<r4c::ManualClock>();
  r4c::ResilienceRegistry registry;

  explicit Fixture(const std::string& text)
      : registry(r4c::testing::registry(clock).config_text(text).build()) {}

  r4c::RateLimiter& limiter() { return registry.rate_limiter_policy("m", "quota"); }
};

// The error a refused text raised, or "" when it was accepted.
std::string refusal(r4c::ResilienceRegistry& registry, const std::string& text) {
  try {
    (void)registry.reconfigure(text);
  } catch (const r4c::ConfigException& e) {
    return e.what();
  }
  return "";
}

// Two texts as one (both std::string: g++ 12 warns falsely on a string + a long literal).
std::string with(std::string_view base, std::string_view more) {
  return std::string(base) + std::string(more);
}

constexpr const char* kTwoPerSecond =
    "instances.quota.rateLimiter.limitForPeriod = 2\n"
    "instances.quota.rateLimiter.refreshPeriod = 1s\n";

// ---- the rate limiter --------------------------------------------------------------------

TEST(RateLimiterObserveTest, LetsEveryCallThroughAndCountsWhatItWouldHaveRefused) {
  Fixture f(with(kTwoPerSecond, "instances.quota.rateLimiter.mode = observe\n"));
  r4c::RateLimiter& limiter = f.limiter();
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(limiter.try_acquire());
  EXPECT_NO_THROW(limiter.acquire());
  EXPECT_TRUE(limiter.try_acquire(2));
  const r4c::RateLimiterSnapshot s = limiter.snapshot();
  EXPECT_EQ(s.rejected, 0u);
  EXPECT_EQ(s.would_have_rejected, 5u);   // 2 permits, then 3 + acquire() + the weight of 2
  EXPECT_EQ(s.available_permissions, 0);  // the permits ran as in enforce
  EXPECT_EQ(s.mode, r4c::PolicyMode::observe);
  EXPECT_THAT(
      r4c::metrics::prometheus_text(f.registry),
      HasSubstr("r4c_ratelimiter_would_reject_total{kind=\"ratelimiter\",name=\"quota\"} 5"));
}

TEST(RateLimiterObserveTest, SwitchedToEnforceKeepsThePeriodItCounted) {
  Fixture f(with(kTwoPerSecond, "instances.quota.rateLimiter.mode = observe\n"));
  r4c::RateLimiter& limiter = f.limiter();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.try_acquire());
  const auto changes = f.registry.reconfigure(kTwoPerSecond);  // mode back to enforce
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].key, "mode");
  EXPECT_FALSE(limiter.try_acquire());  // this period's permits were used while observing
  EXPECT_EQ(limiter.snapshot().rejected, 1u);
  EXPECT_EQ(limiter.snapshot().would_have_rejected, 1u);
  f.clock->advance(1s);
  EXPECT_TRUE(limiter.try_acquire());
}

TEST(RateLimiterObserveTest, RefusesObserveWithATimeout) {
  EXPECT_THROW(
      r4c::RateLimiter(
          "x", r4c::RateLimiterConfig().mode(r4c::PolicyMode::observe).timeout_duration(10ms)),
      r4c::ConfigException);
  Fixture f(kTwoPerSecond);
  (void)f.limiter();
  const std::string error = refusal(f.registry, with(kTwoPerSecond,
                                                     "instances.quota.rateLimiter.mode = observe\n"
                                                     "instances.quota.rateLimiter.timeoutDuration "
                                                     "= 1s\n"));
  EXPECT_THAT(error, HasSubstr("R4C-ATR-009"));
  EXPECT_EQ(f.limiter().config().mode(), r4c::PolicyMode::enforce);  // nothing applied
}

TEST(RateLimiterReconfigureTest, ANewLimitStartsAPeriodNowWithThePermitsLeft) {
  Fixture f(kTwoPerSecond);
  r4c::RateLimiter& limiter = f.limiter();
  EXPECT_TRUE(limiter.try_acquire());  // 1 left of 2
  f.clock->advance(500ms);
  (void)f.registry.reconfigure(
      "instances.quota.rateLimiter.limitForPeriod = 5\n"
      "instances.quota.rateLimiter.refreshPeriod = 1s\n");
  EXPECT_EQ(limiter.snapshot().limit_for_period, 5);
  EXPECT_EQ(limiter.snapshot().available_permissions, 1);  // carried over
  EXPECT_TRUE(limiter.try_acquire());
  EXPECT_FALSE(limiter.try_acquire());
  f.clock->advance(999ms);  // the new period began at 0.5 s: still in it at 1.499 s
  EXPECT_FALSE(limiter.try_acquire());
  f.clock->advance(1ms);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(limiter.try_acquire()) << i;
  EXPECT_FALSE(limiter.try_acquire());
  EXPECT_TRUE(limiter.try_acquire(5) == false);  // the weight bound follows the new limit
  EXPECT_THROW((void)limiter.try_acquire(6), r4c::ConfigException);
}

TEST(RateLimiterReconfigureTest, ALowerLimitCapsWhatIsLeftAndAShorterPeriodRefillsSooner) {
  Fixture f("instances.quota.rateLimiter.limitForPeriod = 10\n");
  r4c::RateLimiter& limiter = f.limiter();
  f.clock->advance(300ms);
  (void)f.registry.reconfigure(
      "instances.quota.rateLimiter.limitForPeriod = 3\n"
      "instances.quota.rateLimiter.refreshPeriod = 100ms\n");
  EXPECT_EQ(limiter.snapshot().available_permissions, 3);  // 10 left, at most the new 3
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.try_acquire());
  EXPECT_FALSE(limiter.try_acquire());
  f.clock->advance(100ms);
  EXPECT_EQ(limiter.snapshot().available_permissions, 3);
}

TEST(RateLimiterReconfigureTest, AReservedPermitAndItsWaiterAreKept) {
  Fixture f(with(kTwoPerSecond, "instances.quota.rateLimiter.timeoutDuration = 2s\n"));
  r4c::RateLimiter& limiter = f.limiter();
  EXPECT_TRUE(limiter.try_acquire());
  EXPECT_TRUE(limiter.try_acquire());
  const r4c::RateLimiter::Reservation waiter = limiter.reserve_permit();  // owed: period 2
  ASSERT_EQ(waiter.kind, r4c::RateLimiter::Reservation::Kind::later);
  EXPECT_EQ(waiter.ready_at, 1s);
  f.clock->advance(400ms);
  (void)f.registry.reconfigure(
      "instances.quota.rateLimiter.limitForPeriod = 4\n"
      "instances.quota.rateLimiter.refreshPeriod = 1s\n"
      "instances.quota.rateLimiter.timeoutDuration = 2s\n");
  EXPECT_EQ(limiter.snapshot().waiting_calls, 1);
  EXPECT_EQ(limiter.snapshot().available_permissions, -1);  // still owed
  f.clock->advance(1s);  // the new period at 1.4 s: 4 permits, one of them the waiter's
  limiter.end_wait();
  EXPECT_EQ(limiter.snapshot().available_permissions, 3);
  EXPECT_EQ(limiter.snapshot().waiting_calls, 0);
}

TEST(RateLimiterReconfigureTest, ATimeoutChangeAloneKeepsThePeriod) {
  Fixture f(kTwoPerSecond);
  r4c::RateLimiter& limiter = f.limiter();
  EXPECT_TRUE(limiter.try_acquire());
  f.clock->advance(600ms);
  (void)f.registry.reconfigure(
      with(kTwoPerSecond, "instances.quota.rateLimiter.timeoutDuration = 500ms\n"));
  EXPECT_TRUE(limiter.try_acquire());
  // The period still ends at 1 s: a reservation now waits 400 ms, within the new 500 ms.
  const r4c::RateLimiter::Reservation waiter = limiter.reserve_permit();
  ASSERT_EQ(waiter.kind, r4c::RateLimiter::Reservation::Kind::later);
  EXPECT_EQ(waiter.ready_at, 1s);
  limiter.end_wait();
}

// ---- the circuit breaker -----------------------------------------------------------------

constexpr const char* kBreaker =
    "instances.fuse.circuitBreaker.slidingWindowSize = 4\n"
    "instances.fuse.circuitBreaker.minimumNumberOfCalls = 4\n"
    "instances.fuse.circuitBreaker.failureRateThreshold = 50\n"
    "instances.fuse.circuitBreaker.waitInOpen = 10s\n"
    "instances.fuse.circuitBreaker.permittedCallsInHalfOpen = 1\n";

r4c::CircuitBreaker& breaker_of(Fixture& f) {
  return f.registry.circuit_breaker_policy("m", "fuse");
}

void fail(r4c::CircuitBreaker& breaker, int calls) {
  for (int i = 0; i < calls; ++i) {
    r4c::CircuitBreakerPermit permit = breaker.try_acquire();
    ASSERT_TRUE(permit);
    permit.on_error(1ms);
  }
}

TEST(CircuitBreakerObserveTest, OpensAsInEnforceButLetsTheCallsThroughUnrecorded) {
  Fixture f(with(kBreaker, "instances.fuse.circuitBreaker.mode = observe\n"));
  r4c::CircuitBreaker& breaker = breaker_of(f);
  fail(breaker, 4);
  EXPECT_EQ(breaker.state(), r4c::CircuitBreakerState::open);
  for (int i = 0; i < 3; ++i) {
    r4c::CircuitBreakerPermit permit = breaker.try_acquire();
    ASSERT_TRUE(permit);     // observe: let through
    permit.on_success(1ms);  // not recorded: in enforce it would not have run
  }
  r4c::CircuitBreakerSnapshot s = breaker.snapshot();
  EXPECT_EQ(s.not_permitted_calls, 0u);
  EXPECT_EQ(s.would_have_rejected, 3u);
  EXPECT_EQ(s.buffered_calls, 4u);  // the four that opened it, nothing since
  EXPECT_EQ(s.mode, r4c::PolicyMode::observe);
  // After the wait: one trial, the rest observed; the trial's success closes it.
  f.clock->advance(10s);
  r4c::CircuitBreakerPermit trial = breaker.try_acquire();
  ASSERT_TRUE(trial);
  EXPECT_EQ(breaker.state(), r4c::CircuitBreakerState::half_open);
  {
    r4c::CircuitBreakerPermit extra = breaker.try_acquire();
    EXPECT_TRUE(extra);
    extra.on_error(1ms);  // not a trial: rates nothing
  }
  EXPECT_EQ(breaker.state(), r4c::CircuitBreakerState::half_open);
  trial.on_success(1ms);
  EXPECT_EQ(breaker.state(), r4c::CircuitBreakerState::closed);
  EXPECT_EQ(breaker.snapshot().would_have_rejected, 4u);
  EXPECT_THAT(r4c::metrics::prometheus_text(f.registry),
              HasSubstr("r4c_circuitbreaker_would_reject_total{kind=\"circuitbreaker\",name="
                        "\"fuse\"} 4"));
}

TEST(CircuitBreakerObserveTest, SwitchedToEnforceKeepsTheStateItLearnt) {
  Fixture f(with(kBreaker, "instances.fuse.circuitBreaker.mode = observe\n"));
  r4c::CircuitBreaker& breaker = breaker_of(f);
  fail(breaker, 4);
  (void)f.registry.reconfigure(kBreaker);
  EXPECT_EQ(breaker.config().mode(), r4c::PolicyMode::enforce);
  EXPECT_EQ(breaker.state(), r4c::CircuitBreakerState::open);
  EXPECT_FALSE(breaker.try_acquire());
  EXPECT_EQ(breaker.snapshot().not_permitted_calls, 1u);
}

TEST(CircuitBreakerReconfigureTest, KeepsItsStateAndWindowWhenTheWindowStays) {
  Fixture f(kBreaker);
  r4c::CircuitBreaker& breaker = breaker_of(f);
  fail(breaker, 2);  // 2 of 4: not rated yet
  const auto changes = f.registry.reconfigure(with(kBreaker,
                                                   "instances.fuse.circuitBreaker."
                                                   "minimumNumberOfCalls = 2\n"));
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].key, "minimumNumberOfCalls");
  EXPECT_EQ(breaker.snapshot().buffered_calls, 2u);  // the window stayed
  EXPECT_EQ(breaker.state(), r4c::CircuitBreakerState::closed);
  fail(breaker, 1);  // 3 calls, all failed, minimum 2: opens
  EXPECT_EQ(breaker.state(), r4c::CircuitBreakerState::open);
  // An open breaker stays open, its wait unchanged by a new waitInOpen.
  (void)f.registry.reconfigure(with(kBreaker,
                                    "instances.fuse.circuitBreaker.minimumNumberOfCalls = 2\n"
                                    "instances.fuse.circuitBreaker.waitInOpen = 1s\n"));
  EXPECT_EQ(breaker.state(), r4c::CircuitBreakerState::open);
  f.clock->advance(1s);
  EXPECT_FALSE(breaker.try_acquire());
  f.clock->advance(9s);
  EXPECT_TRUE(breaker.try_acquire());
}

TEST(CircuitBreakerReconfigureTest, ANewWindowSizeStartsAnEmptyWindow) {
  Fixture f(kBreaker);
  r4c::CircuitBreaker& breaker = breaker_of(f);
  fail(breaker, 3);
  (void)f.registry.reconfigure(
      with(kBreaker, "instances.fuse.circuitBreaker.slidingWindowSize = 10\n"));
  EXPECT_EQ(breaker.snapshot().buffered_calls, 0u);
  fail(breaker, 3);  // 3 calls in the new window: below the minimum of 4
  EXPECT_EQ(breaker.state(), r4c::CircuitBreakerState::closed);
  fail(breaker, 1);
  EXPECT_EQ(breaker.state(), r4c::CircuitBreakerState::open);
}

TEST(CircuitBreakerReconfigureTest, ANewSlowDurationRatesTheNextCalls) {
  Fixture f(with(kBreaker, "instances.fuse.circuitBreaker.slowCallRateThreshold = 50\n"));
  r4c::CircuitBreaker& breaker = breaker_of(f);
  for (int i = 0; i < 3; ++i) breaker.try_acquire().on_success(2s);  // slow only beyond 60 s
  EXPECT_EQ(breaker.snapshot().slow_calls, 0u);
  (void)f.registry.reconfigure(with(kBreaker,
                                    "instances.fuse.circuitBreaker.slowCallRateThreshold = 50\n"
                                    "instances.fuse.circuitBreaker.slowCallDuration = 1s\n"));
  breaker.try_acquire().on_success(2s);
  EXPECT_EQ(breaker.snapshot().slow_calls, 1u);
}

// A bulkhead "pool" of one slot, held: its refusal is one preallocated (stock) exception,
// whose verdict a classifying policy keeps.
constexpr const char* kFullPool = "instances.pool.bulkhead.maxConcurrent = 1\n";

struct FullPool {
  r4c::Bulkhead& pool;
  r4c::BulkheadPermit held = pool.try_acquire();
  // The pool's refusal, as an Outcome: the same exception object every time.
  r4c::Outcome<int> refusal() {
    return pool.try_execute([] { return 1; });
  }
};

TEST(CircuitBreakerReconfigureTest, NewRecordOnAndIgnoreOnListsClassifyTheNextStockFailure) {
  const std::string base = with(kBreaker, kFullPool);
  Fixture f(base);
  r4c::CircuitBreaker& breaker = breaker_of(f);
  FullPool full{f.registry.bulkhead_policy("m", "pool")};
  ASSERT_TRUE(full.held);
  auto call = [&] { return breaker.try_execute([&] { return full.refusal(); }); };
  ASSERT_TRUE(call().refused());
  EXPECT_EQ(breaker.snapshot().failed_calls, 1u);  // every failure is recorded; verdict kept
  // Ignored now: the verdict kept for the old lists is not the new one's.
  const auto changes = f.registry.reconfigure(
      with(base, "instances.fuse.circuitBreaker.ignoreOn = BulkheadFullException\n"));
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].key, "ignoreOn");
  (void)call();
  (void)call();
  EXPECT_EQ(breaker.snapshot().buffered_calls, 1u);  // the window stayed, nothing added
  EXPECT_EQ(breaker.snapshot().failed_calls, 1u);
  // Recorded only when a CallTimeoutException: the refusal is a success (resilience4j's rule).
  (void)f.registry.reconfigure(
      with(base, "instances.fuse.circuitBreaker.recordOn = CallTimeoutException\n"));
  (void)call();
  EXPECT_EQ(breaker.snapshot().buffered_calls, 2u);
  EXPECT_EQ(breaker.snapshot().failed_calls, 1u);
  // Every failure again: two more failures of four, 75%: the breaker opens.
  (void)f.registry.reconfigure(base);
  (void)call();
  EXPECT_EQ(breaker.state(), r4c::CircuitBreakerState::closed);
  (void)call();
  EXPECT_EQ(breaker.snapshot().failed_calls, 3u);
  EXPECT_EQ(breaker.state(), r4c::CircuitBreakerState::open);
}

TEST(CircuitBreakerReconfigureTest, ANewIgnoreOnListClassifiesWhatExecuteThrows) {
  Fixture f(kBreaker);
  r4c::CircuitBreaker& breaker = breaker_of(f);
  auto time_out = [&] {
    EXPECT_THROW(breaker.execute([]() -> int { throw r4c::CallTimeoutException("late"); }),
                 r4c::CallTimeoutException);
  };
  time_out();
  (void)f.registry.reconfigure(
      with(kBreaker, "instances.fuse.circuitBreaker.ignoreOn = CallTimeoutException\n"));
  time_out();
  EXPECT_EQ(breaker.snapshot().buffered_calls, 1u);
  (void)f.registry.reconfigure(kBreaker);
  time_out();
  EXPECT_EQ(breaker.snapshot().failed_calls, 2u);
}

// ---- the retry ----------------------------------------------------------------------------

constexpr const char* kRetry =
    "instances.again.retry.maxAttempts = 3\n"
    "instances.again.retry.wait = 0ms\n";

TEST(RetryReconfigureTest, NewAbortOnAndRetryOnListsDecideTheNextStockFailure) {
  const std::string base = with(kRetry, kFullPool);
  Fixture f(base);
  r4c::Retry& retry = f.registry.retry_policy("m", "again");
  FullPool full{f.registry.bulkhead_policy("m", "pool")};
  ASSERT_TRUE(full.held);
  int attempts = 0;
  auto call = [&] {
    attempts = 0;
    return retry.try_execute([&] {
      ++attempts;
      return full.refusal();
    });
  };
  (void)call();
  EXPECT_EQ(attempts, 3);  // every failure is retried
  (void)f.registry.reconfigure(
      with(base, "instances.again.retry.abortOn = BulkheadFullException\n"));
  (void)call();
  EXPECT_EQ(attempts, 1);
  (void)f.registry.reconfigure(
      with(base, "instances.again.retry.retryOn = BulkheadFullException\n"));
  (void)call();
  EXPECT_EQ(attempts, 3);
  (void)f.registry.reconfigure(
      with(base, "instances.again.retry.retryOn = CallTimeoutException\n"));
  (void)call();
  EXPECT_EQ(attempts, 1);
  (void)f.registry.reconfigure(base);
  (void)call();
  EXPECT_EQ(attempts, 3);
  const r4c::RetrySnapshot s = retry.snapshot();  // the counters stayed
  EXPECT_EQ(s.failed_with_retry + s.failed_without_retry, 5u);
}

TEST(RetryReconfigureTest, ANewAbortOnListDecidesWhatExecuteThrows) {
  Fixture f(kRetry);
  r4c::Retry& retry = f.registry.retry_policy("m", "again");
  int attempts = 0;
  auto call = [&] {
    attempts = 0;
    EXPECT_THROW(retry.execute([&]() -> int {
      ++attempts;
      throw r4c::CallTimeoutException("late");
    }),
                 r4c::CallTimeoutException);
  };
  call();
  EXPECT_EQ(attempts, 3);
  (void)f.registry.reconfigure(
      with(kRetry, "instances.again.retry.abortOn = CallTimeoutException\n"));
  call();
  EXPECT_EQ(attempts, 1);
}

// ---- the timeout -------------------------------------------------------------------------

TEST(TimeoutReconfigureTest, CallsThatStartAfterTheChangeTakeTheNewDuration) {
  Fixture f("instances.slow.timeout.timeout = 1s\n");
  r4c::Timeout& timeout = f.registry.timeout_policy("m", "slow");
  // A call under way keeps the deadline it started with.
  EXPECT_EQ(timeout.execute([&] {
    (void)f.registry.reconfigure("instances.slow.timeout.timeout = 500ms\n");
    f.clock->advance(700ms);
    return 1;
  }),
            1);
  EXPECT_EQ(timeout.config().timeout(), 500ms);
  EXPECT_EQ(timeout.snapshot().timeout, 500ms);
  EXPECT_THROW(timeout.execute([&] { f.clock->advance(700ms); }), r4c::CallTimeoutException);
  // With a token: its deadline is the new one too.
  bool stopped = false;
  EXPECT_THROW(timeout.execute([&](std::stop_token stop) {
    f.clock->advance(500ms);
    stopped = stop.stop_requested();
  }),
               r4c::CallTimeoutException);
  EXPECT_TRUE(stopped);
  EXPECT_EQ(timeout.snapshot().timed_out, 2u);
}

// ---- the bulkhead ------------------------------------------------------------------------
// A waiting caller runs on its own thread, watched through the snapshot's `waiting` (yielding,
// never sleeping).

// A bulkhead "pool" of `max_concurrent` slots whose calls wait up to `max_wait`.
std::string pool(int max_concurrent, std::string_view max_wait) {
  return "instances.pool.bulkhead.maxConcurrent = " + std::to_string(max_concurrent) +
         "\ninstances.pool.bulkhead.maxWait = " + std::string(max_wait) + "\n";
}

struct BulkheadFixture : Fixture {
  std::vector<std::thread> threads;
  std::atomic<int> granted{0};       // callers of wait_on_thread() that got a slot
  std::atomic<bool> release{false};  // lets them give it back

  using Fixture::Fixture;
  ~BulkheadFixture() { join(); }

  r4c::Bulkhead& bulkhead() { return registry.bulkhead_policy("m", "pool"); }
  void join() {
    release.store(true);
    for (std::thread& thread : threads) thread.join();
    threads.clear();
  }

  // Starts a caller of acquire() on a thread that holds the slot it gets until `release` is
  // set; returns once it waits.
  void wait_on_thread() {
    r4c::Bulkhead& b = bulkhead();
    const int before = b.snapshot().waiting;
    threads.emplace_back([this, &b] {
      r4c::BulkheadPermit permit = b.acquire();
      if (!permit) return;
      granted.fetch_add(1);
      while (!release.load()) std::this_thread::yield();
    });
    while (b.snapshot().waiting == before) std::this_thread::yield();
  }
};

void wait_until(const std::atomic<int>& value, int expected) {
  while (value.load() != expected) std::this_thread::yield();
}

// ---- observe mode ------------------------------------------------------------------------

constexpr const char* kObservingPool =
    "instances.pool.bulkhead.maxConcurrent = 2\n"
    "instances.pool.bulkhead.mode = observe\n";

TEST(BulkheadObserveTest, LetsEveryCallThroughAndCountsWhatItWouldHaveRejected) {
  BulkheadFixture f(kObservingPool);
  r4c::Bulkhead& bulkhead = f.bulkhead();
  std::vector<r4c::BulkheadPermit> permits;
  for (int i = 0; i < 4; ++i) {
    permits.push_back(bulkhead.try_acquire());
    EXPECT_TRUE(permits.back());
  }
  EXPECT_EQ(bulkhead.execute([] { return 7; }), 7);
  r4c::BulkheadSnapshot s = bulkhead.snapshot();
  EXPECT_EQ(s.rejected, 0u);
  EXPECT_EQ(s.would_have_rejected, 3u);  // the third, the fourth and the execute()
  EXPECT_EQ(s.in_flight, 4);             // the calls let through hold slots beyond the limit
  EXPECT_EQ(s.available, 0);
  EXPECT_EQ(s.mode, r4c::PolicyMode::observe);
  EXPECT_THAT(r4c::metrics::prometheus_text(f.registry),
              HasSubstr("r4c_bulkhead_would_reject_total{kind=\"bulkhead\",name=\"pool\"} 3"));
  permits.clear();
  EXPECT_EQ(bulkhead.in_flight(), 0);
}

TEST(BulkheadObserveTest, AnEnforcingBulkheadPublishesNoWouldRejectMetric) {
  BulkheadFixture f("instances.pool.bulkhead.maxConcurrent = 1\n");
  r4c::BulkheadPermit held = f.bulkhead().try_acquire();
  EXPECT_FALSE(f.bulkhead().try_acquire());
  EXPECT_EQ(f.bulkhead().snapshot().would_have_rejected, 0u);
  EXPECT_THAT(r4c::metrics::prometheus_text(f.registry), Not(HasSubstr("would_reject")));
}

TEST(BulkheadObserveTest, RefusesObserveWithAMaxWait) {
  EXPECT_THROW(r4c::BulkheadConfig().max_wait(1s).mode(r4c::PolicyMode::observe).validate(),
               r4c::ConfigException);
  BulkheadFixture f("instances.pool.bulkhead.maxWait = 1s\n");
  (void)f.bulkhead();
  const std::string error = refusal(f.registry,
                                    "instances.pool.bulkhead.maxWait = 1s\n"
                                    "instances.pool.bulkhead.mode = observe\n");
  EXPECT_THAT(error, HasSubstr("R4C-ATR-009"));
  EXPECT_THAT(error, HasSubstr("max_wait 0 in observe mode"));
  EXPECT_EQ(f.bulkhead().config().mode(), r4c::PolicyMode::enforce);  // nothing changed
}

TEST(BulkheadObserveTest, SwitchedToEnforceKeepsItsCallsInFlight) {
  BulkheadFixture f(kObservingPool);
  r4c::Bulkhead& bulkhead = f.bulkhead();
  std::vector<r4c::BulkheadPermit> permits;
  for (int i = 0; i < 3; ++i) permits.push_back(bulkhead.try_acquire());
  (void)f.registry.reconfigure("instances.pool.bulkhead.maxConcurrent = 2\n");
  EXPECT_EQ(bulkhead.config().mode(), r4c::PolicyMode::enforce);
  EXPECT_EQ(bulkhead.in_flight(), 3);
  EXPECT_FALSE(bulkhead.try_acquire());  // 3 in flight, 2 slots: rejected now
  permits.pop_back();
  EXPECT_FALSE(bulkhead.try_acquire());  // 2 in flight
  permits.pop_back();
  EXPECT_TRUE(bulkhead.try_acquire());
  const r4c::BulkheadSnapshot s = bulkhead.snapshot();
  EXPECT_EQ(s.rejected, 2u);
  EXPECT_EQ(s.would_have_rejected, 1u);
}

// ---- live reconfiguration ----------------------------------------------------------------

TEST(BulkheadReconfigureTest, AHigherLimitHandsItsNewSlotsToTheWaiters) {
  BulkheadFixture f(pool(1, "1s"));
  r4c::Bulkhead& bulkhead = f.bulkhead();
  r4c::BulkheadPermit held = bulkhead.try_acquire();
  ASSERT_TRUE(held);
  f.wait_on_thread();
  f.wait_on_thread();
  f.wait_on_thread();
  (void)f.registry.reconfigure(pool(3, "1s"));
  wait_until(f.granted, 2);  // two new slots, two waiters, without a release
  r4c::BulkheadSnapshot s = bulkhead.snapshot();
  EXPECT_EQ(s.max_concurrent, 3);
  EXPECT_EQ(s.in_flight, 3);
  EXPECT_EQ(s.waiting, 1);
  EXPECT_EQ(s.waits_granted, 2u);
  held.release();  // the third waiter gets this one
  wait_until(f.granted, 3);
  f.join();
  s = bulkhead.snapshot();
  EXPECT_EQ(s.in_flight, 0);
  EXPECT_EQ(s.rejected, 0u);
}

TEST(BulkheadReconfigureTest, ALowerLimitLetsTheCallsInFlightAndTheWaitersDrain) {
  BulkheadFixture f(pool(3, "1s"));
  r4c::Bulkhead& bulkhead = f.bulkhead();
  std::vector<r4c::BulkheadPermit> permits;
  for (int i = 0; i < 3; ++i) permits.push_back(bulkhead.try_acquire());
  f.wait_on_thread();
  (void)f.registry.reconfigure(pool(1, "1s"));
  EXPECT_EQ(bulkhead.in_flight(), 3);  // nobody lost a slot
  permits.pop_back();
  permits.pop_back();  // 1 in flight: still no slot below the new limit
  EXPECT_EQ(bulkhead.snapshot().waiting, 1);
  EXPECT_EQ(f.granted.load(), 0);
  permits.pop_back();  // 0 in flight: the waiter's
  wait_until(f.granted, 1);
  EXPECT_EQ(bulkhead.in_flight(), 1);
  EXPECT_FALSE(bulkhead.try_acquire());
  f.join();
  EXPECT_EQ(bulkhead.snapshot().rejected, 1u);
  EXPECT_EQ(bulkhead.in_flight(), 0);
}

TEST(BulkheadReconfigureTest, AMaxWaitGivenLiveMakesCallsWaitForSlotsTakenBefore) {
  BulkheadFixture f("instances.pool.bulkhead.maxConcurrent = 1\n");
  r4c::Bulkhead& bulkhead = f.bulkhead();
  r4c::BulkheadPermit held = bulkhead.try_acquire();  // the short way: no max_wait yet
  EXPECT_FALSE(bulkhead.acquire());
  (void)f.registry.reconfigure(pool(1, "1s"));
  EXPECT_TRUE(bulkhead.waits());
  f.release.store(true);
  f.wait_on_thread();
  held.release();  // taken before the change, released the short way: still handed over
  wait_until(f.granted, 1);
  f.join();
  EXPECT_EQ(bulkhead.snapshot().waits_granted, 1u);
  // And a wait times out after the new max_wait.
  held = bulkhead.try_acquire();
  std::atomic<int> rejected{0};
  f.threads.emplace_back([&] {
    if (!bulkhead.acquire()) rejected.fetch_add(1);
  });
  while (bulkhead.snapshot().waiting == 0) std::this_thread::yield();
  f.clock->advance(1s);
  wait_until(rejected, 1);
  EXPECT_EQ(bulkhead.snapshot().rejected_by_reason[1], 1u);  // wait_timeout
}

TEST(BulkheadReconfigureTest, AMaxWaitTakenAwayKeepsTheWaitersAndRejectsNewCallsAtOnce) {
  BulkheadFixture f(pool(1, "1s"));
  r4c::Bulkhead& bulkhead = f.bulkhead();
  r4c::BulkheadPermit held = bulkhead.try_acquire();
  f.release.store(true);
  f.wait_on_thread();
  (void)f.registry.reconfigure("instances.pool.bulkhead.maxConcurrent = 1\n");
  EXPECT_FALSE(bulkhead.waits());
  EXPECT_THROW(bulkhead.execute([] {}), r4c::BulkheadFullException);  // no wait now
  EXPECT_EQ(bulkhead.snapshot().waiting, 1);
  held.release();
  wait_until(f.granted, 1);
  f.join();
  const r4c::BulkheadSnapshot s = bulkhead.snapshot();
  EXPECT_EQ(s.rejected_by_reason[0], 1u);  // full
  EXPECT_EQ(s.waits_granted, 1u);
  EXPECT_EQ(s.in_flight, 0);
}

TEST(BulkheadReconfigureTest, SwitchesTheLatencyHistogramOnAndOffLive) {
  const std::string base = "instances.pool.bulkhead.maxConcurrent = 2\n";
  const std::string on = with(base, "instances.pool.bulkhead.latencyHistogram = true\n");
  BulkheadFixture f(base);
  r4c::Bulkhead& bulkhead = f.bulkhead();
  r4c::BulkheadPermit before = bulkhead.try_acquire();  // taken the short way, unstamped
  ASSERT_TRUE(before);
  (void)f.registry.reconfigure(on);
  EXPECT_TRUE(bulkhead.config().latency_histogram());
  bulkhead.execute([&] { f.clock->advance(3ms); });
  {
    r4c::BulkheadPermit during = bulkhead.try_acquire();
    ASSERT_TRUE(during);
    f.clock->advance(5ms);
  }
  before.release();  // taken before the histogram: not recorded (no time of taking)
  r4c::BulkheadSnapshot s = bulkhead.snapshot();
  ASSERT_TRUE(s.latency.enabled);
  EXPECT_EQ(s.latency.total.count, 2u);
  EXPECT_EQ(s.latency.sum, 8ms);
  EXPECT_EQ(s.in_flight, 0);
  EXPECT_THAT(r4c::metrics::prometheus_text(f.registry),
              HasSubstr("r4c_bulkhead_call_latency_seconds_count{kind=\"bulkhead\",name="
                        "\"pool\"} 2"));
  // Off: a call stamped while on records nothing when it ends; the metrics show no histogram.
  r4c::BulkheadPermit stamped = bulkhead.try_acquire();
  (void)f.registry.reconfigure(base);
  bulkhead.execute([&] { f.clock->advance(1ms); });
  stamped.release();
  s = bulkhead.snapshot();
  EXPECT_FALSE(s.latency.enabled);
  EXPECT_EQ(s.in_flight, 0);
  EXPECT_THAT(r4c::metrics::prometheus_text(f.registry), Not(HasSubstr("latency_seconds")));
  // On again: the same histogram goes on counting.
  (void)f.registry.reconfigure(on);
  bulkhead.execute([&] { f.clock->advance(2ms); });
  s = bulkhead.snapshot();
  ASSERT_TRUE(s.latency.enabled);
  EXPECT_EQ(s.latency.total.count, 3u);
  EXPECT_EQ(s.latency.sum, 10ms);
  // The limit held throughout.
  r4c::BulkheadPermit a = bulkhead.try_acquire(), b = bulkhead.try_acquire();
  EXPECT_TRUE(a && b);
  EXPECT_FALSE(bulkhead.try_acquire());
}

// ---- latency histogram -------------------------------------------------------------------

TEST(BulkheadLatencyHistogramTest, RecordsHowLongEachCallHeldItsSlot) {
  BulkheadFixture f("instances.pool.bulkhead.latencyHistogram = true\n");
  r4c::Bulkhead& bulkhead = f.bulkhead();
  for (int i = 1; i <= 100; ++i) {
    bulkhead.execute([&] { f.clock->advance(std::chrono::microseconds(10 * i)); });
  }
  {
    r4c::BulkheadPermit permit = bulkhead.try_acquire();  // a permit's slot counts too
    f.clock->advance(2ms);
  }
  const r4c::BulkheadSnapshot s = bulkhead.snapshot();
  ASSERT_TRUE(s.latency.enabled);
  EXPECT_EQ(s.latency.total.count, 101u);
  EXPECT_EQ(s.latency.sum, std::chrono::microseconds(10 * 5050) + 2ms);
  // Percentiles: the bucket bound at or above the exact value, at most 1/8 above it.
  EXPECT_GE(s.latency.total.p50, 500us);
  EXPECT_LE(s.latency.total.p50, 500us + 500us / 8);
  EXPECT_GE(s.latency.total.p99, 990us);
  EXPECT_LE(s.latency.total.p99, 990us + 990us / 8);
  EXPECT_GE(s.latency.total.p999, 2000us);
  EXPECT_LE(s.latency.total.p999, 2000us + 2000us / 8);
  const std::string text = r4c::metrics::prometheus_text(f.registry);
  EXPECT_THAT(text, HasSubstr("# TYPE r4c_bulkhead_call_latency_seconds histogram"));
  EXPECT_THAT(text, HasSubstr("r4c_bulkhead_call_latency_seconds_count{kind=\"bulkhead\",name="
                              "\"pool\"} 101"));
  EXPECT_THAT(text, HasSubstr("r4c_bulkhead_call_latency_seconds_sum{kind=\"bulkhead\",name="
                              "\"pool\"} 0.0525"));
}

TEST(BulkheadLatencyHistogramTest, TheLastWindowIsTheLastSecondThatEnded) {
  BulkheadFixture f("instances.pool.bulkhead.latencyHistogram = true\n");
  r4c::Bulkhead& bulkhead = f.bulkhead();
  bulkhead.execute([&] { f.clock->advance(100ms); });
  f.clock->advance(1s);  // the next call ends the first window
  bulkhead.execute([&] { f.clock->advance(1ms); });
  bulkhead.execute([&] { f.clock->advance(1ms); });
  const r4c::BulkheadSnapshot s = bulkhead.snapshot();
  EXPECT_EQ(s.latency.window.count, 1u);
  EXPECT_GE(s.latency.window.p50, 100ms);
  EXPECT_EQ(s.latency.total.count, 3u);
}

// A call's latency is recorded once whichever path its slot took: the short one, the one of a
// listened-to bulkhead (a finished listener, then none), observe mode beyond the limit, and a
// wait's grant.
TEST(BulkheadLatencyHistogramTest, RecordsEveryCallOnceWhicheverPathItsSlotTook) {
  BulkheadFixture f(
      "instances.pool.bulkhead.latencyHistogram = true\n"
      "instances.pool.bulkhead.maxConcurrent = 1\n");
  r4c::Bulkhead& bulkhead = f.bulkhead();
  bulkhead.execute([&] { f.clock->advance(1ms); });  // the short way
  int finished = 0;
  {
    r4c::Subscription listening =
        bulkhead.on_call_finished([&](const r4c::BulkheadEvent&) { ++finished; });
    bulkhead.execute([&] { f.clock->advance(2ms); });  // announced
  }
  bulkhead.execute([&] { f.clock->advance(4ms); });  // its release finds no listener
  bulkhead.execute([&] { f.clock->advance(8ms); });  // the short way again
  EXPECT_EQ(finished, 1);
  r4c::BulkheadSnapshot s = bulkhead.snapshot();
  EXPECT_EQ(s.latency.total.count, 4u);
  EXPECT_EQ(s.latency.sum, 15ms);

  // Observe mode: the call beyond the limit holds a slot too, and is timed like the others.
  (void)f.registry.reconfigure(
      "instances.pool.bulkhead.latencyHistogram = true\n"
      "instances.pool.bulkhead.maxConcurrent = 1\n"
      "instances.pool.bulkhead.mode = observe\n");
  {
    r4c::BulkheadPermit first = bulkhead.try_acquire();
    r4c::BulkheadPermit beyond = bulkhead.try_acquire();
    ASSERT_TRUE(first && beyond);
    f.clock->advance(16ms);
  }
  s = bulkhead.snapshot();
  EXPECT_EQ(s.would_have_rejected, 1u);
  EXPECT_EQ(s.latency.total.count, 6u);
  EXPECT_EQ(s.latency.sum, 15ms + 2 * 16ms);

  // A bulkhead that waits: the slot a release hands over is timed from the grant.
  (void)f.registry.reconfigure(
      "instances.pool.bulkhead.latencyHistogram = true\n"
      "instances.pool.bulkhead.maxConcurrent = 1\n"
      "instances.pool.bulkhead.maxWait = 1s\n");
  r4c::BulkheadPermit held = bulkhead.try_acquire();
  ASSERT_TRUE(held);
  f.wait_on_thread();
  f.clock->advance(32ms);
  held.release();
  wait_until(f.granted, 1);
  f.clock->advance(64ms);
  f.join();
  s = bulkhead.snapshot();
  EXPECT_EQ(s.latency.total.count, 8u);
  EXPECT_EQ(s.latency.sum, 15ms + 2 * 16ms + 32ms + 64ms);
  EXPECT_EQ(s.in_flight, 0);
}

TEST(BulkheadLatencyHistogramTest, OffByDefault) {
  BulkheadFixture f("instances.pool.bulkhead.maxConcurrent = 2\n");
  f.bulkhead().execute([&] { f.clock->advance(1ms); });
  EXPECT_FALSE(f.bulkhead().snapshot().latency.enabled);
  EXPECT_EQ(f.bulkhead().snapshot().latency.total.count, 0u);
  EXPECT_THAT(r4c::metrics::prometheus_text(f.registry), Not(HasSubstr("latency_seconds")));
}

// ---- under TSan --------------------------------------------------------------------------

TEST(BulkheadOperationsTest, ReconfiguresInALoopWhileEightThreadsCall) {
  const std::string base = "instances.pool.bulkhead.maxConcurrent = 4\n";
  const std::string texts[] = {base,
                               "instances.pool.bulkhead.maxConcurrent = 1\n"
                               "instances.pool.bulkhead.maxWait = 5ms\n",
                               "instances.pool.bulkhead.maxConcurrent = 16\n"
                               "instances.pool.bulkhead.maxWait = 1ms\n",
                               "instances.pool.bulkhead.maxConcurrent = 2\n"
                               "instances.pool.bulkhead.mode = observe\n",
                               "instances.pool.bulkhead.maxConcurrent = 3\n"
                               "instances.pool.bulkhead.latencyHistogram = true\n",
                               "instances.pool.bulkhead.maxConcurrent = 1\n"
                               "instances.pool.bulkhead.maxWait = 2ms\n"
                               "instances.pool.bulkhead.latencyHistogram = true\n"};
  BulkheadFixture f(base);
  r4c::Bulkhead& bulkhead = f.bulkhead();
  std::atomic<bool> stop{false};
  std::stop_source ending;  // ends the waits of the last calls
  std::atomic<std::uint64_t> ran{0};
  std::atomic<std::uint64_t> refused{0};
  std::atomic<int> started{0};
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    while (!stop.load()) std::this_thread::yield();
    ending.request_stop();
  });
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (std::uint64_t i = 1; i == 1 || !stop.load(std::memory_order_relaxed); ++i) {
        const bool waits = (i + static_cast<std::uint64_t>(t)) % 3 == 0;
        if (r4c::BulkheadPermit permit =
                waits ? bulkhead.acquire(ending.get_token()) : bulkhead.try_acquire()) {
          ran.fetch_add(1);
          std::this_thread::yield();  // hold the slot a little
        } else {
          refused.fetch_add(1);
        }
        if (i == 1) started.fetch_add(1);
      }
    });
  }
  // Every thread has called once before the first reconfiguration (on one core too).
  while (started.load() != 8) std::this_thread::yield();
  r4c::test::reconfigure_while_calling(f.registry, *f.clock, texts, 300, 2ms, stop, threads);
  // Every slot came back, nobody waits, the counts add up.
  const r4c::BulkheadSnapshot s = bulkhead.snapshot();
  EXPECT_EQ(s.in_flight, 0);
  EXPECT_EQ(s.waiting, 0);
  EXPECT_GT(ran.load(), 0u);
  // Every empty permit was counted once, in `rejected` (observe counts none).
  EXPECT_EQ(refused.load(), s.rejected);
  (void)f.registry.reconfigure(base);
  EXPECT_EQ(bulkhead.max_concurrent(), 4);
  EXPECT_EQ(bulkhead.config().max_wait(), 0ns);
  EXPECT_TRUE(bulkhead.try_acquire());
}

// ---- all of them at once, under TSan -----------------------------------------------------

TEST(LiveOperationsTest, ReconfiguresInALoopWhileEightThreadsCallEachOfThem) {
  const std::string base =
      "instances.quota.rateLimiter.limitForPeriod = 1000\n"
      "instances.quota.rateLimiter.refreshPeriod = 10ms\n"
      "instances.fuse.circuitBreaker.slidingWindowSize = 20\n"
      "instances.fuse.circuitBreaker.minimumNumberOfCalls = 10\n"
      "instances.fuse.circuitBreaker.waitInOpen = 20ms\n"
      "instances.slow.timeout.timeout = 1s\n"
      "instances.again.retry.maxAttempts = 2\n"
      "instances.again.retry.wait = 0ms\n"
      "instances.gate.throttle.k = 2\n"
      "instances.pool.bulkhead.maxConcurrent = 1\n";
  // The exception lists flip between texts: the stock refusal the calls meet (the held
  // pool's) is classified again after each change.
  const std::string texts[] = {base,
                               base +
                                   "instances.fuse.circuitBreaker.ignoreOn = "
                                   "BulkheadFullException\n"
                                   "instances.again.retry.abortOn = BulkheadFullException\n"
                                   "instances.gate.throttle.refusedOn = BulkheadFullException\n"
                                   "instances.gate.throttle.seed = 7\n"
                                   "instances.gate.throttle.window = 1s\n",
                               base +
                                   "instances.fuse.circuitBreaker.recordOn = "
                                   "CallTimeoutException\n"
                                   "instances.again.retry.retryOn = CallTimeoutException\n"
                                   "instances.gate.throttle.refusedOn = CallTimeoutException\n"
                                   "instances.gate.throttle.window = 10ms\n",
                               base +
                                   "instances.quota.rateLimiter.limitForPeriod = 3\n"
                                   "instances.quota.rateLimiter.mode = observe\n"
                                   "instances.fuse.circuitBreaker.slidingWindowSize = 5\n"
                                   "instances.fuse.circuitBreaker.failureRateThreshold = 20\n"
                                   "instances.fuse.circuitBreaker.mode = observe\n"
                                   "instances.slow.timeout.timeout = 20ms\n",
                               base +
                                   "instances.quota.rateLimiter.refreshPeriod = 1s\n"
                                   "instances.fuse.circuitBreaker.slidingWindowType = time_based\n"
                                   "instances.fuse.circuitBreaker.slidingWindowSize = 2\n"};
  Fixture f(base);
  r4c::RateLimiter& limiter = f.limiter();
  r4c::CircuitBreaker& breaker = breaker_of(f);
  r4c::Timeout& timeout = f.registry.timeout_policy("m", "slow");
  r4c::Retry& retry = f.registry.retry_policy("m", "again");
  r4c::Throttle& throttle = f.registry.throttle_policy("m", "gate");
  FullPool full{f.registry.bulkhead_policy("m", "pool")};
  ASSERT_TRUE(full.held);
  std::atomic<std::uint64_t> classified{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::uint64_t i = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        ++i;
        (void)limiter.try_acquire();
        if (r4c::CircuitBreakerPermit permit = breaker.try_acquire()) {
          if ((i + static_cast<std::uint64_t>(t)) % 3 == 0) {
            permit.on_error(1ms);
          } else {
            permit.on_success(1ms);
          }
        }
        (void)timeout.try_execute([] { return 1; });
        if ((i + static_cast<std::uint64_t>(t)) % 4 == 0) {
          const auto outcome = retry.try_execute([&] {
            return throttle.try_execute(
                [&] { return breaker.try_execute([&] { return full.refusal(); }); });
          });
          if (!outcome.has_value()) classified.fetch_add(1, std::memory_order_relaxed);
        }
      }
    });
  }
  r4c::test::reconfigure_while_calling(f.registry, *f.clock, texts, 300, 7ms, stop, threads);
  // Every policy is still whole: its settings are the last text's, its counters add up.
  const r4c::RateLimiterSnapshot rate = limiter.snapshot();
  EXPECT_LE(rate.available_permissions, rate.limit_for_period);
  EXPECT_EQ(rate.waiting_calls, 0);
  const r4c::CircuitBreakerSnapshot fuse = breaker.snapshot();
  EXPECT_LE(fuse.failed_calls, fuse.buffered_calls);
  EXPECT_GT(classified.load(), 0u);
  const r4c::RetrySnapshot again = retry.snapshot();
  EXPECT_EQ(again.failed_with_retry + again.failed_without_retry, classified.load());
  (void)f.registry.reconfigure(base);
  EXPECT_EQ(limiter.config().limit_for_period(), 1000);
  EXPECT_EQ(breaker.config().sliding_window_size(), 20);
  EXPECT_EQ(timeout.config().timeout(), 1s);
  EXPECT_TRUE(breaker.config().ignore_on_types().empty());
  EXPECT_TRUE(retry.config().abort_on_types().empty());
  EXPECT_TRUE(throttle.config().refused_on_types().empty());
  EXPECT_EQ(throttle.snapshot().window, r4c::ThrottleConfig().window());
}

}  // namespace
