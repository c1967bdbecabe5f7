// SPDX-License-Identifier: Apache-2.0
// The retry's features of resilience4j's level, asynchronously: fail_after_max_attempts, the
// interval functions, exception predicates, the void result predicate and on_attempt behave as
// in Retry::execute, with waits on a ManualClock (no thread sleeps).
#include <gtest/gtest.h>

#include <asio/bind_executor.hpp>
#include <asio/io_context.hpp>
#include <chrono>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "async_support.hpp"
#include "r4c/asio.hpp"

namespace {

using namespace std::chrono_literals;
using r4c::testing::holds_exception;

struct Busy : std::runtime_error {
  explicit Busy(const char* what = "busy") : std::runtime_error(what) {}
};

// What a callback received.
using Outcome = r4c::testing::Answer;

class AsyncRetryFeaturesTest : public ::testing::Test {
 protected:
  void TearDown() override {
    poll();
    EXPECT_EQ(clock_->pending_tasks(), 0u);
  }

  std::unique_ptr<r4c::Retry> make(r4c::RetryConfig config) {
    return std::make_unique<r4c::Retry>("orders", std::move(config), clock_);
  }
  void poll() { r4c::testing::poll(io_); }
  // A callback on io_ recording into `outcome`.
  auto on_io(Outcome& outcome) { return r4c::testing::on(io_, outcome); }
  // Advances the clock by `wait` and runs what became ready.
  void pass(std::chrono::nanoseconds wait) {
    clock_->advance(wait);
    poll();
  }

  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
  asio::io_context io_;
  r4c::testing::AsyncBackend backend_;
};

TEST_F(AsyncRetryFeaturesTest, FailAfterMaxAttemptsCompletesWithMaxRetriesExceeded) {
  auto retry = make(r4c::RetryConfig()
                        .max_attempts(2)
                        .wait(10ms)
                        .retry_on_result<std::string>([](const std::string& v) { return v == "?"; })
                        .fail_after_max_attempts(true));
  Outcome outcome;
  retry->async_execute<std::string>(backend_.place("a"), on_io(outcome));
  backend_.complete("a", "?");
  pass(10ms);
  backend_.complete("a", "?");
  poll();
  ASSERT_EQ(outcome.calls, 1);
  EXPECT_TRUE(holds_exception<r4c::MaxRetriesExceededException>(outcome.failure));
  EXPECT_EQ(retry->snapshot().failed_with_retry, 1u);
}

TEST_F(AsyncRetryFeaturesTest, AnIntervalFunctionOfTheOutcomeGivesTheExactWait) {
  auto retry = make(r4c::RetryConfig().max_attempts(3).interval_function(
      [](int attempt, const r4c::RetryOutcome& outcome) {
        return outcome.failure && holds_exception<Busy>(outcome.failure) ? attempt * 50ms : 1h;
      }));
  Outcome outcome;
  retry->async_execute<std::string>(backend_.place("a"), on_io(outcome));
  for (int attempt = 1; attempt <= 2; ++attempt) {  // waits of 50 and 100 ms, to the ns
    backend_.fail("a", std::make_exception_ptr(Busy()));
    pass(attempt * 50ms - 1ns);
    EXPECT_EQ(backend_.started("a"), attempt);
    pass(1ns);
    EXPECT_EQ(backend_.started("a"), attempt + 1);
  }
  backend_.complete("a", "ok");
  poll();
  EXPECT_EQ(outcome.value, "ok");
}

TEST_F(AsyncRetryFeaturesTest, ExceptionPredicatesDecideAsInExecute) {
  auto retry = make(r4c::RetryConfig()
                        .max_attempts(3)
                        .wait(10ms)
                        .retry_on<Busy>([](const Busy& e) { return std::string(e.what()) != "x"; })
                        .abort_on([](const std::exception_ptr& e) {
                          return holds_exception<std::logic_error>(e);
                        }));
  Outcome retried;
  retry->async_execute<std::string>(backend_.place("a"), on_io(retried));
  backend_.fail("a", std::make_exception_ptr(Busy()));
  pass(10ms);
  EXPECT_EQ(backend_.started("a"), 2);
  backend_.complete("a", "ok");
  Outcome not_retried;
  retry->async_execute<std::string>(backend_.place("b"), on_io(not_retried));
  backend_.fail("b", std::make_exception_ptr(Busy("x")));
  Outcome aborted;
  retry->async_execute<std::string>(backend_.place("c"), on_io(aborted));
  backend_.fail("c", std::make_exception_ptr(std::logic_error("bug")));
  poll();
  EXPECT_EQ(retried.value, "ok");
  EXPECT_TRUE(holds_exception<Busy>(not_retried.failure));
  EXPECT_TRUE(holds_exception<std::logic_error>(aborted.failure));
  EXPECT_EQ(backend_.started("b"), 1);
  EXPECT_EQ(backend_.started("c"), 1);
}

TEST_F(AsyncRetryFeaturesTest, AVoidResultPredicateRetriesAVoidOperation) {
  int written = 0;
  auto retry = make(r4c::RetryConfig().max_attempts(5).wait(10ms).retry_on_void_result(
      [&] { return written < 2; }));
  int calls = 0;
  std::exception_ptr failure;
  retry->async_execute<void>(
      [&](auto handler) {
        ++written;
        std::move(handler)(std::exception_ptr());
      },
      asio::bind_executor(io_, [&](std::exception_ptr e) {
        ++calls;
        failure = e;
      }));
  pass(10ms);
  ASSERT_EQ(calls, 1);
  EXPECT_FALSE(failure);
  EXPECT_EQ(written, 2);
  EXPECT_EQ(retry->snapshot().successful_with_retry, 1u);
}

TEST_F(AsyncRetryFeaturesTest, AnAttemptListenerHearsEveryAsynchronousAttempt) {
  auto retry = make(r4c::RetryConfig().max_attempts(2).wait(20ms));
  std::vector<r4c::RetryAttemptEvent> events;
  r4c::Subscription s =
      retry->on_attempt([&](const r4c::RetryAttemptEvent& e) { events.push_back(e); });
  Outcome outcome;
  retry->async_execute<std::string>(backend_.place("a"), on_io(outcome));
  backend_.fail("a", std::make_exception_ptr(Busy()));
  pass(20ms);
  backend_.fail("a", std::make_exception_ptr(Busy()));
  poll();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_TRUE(events[0].retrying);
  EXPECT_EQ(events[0].wait, 20ms);
  EXPECT_TRUE(holds_exception<Busy>(events[0].failure));
  EXPECT_EQ(events[1].attempt, 2);
  EXPECT_TRUE(events[1].failed);
  EXPECT_FALSE(events[1].retrying);
}

}  // namespace
