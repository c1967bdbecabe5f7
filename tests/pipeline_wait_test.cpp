// SPDX-License-Identifier: Apache-2.0
// A pipeline whose adaptive limit has max_wait: its calls wait in the limit's queue (sync: on
// the caller's thread, which each test starts and watches through the limit's snapshot), are
// handed a freed slot, and time out at exactly max_wait on the registry's ManualClock.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <optional>
#include <thread>

#include "partition_support.hpp"
#include "r4c/pipeline.hpp"

namespace {

using namespace std::chrono_literals;

class PipelineWaitTest : public ::testing::Test {
 protected:
  r4c::AdaptiveLimit& limit() { return *pipeline_.adaptive_limit(); }
  // Returns once the limit has `n` callers waiting.
  void await_waiting(int n) {
    while (limit().snapshot().waiting != n) std::this_thread::yield();
  }
  // A try_execute of 7 into `outcome`, on a thread of its own, returned once it waits.
  std::thread try_execute_waiting(std::optional<r4c::Outcome<int>>& outcome) {
    std::thread caller(
        [this, &outcome] { outcome.emplace(pipeline_.try_execute([] { return 7; })); });
    await_waiting(1);
    return caller;
  }

  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
  r4c::ResilienceRegistry registry_ = r4c::testing::registry(clock_).build();
  r4c::Pipeline<int> pipeline_ = r4c::Pipeline<int>::builder(registry_, "orders")
                                     .adaptive_limit([](r4c::AdaptiveLimitConfig& a) {
                                       a.initial_limit(1).min_limit(1).max_limit(1).max_wait(20ms);
                                     })
                                     .build();
};

TEST_F(PipelineWaitTest, TryExecuteWaitsAndIsHandedTheFreedSlot) {
  r4c::Permit held = limit().try_acquire();
  std::optional<r4c::Outcome<int>> outcome;
  std::thread caller = try_execute_waiting(outcome);
  clock_->advance(5ms);
  EXPECT_EQ(limit().snapshot().waiting, 1);
  held.on_ignore();  // handed to the waiting call, which runs under it
  caller.join();
  ASSERT_TRUE(outcome.has_value());
  ASSERT_TRUE(outcome->has_value());
  EXPECT_EQ(outcome->value(), 7);
  const r4c::AdaptiveLimitSnapshot snapshot = limit().snapshot();
  EXPECT_EQ(snapshot.in_flight, 0);
  EXPECT_EQ(snapshot.waits_granted, 1u);
  EXPECT_EQ(snapshot.wait_time, 5ms);
  EXPECT_EQ(snapshot.rejected, 0u);
}

TEST_F(PipelineWaitTest, ExecuteTimesOutAtExactlyMaxWait) {
  r4c::Permit held = limit().try_acquire();
  std::atomic<bool> rejected{false};
  std::atomic<bool> ran{false};
  std::thread caller([&] {
    try {
      (void)pipeline_.execute([&] {
        ran = true;
        return 1;
      });
    } catch (const r4c::LimitWaitTimeoutException& e) {
      rejected = e.instance_id() == "orders";
    }
  });
  await_waiting(1);
  clock_->advance(20ms - 1ns);
  // The timer runs inside advance(): a wait that had ended would be off the queue by now.
  EXPECT_EQ(limit().snapshot().waiting, 1);
  clock_->advance(1ns);
  caller.join();
  EXPECT_TRUE(rejected.load());
  EXPECT_FALSE(ran.load());
  const r4c::AdaptiveLimitSnapshot snapshot = limit().snapshot();
  EXPECT_EQ(snapshot.rejected_by_reason[static_cast<int>(r4c::RejectReason::wait_timeout)], 1u);
  EXPECT_EQ(snapshot.waiting, 0);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
  held.on_ignore();
  EXPECT_EQ(limit().in_flight(), 0);
}

TEST_F(PipelineWaitTest, ATimedOutTryExecuteIsTheLimitsRefusal) {
  r4c::Permit held = limit().try_acquire();
  std::optional<r4c::Outcome<int>> outcome;
  std::thread caller = try_execute_waiting(outcome);
  clock_->advance(20ms);
  caller.join();
  ASSERT_TRUE(outcome.has_value());
  ASSERT_TRUE(outcome->refused());
  EXPECT_EQ(outcome->refusal().kind(), "adaptivelimit");
  EXPECT_EQ(outcome->refusal().instance_id(), "orders");
  EXPECT_EQ(outcome->error(), limit().rejection(r4c::RejectReason::wait_timeout));
  held.on_ignore();
}

// A pipeline call says its class: the limit admits it below its class's share (bulk: half).
TEST(PipelineClassTest, ThePipelinesLimitAdmitsACallByItsClass) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::ResilienceRegistry registry = r4c::testing::registry(clock).build();
  auto pipeline = r4c::Pipeline<int>::builder(registry, "classes")
                      .adaptive_limit([](r4c::AdaptiveLimitConfig& a) {
                        a.initial_limit(4).min_limit(4).max_limit(4);
                      })
                      .bulkhead([](r4c::BulkheadConfig& b) { b.max_concurrent(10); })
                      .build();
  r4c::AdaptiveLimit& limit = *pipeline.adaptive_limit();
  r4c::Permit one = limit.try_acquire();
  const auto answer = [] { return 3; };
  EXPECT_TRUE(pipeline.try_execute(r4c::CallClass::bulk, answer).has_value());  // 1 + 1 <= 2
  r4c::Permit two = limit.try_acquire();
  const r4c::Outcome<int> bulk = pipeline.try_execute(r4c::CallClass::bulk, answer);
  ASSERT_TRUE(bulk.refused());
  EXPECT_EQ(bulk.refusal().kind(), "adaptivelimit");
  EXPECT_THROW((void)pipeline.execute(r4c::CallClass::bulk, answer), r4c::LimitExceededException);
  EXPECT_EQ(pipeline.execute(r4c::CallClass::best_effort, answer), 3);  // 3 <= floor(4 * 0.75)
  EXPECT_EQ(pipeline.execute(r4c::CallClass::critical, answer), 3);
  r4c::Permit three = limit.try_acquire();
  r4c::Permit four = limit.try_acquire();
  EXPECT_TRUE(pipeline.try_execute(answer).refused());             // full
  EXPECT_EQ(pipeline.execute(r4c::CallClass::bypass, answer), 3);  // not limited, not counted
  EXPECT_EQ(limit.snapshot().rejected_by_class[static_cast<int>(r4c::CallClass::bulk)], 2u);
  EXPECT_EQ(registry.bulkhead("classes").snapshot().rejected, 0u);
}

// A pipeline call names its limit's partition beside its class.
TEST(PipelineClassTest, ThePipelinesLimitAdmitsACallByItsPartition) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::ResilienceRegistry registry = r4c::testing::registry(clock).build();
  auto pipeline = r4c::Pipeline<int>::builder(registry, "partitions")
                      .adaptive_limit([](r4c::AdaptiveLimitConfig& a) {
                        r4c::test::fixed_user_and_prefetch(a, 4, 0.5, 0.5);
                      })
                      .build();
  r4c::AdaptiveLimit& limit = *pipeline.adaptive_limit();
  const r4c::LimitPartition prefetch = limit.partition("prefetch");
  r4c::Permit one = limit.try_acquire(prefetch);
  const auto answer = [] { return 3; };
  EXPECT_EQ(pipeline.execute(r4c::CallClass::critical, prefetch, answer), 3);  // its 2nd of 2
  r4c::Permit two = limit.try_acquire(prefetch);
  const r4c::Outcome<int> refused =
      pipeline.try_execute(r4c::CallClass::critical, prefetch, answer);
  ASSERT_TRUE(refused.refused());
  EXPECT_EQ(refused.refusal().kind(), "adaptivelimit");
  EXPECT_THROW((void)pipeline.execute(r4c::CallClass::critical, prefetch, answer),
               r4c::LimitExceededException);
  EXPECT_EQ(pipeline.execute(r4c::CallClass::critical, limit.partition("user"), answer), 3);
  EXPECT_EQ(limit.snapshot().partitions[1].rejected, 2u);
}

}  // namespace
