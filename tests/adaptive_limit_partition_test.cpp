// SPDX-License-Identifier: Apache-2.0
// The adaptive limit's partitions (Netflix concurrency-limits' option, with a hard global
// limit), on a ManualClock: each partition's guarantee, borrowing on and off, the calls that
// name none, classes within a partition, waiting, the snapshot, the metrics, the config's
// checks, and in-flight never above the limit at any admission under 8 threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "r4c/adaptive_limit.hpp"
#include "r4c/metrics.hpp"
#include "r4c/registry.hpp"
#include "test_seed.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using r4c::CallClass;
using r4c::LimitPartition;

// A limit held at `limit` (min = max), its window long enough for no test to close it.
r4c::AdaptiveLimitConfig partitioned(int limit, bool borrow = true) {
  r4c::AdaptiveLimitConfig config;
  config.algorithm(r4c::LimitAlgorithm::aimd)
      .initial_limit(limit)
      .min_limit(limit)
      .max_limit(limit)
      .window(1s)
      .partition("user", 0.6)
      .partition("prefetch", 0.3)
      .partition_borrow(borrow);
  return config;
}

// Takes slots for one partition until it is refused; keeps them.
int fill(r4c::AdaptiveLimit& limit, LimitPartition partition, std::vector<r4c::Permit>& held) {
  int taken = 0;
  while (r4c::Permit permit = limit.try_acquire(partition)) {
    EXPECT_LE(limit.in_flight(), limit.limit());
    held.push_back(std::move(permit));
    ++taken;
  }
  return taken;
}

class AdaptiveLimitPartitionTest : public ::testing::Test {
 protected:
  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
};

TEST_F(AdaptiveLimitPartitionTest, EachPartitionGetsItsGuaranteeBesideTheOthers) {
  r4c::AdaptiveLimit limit("orders", partitioned(10, false), clock_);
  const LimitPartition user = limit.partition("user");
  const LimitPartition prefetch = limit.partition("prefetch");
  std::vector<r4c::Permit> held;
  EXPECT_EQ(fill(limit, prefetch, held), 3);  // floor(0.3 × 10)
  EXPECT_EQ(fill(limit, user, held), 6);
  EXPECT_EQ(fill(limit, LimitPartition{}, held), 1);  // what no partition reserves
  EXPECT_EQ(limit.in_flight(), 10);
  const r4c::AdaptiveLimitSnapshot snap = limit.snapshot();
  ASSERT_EQ(snap.partitions.size(), 3u);
  EXPECT_EQ(snap.partitions[0].name, "user");
  EXPECT_EQ(snap.partitions[0].guaranteed, 6);
  EXPECT_EQ(snap.partitions[0].in_flight, 6);
  EXPECT_EQ(snap.partitions[0].rejected, 1u);
  EXPECT_EQ(snap.partitions[1].name, "prefetch");
  EXPECT_EQ(snap.partitions[1].in_flight, 3);
  EXPECT_EQ(snap.partitions[2].name, "");
  EXPECT_EQ(snap.partitions[2].guaranteed, 1);
  EXPECT_EQ(snap.rejected, 3u);
}

TEST_F(AdaptiveLimitPartitionTest, WithoutBorrowingAPartitionNeverRunsMoreThanItsShare) {
  r4c::AdaptiveLimit limit("orders", partitioned(10, false), clock_);
  std::vector<r4c::Permit> held;
  // Alone on the limit, prefetch still gets 3 of 10.
  EXPECT_EQ(fill(limit, limit.partition("prefetch"), held), 3);
  held.clear();
  EXPECT_EQ(limit.in_flight(), 0);
  EXPECT_EQ(fill(limit, limit.partition("prefetch"), held), 3);
}

TEST_F(AdaptiveLimitPartitionTest, ABorrowerTakesIdleSharesAndGivesThemBackToAPartitionThatAsks) {
  r4c::AdaptiveLimit limit("orders", partitioned(10, true), clock_);
  const LimitPartition user = limit.partition("user");
  const LimitPartition prefetch = limit.partition("prefetch");
  std::vector<r4c::Permit> prefetching;
  // user and the rest idle: prefetch borrows the whole limit, never more.
  EXPECT_EQ(fill(limit, prefetch, prefetching), 10);
  EXPECT_EQ(limit.in_flight(), 10);

  // user asks: the limit is full with borrowed slots, so it is refused, and from now on has
  // demand; every slot prefetch frees goes to user until user has its 6.
  EXPECT_FALSE(limit.try_acquire(user));
  std::vector<r4c::Permit> users;
  for (int i = 0; i < 6; ++i) {
    prefetching.pop_back();
    EXPECT_FALSE(limit.try_acquire(prefetch)) << "prefetch may not borrow user's guarantee";
    r4c::Permit permit = limit.try_acquire(user);
    ASSERT_TRUE(permit) << "user below its guarantee with a free slot, at " << i;
    users.push_back(std::move(permit));
    EXPECT_LE(limit.in_flight(), limit.limit());
  }
  // user at its guarantee and prefetch at 4 (its 3 and the idle rest's 1): full.
  EXPECT_EQ(limit.in_flight(), 10);
  prefetching.pop_back();
  r4c::Permit retaken = limit.try_acquire(prefetch);  // the rest's slot, lent again
  EXPECT_TRUE(retaken);

  // A call that names no partition asks: refused, and the rest's guarantee (1) is kept for
  // it from then on.
  EXPECT_FALSE(limit.try_acquire(LimitPartition{}));
  retaken.on_success();
  EXPECT_FALSE(limit.try_acquire(prefetch));
  r4c::Permit unnamed = limit.try_acquire(LimitPartition{});
  EXPECT_TRUE(unnamed);

  // Once user's demand has lapsed (a window without asking, nothing in flight), its share is
  // lent again.
  users.clear();
  clock_->advance(1s + 1ns);
  std::vector<r4c::Permit> more;
  EXPECT_EQ(fill(limit, prefetch, more), 6);
  EXPECT_EQ(limit.in_flight(), 10);
}

TEST_F(AdaptiveLimitPartitionTest, CallsThatNameNoPartitionBorrowWhenEveryShareIsReserved) {
  r4c::AdaptiveLimitConfig config = partitioned(10, true);
  config.partition("prefetch", 0.4);  // replaces 0.3: the shares sum to 1
  r4c::AdaptiveLimit limit("orders", config, clock_);
  std::vector<r4c::Permit> held;
  // Alone, the calls that name none borrow everything.
  EXPECT_EQ(fill(limit, LimitPartition{}, held), 10);
  held.clear();
  // prefetch runs 2 of its 4: the other 2 are kept for it, user takes its 6, nothing is left.
  for (int i = 0; i < 2; ++i) held.push_back(limit.try_acquire(limit.partition("prefetch")));
  EXPECT_EQ(fill(limit, limit.partition("user"), held), 6);
  EXPECT_EQ(fill(limit, LimitPartition{}, held), 0);
  EXPECT_EQ(fill(limit, limit.partition("prefetch"), held), 2);
  EXPECT_EQ(limit.in_flight(), 10);
}

TEST_F(AdaptiveLimitPartitionTest, AClassShareAppliesToTheTotalInsideAPartition) {
  r4c::AdaptiveLimit limit("orders", partitioned(10, true), clock_);
  std::vector<r4c::Permit> held;
  // bulk's share is 0.5 of the limit: 5 in flight, whatever the partition.
  while (r4c::Permit permit = limit.try_acquire(limit.partition("user"), CallClass::bulk))
    held.push_back(std::move(permit));
  EXPECT_EQ(held.size(), 5u);
  EXPECT_TRUE(limit.try_acquire(limit.partition("user")));  // a critical call of user: its 6th
  EXPECT_TRUE(limit.try_acquire(limit.partition("user"), CallClass::bypass));
  EXPECT_EQ(limit.in_flight(), 5);
}

TEST_F(AdaptiveLimitPartitionTest, ExecuteAndTryExecuteNameTheirPartition) {
  r4c::AdaptiveLimit limit("orders", partitioned(10, false), clock_);
  const LimitPartition prefetch = limit.partition("prefetch");
  std::vector<r4c::Permit> held;
  EXPECT_EQ(fill(limit, prefetch, held), 3);
  EXPECT_THROW(limit.execute(prefetch, [] { return 1; }), r4c::LimitExceededException);
  EXPECT_FALSE(limit.try_execute(prefetch, [] { return 1; }).has_value());
  EXPECT_EQ(limit.execute(limit.partition("user"), [] { return 2; }), 2);
  EXPECT_EQ(
      limit.try_execute(CallClass::degraded, limit.partition("user"), [] { return 3; }).value(), 3);
  EXPECT_EQ(limit.in_flight(), 3);
  EXPECT_EQ(limit.snapshot().partitions[1].rejected, 3u);
}

TEST_F(AdaptiveLimitPartitionTest, AFreedSlotGoesToTheWaiterWhosePartitionMayTakeIt) {
  r4c::AdaptiveLimitConfig config = partitioned(10, false);
  config.max_wait(50ms);
  r4c::AdaptiveLimit limit("orders", config, clock_);
  const LimitPartition user = limit.partition("user");
  const LimitPartition prefetch = limit.partition("prefetch");
  std::vector<r4c::Permit> users, prefetching;
  EXPECT_EQ(fill(limit, user, users), 6);
  EXPECT_EQ(fill(limit, prefetch, prefetching), 3);
  // A prefetch call waits first (prefetch is at its share), then a user call (user too).
  r4c::Permit prefetch_granted, user_granted;
  r4c::RejectReason prefetch_reason = r4c::RejectReason::none;
  std::thread prefetch_waiter([&] {
    prefetch_granted =
        limit.acquire(r4c::Admission{CallClass::critical, prefetch}, &prefetch_reason);
  });
  while (limit.snapshot().waiting != 1) std::this_thread::yield();
  std::thread user_waiter([&] {
    user_granted = limit.acquire(r4c::Admission{CallClass::critical, user});
  });
  while (limit.snapshot().waiting != 2) std::this_thread::yield();
  // A user slot frees: the older prefetch waiter may not take it, the user waiter does.
  users.pop_back();
  user_waiter.join();
  EXPECT_TRUE(user_granted);
  EXPECT_EQ(limit.snapshot().waiting, 1);
  // A prefetch slot frees: the prefetch waiter gets it.
  prefetching.pop_back();
  prefetch_waiter.join();
  EXPECT_TRUE(prefetch_granted);
  EXPECT_EQ(limit.in_flight(), 9 + 0);  // 5 + 1 users, 2 + 1 prefetch
}

TEST_F(AdaptiveLimitPartitionTest, AWaiterOfAStuckPartitionTimesOutAndCountsInItsPartition) {
  r4c::AdaptiveLimitConfig config = partitioned(10, false);
  config.max_wait(20ms);
  r4c::AdaptiveLimit limit("orders", config, clock_);
  std::vector<r4c::Permit> held;
  EXPECT_EQ(fill(limit, limit.partition("prefetch"), held), 3);
  r4c::RejectReason reason = r4c::RejectReason::none;
  std::thread waiter([&] {
    r4c::Permit permit =
        limit.acquire(r4c::Admission{CallClass::critical, limit.partition("prefetch")}, &reason);
    EXPECT_FALSE(permit);
  });
  while (limit.snapshot().waiting != 1) std::this_thread::yield();
  // Free room elsewhere does not help prefetch.
  EXPECT_TRUE(limit.try_acquire(limit.partition("user")));
  clock_->advance(20ms);
  waiter.join();
  EXPECT_EQ(reason, r4c::RejectReason::wait_timeout);
  EXPECT_EQ(limit.snapshot().partitions[1].rejected, 2u);  // fill's refusal and the timeout
}

TEST_F(AdaptiveLimitPartitionTest, ThePartitionsShowInTheMetrics) {
  r4c::AdaptiveLimit limit("orders", partitioned(10, false), clock_);
  std::vector<r4c::Permit> held;
  fill(limit, limit.partition("user"), held);
  std::vector<r4c::metrics::Metric> out;
  r4c::metrics::Emitter emitter(out, "adaptivelimit", limit.instance_id());
  r4c::AdaptiveLimitKind::metrics(limit.snapshot(), emitter);
  const auto find = [&](const std::string& name, const std::string& partition) {
    return r4c::test::metric_value(out, name, "partition", partition);
  };
  EXPECT_EQ(find("r4c.adaptivelimit.partition.concurrent.calls", "user"), 6.0);
  EXPECT_EQ(find("r4c.adaptivelimit.partition.guaranteed.calls", "prefetch"), 3.0);
  EXPECT_EQ(find("r4c.adaptivelimit.partition.rejections", "user"), 1.0);
  EXPECT_EQ(find("r4c.adaptivelimit.partition.concurrent.calls", "none"), 0.0);
}

TEST_F(AdaptiveLimitPartitionTest, TheConfigRefusesSharesAboveOneAndBadNames) {
  r4c::AdaptiveLimitConfig config;
  config.partition("user", 0.7).partition("prefetch", 0.4);
  try {
    config.validate();
    FAIL() << "shares summing to 1.1 passed";
  } catch (const r4c::ConfigException& e) {
    EXPECT_EQ(e.code(), "R4C-REG-001");
    EXPECT_NE(std::string(e.what()).find("user 0.7 + prefetch 0.4"), std::string::npos) << e.what();
  }
  config.partition("prefetch", 0.3);
  EXPECT_NO_THROW(config.validate());
  EXPECT_THROW(config.partition("user", 0.0), r4c::ConfigException);
  EXPECT_THROW(config.partition("user", 1.5), r4c::ConfigException);
  EXPECT_THROW(config.partition("", 0.1), r4c::ConfigException);
  EXPECT_THROW(config.partition("none", 0.1), r4c::ConfigException);
  EXPECT_THROW(config.partition("a b", 0.1), r4c::ConfigException);
  EXPECT_THROW(config.partitions({{"a", 0.1}, {"a", 0.2}}), r4c::ConfigException);
  EXPECT_EQ(config.partitions()[0].share, 0.7);  // a refused setter changes nothing
  r4c::AdaptiveLimit limit("orders", config, clock_);
  try {
    (void)limit.partition("prefech");
    FAIL() << "an unknown partition was found";
  } catch (const r4c::ConfigException& e) {
    EXPECT_EQ(e.code(), "R4C-REG-012");
    EXPECT_NE(std::string(e.what()).find("valid: user, prefetch"), std::string::npos) << e.what();
  }
}

TEST_F(AdaptiveLimitPartitionTest, TheFileSetsThePartitionsAndTheirBorrowing) {
  auto registry = r4c::ResilienceRegistry::builder()
                      .config_text(R"(
                        defaults.adaptiveLimit.partitions = user:0.6, prefetch:0.3
                        instances.orders.adaptiveLimit.partitionBorrow = false
                      )")
                      .build();
  const r4c::AdaptiveLimit& limit = registry.adaptive_limit_policy("m", "orders");
  ASSERT_EQ(limit.config().partitions().size(), 2u);
  EXPECT_EQ(limit.config().partitions()[1], (r4c::LimitPartitionShare{"prefetch", 0.3}));
  EXPECT_FALSE(limit.config().partition_borrow());
  EXPECT_TRUE(limit.partitioned());
  EXPECT_EQ(limit.partition("prefetch").index(), 1);
  const auto refused = [](const char* text) {
    try {
      (void)r4c::ResilienceRegistry::builder().config_text(text).build();
      ADD_FAILURE() << text << " was accepted";
      return std::string();
    } catch (const r4c::ConfigException& e) {
      return std::string(e.code()) + " " + e.what();
    }
  };
  EXPECT_NE(
      refused("defaults.adaptiveLimit.partitions = user:0.7, prefetch:0.4").find("R4C-REG-001"),
      std::string::npos);
  EXPECT_NE(refused("defaults.adaptiveLimit.partitions = user=0.7").find("R4C-CFG-004"),
            std::string::npos);
  EXPECT_NE(refused("defaults.adaptiveLimit.partitions = user:lots").find("R4C-CFG-004"),
            std::string::npos);
}

// 8 threads of random partitions, classes and hold times, with windows closing as the
// ManualClock moves: at every admission in-flight (as the test counts it: never above the
// limit's own count) is within the limit.
TEST_F(AdaptiveLimitPartitionTest, InFlightNeverExceedsTheLimitUnderEightThreads) {
  constexpr int kLimit = 8;
  r4c::AdaptiveLimitConfig config;
  config.algorithm(r4c::LimitAlgorithm::aimd)
      .initial_limit(kLimit)
      .min_limit(kLimit)
      .max_limit(kLimit)
      .window(1ms)
      .min_window_samples(1)
      .partition("a", 0.5)
      .partition("b", 0.25)
      .partition("c", 0.125);
  r4c::AdaptiveLimit limit("orders", config, clock_);
  const std::uint64_t seed = r4c::test::test_seed(1717);
  std::atomic<int> running{0};
  std::atomic<int> over{0};
  std::atomic<long> admitted{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 random(seed + static_cast<std::uint64_t>(t));
      std::vector<r4c::Permit> held;
      for (int i = 0; i < 20000; ++i) {
        const LimitPartition partition = LimitPartition::at(static_cast<int>(random() % 4) - 1);
        const auto cls = static_cast<CallClass>(random() % 4);
        r4c::Permit permit = limit.try_acquire(partition, cls);
        if (permit) {
          // Counted after the admission and given back before the release: the test's count
          // never exceeds the limit's, so any count above the limit is the limit's fault.
          if (running.fetch_add(1, std::memory_order_seq_cst) + 1 > kLimit) over.fetch_add(1);
          admitted.fetch_add(1, std::memory_order_relaxed);
          held.push_back(std::move(permit));
        }
        if (!held.empty() && (held.size() > 3 || random() % 2 == 0)) {
          running.fetch_sub(1, std::memory_order_seq_cst);
          if (random() % 5 == 0) {
            held.back().on_drop();
          } else {
            held.back().on_success();
          }
          held.pop_back();
        }
      }
      running.fetch_sub(static_cast<int>(held.size()), std::memory_order_seq_cst);
      held.clear();
    });
  }
  std::thread ticker([&] {
    while (!stop.load()) {
      clock_->advance(1ms);
      std::this_thread::yield();
    }
  });
  for (std::thread& thread : threads) thread.join();
  stop.store(true);
  ticker.join();
  EXPECT_EQ(over.load(), 0);
  EXPECT_GT(admitted.load(), 0);
  EXPECT_EQ(limit.in_flight(), 0);
  const r4c::AdaptiveLimitSnapshot snap = limit.snapshot();
  std::uint64_t rejected = 0;
  for (const r4c::LimitPartitionSnapshot& part : snap.partitions) {
    EXPECT_EQ(part.in_flight, 0) << part.name;
    rejected += part.rejected;
  }
  EXPECT_EQ(rejected, snap.rejected);
}

}  // namespace
