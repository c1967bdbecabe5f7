// SPDX-License-Identifier: Apache-2.0
// Generated wrappers, asynchronous methods (asio::awaitable<T>): a call holds its slots until
// its coroutine completes, a full limit fails at once, cancelling frees the slot without a
// sample; the ManualClock scenario of resilience4cata 0.6.0's "Adaptive limit" page runs through
// a generated wrapper.
#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/system_error.hpp>
#include <asio/use_future.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "fakes.hpp"
#include "r4c/asio.hpp"
#include "r4c/r4c.hpp"
#include "r4c/resilient.hpp"

namespace gen_test {
namespace {

using namespace std::chrono_literals;

template <class T>
bool ready(const std::future<T>& f) {
  return f.wait_for(0s) == std::future_status::ready;
}

class AsyncWrapperTest : public ::testing::Test {
 protected:
  asio::io_context io_;
  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
};

// "Probarlo con ManualClock": two pending calls hold the two slots of initial_limit = 2, the
// third fails at once, and completing both after a second ends the window.
TEST_F(AsyncWrapperTest, TheAdaptiveLimitPagesManualClockScenario) {
  auto registry = r4c::testing::registry(clock_)
                      .adaptive_limit_defaults([](r4c::AdaptiveLimitConfig& a) {
                        a.min_window_samples(1);  // end a window after a single call
                      })
                      .build();
  auto backend = std::make_shared<FakeSearch>();
  std::unique_ptr<shop::SearchClient> orders =
      r4c::make_resilient<shop::SearchClient>(backend, registry);
  r4c::AdaptiveLimitHandle limit = registry.adaptive_limit("orders-async");

  std::future<std::string> a = asio::co_spawn(io_, orders->place_async("a"), asio::use_future);
  std::future<std::string> b = asio::co_spawn(io_, orders->place_async("b"), asio::use_future);
  std::future<std::string> c = asio::co_spawn(io_, orders->place_async("c"), asio::use_future);
  io_.poll();
  EXPECT_EQ(limit.in_flight(), 2);  // a and b are pending: each holds a slot
  ASSERT_TRUE(ready(c));            // full: rejected at once
  EXPECT_THROW(c.get(), r4c::LimitExceededException);
  EXPECT_EQ(backend->pending.count("c"), 0u);  // never started

  clock_->advance(1s);                   // the calls took 1 s; the window is over
  backend->pending.at("a")("placed a");  // ends the window
  backend->pending.at("b")("placed b");
  io_.poll();
  EXPECT_EQ(a.get(), "placed a");
  EXPECT_EQ(b.get(), "placed b");
  const r4c::AdaptiveLimitSnapshot snap = limit.snapshot();
  EXPECT_EQ(snap.windows, 1u);
  EXPECT_EQ(snap.window_latency, 1s);
  EXPECT_EQ(snap.in_flight, 0);
  EXPECT_EQ(clock_->pending_tasks(), 0u);  // the limit schedules nothing
}

TEST_F(AsyncWrapperTest, CancellingACallFreesItsSlotWithoutASample) {
  auto registry = r4c::testing::registry(clock_).build();
  auto backend = std::make_shared<FakeSearch>();
  auto orders = r4c::make_resilient<shop::SearchClient>(backend, registry);
  r4c::AdaptiveLimitHandle limit = registry.adaptive_limit("orders-async");
  asio::cancellation_signal cancel;
  std::future<std::string> a = asio::co_spawn(
      io_, orders->place_async("a"), asio::bind_cancellation_slot(cancel.slot(), asio::use_future));
  io_.poll();
  EXPECT_EQ(limit.in_flight(), 1);
  cancel.emit(asio::cancellation_type::terminal);
  io_.poll();
  ASSERT_TRUE(ready(a));
  try {
    a.get();
    FAIL() << "a cancelled call completed normally";
  } catch (const asio::system_error& e) {
    EXPECT_EQ(e.code(), asio::error::operation_aborted);
  }
  EXPECT_EQ(limit.in_flight(), 0);
  EXPECT_EQ(limit.snapshot().samples + limit.snapshot().window_samples, 0u);
}

class FakeJobs : public Jobs {
 public:
  asio::awaitable<std::string> run(const std::string& job) override {
    received.push_back(job);
    if (received.size() == 1) throw std::runtime_error("the first attempt fails");
    co_return "ran " + job;
  }
  asio::awaitable<void> ping() override {
    co_await asio::async_initiate<const asio::use_awaitable_t<>&, void()>(
        [this](auto handler) {
          auto shared = std::make_shared<decltype(handler)>(std::move(handler));
          pong = [shared] { (*shared)(); };
        },
        asio::use_awaitable);
  }
  asio::awaitable<std::string> echo(std::string text) override {
    received.push_back(text);
    if (received.size() == 1) throw std::runtime_error("the first attempt fails");
    co_return text;
  }
  asio::awaitable<std::string> upload(std::unique_ptr<Order> order) override {
    co_return order->item + " uploaded";
  }
  std::vector<std::string> received;
  std::function<void()> pong;
};

TEST_F(AsyncWrapperTest, ARetriedMethodPassesItsArgumentAgainAfterItsWaitOnTheClock) {
  auto registry = r4c::testing::registry(clock_).build();
  auto backend = std::make_shared<FakeJobs>();
  auto jobs = r4c::make_resilient<Jobs>(backend, registry);
  const std::string job = "nightly report";
  std::future<std::string> done = asio::co_spawn(
      io_, [&]() -> asio::awaitable<std::string> { co_return co_await jobs->run(job); },
      asio::use_future);
  io_.poll();
  EXPECT_EQ(backend->received.size(), 1u);
  EXPECT_FALSE(ready(done));  // waiting 10 ms on the clock
  clock_->advance(10ms);
  io_.poll();
  ASSERT_TRUE(ready(done));
  EXPECT_EQ(done.get(), "ran nightly report");
  EXPECT_EQ(backend->received, (std::vector<std::string>{job, job}));
  EXPECT_EQ(registry.retry("gen_test::Jobs#run(const std::string&)").snapshot().retries, 1u);
}

TEST_F(AsyncWrapperTest, ARetriedMethodCopiesItsByValueArgumentForEachAttempt) {
  auto registry = r4c::testing::registry(clock_).build();
  auto backend = std::make_shared<FakeJobs>();
  auto jobs = r4c::make_resilient<Jobs>(backend, registry);
  const std::string long_text(64, 'x');  // on the heap
  std::future<std::string> short_one = asio::co_spawn(io_, jobs->echo("short"), asio::use_future);
  io_.poll();
  ASSERT_TRUE(ready(short_one));
  EXPECT_EQ(short_one.get(), "short");
  backend->received.clear();
  io_.restart();  // the first call left the io_context without work: poll() stopped it
  std::future<std::string> long_one = asio::co_spawn(io_, jobs->echo(long_text), asio::use_future);
  io_.poll();
  ASSERT_TRUE(ready(long_one));
  EXPECT_EQ(long_one.get(), long_text);
  EXPECT_EQ(backend->received, (std::vector<std::string>{long_text, long_text}));
}

TEST_F(AsyncWrapperTest, AMoveOnlyArgumentReachesTheDelegateThroughARateLimiter) {
  auto registry = r4c::testing::registry(clock_).build();
  auto jobs = r4c::make_resilient<Jobs>(std::make_shared<FakeJobs>(), registry);
  std::future<std::string> done =
      asio::co_spawn(io_, jobs->upload(std::make_unique<Order>(Order{"report"})), asio::use_future);
  io_.poll();
  ASSERT_TRUE(ready(done));
  EXPECT_EQ(done.get(), "report uploaded");
  EXPECT_EQ(registry.rate_limiter("gen_test::Jobs#upload(std::unique_ptr<gen_test::Order>)")
                .snapshot()
                .available_permissions,
            49);
}

TEST_F(AsyncWrapperTest, AVoidMethodHoldsItsBulkheadSlotUntilItCompletes) {
  auto registry = r4c::testing::registry(clock_).build();
  auto backend = std::make_shared<FakeJobs>();
  auto jobs = r4c::make_resilient<Jobs>(backend, registry);
  std::future<void> first = asio::co_spawn(io_, jobs->ping(), asio::use_future);
  io_.poll();
  std::future<void> second = asio::co_spawn(io_, jobs->ping(), asio::use_future);
  io_.poll();
  ASSERT_TRUE(ready(second));
  EXPECT_THROW(second.get(), r4c::BulkheadFullException);
  EXPECT_FALSE(ready(first));
  backend->pong();
  io_.poll();
  ASSERT_TRUE(ready(first));
  first.get();
  EXPECT_EQ(registry.bulkhead("gen_test::Jobs#ping()").in_flight(), 0);
}

}  // namespace
}  // namespace gen_test
