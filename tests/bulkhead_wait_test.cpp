// SPDX-License-Identifier: Apache-2.0
// The bulkhead's max_wait (resilience4j's maxWaitDuration) on a ManualClock: a caller of a full
// bulkhead waits on its own thread (each test starts it and watches the snapshot's `waiting`,
// yielding, never sleeping) and is handed a freed slot oldest first, without barging; its wait
// ends at exactly max_wait or when its stop token is requested.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "r4c/bulkhead.hpp"
#include "r4c/registry.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;

class BulkheadWaitTest : public ::testing::Test {
 protected:
  // Starts a caller of acquire() on a thread; returns once it waits. It records its name when
  // granted (and gives the slot back at once) or name + ":rejected".
  void start(const std::string& name, std::stop_token stop = {}) {
    const int before = bulkhead_.snapshot().waiting;
    threads_.emplace_back([this, name, stop] {
      BulkheadPermit permit = bulkhead_.acquire(stop);
      std::scoped_lock lock(mutex_);
      ended_.push_back(permit ? name : name + ":rejected");
    });
    while (bulkhead_.snapshot().waiting == before) std::this_thread::yield();
  }
  std::vector<std::string> join() {
    for (std::thread& thread : threads_) thread.join();
    threads_.clear();
    std::scoped_lock lock(mutex_);
    return ended_;
  }
  using BulkheadPermit = r4c::BulkheadPermit;

  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
  r4c::Bulkhead bulkhead_{"pool", r4c::BulkheadConfig().max_concurrent(1).max_wait(10ms), clock_};
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::vector<std::string> ended_;
};

TEST_F(BulkheadWaitTest, WithoutMaxWaitAFullBulkheadRejectsAtOnce) {
  r4c::Bulkhead plain("plain", r4c::BulkheadConfig().max_concurrent(1), clock_);
  BulkheadPermit held = plain.try_acquire();
  EXPECT_FALSE(plain.acquire());
  EXPECT_THROW(plain.execute([] {}), r4c::BulkheadFullException);
  EXPECT_EQ(plain.snapshot().rejected, 2u);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
}

TEST_F(BulkheadWaitTest, FreedSlotsGoToTheOldestWaiterAndNoNewcomerBarges) {
  BulkheadPermit held = bulkhead_.try_acquire();
  ASSERT_TRUE(held);
  BulkheadPermit second_holder;
  start("a");
  start("b");
  EXPECT_EQ(bulkhead_.snapshot().waiting, 2);
  held.release();  // handed to a, who gives it back at once: then to b
  const std::vector<std::string> ended = join();
  EXPECT_EQ(ended, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(bulkhead_.in_flight(), 0);
  EXPECT_EQ(clock_->pending_tasks(), 0u);

  held = bulkhead_.try_acquire();
  start("c");
  // Someone waits: a newcomer is rejected even by try_acquire().
  EXPECT_FALSE(bulkhead_.try_acquire());
  held.release();
  EXPECT_EQ(join().back(), "c");
  EXPECT_EQ(bulkhead_.snapshot().rejected, 1u);
}

TEST_F(BulkheadWaitTest, AWaitEndsAtExactlyMaxWaitOnTheClock) {
  BulkheadPermit held = bulkhead_.try_acquire();
  std::atomic<int> outcome{0};  // 1: rejected with BulkheadFullException, 2: ran
  std::thread caller([&] {
    try {
      bulkhead_.execute([&] { outcome = 2; });
    } catch (const r4c::BulkheadFullException&) {
      outcome = 1;
    }
  });
  while (bulkhead_.snapshot().waiting == 0) std::this_thread::yield();
  clock_->advance(10ms - 1ns);
  EXPECT_EQ(bulkhead_.snapshot().waiting, 1);  // the timer fires inside advance()
  clock_->advance(1ns);
  caller.join();
  EXPECT_EQ(outcome.load(), 1);
  EXPECT_EQ(bulkhead_.snapshot().waiting, 0);
  EXPECT_EQ(bulkhead_.snapshot().rejected, 1u);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
  held.release();
  EXPECT_EQ(bulkhead_.in_flight(), 0);  // nobody was handed the slot
}

TEST_F(BulkheadWaitTest, AStopTokenEndsTheWait) {
  BulkheadPermit held = bulkhead_.try_acquire();
  std::stop_source stop;
  start("a", stop.get_token());
  stop.request_stop();
  EXPECT_EQ(join(), (std::vector<std::string>{"a:rejected"}));
  std::stop_source stopped;
  stopped.request_stop();
  EXPECT_FALSE(bulkhead_.acquire(stopped.get_token()));  // not even queued
  EXPECT_EQ(bulkhead_.snapshot().rejected, 2u);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
}

TEST_F(BulkheadWaitTest, AFreeSlotIsTakenWithoutATimerAndEventsStillCome) {
  int finished = 0;
  const r4c::Subscription subscription =
      bulkhead_.on_call_finished([&](const r4c::BulkheadEvent&) { ++finished; });
  EXPECT_EQ(bulkhead_.execute([] { return 5; }), 5);
  EXPECT_EQ(finished, 1);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
  EXPECT_EQ(bulkhead_.in_flight(), 0);
}

TEST(BulkheadWaitConfigTest, MaxWaitIsAFileKeyAndIsValidated) {
  auto clock = std::make_shared<r4c::ManualClock>();
  auto registry = r4c::testing::registry(clock)
                      .config_text(R"(
                        defaults.bulkhead.maxWait = 25ms
                        instances.pool.bulkhead.maxConcurrent = 2
                      )")
                      .build();
  r4c::Bulkhead& bulkhead = registry.bulkhead_policy("m", "pool");
  EXPECT_EQ(bulkhead.config().max_wait(), 25ms);
  // The registry's clock times the wait.
  r4c::BulkheadPermit one = bulkhead.try_acquire();
  r4c::BulkheadPermit two = bulkhead.try_acquire();
  std::atomic<bool> rejected{false};
  std::thread caller([&] { rejected = !bulkhead.acquire(); });
  while (bulkhead.snapshot().waiting == 0) std::this_thread::yield();
  clock->advance(25ms);
  caller.join();
  EXPECT_TRUE(rejected.load());

  const r4c::ConfigException e =
      r4c::test::config_error([] { r4c::BulkheadConfig().max_wait(-1ms); });
  EXPECT_EQ(e.code(), "R4C-REG-001");
  EXPECT_NE(std::string(e.what()).find("max_wait"), std::string::npos) << e.what();
  EXPECT_THROW(r4c::BulkheadConfig().max_wait(2h), r4c::ConfigException);
}

}  // namespace
