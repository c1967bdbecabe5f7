// SPDX-License-Identifier: Apache-2.0
// Operating the rate limiter, the circuit breaker and the timeout (docs/operations.md):
// observe mode and live reconfiguration through registry.reconfigure(), on a ManualClock; the
// loop test reconfigures while 8 threads call each of them and runs under TSan.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "r4c/metrics.hpp"
#include "r4c/registry.hpp"
#include "test_seed.hpp"

namespace {

using ::testing::HasSubstr;
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

}  // namespace
