// SPDX-License-Identifier: Apache-2.0
// Runs under ThreadSanitizer in CI (label "concurrency").
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "r4c/adaptive_limit.hpp"
#include "test_seed.hpp"

namespace {

using namespace std::chrono_literals;

struct ThreadTally {
  std::uint64_t rejected = 0;
  std::uint64_t samples = 0;  // successes and drops: the calls that are samples
};

void stress(r4c::LimitAlgorithm algorithm) {
  constexpr int kThreads = 8;
  constexpr int kCallsPerThread = 20000;
  constexpr int kMinLimit = 1;
  constexpr int kMaxLimit = 16;
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("stress",
                           r4c::AdaptiveLimitConfig()
                               .algorithm(algorithm)
                               .initial_limit(4)
                               .min_limit(kMinLimit)
                               .max_limit(kMaxLimit)
                               .window(1ms)
                               .min_window_samples(5)
                               .queue_size(1),
                           clock);
  std::atomic<int> running{0};
  std::atomic<int> most_running{0};
  std::atomic<bool> done{false};
  std::atomic<bool> bounds_ok{true};

  std::thread watcher([&] {
    while (!done.load(std::memory_order_acquire)) {
      const r4c::AdaptiveLimitSnapshot snap = limit.snapshot();
      if (snap.limit < kMinLimit || snap.limit > kMaxLimit || snap.in_flight < 0 ||
          snap.in_flight > kMaxLimit) {
        bounds_ok.store(false);
      }
      std::this_thread::yield();
    }
  });

  std::vector<ThreadTally> tallies(kThreads);
  std::vector<std::thread> threads;
  const std::uint64_t seed = r4c::test::test_seed();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(static_cast<unsigned>(seed + static_cast<std::uint64_t>(t) + 1));
      ThreadTally& tally = tallies[static_cast<std::size_t>(t)];
      for (int i = 0; i < kCallsPerThread; ++i) {
        const unsigned roll = random() % 10;
        if (roll == 0) {  // the throwing API, with a drop or an ignored failure
          try {
            limit.execute([&] {
              clock->advance(std::chrono::microseconds(random() % 50));
              if (random() % 2) throw r4c::CallTimeoutException("late");
              throw std::runtime_error("404");
            });
          } catch (const r4c::LimitExceededException&) {
            ++tally.rejected;
          } catch (const r4c::CallTimeoutException&) {
            ++tally.samples;
          } catch (const std::runtime_error&) {
          }
          continue;
        }
        r4c::Permit permit = limit.try_acquire();
        if (!permit) {
          ++tally.rejected;
          continue;
        }
        const int now_running = running.fetch_add(1) + 1;
        int most = most_running.load();
        while (now_running > most && !most_running.compare_exchange_weak(most, now_running)) {
        }
        clock->advance(std::chrono::microseconds(random() % 100));
        running.fetch_sub(1);
        if (roll < 7) {
          permit.on_success();
          ++tally.samples;
        } else if (roll < 9) {
          permit.on_drop();
          ++tally.samples;
        }  // else destroyed untouched: ignored
      }
    });
  }
  for (auto& thread : threads) thread.join();
  done.store(true, std::memory_order_release);
  watcher.join();

  std::uint64_t rejected = 0;
  std::uint64_t samples = 0;
  for (const ThreadTally& tally : tallies) {
    rejected += tally.rejected;
    samples += tally.samples;
  }
  const r4c::AdaptiveLimitSnapshot snap = limit.snapshot();
  EXPECT_TRUE(bounds_ok.load()) << "the limit or in-flight count left its bounds";
  EXPECT_EQ(snap.in_flight, 0) << "slots did not balance";
  EXPECT_LE(most_running.load(), kMaxLimit);
  EXPECT_EQ(snap.rejected, rejected) << "rejections must be counted exactly";
  EXPECT_LE(snap.samples, samples) << "samples were invented";
  EXPECT_GT(snap.windows, 0u);
  EXPECT_GE(snap.limit, kMinLimit);
  EXPECT_LE(snap.limit, kMaxLimit);
}

TEST(AdaptiveLimitConcurrencyTest, Gradient2StressKeepsSlotsBalancedBoundsAndCounts) {
  stress(r4c::LimitAlgorithm::gradient2);
}

TEST(AdaptiveLimitConcurrencyTest, AimdStressKeepsSlotsBalancedBoundsAndCounts) {
  stress(r4c::LimitAlgorithm::aimd);
}

TEST(AdaptiveLimitConcurrencyTest, ThreadsWithTheirOwnStripesLoseNoSample) {
  constexpr int kThreads = 6;
  constexpr int kCalls = 5000;
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("samples", r4c::AdaptiveLimitConfig().initial_limit(100), clock);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kCalls; ++i) {
        r4c::Permit permit = limit.try_acquire();
        ASSERT_TRUE(permit);
        permit.on_success();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  clock->advance(1s);  // the window ends; one more call closes it
  limit.execute([] {});
  EXPECT_EQ(limit.snapshot().windows, 1u);
  EXPECT_EQ(limit.snapshot().samples, static_cast<std::uint64_t>(kThreads * kCalls + 1));
}

TEST(AdaptiveLimitConcurrencyTest, RejectionsAreExactWithMoreThreadsThanStripes) {
  constexpr int kThreads = static_cast<int>(r4c::detail::kThreadSlots) + 36;
  constexpr int kRejections = 500;
  r4c::AdaptiveLimit limit("full", r4c::AdaptiveLimitConfig().initial_limit(1),
                           std::make_shared<r4c::ManualClock>());
  r4c::Permit held = limit.try_acquire();
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();  // all alive at once
      for (int i = 0; i < kRejections; ++i) EXPECT_FALSE(limit.try_acquire());
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(limit.snapshot().rejected, static_cast<std::uint64_t>(kThreads) * kRejections);
}

TEST(AdaptiveLimitConcurrencyTest, ThreadsGiveTheirStripesBackWhenTheyExit) {
  r4c::AdaptiveLimit limit("slots");
  limit.execute([] {});  // this thread holds its slot
  const std::uint32_t before = r4c::detail::exclusive_thread_slots_in_use();
  std::vector<std::thread> threads;
  for (int t = 0; t < 10; ++t) threads.emplace_back([&] { limit.execute([] {}); });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(r4c::detail::exclusive_thread_slots_in_use(), before);
}

TEST(AdaptiveLimitConcurrencyTest, SnapshotsNeverMixTwoWindows) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("snapshots",
                           r4c::AdaptiveLimitConfig().window(1ms).min_window_samples(1), clock);
  std::atomic<bool> done{false};
  std::atomic<int> compared{0};
  std::thread closer([&] {
    // Window w has k = w % 8 + 1 samples and an average latency of k ms: all but one end at
    // once, the last after k * k ms, closing the window. A snapshot must pair the two.
    // At least 2000 windows, and on until the reader has compared 200 snapshots taken while
    // windows closed (a busy machine may not schedule it during the first 2000).
    for (int w = 0; w < 2000 || (compared.load() < 200 && w < 2'000'000); ++w) {
      const int k = w % 8 + 1;
      std::vector<r4c::Permit> permits;
      for (int i = 0; i < k; ++i) permits.push_back(limit.try_acquire());
      for (int i = 0; i + 1 < k; ++i) permits[static_cast<std::size_t>(i)].on_success();
      clock->advance(std::chrono::milliseconds(k * k));
      permits.back().on_success();
    }
    done.store(true);
  });
  auto check = [&limit] {
    const r4c::AdaptiveLimitSnapshot snap = limit.snapshot();
    if (snap.windows == 0) return false;
    EXPECT_EQ(snap.window_latency.count(),
              static_cast<std::int64_t>(snap.window_samples) * 1'000'000);
    return true;
  };
  while (!done.load()) {
    if (check()) compared.fetch_add(1);
  }
  closer.join();
  EXPECT_GE(compared.load(), 200);
  EXPECT_TRUE(check());
}

}  // namespace
