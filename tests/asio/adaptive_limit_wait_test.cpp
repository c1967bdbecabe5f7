// SPDX-License-Identifier: Apache-2.0
// The adaptive limit's asynchronous wait on a ManualClock: a waiting call holds no thread, gets
// a freed slot handed to it, times out on the limit's clock and honours Asio cancellation.
#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "../partition_support.hpp"
#include "async_support.hpp"
#include "r4c/asio.hpp"

namespace {

using namespace std::chrono_literals;

class AsyncLimitWaitTest : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_EQ(clock_->pending_tasks(), 0u); }

  auto recorder(std::optional<std::exception_ptr>& failure, std::string& value) {
    return [&failure, &value](std::exception_ptr e, std::string v) {
      failure = e;
      value = std::move(v);
    };
  }
  // A call on limit_ for "a", answered on io_ into `failure` and `value`.
  void call_a(std::optional<std::exception_ptr>& failure, std::string& value) {
    limit_.async_execute<std::string>(backend_.place("a"),
                                      asio::bind_executor(io_, recorder(failure, value)));
  }

  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit_{"async-wait",
                            r4c::AdaptiveLimitConfig().initial_limit(1).max_wait(10ms), clock_};
  asio::io_context io_;
  r4c::testing::AsyncBackend backend_;
};

TEST_F(AsyncLimitWaitTest, AFreedSlotIsHandedToTheWaitingCall) {
  r4c::Permit held = limit_.try_acquire();
  std::optional<std::exception_ptr> failure;
  std::string value;
  call_a(failure, value);
  io_.poll();
  EXPECT_FALSE(backend_.has("a"));  // waiting, on no thread
  EXPECT_EQ(limit_.snapshot().waiting, 1);
  clock_->advance(4ms);
  held.on_ignore();  // handed over: the operation starts on the caller's executor
  r4c::testing::poll(io_);
  ASSERT_TRUE(backend_.has("a"));
  EXPECT_EQ(limit_.in_flight(), 1);
  backend_.complete("a", "placed");
  r4c::testing::poll(io_);
  ASSERT_TRUE(failure.has_value());
  EXPECT_FALSE(*failure);
  EXPECT_EQ(value, "placed");
  const r4c::AdaptiveLimitSnapshot snapshot = limit_.snapshot();
  EXPECT_EQ(snapshot.in_flight, 0);
  EXPECT_EQ(snapshot.waits_granted, 1u);
  EXPECT_EQ(snapshot.wait_time, 4ms);
}

// Live reconfiguration (issue 19): with max_wait back to 0 the waiting call keeps its place and
// is granted, a new one fails at once; on again, calls wait again.
TEST_F(AsyncLimitWaitTest, MaxWaitChangesOnTheLiveLimitKeepingTheWaitingCall) {
  r4c::Permit held = limit_.try_acquire();
  std::optional<std::exception_ptr> failure;
  std::string value;
  call_a(failure, value);
  io_.poll();
  EXPECT_EQ(limit_.snapshot().waiting, 1);
  const r4c::AdaptiveLimitConfig config = limit_.config();
  limit_.reconfigure(r4c::AdaptiveLimitConfig(config).max_wait(0ms));
  EXPECT_FALSE(limit_.waits());
  std::optional<std::exception_ptr> at_once;
  std::string ignored;
  limit_.async_execute<std::string>(backend_.place("b"),
                                    asio::bind_executor(io_, recorder(at_once, ignored)));
  r4c::testing::poll(io_);
  ASSERT_TRUE(at_once.has_value());
  EXPECT_TRUE(*at_once);  // rejected at once: the limit is full and calls no longer wait
  EXPECT_FALSE(backend_.has("b"));
  held.on_ignore();  // the call that was waiting is granted
  r4c::testing::poll(io_);
  ASSERT_TRUE(backend_.has("a"));
  backend_.complete("a", "placed");
  r4c::testing::poll(io_);
  ASSERT_TRUE(failure.has_value());
  EXPECT_FALSE(*failure);
  EXPECT_EQ(limit_.in_flight(), 0);

  limit_.reconfigure(config);  // waiting again
  EXPECT_TRUE(limit_.waits());
  held = limit_.try_acquire();
  std::optional<std::exception_ptr> waited;
  call_a(waited, value);
  r4c::testing::poll(io_);
  EXPECT_EQ(limit_.snapshot().waiting, 1);
  clock_->advance(10ms);  // times out after the restored max_wait
  r4c::testing::poll(io_);
  ASSERT_TRUE(waited.has_value());
  EXPECT_TRUE(*waited);
  held.on_ignore();
  EXPECT_EQ(limit_.in_flight(), 0);
}

TEST_F(AsyncLimitWaitTest, AWaitTimesOutOnTheLimitsClock) {
  r4c::Permit held = limit_.try_acquire();
  std::optional<std::exception_ptr> failure;
  std::string value;
  call_a(failure, value);
  clock_->advance(10ms - 1ns);
  io_.poll();
  EXPECT_FALSE(failure.has_value());
  clock_->advance(1ns);
  r4c::testing::poll(io_);
  ASSERT_TRUE(failure.has_value());
  EXPECT_THROW(std::rethrow_exception(*failure), r4c::LimitWaitTimeoutException);
  EXPECT_FALSE(backend_.has("a"));
  EXPECT_EQ(limit_.snapshot().rejected_by_reason[static_cast<int>(r4c::RejectReason::wait_timeout)],
            1u);
}

TEST_F(AsyncLimitWaitTest, CancellingAWaitingCallCompletesItAtOnceAndLeavesTheQueue) {
  for (asio::cancellation_type type :
       {asio::cancellation_type::terminal, asio::cancellation_type::partial}) {
    r4c::Permit held = limit_.try_acquire();
    asio::cancellation_signal signal;
    std::optional<std::exception_ptr> failure;
    std::string value;
    limit_.async_execute<std::string>(
        backend_.place("a"),
        asio::bind_cancellation_slot(signal.slot(),
                                     asio::bind_executor(io_, recorder(failure, value))));
    r4c::testing::poll(io_);
    signal.emit(type);
    r4c::testing::poll(io_);
    ASSERT_TRUE(failure.has_value());
    EXPECT_TRUE(r4c::testing::aborted(*failure));
    EXPECT_EQ(limit_.snapshot().waiting, 0);
    held.on_ignore();
    EXPECT_EQ(limit_.in_flight(), 0);  // nobody was handed the slot
    EXPECT_FALSE(backend_.has("a"));
  }
  EXPECT_EQ(limit_.snapshot().rejected_by_reason[static_cast<int>(r4c::RejectReason::cancelled)],
            2u);
}

TEST_F(AsyncLimitWaitTest, ACoroutineWaitsForItsSlotToo) {
  r4c::Permit held = limit_.try_acquire();
  std::optional<std::exception_ptr> failure;
  std::string value;
  asio::co_spawn(io_, limit_.co_execute([]() -> asio::awaitable<std::string> { co_return "ran"; }),
                 [&](std::exception_ptr e, std::string v) {
                   failure = e;
                   value = std::move(v);
                 });
  io_.poll();
  EXPECT_FALSE(failure.has_value());
  EXPECT_EQ(limit_.snapshot().waiting, 1);
  held.on_ignore();
  r4c::testing::poll(io_);
  ASSERT_TRUE(failure.has_value());
  EXPECT_FALSE(*failure);
  EXPECT_EQ(value, "ran");
  EXPECT_EQ(limit_.in_flight(), 0);
}

// A pipeline's asynchronous call says its class to the pipeline's limit; with max_wait, a bulk
// call waits behind the class's share and gets the slot a release frees.
TEST_F(AsyncLimitWaitTest, APipelinesAsyncCallSaysItsClass) {
  r4c::ResilienceRegistry registry = r4c::testing::registry(clock_).build();
  auto pipeline = r4c::Pipeline<std::string>::builder(registry, "classes")
                      .adaptive_limit([](r4c::AdaptiveLimitConfig& a) {
                        a.initial_limit(2).min_limit(2).max_limit(2).max_wait(10ms);
                      })
                      .build();
  r4c::AdaptiveLimit& limit = *pipeline.adaptive_limit();
  r4c::Permit held = limit.try_acquire();  // bulk's share of 2 is 1: full for bulk
  std::optional<std::exception_ptr> bulk_failure;
  std::string bulk_value;
  pipeline.async_execute(r4c::CallClass::bulk, backend_.place("bulk"),
                         asio::bind_executor(io_, recorder(bulk_failure, bulk_value)));
  std::optional<std::exception_ptr> critical_failure;
  std::string critical_value;
  pipeline.async_execute(r4c::CallClass::critical, backend_.place("critical"),
                         asio::bind_executor(io_, recorder(critical_failure, critical_value)));
  io_.poll();
  EXPECT_TRUE(backend_.has("critical"));  // within the whole limit
  EXPECT_FALSE(backend_.has("bulk"));     // waiting
  EXPECT_EQ(limit.snapshot().waiting, 1);
  backend_.complete("critical", "c");
  held.on_ignore();  // in flight 0: the bulk waiter gets its slot
  r4c::testing::poll(io_);
  ASSERT_TRUE(backend_.has("bulk"));
  backend_.complete("bulk", "b");
  r4c::testing::poll(io_);
  ASSERT_TRUE(bulk_failure.has_value() && critical_failure.has_value());
  EXPECT_FALSE(*bulk_failure);
  EXPECT_FALSE(*critical_failure);
  EXPECT_EQ(bulk_value + critical_value, "bc");
  EXPECT_EQ(limit.snapshot().waits_granted, 1u);
  EXPECT_EQ(limit.in_flight(), 0);
}

}  // namespace

namespace {

// Granted in the queue, then cancelled before its operation ran (the grant's step not yet run
// on the caller's executor): operation_aborted, counted `cancelled`, the operation never
// started and the slot given back.
TEST_F(AsyncLimitWaitTest, ACallCancelledAfterItsGrantButBeforeItRanCountsAsCancelled) {
  r4c::Permit held = limit_.try_acquire();
  std::optional<std::exception_ptr> failure;
  std::string value;
  asio::cancellation_signal signal;
  limit_.async_execute<std::string>(
      backend_.place("a"), asio::bind_cancellation_slot(
                               signal.slot(), asio::bind_executor(io_, recorder(failure, value))));
  io_.poll();
  held.on_ignore();                                // granted: its step is posted, not yet run
  signal.emit(asio::cancellation_type::terminal);  // before the step runs
  r4c::testing::poll(io_);
  ASSERT_TRUE(failure.has_value());
  EXPECT_TRUE(r4c::testing::aborted(*failure));
  EXPECT_FALSE(backend_.has("a"));
  const r4c::AdaptiveLimitSnapshot snapshot = limit_.snapshot();
  EXPECT_EQ(snapshot.in_flight, 0);
  EXPECT_EQ(snapshot.waits_granted, 1u);
  EXPECT_EQ(snapshot.rejected, 1u);
  EXPECT_EQ(snapshot.rejected_by_reason[static_cast<int>(r4c::RejectReason::cancelled)], 1u);
}

// An async call refused without waiting (its queue holds nobody) counts in its class and its
// partition, as the reason it was answered with.
TEST_F(AsyncLimitWaitTest, ARefusalCountsInTheCallsClassAndPartition) {
  r4c::AdaptiveLimitConfig config;
  config.initial_limit(2).min_limit(2).max_limit(2).max_wait(10ms).max_queue(0).partition("p", 0.5);
  r4c::AdaptiveLimit limit("refusals", config, clock_);
  r4c::Permit first = limit.try_acquire(limit.partition("p"));
  std::optional<std::exception_ptr> failure;
  std::string value;
  limit.async_execute<std::string>(r4c::CallClass::bulk, limit.partition("p"), backend_.place("b"),
                                   asio::bind_executor(io_, recorder(failure, value)));
  io_.poll();
  ASSERT_TRUE(failure.has_value());
  EXPECT_THROW(std::rethrow_exception(*failure), r4c::LimitQueueFullException);
  const r4c::AdaptiveLimitSnapshot snapshot = limit.snapshot();
  EXPECT_EQ(snapshot.rejected, 1u);
  EXPECT_EQ(snapshot.rejected_by_reason[static_cast<int>(r4c::RejectReason::queue_full)], 1u);
  EXPECT_EQ(snapshot.rejected_by_class[static_cast<int>(r4c::CallClass::bulk)], 1u);
  EXPECT_EQ(snapshot.partitions[0].rejected, 1u);
}

// A pipeline's async call names its limit's partition: a prefetch call waits behind prefetch's
// share even with room left for user calls, and the slot a prefetch call frees is handed to it.
TEST_F(AsyncLimitWaitTest, APipelinesAsyncCallWaitsBehindItsPartitionsShare) {
  r4c::ResilienceRegistry registry = r4c::testing::registry(clock_).build();
  auto pipeline = r4c::Pipeline<std::string>::builder(registry, "partitions")
                      .adaptive_limit([](r4c::AdaptiveLimitConfig& a) {
                        r4c::test::fixed_user_and_prefetch(a, 10, 0.6, 0.3).max_wait(10ms);
                      })
                      .build();
  r4c::AdaptiveLimit& limit = *pipeline.adaptive_limit();
  const r4c::LimitPartition prefetch = limit.partition("prefetch");
  std::vector<r4c::Permit> held;
  for (int i = 0; i < 3; ++i) held.push_back(limit.try_acquire(prefetch));
  std::optional<std::exception_ptr> prefetch_failure, user_failure;
  std::string prefetch_value, user_value;
  pipeline.async_execute(r4c::CallClass::critical, prefetch, backend_.place("p"),
                         asio::bind_executor(io_, recorder(prefetch_failure, prefetch_value)));
  io_.poll();
  EXPECT_EQ(limit.snapshot().waiting, 1);
  limit.async_execute<std::string>(limit.partition("user"), backend_.place("u"),
                                   asio::bind_executor(io_, recorder(user_failure, user_value)));
  r4c::testing::poll(io_);
  EXPECT_TRUE(backend_.has("u"));  // user's share has room: admitted at once
  EXPECT_FALSE(backend_.has("p"));
  held.pop_back();  // a prefetch slot frees: handed to the waiting prefetch call
  r4c::testing::poll(io_);
  ASSERT_TRUE(backend_.has("p"));
  backend_.complete("p", "p");
  backend_.complete("u", "u");
  r4c::testing::poll(io_);
  ASSERT_TRUE(prefetch_failure.has_value() && user_failure.has_value());
  EXPECT_FALSE(*prefetch_failure);
  EXPECT_FALSE(*user_failure);
  held.clear();
  EXPECT_EQ(limit.in_flight(), 0);
  EXPECT_EQ(limit.snapshot().partitions[1].in_flight, 0);
}

}  // namespace
