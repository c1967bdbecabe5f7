// SPDX-License-Identifier: Apache-2.0
// The bulkhead's asynchronous wait (bulkhead.maxWait) on a ManualClock: a call of a full
// bulkhead waits holding no thread, is handed the slot a release frees (oldest first, no
// barging), fails with BulkheadFullException at exactly max_wait on the bulkhead's clock, and
// honours Asio cancellation (terminal and partial) with operation_aborted, counted `cancelled`.
#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/io_context.hpp>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "../test_support.hpp"
#include "async_support.hpp"
#include "r4c/asio.hpp"
#include "r4c/metrics.hpp"

namespace {

using namespace std::chrono_literals;
using Reason = r4c::BulkheadRejectReason;

class AsyncBulkheadWaitTest : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_EQ(clock_->pending_tasks(), 0u); }

  // Starts an async call of `key`; its answer lands in answers_[key].
  void start(const std::string& key, asio::cancellation_signal* signal = nullptr) {
    auto record = [this, key](std::exception_ptr e, std::string v) {
      answers_.push_back(key + (e ? (r4c::testing::aborted(e) ? ":aborted" : ":full") : "=" + v));
    };
    if (signal != nullptr) {
      bulkhead_.async_execute<std::string>(
          backend_.place(key),
          asio::bind_cancellation_slot(signal->slot(), asio::bind_executor(io_, record)));
    } else {
      bulkhead_.async_execute<std::string>(backend_.place(key), asio::bind_executor(io_, record));
    }
    run();
  }
  void run() {
    io_.restart();
    io_.poll();
  }
  std::uint64_t by(Reason reason) const {
    return bulkhead_.snapshot().rejected_by_reason[static_cast<int>(reason)];
  }

  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
  r4c::Bulkhead bulkhead_{"pool", r4c::BulkheadConfig().max_concurrent(1).max_wait(10ms), clock_};
  asio::io_context io_;
  r4c::testing::AsyncBackend backend_;
  std::vector<std::string> answers_;
};

TEST_F(AsyncBulkheadWaitTest, AFreedSlotIsHandedToTheOldestWaitingCall) {
  start("a");
  ASSERT_TRUE(backend_.has("a"));
  start("b");
  start("c");
  EXPECT_FALSE(backend_.has("b"));  // waiting, on no thread
  EXPECT_EQ(bulkhead_.snapshot().waiting, 2);
  // No barging: a synchronous newcomer does not pass them.
  EXPECT_FALSE(bulkhead_.try_acquire());
  clock_->advance(3ms);
  backend_.complete("a", "1");  // its slot goes to b, the oldest
  run();
  ASSERT_TRUE(backend_.has("b"));
  EXPECT_FALSE(backend_.has("c"));
  backend_.complete("b", "2");
  run();
  ASSERT_TRUE(backend_.has("c"));
  backend_.complete("c", "3");
  run();
  EXPECT_EQ(answers_, (std::vector<std::string>{"a=1", "b=2", "c=3"}));
  const r4c::BulkheadSnapshot snap = bulkhead_.snapshot();
  EXPECT_EQ(snap.in_flight, 0);
  EXPECT_EQ(snap.waits_granted, 2u);
  EXPECT_EQ(snap.wait_time, 6ms);  // b waited 3 ms, c 3 ms
  EXPECT_EQ(snap.rejected, 1u);    // the try_acquire()
  EXPECT_EQ(by(Reason::full), 1u);
}

TEST_F(AsyncBulkheadWaitTest, AWaitFailsAtExactlyMaxWaitOnTheBulkheadsClock) {
  start("a");
  start("b");
  clock_->advance(10ms - 1ns);
  run();
  EXPECT_TRUE(answers_.empty());
  clock_->advance(1ns);
  run();
  EXPECT_EQ(answers_, (std::vector<std::string>{"b:full"}));
  EXPECT_FALSE(backend_.has("b"));
  EXPECT_EQ(by(Reason::wait_timeout), 1u);
  EXPECT_EQ(bulkhead_.snapshot().waiting, 0);
  backend_.complete("a", "1");
  run();
}

TEST_F(AsyncBulkheadWaitTest, ACancelledWaitAnswersAbortedAndCountsCancelled) {
  for (const auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial}) {
    answers_.clear();
    start("a");
    asio::cancellation_signal signal;
    start("b", &signal);
    signal.emit(type);
    run();
    EXPECT_EQ(answers_, (std::vector<std::string>{"b:aborted"}));
    EXPECT_EQ(bulkhead_.snapshot().waiting, 0);
    backend_.complete("a", "1");
    run();
  }
  EXPECT_EQ(by(Reason::cancelled), 2u);
  EXPECT_EQ(bulkhead_.snapshot().rejected, 2u);
  EXPECT_EQ(bulkhead_.snapshot().in_flight, 0);
}

// Granted in the queue, then cancelled before its step ran: operation_aborted, counted
// `cancelled`, the operation never started and the slot back.
TEST_F(AsyncBulkheadWaitTest, ACallCancelledAfterItsGrantButBeforeItRanCountsAsCancelled) {
  r4c::BulkheadPermit held = bulkhead_.try_acquire();
  asio::cancellation_signal signal;
  start("b", &signal);
  held.release();                                  // handed to b: its step is posted
  signal.emit(asio::cancellation_type::terminal);  // before it runs
  run();
  EXPECT_EQ(answers_, (std::vector<std::string>{"b:aborted"}));
  EXPECT_FALSE(backend_.has("b"));
  const r4c::BulkheadSnapshot snap = bulkhead_.snapshot();
  EXPECT_EQ(snap.in_flight, 0);
  EXPECT_EQ(snap.waits_granted, 1u);
  EXPECT_EQ(by(Reason::cancelled), 1u);
}

TEST_F(AsyncBulkheadWaitTest, TheWaitShowsInTheMetrics) {
  start("a");
  start("b");
  std::vector<r4c::metrics::Metric> out;
  r4c::metrics::Emitter emitter(out, "bulkhead", bulkhead_.instance_id());
  r4c::BulkheadKind::metrics(bulkhead_.snapshot(), emitter);
  const auto value = [&](const std::string& name, const std::string& reason) {
    return reason.empty() ? r4c::test::metric_value(out, name)
                          : r4c::test::metric_value(out, name, "reason", reason);
  };
  EXPECT_EQ(value("r4c.bulkhead.waiting.calls", ""), 1.0);
  EXPECT_EQ(value("r4c.bulkhead.rejections", "wait_timeout"), 0.0);
  clock_->advance(10ms);
  run();
  out.clear();
  r4c::BulkheadKind::metrics(bulkhead_.snapshot(), emitter);
  EXPECT_EQ(value("r4c.bulkhead.waiting.calls", ""), 0.0);
  EXPECT_EQ(value("r4c.bulkhead.rejections", "wait_timeout"), 1.0);
  EXPECT_EQ(value("r4c.bulkhead.waits.granted", ""), 0.0);
  backend_.complete("a", "1");
  run();
  // A bulkhead without max_wait keeps its metrics as they were.
  r4c::Bulkhead plain("plain", r4c::BulkheadConfig().max_concurrent(1), clock_);
  out.clear();
  r4c::BulkheadKind::metrics(plain.snapshot(), emitter);
  EXPECT_EQ(value("r4c.bulkhead.waiting.calls", ""), -1.0);
}

}  // namespace
