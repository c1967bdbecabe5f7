// SPDX-License-Identifier: Apache-2.0
// The adaptive limit's bounded wait, priority classes and bypass, on a ManualClock. A waiting
// caller blocks its own thread, so each test starts waiters on threads and waits (yielding, not
// sleeping) until the limit reports them queued; every time in the tests is the ManualClock's.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <random>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "limit_waiters.hpp"
#include "r4c/adaptive_limit.hpp"
#include "r4c/metrics.hpp"
#include "r4c/registry.hpp"
#include "test_seed.hpp"

namespace {

using namespace std::chrono_literals;
using r4c::CallClass;
using r4c::RejectReason;

r4c::AdaptiveLimitConfig waiting_config(int limit, std::chrono::nanoseconds max_wait) {
  r4c::AdaptiveLimitConfig config;
  config.initial_limit(limit).min_limit(1).max_limit(std::max(limit, 8)).max_wait(max_wait);
  return config;
}

using r4c::test::Waiters;

TEST(AdaptiveLimitWaitTest, WithoutMaxWaitAFullLimitRejectsAtOnce) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("plain", waiting_config(1, 0ns), clock);
  r4c::Permit held = limit.try_acquire();
  RejectReason reason = RejectReason::none;
  EXPECT_FALSE(limit.acquire({}, &reason));
  EXPECT_EQ(reason, RejectReason::limit);
  EXPECT_FALSE(limit.waits());
  const r4c::AdaptiveLimitSnapshot snapshot = limit.snapshot();
  EXPECT_EQ(snapshot.waiting, 0);
  EXPECT_EQ(snapshot.rejected, 1u);
  EXPECT_EQ(snapshot.rejected_by_reason[static_cast<int>(RejectReason::limit)], 1u);
}

TEST(AdaptiveLimitWaitTest, AFreeSlotIsTakenWithoutWaiting) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("free", waiting_config(1, 10ms), clock);
  r4c::Permit permit = limit.acquire();
  EXPECT_TRUE(permit);
  EXPECT_EQ(clock->pending_tasks(), 0u);  // no timer for a call that did not wait
}

TEST(AdaptiveLimitWaitTest, FifoHandsEachFreedSlotToTheOldestWaiter) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("fifo", waiting_config(1, 1s), clock);
  r4c::Permit held = limit.try_acquire();
  Waiters waiters(limit);
  for (const char* name : {"a", "b", "c"}) {
    waiters.start(name);
    clock->advance(1ms);
  }
  EXPECT_EQ(limit.snapshot().waiting, 3);
  EXPECT_FALSE(limit.try_acquire());  // no barging while someone waits
  held.on_ignore();
  EXPECT_EQ(waiters.ended(), (std::vector<std::string>{"a", "b", "c"}));
  const r4c::AdaptiveLimitSnapshot snapshot = limit.snapshot();
  EXPECT_EQ(snapshot.in_flight, 0);
  EXPECT_EQ(snapshot.waiting, 0);
  EXPECT_EQ(snapshot.waits_granted, 3u);
  EXPECT_EQ(snapshot.wait_time, 3ms + 2ms + 1ms);  // each waited until the slot was freed
  EXPECT_EQ(clock->pending_tasks(), 0u);
}

TEST(AdaptiveLimitWaitTest, LifoHandsEachFreedSlotToTheNewestWaiter) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("lifo", waiting_config(1, 1s).queue_order(r4c::QueueOrder::lifo), clock);
  r4c::Permit held = limit.try_acquire();
  Waiters waiters(limit);
  for (const char* name : {"a", "b", "c"}) waiters.start(name);
  held.on_ignore();
  EXPECT_EQ(waiters.ended(), (std::vector<std::string>{"c", "b", "a"}));
}

TEST(AdaptiveLimitWaitTest, AWaitTimesOutExactlyAtMaxWaitOnTheLimitsClock) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("timeout", waiting_config(1, 20ms), clock);
  r4c::Permit held = limit.try_acquire();
  Waiters waiters(limit);
  waiters.start("a");
  clock->advance(20ms - 1ns);
  EXPECT_EQ(waiters.answers(), 0u);
  clock->advance(1ns);
  EXPECT_EQ(waiters.ended(), (std::vector<std::string>{"a:wait_timeout"}));
  const r4c::AdaptiveLimitSnapshot snapshot = limit.snapshot();
  EXPECT_EQ(snapshot.rejected_by_reason[static_cast<int>(RejectReason::wait_timeout)], 1u);
  EXPECT_EQ(snapshot.rejected, 1u);
  EXPECT_EQ(snapshot.in_flight, 1);  // the held slot only
}

TEST(AdaptiveLimitWaitTest, AStopTokenCancelsAWait) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("stop", waiting_config(1, 1s), clock);
  r4c::Permit held = limit.try_acquire();
  std::stop_source stop;
  Waiters waiters(limit);
  waiters.start("a", {.stop = stop.get_token()});
  stop.request_stop();
  EXPECT_EQ(waiters.ended(), (std::vector<std::string>{"a:cancelled"}));
  EXPECT_EQ(clock->pending_tasks(), 0u);  // its timer is gone

  std::stop_source stopped;
  stopped.request_stop();
  RejectReason reason = RejectReason::none;
  EXPECT_FALSE(limit.acquire({.stop = stopped.get_token()}, &reason));
  EXPECT_EQ(reason, RejectReason::cancelled);
}

TEST(AdaptiveLimitWaitTest, ACallerWhoseDeadlineCannotBeMetIsRejectedAtOnce) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("deadline", waiting_config(1, 1s), clock);
  r4c::Permit held = limit.try_acquire();
  RejectReason reason = RejectReason::none;
  EXPECT_FALSE(limit.acquire({.deadline = clock->now()}, &reason));
  EXPECT_EQ(reason, RejectReason::deadline);
  // A later deadline bounds the wait instead of max_wait.
  Waiters waiters(limit);
  waiters.start("a", {.deadline = clock->now() + 5ms});
  clock->advance(5ms);
  EXPECT_EQ(waiters.ended(), (std::vector<std::string>{"a:wait_timeout"}));
}

TEST(AdaptiveLimitWaitTest, AFullQueueRejectsOrEvictsTheLowestClassesOldestWaiter) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("queue", waiting_config(2, 1s).max_queue(2), clock);
  r4c::Permit held = limit.try_acquire();
  r4c::Permit other = limit.try_acquire();
  Waiters waiters(limit);
  waiters.start("bulk1", {.cls = CallClass::bulk});
  waiters.start("bulk2", {.cls = CallClass::bulk});
  RejectReason reason = RejectReason::none;
  EXPECT_FALSE(limit.acquire({.cls = CallClass::bulk}, &reason));  // nobody lower to evict
  EXPECT_EQ(reason, RejectReason::queue_full);
  waiters.start("critical");  // evicts bulk1, the oldest of the lowest class
  while (waiters.answers() == 0) std::this_thread::yield();
  held.on_ignore();  // the highest class is served first
  while (waiters.answers() == 1) std::this_thread::yield();
  EXPECT_EQ(limit.snapshot().waiting, 1);  // bulk2: in flight 1 is its whole share (0.5 × 2)
  other.on_ignore();
  EXPECT_EQ(waiters.ended(), (std::vector<std::string>{"bulk1:evicted", "critical", "bulk2"}));
  const r4c::AdaptiveLimitSnapshot snapshot = limit.snapshot();
  EXPECT_EQ(snapshot.rejected_by_reason[static_cast<int>(RejectReason::evicted)], 1u);
  EXPECT_EQ(snapshot.rejected_by_reason[static_cast<int>(RejectReason::queue_full)], 1u);
  EXPECT_EQ(snapshot.rejected_by_class[static_cast<int>(CallClass::bulk)], 2u);
}

TEST(AdaptiveLimitWaitTest, AQueueBoundAsAFactorFollowsTheLimit) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("factor", waiting_config(4, 1s).max_queue_factor(0.5), clock);
  EXPECT_EQ(limit.snapshot().max_queue, 2);
}

TEST(AdaptiveLimitWaitTest, EverySlotARaiseAddsGoesToAWaiter) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit(
      "raise",
      waiting_config(2, 1s).algorithm(r4c::LimitAlgorithm::aimd).window(1ms).min_window_samples(1),
      clock);
  r4c::Permit first = limit.try_acquire();
  r4c::Permit second = limit.try_acquire();
  Waiters waiters(limit, /*keep=*/true);
  waiters.start("a");
  waiters.start("b");
  std::vector<int> granted_by_raise;  // what each LimitChangeEvent says it granted
  const r4c::Subscription subscription = limit.on_limit_change(
      [&](const r4c::LimitChangeEvent& e) { granted_by_raise.push_back(e.waiters_granted); });
  clock->advance(2ms);
  first.on_success();  // a gets the freed slot; the window closes and raises the limit to 3
  EXPECT_EQ(granted_by_raise, std::vector<int>{1});  // published on this thread, after b's grant
  std::vector<std::string> ended = waiters.ended();  // both woken at once: any order
  std::sort(ended.begin(), ended.end());
  EXPECT_EQ(ended, (std::vector<std::string>{"a", "b"}));
  const r4c::AdaptiveLimitSnapshot snapshot = limit.snapshot();
  EXPECT_EQ(snapshot.limit, 3);
  EXPECT_EQ(snapshot.granted_on_raise, 1u);  // b, by the raise: a and second still hold theirs
  EXPECT_EQ(snapshot.in_flight, 3);
  waiters.kept().clear();
}

// Each reason a wait is rejected for has its own LimitExceededException subclass.
TEST(AdaptiveLimitWaitTest, EachRejectionReasonHasItsOwnException) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("reasons", waiting_config(1, 10ms).max_queue(1), clock);
  const auto rethrow = [&](RejectReason reason) {
    std::rethrow_exception(limit.rejection(reason));
  };
  EXPECT_THROW(rethrow(RejectReason::queue_full), r4c::LimitQueueFullException);
  EXPECT_THROW(rethrow(RejectReason::wait_timeout), r4c::LimitWaitTimeoutException);
  EXPECT_THROW(rethrow(RejectReason::deadline), r4c::LimitDeadlineException);
  EXPECT_THROW(rethrow(RejectReason::cancelled), r4c::LimitWaitCancelledException);
  EXPECT_THROW(rethrow(RejectReason::evicted), r4c::LimitEvictedException);
  EXPECT_NE(limit.rejection(RejectReason::queue_full), limit.rejection(RejectReason::evicted));
  EXPECT_EQ(limit.rejection(RejectReason::limit), limit.rejection());
  // A limit that cannot wait has only its plain exception.
  r4c::AdaptiveLimit plain("plain", r4c::AdaptiveLimitConfig(), clock);
  EXPECT_EQ(plain.rejection(RejectReason::wait_timeout), plain.rejection());

  // execute() throws the reason's exception, caught as a LimitExceededException too.
  r4c::Permit held = limit.try_acquire();
  std::atomic<int> timed_out{0};
  std::thread waiter([&] {
    try {
      limit.execute([] {});
    } catch (const r4c::LimitWaitTimeoutException& e) {
      timed_out = e.instance_id() == "reasons" ? 1 : 2;
    } catch (...) {
      timed_out = 3;
    }
  });
  while (limit.snapshot().waiting == 0) std::this_thread::yield();
  try {
    limit.execute([] {});  // the one place in the queue is taken
    ADD_FAILURE() << "admitted";
  } catch (const r4c::LimitExceededException& e) {
    EXPECT_NE(dynamic_cast<const r4c::LimitQueueFullException*>(&e), nullptr);
  }
  clock->advance(10ms);
  waiter.join();
  EXPECT_EQ(timed_out.load(), 1);
  held.on_ignore();
}

TEST(AdaptiveLimitWaitTest, AdaptiveLifoServesOldestFirstUntilTheQueueStands) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit(
      "codel", waiting_config(1, 1s).queue_order(r4c::QueueOrder::adaptive_lifo), clock);
  r4c::Permit held = limit.try_acquire();
  Waiters waiters(limit);
  waiters.start("a");
  clock->advance(1ms);
  waiters.start("b");
  held.on_ignore();  // the queue emptied 1 ms ago: FIFO
  EXPECT_EQ(waiters.ended(), (std::vector<std::string>{"a", "b"}));

  Waiters standing(limit);
  held = limit.try_acquire();
  standing.start("c");
  clock->advance(101ms);  // non-empty for longer than the 100 ms interval: it stands
  standing.start("d");    // sheds c (older than the 5 ms target)
  while (standing.answers() < 1 || limit.snapshot().waiting != 1) std::this_thread::yield();
  clock->advance(1ms);
  standing.start("e");
  held.on_ignore();  // newest first
  EXPECT_EQ(standing.ended(), (std::vector<std::string>{"c:wait_timeout", "e", "d"}));
}

TEST(AdaptiveLimitClassTest, AClassIsAdmittedBelowItsShareOfTheLimit) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("classes", waiting_config(4, 0ns), clock);
  std::vector<r4c::Permit> permits;
  permits.push_back(limit.try_acquire(CallClass::bulk));
  permits.push_back(limit.try_acquire(CallClass::bulk));
  EXPECT_FALSE(limit.try_acquire(CallClass::bulk));              // 2 = 0.5 × 4
  permits.push_back(limit.try_acquire(CallClass::best_effort));  // below 3 = 0.75 × 4
  EXPECT_FALSE(limit.try_acquire(CallClass::degraded));          // 3 = floor(0.9 × 4)
  permits.push_back(limit.try_acquire(CallClass::critical));
  for (const r4c::Permit& permit : permits) EXPECT_TRUE(permit);
  EXPECT_FALSE(limit.try_acquire());
  r4c::Permit bypass = limit.try_acquire(CallClass::bypass);
  EXPECT_TRUE(bypass);
  EXPECT_EQ(limit.in_flight(), 4);  // bypass is not counted
  const r4c::AdaptiveLimitSnapshot snapshot = limit.snapshot();
  EXPECT_EQ(snapshot.rejected, 3u);
  EXPECT_EQ(snapshot.rejected_by_class[static_cast<int>(CallClass::bulk)], 1u);
  EXPECT_EQ(snapshot.rejected_by_class[static_cast<int>(CallClass::degraded)], 1u);
  EXPECT_EQ(snapshot.rejected_by_class[static_cast<int>(CallClass::critical)], 1u);
}

TEST(AdaptiveLimitClassTest, ExecuteSaysItsClass) {
  r4c::AdaptiveLimit limit("execute", waiting_config(2, 0ns).class_share(CallClass::bulk, 0.5));
  r4c::Permit held = limit.try_acquire();
  EXPECT_THROW(limit.execute(CallClass::bulk, [] { return 1; }), r4c::LimitExceededException);
  EXPECT_EQ(limit.execute(CallClass::critical, [] { return 2; }), 2);
}

TEST(AdaptiveLimitClassTest, SharesMustNotGrowTowardsLowerClasses) {
  r4c::AdaptiveLimitConfig config;
  config.class_share(CallClass::bulk, 0.95);
  EXPECT_THROW(config.validate(), r4c::ConfigException);
  EXPECT_THROW(config.class_share(CallClass::bulk, 0.0), r4c::ConfigException);
  EXPECT_THROW(config.class_share(CallClass::bypass, 0.5), r4c::ConfigException);
  EXPECT_THROW(config.max_wait(-1ns), r4c::ConfigException);
  EXPECT_THROW(config.max_queue(-1), r4c::ConfigException);
}

double metric(const std::vector<r4c::metrics::Metric>& all, std::string_view name,
              const std::string& label = "") {
  for (const r4c::metrics::Metric& m : all) {
    if (m.name != name) continue;
    if (label.empty()) return m.value;
    for (const r4c::metrics::Label& l : m.labels) {
      if (l.value == label) return m.value;
    }
  }
  ADD_FAILURE() << "no metric " << name << " " << label;
  return -1;
}

TEST(AdaptiveLimitWaitMetricsTest, WaitsAndRejectionReasonsAreMetrics) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("metrics", waiting_config(1, 5ms), clock);
  r4c::Permit held = limit.try_acquire();
  Waiters waiters(limit);
  waiters.start("a", {.cls = CallClass::bulk});
  std::vector<r4c::metrics::Metric> all;
  r4c::metrics::Emitter out(all, "adaptivelimit", limit.instance_id());
  r4c::AdaptiveLimitKind::metrics(limit.snapshot(), out);
  EXPECT_EQ(metric(all, "r4c.adaptivelimit.waiting.calls"), 1);
  clock->advance(5ms);
  waiters.join();
  all.clear();
  r4c::AdaptiveLimitKind::metrics(limit.snapshot(), out);
  EXPECT_EQ(metric(all, "r4c.adaptivelimit.waiting.calls"), 0);
  EXPECT_EQ(metric(all, "r4c.adaptivelimit.rejections", "wait_timeout"), 1);
  EXPECT_EQ(metric(all, "r4c.adaptivelimit.rejections", "limit"), 0);
  EXPECT_EQ(metric(all, "r4c.adaptivelimit.class.rejections", "bulk"), 1);

  // A plain limit's metrics are as they were.
  r4c::AdaptiveLimit plain("plain", waiting_config(1, 0ns), clock);
  all.clear();
  r4c::metrics::Emitter plain_out(all, "adaptivelimit", plain.instance_id());
  r4c::AdaptiveLimitKind::metrics(plain.snapshot(), plain_out);
  for (const r4c::metrics::Metric& m : all) {
    EXPECT_EQ(m.name.find("wait"), std::string::npos) << m.name;
  }
}

TEST(AdaptiveLimitWaitConfigTest, TheFileSetsTheWaitAndTheSharesThroughTheDescriptor) {
  auto registry = r4c::ResilienceRegistry::builder()
                      .config_text(R"(
                        defaults.adaptiveLimit.maxWait = 20ms
                        defaults.adaptiveLimit.maxQueue = 3
                        defaults.adaptiveLimit.queueOrder = adaptive_lifo
                        defaults.adaptiveLimit.codelTarget = 2ms
                        instances.orders.adaptiveLimit.bulkShare = 0.4
                      )")
                      .build();
  const r4c::AdaptiveLimitConfig& config = registry.adaptive_limit_policy("m", "orders").config();
  EXPECT_EQ(config.max_wait(), 20ms);
  EXPECT_EQ(config.max_queue(), 3);
  EXPECT_EQ(config.queue_order(), r4c::QueueOrder::adaptive_lifo);
  EXPECT_EQ(config.codel_target(), 2ms);
  EXPECT_EQ(config.class_share(CallClass::bulk), 0.4);
  EXPECT_TRUE(registry.adaptive_limit_policy("m", "orders").waits());
  try {
    (void)r4c::ResilienceRegistry::builder()
        .config_text("defaults.adaptiveLimit.maxQueue = -1")
        .build();
    ADD_FAILURE() << "a negative maxQueue was accepted";
  } catch (const r4c::ConfigException& e) {
    EXPECT_EQ(e.code(), "R4C-REG-001");
    EXPECT_NE(std::string(e.what()).find("max_queue"), std::string::npos) << e.what();
  }
}

}  // namespace
