// SPDX-License-Identifier: Apache-2.0
// Async calls whose operations complete on other threads, through the handler's associated
// executor, with callers that have no strand (a plain callback, asio::use_future, bound to a
// pool's executor where a hedge launches through it): r4c's own
// cancellations (a hedge's losers, a timeout's deadline) and the completions they race with run
// on different threads. Each test is a bounded stress test, meant for TSan and ASan; a race or a
// use-after-free is what fails them there, a lost or doubled answer everywhere.
#include <gtest/gtest.h>

#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/bind_executor.hpp>
#include <asio/dispatch.hpp>
#include <asio/error.hpp>
#include <asio/post.hpp>
#include <asio/thread_pool.hpp>
#include <asio/use_future.hpp>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "async_support.hpp"
#include "r4c/asio.hpp"

namespace {

using namespace std::chrono_literals;

// An operation that behaves as Asio's own do: it installs a cancellation handler on its slot,
// runs on a pool, clears the handler there and completes through the handler's associated
// executor (dispatch: inline when that executor is the system's or a future's). It completes
// `spin` after it started, so that a test can land completions around a deadline.
struct PooledOperation {
  asio::thread_pool* pool;
  int value;
  std::chrono::nanoseconds spin{0};
  std::shared_ptr<std::atomic<int>> cancellations = std::make_shared<std::atomic<int>>(0);

  template <class Handler>
  void operator()(Handler handler) const {
    auto slot = asio::get_associated_cancellation_slot(handler);
    if (slot.is_connected()) {
      slot.assign([cancellations = cancellations](asio::cancellation_type) {
        cancellations->fetch_add(1, std::memory_order_relaxed);
      });
    }
    const auto due = std::chrono::steady_clock::now() + spin;
    asio::post(*pool, [handler = std::move(handler), slot, value = value, due]() mutable {
      while (std::chrono::steady_clock::now() < due) std::this_thread::yield();
      if (slot.is_connected()) slot.clear();
      auto executor = asio::get_associated_executor(handler);
      asio::dispatch(executor, [handler = std::move(handler), value]() mutable {
        std::move(handler)(std::error_code(), value);
      });
    });
  }
};

class AsyncThreadingTest : public ::testing::Test {
 protected:
  void TearDown() override { pool_.join(); }

  r4c::ResilienceRegistry registry_ = r4c::ResilienceRegistry::builder().build();  // SystemClock
  asio::thread_pool pool_{2};
  long calls_ = r4c::testing::count_from_env("R4C_ASYNC_STRESS_CALLS", 3000);
};

// Fault: the hedge cancelled a losing attempt on the thread that closed the call while the
// loser's inner call cleared that attempt's slot on another (ASan: heap-use-after-free in
// cancellation_signal::emit; plain builds: SIGSEGV).
// The hedge tests bind their callers to the pool (still no strand: two threads): a hedge
// launches attempts through the caller's executor and may cancel a loser there after the
// answer, so the registry must outlive that executor's work (docs/async.md). With the system
// executor's threads, which no test can join, TSan saw the registry destroyed while a late
// launch's cancellation was still in AdaptiveLimit::complete.
TEST_F(AsyncThreadingTest, AHedgedLimitAnswersEveryFutureOnceWhileAttemptsCompleteOnAPool) {
  auto pipeline = r4c::Pipeline<int>::builder(registry_, "hedged")
                      .hedge([](r4c::HedgeConfig& h) { h.delay(20us).max_attempts(2); })
                      .adaptive_limit([](r4c::AdaptiveLimitConfig& a) { a.initial_limit(100); })
                      .build();
  for (long i = 0; i < calls_; ++i) {
    std::future<int> answer = pipeline.async_execute(PooledOperation{&pool_, static_cast<int>(i)},
                                                     asio::bind_executor(pool_, asio::use_future));
    ASSERT_EQ(answer.get(), static_cast<int>(i));
  }
  // Losing attempts may still be on the pool; they end without a caller.
  pool_.join();
  EXPECT_EQ(pipeline.adaptive_limit()->in_flight(), 0);
  EXPECT_EQ(registry_.clock()->pending_tasks(), 0u);
}

TEST_F(AsyncThreadingTest, AHedgedLimitAnswersEveryCallbackOnceWhileAttemptsCompleteOnAPool) {
  auto pipeline = r4c::Pipeline<int>::builder(registry_, "hedged")
                      .hedge([](r4c::HedgeConfig& h) { h.delay(20us).max_attempts(2); })
                      .adaptive_limit([](r4c::AdaptiveLimitConfig& a) { a.initial_limit(100); })
                      .build();
  std::atomic<long> answers{0};
  std::atomic<long> failures{0};
  for (long i = 0; i < calls_; ++i) {
    std::promise<void> done;
    pipeline.async_execute(PooledOperation{&pool_, 1},
                           asio::bind_executor(pool_, [&](std::exception_ptr e, int value) {
                             if (e || value != 1) failures.fetch_add(1);
                             answers.fetch_add(1);
                             done.set_value();
                           }));
    done.get_future().wait();
  }
  pool_.join();
  EXPECT_EQ(answers.load(), calls_);
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(pipeline.adaptive_limit()->in_flight(), 0);
}

// Fault: the timeout's deadline emitted on its operation's slot on one thread while the inner
// bulkhead call, completed on a pool thread, cleared it (TSan: a data race).
TEST_F(AsyncThreadingTest, ATimeoutAroundABulkheadAnswersOnceWhenCompletionsLandAroundTheDeadline) {
  auto pipeline = r4c::Pipeline<int>::builder(registry_, "timed")
                      .adaptive_limit([](r4c::AdaptiveLimitConfig& a) { a.initial_limit(100); })
                      .timeout([](r4c::TimeoutConfig& t) { t.timeout(50us); })
                      .bulkhead([](r4c::BulkheadConfig& b) { b.max_concurrent(100); })
                      .build();
  std::mt19937_64 random(r4c::testing::test_seed());
  std::uniform_int_distribution<int> spin_us(30, 70);  // around the deadline
  long timed_out = 0;
  long answered = 0;
  for (long i = 0; i < calls_; ++i) {
    std::promise<std::exception_ptr> done;
    pipeline.async_execute(PooledOperation{&pool_, 7, std::chrono::microseconds(spin_us(random))},
                           [&](std::exception_ptr e, int) { done.set_value(e); });
    std::exception_ptr failure = done.get_future().get();
    ++answered;
    if (failure) {
      EXPECT_TRUE(r4c::testing::holds_exception<r4c::CallTimeoutException>(failure));
      ++timed_out;
    }
  }
  pool_.join();
  EXPECT_EQ(answered, calls_);
  EXPECT_EQ(static_cast<long>(pipeline.timeout()->snapshot().timed_out), timed_out);
  EXPECT_EQ(pipeline.adaptive_limit()->in_flight(), 0);
  EXPECT_EQ(pipeline.bulkhead()->in_flight(), 0);
}

// Fault: the rate limiter's start() looked at its call after arming the wait without a
// reference of its own, while another thread's advance fired the wait, ran the operation and
// freed the call (ASan: heap-use-after-free).
TEST_F(AsyncThreadingTest, ARateLimitedFutureIsAnsweredOnceWhileAnotherThreadAdvancesTheClock) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::RateLimiter limiter(
      "paced",
      r4c::RateLimiterConfig().limit_for_period(1).refresh_period(1ms).timeout_duration(1h), clock);
  std::atomic<bool> stop{false};
  std::thread advancer([&] {
    while (!stop.load()) clock->advance(1ms);
  });
  auto op = [](auto handler) { std::move(handler)(std::error_code(), 5); };
  for (long i = 0; i < calls_; ++i) {
    std::future<int> answer = limiter.async_execute<int>(op, asio::use_future);
    ASSERT_EQ(answer.get(), 5);
  }
  stop.store(true);
  advancer.join();
  EXPECT_EQ(limiter.snapshot().waiting_calls, 0);
  EXPECT_EQ(clock->pending_tasks(), 0u);
}

// Fault: behind a bulkhead or a timeout an error code reached the limit as an exception_ptr, and
// is_drop(exception_ptr) consulted drop_on only, never drop_on_error (the limit stayed 10).
class AsyncDropBehindAnInnerLayerTest : public ::testing::TestWithParam<std::string> {};

TEST_P(AsyncDropBehindAnInnerLayerTest, AnErrorCodeThatIsADropStaysADropBehindIt) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::ResilienceRegistry registry =
      r4c::testing::registry(clock)
          .adaptive_limit_defaults([](r4c::AdaptiveLimitConfig& a) { a.min_window_samples(1); })
          .build();
  auto builder = r4c::Pipeline<std::string>::builder(registry, "orders")
                     .adaptive_limit([](r4c::AdaptiveLimitConfig& a) {
                       a.algorithm(r4c::LimitAlgorithm::aimd).initial_limit(10);
                     });
  if (GetParam().find("timeout") != std::string::npos) {
    builder.timeout([](r4c::TimeoutConfig& t) { t.timeout(1h); });
  }
  if (GetParam().find("bulkhead") != std::string::npos) builder.bulkhead();
  auto orders = builder.build();
  r4c::testing::AsyncBackend backend;
  std::future<std::string> answer = orders.async_execute(backend.place("a"), asio::use_future);
  clock->advance(1s);
  backend.fail("a", asio::error::timed_out);
  EXPECT_THROW(answer.get(), asio::system_error);
  EXPECT_EQ(orders.adaptive_limit()->snapshot().limit, 9);
  EXPECT_TRUE(orders.adaptive_limit()->snapshot().window_dropped);
}

INSTANTIATE_TEST_SUITE_P(InnerLayers, AsyncDropBehindAnInnerLayerTest,
                         ::testing::Values("nothing", "bulkhead", "timeout", "timeout_bulkhead"));

}  // namespace
