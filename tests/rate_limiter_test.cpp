// SPDX-License-Identifier: Apache-2.0
#include "r4c/rate_limiter.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

class RateLimiterTest : public ::testing::Test {
 protected:
  std::unique_ptr<r4c::RateLimiter> make(r4c::RateLimiterConfig config) {
    return std::make_unique<r4c::RateLimiter>("search", std::move(config), clock_);
  }
  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
};

TEST_F(RateLimiterTest, GivesLimitForPeriodPermitsPerPeriod) {
  auto limiter = make(r4c::RateLimiterConfig().limit_for_period(3).refresh_period(1s));
  EXPECT_TRUE(limiter->try_acquire());
  EXPECT_TRUE(limiter->try_acquire());
  EXPECT_TRUE(limiter->try_acquire());
  EXPECT_FALSE(limiter->try_acquire());
  clock_->advance(999ms);
  EXPECT_FALSE(limiter->try_acquire());
  clock_->advance(1ms);  // a new period
  EXPECT_EQ(limiter->snapshot().available_permissions, 3);
  EXPECT_TRUE(limiter->try_acquire());
  EXPECT_EQ(limiter->snapshot().rejected, 2u);
}

TEST_F(RateLimiterTest, UnusedPermitsDoNotAccumulate) {
  auto limiter = make(r4c::RateLimiterConfig().limit_for_period(2).refresh_period(1s));
  clock_->advance(10s);
  EXPECT_TRUE(limiter->try_acquire());
  EXPECT_TRUE(limiter->try_acquire());
  EXPECT_FALSE(limiter->try_acquire());
}

TEST_F(RateLimiterTest, WithoutATimeoutACallWithoutAPermitFailsAtOnce) {
  auto limiter = make(r4c::RateLimiterConfig().limit_for_period(1));
  limiter->acquire();
  bool called = false;
  try {
    limiter->execute([&] { called = true; });
    FAIL() << "not refused";
  } catch (const r4c::RequestNotPermittedException& e) {
    EXPECT_EQ(e.instance_id(), "search");
    EXPECT_THAT(e.what(), HasSubstr("rate limiter 'search' has no permit"));
  }
  EXPECT_FALSE(called);
  EXPECT_EQ(limiter->snapshot().rejected, 1u);
}

TEST_F(RateLimiterTest, ACallWaitsForTheNextPeriodOnTheClockWithinItsTimeout) {
  auto limiter =
      make(r4c::RateLimiterConfig().limit_for_period(1).refresh_period(1s).timeout_duration(2s));
  limiter->acquire();
  std::atomic<bool> done{false};
  std::thread caller([&] { limiter->execute([&] { done.store(true); }); });
  while (limiter->snapshot().waiting_calls == 0) std::this_thread::yield();
  EXPECT_EQ(limiter->snapshot().available_permissions, -1);  // reserved
  clock_->advance(500ms);
  std::this_thread::sleep_for(5ms);  // would have run by now if it did not wait for the clock
  EXPECT_FALSE(done.load());
  // Exact, whatever the scheduler did: the wait is still on the clock.
  EXPECT_EQ(limiter->snapshot().waiting_calls, 1);
  EXPECT_EQ(clock_->pending_tasks(), 1u);
  clock_->advance(500ms);
  caller.join();
  EXPECT_TRUE(done.load());
  EXPECT_EQ(limiter->snapshot().waiting_calls, 0);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
}

TEST_F(RateLimiterTest, ACallThatWouldWaitLongerThanItsTimeoutFailsAtOnce) {
  auto limiter =
      make(r4c::RateLimiterConfig().limit_for_period(1).refresh_period(1s).timeout_duration(500ms));
  limiter->acquire();
  EXPECT_THROW(limiter->acquire(), r4c::RequestNotPermittedException);
  EXPECT_EQ(limiter->snapshot().available_permissions, 0);  // nothing reserved
  EXPECT_EQ(clock_->pending_tasks(), 0u);
}

TEST_F(RateLimiterTest, ReservationsQueueAcrossPeriods) {
  auto limiter =
      make(r4c::RateLimiterConfig().limit_for_period(2).refresh_period(1s).timeout_duration(5s));
  limiter->acquire();
  limiter->acquire();
  std::vector<std::thread> callers;
  std::atomic<int> done{0};
  for (int i = 0; i < 4; ++i) {
    callers.emplace_back([&] {
      limiter->acquire();
      done.fetch_add(1);
    });
  }
  while (limiter->snapshot().waiting_calls < 4) std::this_thread::yield();
  EXPECT_EQ(limiter->snapshot().available_permissions, -4);
  clock_->advance(1s);
  while (done.load() < 2) std::this_thread::yield();
  std::this_thread::sleep_for(5ms);
  EXPECT_EQ(done.load(), 2);  // the other two hold permits of the period after
  EXPECT_EQ(limiter->snapshot().waiting_calls, 2);
  EXPECT_EQ(clock_->pending_tasks(), 2u);
  clock_->advance(1s);
  for (auto& caller : callers) caller.join();
  EXPECT_EQ(done.load(), 4);
}

TEST_F(RateLimiterTest, InvalidSettingsNameTheSettingAndTheRange) {
  auto code_of = [](auto&& set) {
    try {
      set();
    } catch (const r4c::ConfigException& e) {
      return e.code();
    }
    return std::string("none");
  };
  EXPECT_EQ(code_of([] { r4c::RateLimiterConfig().limit_for_period(0); }), "R4C-ATR-003");
  EXPECT_EQ(code_of([] { r4c::RateLimiterConfig().limit_for_period(1 << 23); }), "R4C-REG-001");
  EXPECT_EQ(code_of([] { r4c::RateLimiterConfig().refresh_period(999us); }), "R4C-REG-001");
  EXPECT_EQ(code_of([] { r4c::RateLimiterConfig().timeout_duration(-1ns); }), "R4C-REG-001");
  const r4c::RateLimiterConfig defaults;
  EXPECT_EQ(defaults.limit_for_period(), 50);
  EXPECT_EQ(defaults.refresh_period(), 1s);
  EXPECT_EQ(defaults.timeout_duration(), 0s);
}

TEST(RateLimiterConcurrencyTest, NeverGivesMorePermitsThanTheLimitInAPeriod) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::RateLimiter limiter("hot", r4c::RateLimiterConfig().limit_for_period(100), clock);
  std::atomic<int> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        if (limiter.try_acquire()) granted.fetch_add(1);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(granted.load(), 100);
  EXPECT_EQ(limiter.snapshot().rejected, 8u * 1000u - 100u);
}

}  // namespace
