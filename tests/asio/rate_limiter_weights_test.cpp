// SPDX-License-Identifier: Apache-2.0
// The rate limiter's weighted asynchronous calls (<r4c/asio.hpp>): n permits from one
// reservation, waited for on the limiter's clock; a weight no period holds completes at once
// with R4C-USE-001.
#include "async_support.hpp"
#include "r4c/asio.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <asio/bind_executor.hpp>
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>
#include <exception>
#include <future>
#include <memory>
#include <string>

namespace {

using namespace std::chrono_literals;

// What a callback received.
using Outcome = r4c::testing::Answer;
using r4c::testing::succeeded_with;

class AsyncRateLimiterWeightsTest : public r4c::testing::AsyncPolicyTest<r4c::RateLimiter> {
 protected:
  AsyncRateLimiterWeightsTest()
      : AsyncPolicyTest([](const std::shared_ptr<r4c::ManualClock>& clock) {
          return r4c::RateLimiter(
              "bulk",
              r4c::RateLimiterConfig().limit_for_period(4).refresh_period(1s).timeout_duration(2s),
              clock);
        }) {}

  void TearDown() override {
    AsyncPolicyTest::TearDown();
    EXPECT_EQ(limiter_.snapshot().waiting_calls, 0);
  }

  r4c::RateLimiter& limiter_ = policy_;
};

TEST_F(AsyncRateLimiterWeightsTest, AWeightedCallStartsAtOnceWhenItsPermitsAreFree) {
  auto reply = limiter_.async_execute<std::string>(3, backend_.place("a"), asio::use_future);
  EXPECT_EQ(backend_.started("a"), 1);
  EXPECT_EQ(limiter_.snapshot().available_permissions, 1);
  backend_.complete("a", "ok");
  EXPECT_EQ(reply.get(), "ok");
}

TEST_F(AsyncRateLimiterWeightsTest, AWeightedCallWaitsOnTheClockForThePeriodThatCompletesIt) {
  ASSERT_TRUE(limiter_.try_acquire(3));
  Outcome outcome;
  limiter_.async_execute<std::string>(4, backend_.place("b"), on_io(outcome));
  EXPECT_EQ(backend_.started("b"), 0);
  EXPECT_EQ(limiter_.snapshot().available_permissions, -3);
  EXPECT_EQ(limiter_.snapshot().waiting_calls, 1);
  clock_->advance(999ms);
  poll();
  EXPECT_EQ(backend_.started("b"), 0);
  clock_->advance(1ms);
  poll();
  EXPECT_EQ(backend_.started("b"), 1);
  EXPECT_EQ(limiter_.snapshot().waiting_calls, 0);
  EXPECT_EQ(limiter_.snapshot().available_permissions, 1);
  backend_.complete("b", "ok");
  poll();
  ASSERT_TRUE(succeeded_with(outcome, "ok"));
}

TEST_F(AsyncRateLimiterWeightsTest, AWeightAboveTheLimitCompletesAtOnceWithR4CUse001) {
  auto reply = limiter_.async_execute<std::string>(5, backend_.place("c"), asio::use_future);
  ASSERT_EQ(reply.wait_for(0s), std::future_status::ready);
  const auto mistake = r4c::testing::exception_of<r4c::ConfigException>(reply);
  ASSERT_TRUE(mistake);
  EXPECT_EQ(mistake->code(), "R4C-USE-001");
  EXPECT_THAT(mistake->what(), ::testing::HasSubstr("asked for 5 permits at once; valid: 1 .. 4"));
  EXPECT_EQ(backend_.started("c"), 0);
  EXPECT_EQ(limiter_.snapshot().available_permissions, 4);
  EXPECT_EQ(limiter_.snapshot().rejected, 0u);
}

TEST_F(AsyncRateLimiterWeightsTest, AWeightedCallBeyondTheTimeoutIsRefusedAsOneCall) {
  ASSERT_TRUE(limiter_.try_acquire(4));
  // The next period's 4 at 1 s, the one after's at 2 s (2 s: within the timeout).
  Outcome first;
  Outcome second;
  limiter_.async_execute<std::string>(4, backend_.place("d"), on_io(first));
  limiter_.async_execute<std::string>(4, backend_.place("e"), on_io(second));
  // 4 more would need the period at 3 s.
  auto refused = limiter_.async_execute<std::string>(4, backend_.place("f"), asio::use_future);
  ASSERT_EQ(refused.wait_for(0s), std::future_status::ready);
  EXPECT_THROW(refused.get(), r4c::RequestNotPermittedException);
  EXPECT_EQ(limiter_.snapshot().rejected, 1u);
  EXPECT_EQ(limiter_.snapshot().available_permissions, -8);
  clock_->advance(1s);
  poll();
  EXPECT_EQ(backend_.started("d"), 1);
  EXPECT_EQ(backend_.started("e"), 0);
  clock_->advance(1s);
  poll();
  EXPECT_EQ(backend_.started("e"), 1);
  backend_.complete("d", "first");
  backend_.complete("e", "second");
  poll();
  EXPECT_EQ(first.value, "first");
  EXPECT_EQ(second.value, "second");
}

}  // namespace
