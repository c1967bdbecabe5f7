// SPDX-License-Identifier: Apache-2.0
// Live reconfiguration of the adaptive limit's admission, wait and partition settings (issue
// 19): each changes on a running limit, observed in behaviour, with the limit value, the calls
// in flight and the waiters kept. On a ManualClock; waiters block their own threads, so each is
// started on one and the test yields until the limit reports it queued.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <iterator>
#include <mutex>
#include <random>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "limit_waiters.hpp"
#include "r4c/adaptive_limit.hpp"
#include "r4c/registry.hpp"
#include "test_seed.hpp"

namespace {

using namespace std::chrono_literals;
using r4c::CallClass;
using r4c::RejectReason;

r4c::AdaptiveLimitConfig fixed(int limit) {
  r4c::AdaptiveLimitConfig config;
  config.algorithm(r4c::LimitAlgorithm::aimd)
      .initial_limit(limit)
      .min_limit(1)
      .max_limit(std::max(limit, 20))
      .window(1s)
      .min_window_samples(1);
  return config;
}

using r4c::test::Waiters;

TEST(AdaptiveLimitLiveTest, DisablingMakesAPassThroughAndEnablingEnforcesTheKeptLimit) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimitConfig config = fixed(2);
  r4c::AdaptiveLimit limit("switch", config, clock);
  std::vector<r4c::Permit> before;
  before.push_back(limit.try_acquire());
  before.push_back(limit.try_acquire());
  EXPECT_FALSE(limit.try_acquire());
  limit.reconfigure(r4c::AdaptiveLimitConfig(config).enabled(false));
  EXPECT_FALSE(limit.snapshot().enabled);
  std::vector<r4c::Permit> open;
  for (int i = 0; i < 10; ++i) open.push_back(limit.try_acquire());
  EXPECT_TRUE(std::all_of(open.begin(), open.end(), [](const r4c::Permit& p) { return bool(p); }));
  EXPECT_EQ(limit.in_flight(), 2);  // a pass-through counts nothing; the earlier two stay
  before[0].on_success();           // released across the switch
  for (r4c::Permit& permit : open) permit.on_success();
  EXPECT_EQ(limit.in_flight(), 1);
  EXPECT_EQ(limit.snapshot().windows, 0u);  // the pass-through's calls were no samples

  limit.reconfigure(config);
  EXPECT_TRUE(limit.snapshot().enabled);
  EXPECT_EQ(limit.limit(), 2);  // kept across the switch
  r4c::Permit second = limit.try_acquire();
  EXPECT_TRUE(second);
  EXPECT_FALSE(limit.try_acquire());  // enforcing again: 1 from before and 1 new
  before[1].on_ignore();
  second.on_ignore();
  EXPECT_EQ(limit.in_flight(), 0);
}

TEST(AdaptiveLimitLiveTest, ClassSharesApplyFromTheNextAdmission) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimitConfig config = fixed(10);
  config.class_share(CallClass::bulk, 0.5);
  r4c::AdaptiveLimit limit("shares", config, clock);
  std::vector<r4c::Permit> held;
  for (int i = 0; i < 3; ++i) held.push_back(limit.try_acquire(CallClass::bulk));
  limit.reconfigure(r4c::AdaptiveLimitConfig(config).class_share(CallClass::bulk, 0.3));
  EXPECT_FALSE(limit.try_acquire(CallClass::bulk));  // 3 in flight, 2 allowed now
  held.clear();
  EXPECT_EQ(limit.in_flight(), 0);
  r4c::Permit a = limit.try_acquire(CallClass::bulk);
  r4c::Permit b = limit.try_acquire(CallClass::bulk);
  EXPECT_TRUE(a && b);
  EXPECT_FALSE(limit.try_acquire(CallClass::bulk));
  EXPECT_TRUE(limit.try_acquire());  // critical keeps the whole limit
  EXPECT_EQ(limit.snapshot().rejected_by_class[static_cast<int>(CallClass::bulk)], 2u);
}

TEST(AdaptiveLimitLiveTest, DropOnClassifiesTheNextOutcomeAndForgetsItsCachedVerdicts) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimitConfig config = fixed(10);
  config.drop_on({});
  r4c::AdaptiveLimit limit("drops", config, clock);
  // A stock failure: another limit's preallocated refusal, whose verdict try_execute caches.
  r4c::AdaptiveLimit full("full", fixed(1), clock);
  r4c::Permit blocking = full.try_acquire();
  const auto refused = [&] { return full.try_execute([] { return 1; }); };
  EXPECT_FALSE(limit.try_execute(refused).has_value());
  EXPECT_FALSE(limit.is_drop(full.rejection()));
  limit.reconfigure(r4c::AdaptiveLimitConfig(config).drop_on<r4c::LimitExceededException>());
  EXPECT_TRUE(limit.is_drop(full.rejection()));
  EXPECT_FALSE(limit.try_execute(refused).has_value());  // a drop now, not the cached verdict
  clock->advance(1s);
  EXPECT_FALSE(limit.try_execute(refused).has_value());  // closes the window
  EXPECT_TRUE(limit.snapshot().window_dropped);
  EXPECT_LT(limit.limit(), 10);  // aimd backed off for the drop
  EXPECT_EQ(limit.in_flight(), 0);
}

TEST(AdaptiveLimitLiveTest, MaxWaitTurnsWaitingOnAndOffKeepingTheWaiters) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimitConfig config = fixed(1);
  r4c::AdaptiveLimit limit("waits", config, clock);
  r4c::Permit held = limit.try_acquire();
  RejectReason reason = RejectReason::none;
  EXPECT_FALSE(limit.acquire({}, &reason));
  EXPECT_EQ(reason, RejectReason::limit);

  limit.reconfigure(r4c::AdaptiveLimitConfig(config).max_wait(1s));
  EXPECT_TRUE(limit.waits());
  Waiters waiters(limit);
  waiters.start("a");
  waiters.start("b");
  EXPECT_EQ(limit.snapshot().waiting, 2);
  // Back to 0: the two keep waiting; a new call that finds the limit full is rejected at once.
  limit.reconfigure(config);
  EXPECT_FALSE(limit.waits());
  EXPECT_EQ(limit.snapshot().waiting, 2);
  EXPECT_FALSE(limit.acquire({}, &reason));
  EXPECT_EQ(reason, RejectReason::limit);
  held.on_ignore();  // a is granted, gives its slot back, b is granted
  EXPECT_EQ(waiters.ended(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(limit.in_flight(), 0);
  EXPECT_EQ(limit.snapshot().waiting, 0);
  EXPECT_EQ(limit.limit(), 1);
  // And on again: a waiter started now times out after the new max_wait.
  limit.reconfigure(r4c::AdaptiveLimitConfig(config).max_wait(50ms));
  held = limit.try_acquire();
  waiters.start("c");
  clock->advance(50ms);
  EXPECT_EQ(waiters.ended().back(), "c:wait_timeout");
  held.on_ignore();
  EXPECT_EQ(limit.in_flight(), 0);
}

TEST(AdaptiveLimitLiveTest, QueueOrderChangesTheNextGrant) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimitConfig config = fixed(1);
  config.max_wait(1s);
  r4c::AdaptiveLimit limit("order", config, clock);
  r4c::Permit held = limit.try_acquire();
  Waiters waiters(limit);
  for (const char* name : {"a", "b", "c"}) waiters.start(name);
  limit.reconfigure(r4c::AdaptiveLimitConfig(config).queue_order(r4c::QueueOrder::lifo));
  held.on_ignore();
  EXPECT_EQ(waiters.ended(), (std::vector<std::string>{"c", "b", "a"}));
  EXPECT_EQ(limit.in_flight(), 0);
}

TEST(AdaptiveLimitLiveTest, AdaptiveLifoTakesTheNewCodelSettingsAtTheNextGrant) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimitConfig config = fixed(1);
  config.max_wait(10s)
      .queue_order(r4c::QueueOrder::adaptive_lifo)
      .codel_interval(5s)
      .codel_target(5s);
  r4c::AdaptiveLimit limit("codel", config, clock);
  r4c::Permit held = limit.try_acquire();
  Waiters waiters(limit);
  waiters.start("old");
  clock->advance(200ms);
  waiters.start("new");
  clock->advance(200ms);
  // Under the new settings the queue stands (older than 100 ms) and "old" waited past 100 ms.
  limit.reconfigure(r4c::AdaptiveLimitConfig(config).codel_interval(100ms).codel_target(300ms));
  held.on_ignore();
  std::vector<std::string> ended = waiters.ended();  // both woken at once: in either order
  std::sort(ended.begin(), ended.end());
  EXPECT_EQ(ended, (std::vector<std::string>{"new", "old:wait_timeout"}));
  EXPECT_EQ(limit.in_flight(), 0);
}

TEST(AdaptiveLimitLiveTest, LoweringMaxQueueEvictsNobodyAndBoundsTheNewcomers) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimitConfig config = fixed(1);
  config.max_wait(1s).max_queue(3);
  r4c::AdaptiveLimit limit("queue", config, clock);
  r4c::Permit held = limit.try_acquire();
  Waiters waiters(limit);
  for (const char* name : {"a", "b", "c"}) waiters.start(name);
  limit.reconfigure(r4c::AdaptiveLimitConfig(config).max_queue(1));
  EXPECT_EQ(limit.snapshot().waiting, 3);
  EXPECT_EQ(limit.snapshot().max_queue, 1);
  waiters.start("d");  // the queue is over its new bound: refused at once
  EXPECT_EQ(waiters.answers(), 1u);
  held.on_ignore();
  EXPECT_EQ(waiters.ended(), (std::vector<std::string>{"d:queue_full", "a", "b", "c"}));
  EXPECT_EQ(limit.in_flight(), 0);
}

TEST(AdaptiveLimitLiveTest, DisablingAdmitsTheWaitersUncounted) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimitConfig config = fixed(1);
  config.max_wait(1s);
  r4c::AdaptiveLimit limit("off", config, clock);
  r4c::Permit held = limit.try_acquire();
  Waiters waiters(limit);
  waiters.start("a");
  waiters.start("b");
  limit.reconfigure(r4c::AdaptiveLimitConfig(config).enabled(false));
  std::vector<std::string> ended = waiters.ended();  // both granted at once: in either order
  std::sort(ended.begin(), ended.end());
  EXPECT_EQ(ended, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(limit.in_flight(), 1);  // only the held one counts
  held.on_success();
  EXPECT_EQ(limit.in_flight(), 0);
  EXPECT_EQ(limit.snapshot().waiting, 0);
}

int partition_in_flight(const r4c::AdaptiveLimit& limit, const std::string& name) {
  for (const r4c::LimitPartitionSnapshot& p : limit.snapshot().partitions) {
    if (p.name == name) return p.in_flight;
  }
  return -1;
}

TEST(AdaptiveLimitLiveTest, ANewPartitionLayoutCarriesTheCallsInFlightByName) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimitConfig config = fixed(10);
  config.partition("user", 0.5).partition("prefetch", 0.3).partition_borrow(false);
  r4c::AdaptiveLimit limit("layout", config, clock);
  std::vector<r4c::Permit> users;
  std::vector<r4c::Permit> prefetches;
  for (int i = 0; i < 3; ++i) users.push_back(limit.try_acquire(limit.partition("user")));
  for (int i = 0; i < 2; ++i) prefetches.push_back(limit.try_acquire(limit.partition("prefetch")));
  ASSERT_EQ(limit.in_flight(), 5);

  r4c::AdaptiveLimitConfig next = fixed(10);
  next.partition("batch", 0.5).partition("user", 0.2).partition_borrow(false);
  limit.reconfigure(next);
  EXPECT_EQ(partition_in_flight(limit, "user"), 3);
  EXPECT_EQ(partition_in_flight(limit, "batch"), 0);
  EXPECT_EQ(partition_in_flight(limit, ""), 2);  // prefetch is gone: its calls count as none
  EXPECT_EQ(partition_in_flight(limit, "prefetch"), -1);
  // user holds 3 of its 2 now: no more; batch has its 5.
  EXPECT_FALSE(limit.try_acquire(limit.partition("user")));
  std::vector<r4c::Permit> batch;
  for (int i = 0; i < 5; ++i) batch.push_back(limit.try_acquire(limit.partition("batch")));
  EXPECT_TRUE(
      std::all_of(batch.begin(), batch.end(), [](const r4c::Permit& p) { return bool(p); }));
  EXPECT_FALSE(limit.try_acquire(limit.partition("batch")));
  EXPECT_EQ(limit.in_flight(), 10);
  EXPECT_FALSE(limit.try_acquire());  // never above the limit

  // Released into the layout current now, and then into none at all.
  users.pop_back();
  prefetches.pop_back();
  EXPECT_EQ(partition_in_flight(limit, "user"), 2);
  EXPECT_EQ(partition_in_flight(limit, ""), 1);
  limit.reconfigure(fixed(10));
  EXPECT_FALSE(limit.partitioned());
  EXPECT_TRUE(limit.snapshot().partitions.empty());
  users.clear();
  batch.pop_back();
  EXPECT_EQ(limit.in_flight(), 5);  // a prefetch and four batch calls
  limit.reconfigure(config);        // partitions again: the calls from before count nowhere
  EXPECT_EQ(partition_in_flight(limit, "user"), 0);
  prefetches.clear();
  batch.clear();
  EXPECT_EQ(limit.in_flight(), 0);
  for (const r4c::LimitPartitionSnapshot& p : limit.snapshot().partitions)
    EXPECT_EQ(p.in_flight, 0) << p.name;
  EXPECT_EQ(limit.limit(), 10);
}

TEST(AdaptiveLimitLiveTest, PartitionBorrowChangesTheNextAdmission) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimitConfig config = fixed(10);
  config.partition("user", 0.5).partition_borrow(false);
  r4c::AdaptiveLimit limit("borrow", config, clock);
  std::vector<r4c::Permit> held;
  for (int i = 0; i < 5; ++i) held.push_back(limit.try_acquire(limit.partition("user")));
  EXPECT_FALSE(limit.try_acquire(limit.partition("user")));
  limit.reconfigure(r4c::AdaptiveLimitConfig(config).partition_borrow(true));
  EXPECT_EQ(partition_in_flight(limit, "user"), 5);         // kept
  EXPECT_TRUE(limit.try_acquire(limit.partition("user")));  // borrows the idle share now
  held.clear();
  EXPECT_EQ(limit.in_flight(), 0);
}

TEST(AdaptiveLimitLiveTest, AWaiterIsGrantedUnderTheLayoutCurrentThen) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimitConfig config = fixed(2);
  config.max_wait(1s).partition("user", 0.5).partition_borrow(false);
  r4c::AdaptiveLimit limit("waiting layout", config, clock);
  r4c::Permit held = limit.try_acquire(limit.partition("user"));
  Waiters waiters(limit);
  waiters.start("u", r4c::Admission{CallClass::critical, limit.partition("user")});
  EXPECT_EQ(limit.snapshot().waiting, 1);
  // user gets the whole limit now: the waiter is granted by the reconfigure itself.
  r4c::AdaptiveLimitConfig next = fixed(2);
  next.max_wait(1s).partition("user", 1.0).partition_borrow(false);
  limit.reconfigure(next);
  EXPECT_EQ(waiters.ended(), (std::vector<std::string>{"u"}));
  held.on_ignore();
  EXPECT_EQ(limit.in_flight(), 0);
  EXPECT_EQ(partition_in_flight(limit, "user"), 0);
}

// Every setting that the admission and the queue read, flipped while eight threads call, wait
// and end calls on it (run under TSan: label concurrency). Ends with every slot free.
// A listener runs while the limit holds its closing token (and, from reconfigure(), its
// mutex); a reconfiguration it asks of the same limit used to wait for them forever.
TEST(AdaptiveLimitLiveTest, AListenerReconfiguresItsOwnLimitOnceItHasReturned) {
  auto clock = std::make_shared<r4c::ManualClock>();
  const r4c::AdaptiveLimitConfig config = fixed(5);
  r4c::AdaptiveLimit limit("listened", config, clock);
  // A running limit keeps its value (clamped): initialLimit only has to fit the new bounds.
  const auto capped = [&](int max) {
    return r4c::AdaptiveLimitConfig(config).initial_limit(1).max_limit(max);
  };
  std::vector<std::pair<int, int>> changes;
  std::vector<int> max_seen_by_listener;
  const r4c::Subscription subscription =
      limit.on_limit_change([&, calls = 0](const r4c::LimitChangeEvent& event) mutable {
        changes.emplace_back(event.old_limit, event.new_limit);
        max_seen_by_listener.push_back(limit.config().max_limit());
        ++calls;
        if (calls == 1) {
          r4c::AdaptiveLimitConfig bad(config);
          bad.min_limit(8);                                            // above initialLimit 5
          EXPECT_THROW(limit.reconfigure(bad), r4c::ConfigException);  // refused at once
          limit.reconfigure(capped(3));
        } else if (calls == 2) {
          limit.reconfigure(capped(2));  // the last one wins
          limit.reconfigure(capped(1));
        } else if (calls == 4) {
          limit.reconfigure(capped(3));
        }
      });

  // A drop closes a window: AIMD backs 5 off to 4, and the listener asks for max 3.
  r4c::Permit permit = limit.try_acquire();
  clock->advance(1s);
  permit.on_drop();
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes[0], std::make_pair(5, 4));
  // Applied once the first listener returned: 4 clamped to 3, whose listener asked twice.
  EXPECT_EQ(changes[1], std::make_pair(4, 3));
  EXPECT_EQ(changes[2], std::make_pair(3, 1));
  EXPECT_EQ(max_seen_by_listener, (std::vector<int>{20, 3, 1}));
  EXPECT_EQ(limit.config().max_limit(), 1);
  EXPECT_EQ(limit.limit(), 1);

  // The window reopened: the next call is admitted and its close is an ordinary one.
  r4c::Permit next = limit.try_acquire();
  ASSERT_TRUE(next);
  clock->advance(1s);
  next.on_success();
  EXPECT_EQ(limit.snapshot().windows, 2u);

  // From reconfigure(): its own listener's request follows it.
  changes.clear();
  limit.reconfigure(r4c::AdaptiveLimitConfig(config).initial_limit(4).min_limit(4).max_limit(9));
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0], std::make_pair(1, 4));  // clamped into the new bounds
  EXPECT_EQ(changes[1], std::make_pair(4, 3));
  EXPECT_EQ(limit.config().min_limit(), 1);
  EXPECT_EQ(limit.config().max_limit(), 3);
  EXPECT_EQ(limit.limit(), 3);
  EXPECT_EQ(limit.in_flight(), 0);
}

// The same through another limit: a's listener reconfigures b, whose listener reconfigures a
// while a's listeners are still running on this thread.
TEST(AdaptiveLimitLiveTest, ListenersOfTwoLimitsReconfigureEachOther) {
  auto clock = std::make_shared<r4c::ManualClock>();
  const r4c::AdaptiveLimitConfig config = fixed(5);
  r4c::AdaptiveLimit a("a", config, clock);
  r4c::AdaptiveLimit b("b", config, clock);
  const auto capped = [&](int max) {
    return r4c::AdaptiveLimitConfig(config).initial_limit(1).max_limit(max);
  };
  std::vector<std::string> changes;
  const r4c::Subscription on_a = a.on_limit_change([&](const r4c::LimitChangeEvent& event) {
    changes.push_back("a " + std::to_string(event.old_limit) + "->" +
                      std::to_string(event.new_limit));
    if (changes.size() == 1) b.reconfigure(capped(3));
  });
  const r4c::Subscription on_b = b.on_limit_change([&](const r4c::LimitChangeEvent& event) {
    changes.push_back("b " + std::to_string(event.old_limit) + "->" +
                      std::to_string(event.new_limit));
    a.reconfigure(capped(2));  // a's listener is still running: kept for a
  });
  r4c::Permit permit = a.try_acquire();
  clock->advance(1s);
  permit.on_drop();
  EXPECT_EQ(changes, (std::vector<std::string>{"a 5->4", "b 5->3", "a 4->2"}));
  EXPECT_EQ(a.config().max_limit(), 2);
  EXPECT_EQ(b.config().max_limit(), 3);
  EXPECT_EQ(a.limit(), 2);
  EXPECT_EQ(b.limit(), 3);
}

TEST(AdaptiveLimitLiveTest, ReconfiguresEverySettingInALoopWhileEightThreadsCall) {
  auto clock = std::make_shared<r4c::ManualClock>();
  const std::string base =
      "instances.orders.adaptiveLimit.algorithm = aimd\n"
      "instances.orders.adaptiveLimit.initialLimit = 6\n"
      "instances.orders.adaptiveLimit.maxLimit = 20\n"
      "instances.orders.adaptiveLimit.window = 100ms\n"
      "instances.orders.adaptiveLimit.minWindowSamples = 1\n";
  const std::string texts[] = {
      base,
      base +
          "instances.orders.adaptiveLimit.maxWait = 20ms\n"
          "instances.orders.adaptiveLimit.queueOrder = lifo\n"
          "instances.orders.adaptiveLimit.maxQueue = 4\n"
          "instances.orders.adaptiveLimit.bulkShare = 0.5\n",
      base +
          "instances.orders.adaptiveLimit.maxWait = 50ms\n"
          "instances.orders.adaptiveLimit.queueOrder = adaptive_lifo\n"
          "instances.orders.adaptiveLimit.codelInterval = 10ms\n"
          "instances.orders.adaptiveLimit.maxQueueFactor = 2\n"
          "instances.orders.adaptiveLimit.partitions = user:0.5, batch:0.3\n"
          "instances.orders.adaptiveLimit.latencyHistogram = true\n",
      base +
          "instances.orders.adaptiveLimit.partitions = batch:0.4, other:0.2\n"
          "instances.orders.adaptiveLimit.partitionBorrow = false\n"
          "instances.orders.adaptiveLimit.dropOn = RejectedException\n"
          "instances.orders.adaptiveLimit.criticalShare = 0.9\n"
          "instances.orders.adaptiveLimit.degradedShare = 0.8\n"
          "instances.orders.adaptiveLimit.bestEffortShare = 0.7\n"
          "instances.orders.adaptiveLimit.bulkShare = 0.6\n",
      base +
          "instances.orders.adaptiveLimit.enabled = false\n"
          "instances.orders.adaptiveLimit.latencyHistogram = true\n"};
  r4c::ResilienceRegistry registry = r4c::testing::registry(clock).config_text(texts[2]).build();
  r4c::AdaptiveLimit& limit = registry.adaptive_limit_policy("shop::Orders#place", "orders");
  std::atomic<bool> stop{false};
  std::stop_source cancel;
  std::atomic<std::uint64_t> admitted{0};
  std::atomic<int> finished{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      const auto partition = r4c::LimitPartition::at(t % 3 - 1);
      const auto cls = static_cast<CallClass>(t % r4c::kLimitedClasses);
      int i = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        ++i;
        r4c::Permit permit = i % 3 == 0
                                 ? limit.acquire(r4c::Admission{cls, partition, cancel.get_token()})
                                 : limit.try_acquire(partition, cls);
        if (!permit) continue;
        admitted.fetch_add(1, std::memory_order_relaxed);
        if (i % 5 == 0) {
          (void)limit.try_execute([]() -> r4c::Outcome<int> {
            return r4c::Outcome<int>::failure(std::make_exception_ptr(std::runtime_error("x")));
          });
        }
        if (i % 2 == 0) {
          permit.on_success();
        } else {
          permit.on_drop();
        }
      }
      finished.fetch_add(1);
    });
  }
  std::mt19937 random(r4c::test::test_seed(19));
  for (int i = 0; i < 300; ++i) {
    (void)registry.reconfigure(texts[random() % std::size(texts)]);
    clock->advance(10ms);  // ends waits, closes windows
    const r4c::AdaptiveLimitSnapshot s = limit.snapshot();
    EXPECT_GE(s.waiting, 0);
  }
  stop.store(true);
  cancel.request_stop();
  // try_execute's waits take no stop token: their time runs out on the clock.
  while (finished.load() < static_cast<int>(threads.size())) {
    clock->advance(10ms);
    std::this_thread::yield();
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_GT(admitted.load(), 0u);
  EXPECT_EQ(limit.in_flight(), 0);  // every slot came back
  const r4c::AdaptiveLimitSnapshot s = limit.snapshot();
  EXPECT_EQ(s.waiting, 0);
  for (const r4c::LimitPartitionSnapshot& p : s.partitions) EXPECT_EQ(p.in_flight, 0) << p.name;
  (void)registry.reconfigure(texts[2]);  // partitions again: still nothing in flight
  for (const r4c::LimitPartitionSnapshot& p : limit.snapshot().partitions)
    EXPECT_EQ(p.in_flight, 0) << p.name;
}

}  // namespace
