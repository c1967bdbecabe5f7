// SPDX-License-Identifier: Apache-2.0
// Randomised waits on one adaptive limit from 8 threads: classes, timeouts, cancellations,
// evictions and (in the second test) limit changes, while one more thread moves the
// ManualClock and cancels waits. Runs under ThreadSanitizer in CI (label "concurrency").
// 10^6 waits in an optimised build, 10^5 under a sanitizer (which slows each one tenfold), and
// more if the thread schedule has not yet ended a wait in every way.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <mutex>
#include <random>
#include <stop_token>
#include <thread>
#include <vector>

#include "r4c/adaptive_limit.hpp"
#include "test_seed.hpp"
#include "wait_stress_support.hpp"

namespace {

using namespace std::chrono_literals;

constexpr int kWaits = r4c::test::kSanitized ? 100'000 : 1'000'000;
constexpr int kThreads = 8;

struct Worker {
  std::mutex mutex;  // guards stop
  std::stop_source stop;
  std::array<std::uint64_t, r4c::kRejectReasons> reasons{};
  std::uint64_t granted = 0;
  std::uint64_t attempts = 0;
};

constexpr std::initializer_list<r4c::RejectReason> kEveryWaitEnd = {
    r4c::RejectReason::wait_timeout, r4c::RejectReason::cancelled, r4c::RejectReason::evicted,
    r4c::RejectReason::queue_full};

void stress(bool changing_limit) {
  constexpr int kLimit = 6;
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit(
      "stress", r4c::test::stress_limit(changing_limit, kLimit, 12, 300us, changing_limit ? 5 : 1),
      clock);
  std::atomic<int> running{0};
  std::atomic<int> most_running{0};
  std::atomic<bool> over_limit{false};
  std::atomic<int> finished{0};
  std::array<Worker, kThreads> workers;
  r4c::test::ReasonsSeen seen;
  const std::uint64_t seed = r4c::test::test_seed(17);
  const auto give_up = std::chrono::steady_clock::now() + r4c::test::kCoverageCap;

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 random(seed + t);
      Worker& me = workers[t];
      for (int i = 0; i < kWaits / kThreads ||
                      (!seen.all(kEveryWaitEnd) && std::chrono::steady_clock::now() < give_up);
           ++i) {
        ++me.attempts;
        r4c::Admission admission;
        admission.cls = static_cast<r4c::CallClass>(random() % r4c::kLimitedClasses);
        {
          std::scoped_lock lock(me.mutex);
          me.stop = std::stop_source();
          admission.stop = me.stop.get_token();
        }
        r4c::RejectReason reason = r4c::RejectReason::none;
        r4c::Permit permit = limit.acquire(admission, &reason);
        if (!permit) {
          ++me.reasons[static_cast<int>(reason)];
          seen.mark(reason);
          continue;
        }
        ++me.granted;
        const int now = running.fetch_add(1) + 1;
        if (!changing_limit && now > kLimit) over_limit = true;
        int seen = most_running.load();
        while (now > seen && !most_running.compare_exchange_weak(seen, now)) {
        }
        if (random() % 4 == 0) std::this_thread::yield();
        running.fetch_sub(1);
        switch (random() % 3) {
          case 0:
            permit.on_success();
            break;
          case 1:
            permit.on_drop();
            break;
          default:
            permit.on_ignore();
        }
      }
      finished.fetch_add(1);
    });
  }
  // The clock moves (now and then past every wait) and waits are cancelled until every worker
  // is done.
  std::mt19937_64 random(seed);
  while (finished.load() < kThreads) {
    clock->advance(random() % 16 == 0 ? 350us : std::chrono::microseconds(random() % 50));
    Worker& victim = workers[random() % kThreads];
    if (random() % 4 == 0) {
      std::scoped_lock lock(victim.mutex);
      victim.stop.request_stop();
    }
    std::this_thread::yield();
  }
  for (std::thread& thread : threads) thread.join();

  std::uint64_t granted = 0;
  std::uint64_t attempts = 0;
  std::array<std::uint64_t, r4c::kRejectReasons> reasons{};
  for (const Worker& worker : workers) {
    granted += worker.granted;
    attempts += worker.attempts;
    for (int r = 0; r < r4c::kRejectReasons; ++r) reasons[r] += worker.reasons[r];
  }
  std::uint64_t rejected = 0;
  for (std::uint64_t count : reasons) rejected += count;
  EXPECT_GE(attempts, static_cast<std::uint64_t>(kWaits / kThreads * kThreads));
  EXPECT_EQ(granted + rejected, attempts);
  EXPECT_EQ(reasons[static_cast<int>(r4c::RejectReason::none)], 0u);

  const r4c::AdaptiveLimitSnapshot snapshot = limit.snapshot();
  EXPECT_EQ(snapshot.in_flight, 0);  // every slot free
  EXPECT_EQ(snapshot.waiting, 0);    // every waiter answered
  EXPECT_EQ(clock->pending_tasks(), 0u);
  EXPECT_EQ(snapshot.rejected, rejected);  // each answered once, counted once
  for (int r = 1; r < r4c::kRejectReasons; ++r) {
    EXPECT_EQ(snapshot.rejected_by_reason[r], reasons[r]) << r4c::to_string(r4c::RejectReason(r));
  }
  EXPECT_FALSE(over_limit.load());
  EXPECT_LE(most_running.load(), changing_limit ? 12 : kLimit);
  // The mix really exercised every way a wait ends.
  EXPECT_GT(snapshot.waits_granted, 0u);
  EXPECT_GT(reasons[static_cast<int>(r4c::RejectReason::wait_timeout)], 0u);
  EXPECT_GT(reasons[static_cast<int>(r4c::RejectReason::cancelled)], 0u);
  EXPECT_GT(reasons[static_cast<int>(r4c::RejectReason::evicted)], 0u);
  EXPECT_GT(reasons[static_cast<int>(r4c::RejectReason::queue_full)], 0u);
  if (changing_limit) {
    EXPECT_GT(snapshot.limit_changes, 0u);
  }
}

TEST(AdaptiveLimitWaitStressTest, AFixedLimitIsNeverExceededAndEveryWaiterEndsOnce) {
  stress(false);
}

TEST(AdaptiveLimitWaitStressTest, AMovingLimitLeavesEverySlotFreeAndEveryWaiterAnswered) {
  stress(true);
}

}  // namespace
