// SPDX-License-Identifier: Apache-2.0
#include "r4c/rate_limiter.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

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
  ASSERT_NO_FATAL_FAILURE(r4c::test::expect_refused<r4c::RequestNotPermittedException>(
      [&](auto method) { limiter->execute(method); }, "search",
      "rate limiter 'search' has no permit"));
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

TEST_F(RateLimiterTest, AWeightedTryAcquireTakesThatManyPermitsOrNone) {
  auto limiter = make(r4c::RateLimiterConfig().limit_for_period(5).refresh_period(1s));
  EXPECT_TRUE(limiter->try_acquire(3));
  EXPECT_EQ(limiter->snapshot().available_permissions, 2);
  EXPECT_FALSE(limiter->try_acquire(3));  // two left: takes none
  EXPECT_EQ(limiter->snapshot().available_permissions, 2);
  EXPECT_EQ(limiter->snapshot().rejected, 1u);  // one refused call, whatever its weight
  EXPECT_TRUE(limiter->try_acquire(2));
  EXPECT_FALSE(limiter->try_acquire());
  clock_->advance(1s);
  EXPECT_TRUE(limiter->try_acquire(5));  // a whole period at once
  EXPECT_EQ(limiter->snapshot().available_permissions, 0);
}

// A weight above limit_for_period could never be granted: without the check, a call with a
// timeout would reserve into the future, or wait forever.
TEST_F(RateLimiterTest, AWeightNoPeriodCanGrantIsRefusedAtOnceWithR4CUse001) {
  auto limiter =
      make(r4c::RateLimiterConfig().limit_for_period(5).refresh_period(1s).timeout_duration(1h));
  auto error_of = [](const std::function<void()>& call) {
    return std::string(r4c::test::config_error(call).what());
  };
  const std::string above = error_of([&] { limiter->acquire(6); });
  EXPECT_THAT(above, ::testing::StartsWith("R4C-USE-001: rate limiter 'search'"));
  EXPECT_THAT(above, HasSubstr("asked for 6 permits at once; valid: 1 .. 5"));
  EXPECT_THAT(error_of([&] { (void)limiter->try_acquire(6); }), HasSubstr("R4C-USE-001"));
  EXPECT_THAT(error_of([&] { (void)limiter->try_acquire(0); }), HasSubstr("asked for 0 permits"));
  EXPECT_THAT(error_of([&] { limiter->execute(-1, [] {}); }), HasSubstr("R4C-USE-001"));
  const r4c::RateLimiterSnapshot after = limiter->snapshot();
  EXPECT_EQ(after.available_permissions, 5);  // nothing taken
  EXPECT_EQ(after.rejected, 0u);              // a mistake, not a refusal
  EXPECT_EQ(after.waiting_calls, 0);
  EXPECT_EQ(clock_->pending_tasks(), 0u);  // nothing waits
}

TEST_F(RateLimiterTest, AWeightedReservationWaitsForThePeriodThatHoldsItsLastPermit) {
  auto limiter =
      make(r4c::RateLimiterConfig().limit_for_period(5).refresh_period(1s).timeout_duration(3s));
  clock_->advance(250ms);  // reservations end on period boundaries, not a period from now
  ASSERT_TRUE(limiter->try_acquire(4));
  using Kind = r4c::RateLimiter::Reservation::Kind;
  // One left: 5 more need 4 of the next period, which begins at 1 s.
  const r4c::RateLimiter::Reservation first = limiter->reserve_permit(5);
  ASSERT_EQ(first.kind, Kind::later);
  EXPECT_EQ(first.ready_at, clock_->now() + 750ms);
  EXPECT_EQ(limiter->snapshot().available_permissions, -4);
  // 5 more: 4 owed to the first, so its last permit is the 9th after now: 2 periods ahead.
  const r4c::RateLimiter::Reservation second = limiter->reserve_permit(5);
  ASSERT_EQ(second.kind, Kind::later);
  EXPECT_EQ(second.ready_at, clock_->now() + 1750ms);
  // 5 more: the 14th permit comes with the period at 3 s, 2750 ms from now, within 3 s.
  const r4c::RateLimiter::Reservation third = limiter->reserve_permit(5);
  ASSERT_EQ(third.kind, Kind::later);
  EXPECT_EQ(third.ready_at, clock_->now() + 2750ms);
  // The fourth would wait 3750 ms: refused, nothing reserved.
  EXPECT_EQ(limiter->reserve_permit(5).kind, Kind::refused);
  EXPECT_EQ(limiter->snapshot().available_permissions, -14);
  EXPECT_EQ(limiter->snapshot().waiting_calls, 3);
  for (int i = 0; i < 3; ++i) limiter->end_wait();
  clock_->advance(2750ms);  // the period at 3 s: -14 + 3 * 5
  EXPECT_EQ(limiter->snapshot().available_permissions, 1);
}

TEST_F(RateLimiterTest, AWeightedAcquireWaitsOnTheClockForItsPermits) {
  auto limiter =
      make(r4c::RateLimiterConfig().limit_for_period(3).refresh_period(1s).timeout_duration(2s));
  limiter->acquire(2);
  std::atomic<bool> done{false};
  std::thread caller([&] { limiter->execute(3, [&] { done.store(true); }); });
  // The waiter is counted before its wait is on the clock: wait for the wait.
  while (clock_->pending_tasks() == 0) std::this_thread::yield();
  EXPECT_EQ(limiter->snapshot().waiting_calls, 1);
  EXPECT_EQ(limiter->snapshot().available_permissions, -2);
  clock_->advance(999ms);
  EXPECT_EQ(clock_->pending_tasks(), 1u);  // exact: still on the clock
  EXPECT_FALSE(done.load());
  clock_->advance(1ms);
  caller.join();
  EXPECT_TRUE(done.load());
  EXPECT_EQ(limiter->snapshot().available_permissions, 1);
  EXPECT_EQ(limiter->snapshot().waiting_calls, 0);
}

TEST_F(RateLimiterTest, DrainGivesUpThePermitsLeftInThePeriodOnly) {
  auto limiter = make(r4c::RateLimiterConfig().limit_for_period(5).refresh_period(1s));
  ASSERT_TRUE(limiter->try_acquire());
  EXPECT_EQ(limiter->drain(), 4);
  EXPECT_EQ(limiter->snapshot().available_permissions, 0);
  EXPECT_FALSE(limiter->try_acquire());
  EXPECT_EQ(limiter->drain(), 0);
  clock_->advance(1s);
  EXPECT_EQ(limiter->snapshot().available_permissions, 5);  // the next period refills
  clock_->advance(3s);
  EXPECT_EQ(limiter->drain(), 5);  // periods that went by unused refill before the drain
  EXPECT_EQ(limiter->snapshot().available_permissions, 0);
}

TEST_F(RateLimiterTest, DrainLeavesReservedPermitsOwed) {
  auto limiter =
      make(r4c::RateLimiterConfig().limit_for_period(2).refresh_period(1s).timeout_duration(2s));
  ASSERT_TRUE(limiter->try_acquire(2));
  ASSERT_EQ(limiter->reserve_permit().kind, r4c::RateLimiter::Reservation::Kind::later);
  EXPECT_EQ(limiter->drain(), 0);
  EXPECT_EQ(limiter->snapshot().available_permissions, -1);  // the waiter keeps its permit
  limiter->end_wait();
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
