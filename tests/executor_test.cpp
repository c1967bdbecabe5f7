// SPDX-License-Identifier: Apache-2.0
#include "r4c/executor.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "r4c/errors.hpp"

namespace {

using ::testing::HasSubstr;

TEST(ExecutorTest, RunsTasksOnItsOwnThreads) {
  std::mutex mutex;
  std::set<std::thread::id> ran_on;
  std::latch done(20);
  {
    r4c::Executor executor(3);
    EXPECT_EQ(executor.threads(), 3);
    for (int i = 0; i < 20; ++i) {
      ASSERT_TRUE(executor.try_post([&] {
        {
          std::lock_guard<std::mutex> lock(mutex);
          ran_on.insert(std::this_thread::get_id());
        }
        done.count_down();
      }));
    }
    done.wait();
  }
  EXPECT_FALSE(ran_on.empty());
  EXPECT_LE(ran_on.size(), 3u);
  EXPECT_EQ(ran_on.count(std::this_thread::get_id()), 0u);
}

TEST(ExecutorTest, RefusesTasksPastMaxQueuedWithoutBlocking) {
  std::latch started(1);
  std::latch release(1);
  std::atomic<int> ran{0};
  r4c::Executor executor(1, 2);
  ASSERT_TRUE(executor.try_post([&] {
    started.count_down();
    release.wait();
  }));
  started.wait();  // the one thread is busy: what follows queues
  EXPECT_TRUE(executor.try_post([&] { ran.fetch_add(1); }));
  EXPECT_TRUE(executor.try_post([&] { ran.fetch_add(1); }));
  EXPECT_EQ(executor.queued(), 2u);
  EXPECT_FALSE(executor.try_post([&] { ran.fetch_add(100); }));
  release.count_down();
  while (executor.completed() < 3) std::this_thread::yield();
  EXPECT_EQ(ran.load(), 2);
  EXPECT_EQ(executor.queued(), 0u);
}

TEST(ExecutorTest, TheDestructorRunsEveryQueuedTaskAndJoins) {
  std::latch release(1);
  std::atomic<int> ran{0};
  {
    r4c::Executor executor(2, 100);
    for (int i = 0; i < 50; ++i) {
      ASSERT_TRUE(executor.try_post([&] {
        release.wait();
        ran.fetch_add(1);
      }));
    }
    release.count_down();
  }  // joins after the 50 tasks
  EXPECT_EQ(ran.load(), 50);
}

TEST(ExecutorTest, ATaskThatThrowsDoesNotKillItsThread) {
  r4c::Executor executor(1);
  ASSERT_TRUE(executor.try_post([] { throw std::runtime_error("boom"); }));
  std::latch ran(1);
  ASSERT_TRUE(executor.try_post([&] { ran.count_down(); }));
  ran.wait();
  while (executor.completed() < 2) std::this_thread::yield();
  EXPECT_EQ(executor.completed(), 2u);
}

TEST(ExecutorTest, ManyPostersLoseNoTask) {
  constexpr int kPosters = 8;
  constexpr int kTasksEach = 500;
  std::atomic<int> ran{0};
  std::atomic<int> refused{0};
  {
    r4c::Executor executor(3, 64);
    std::vector<std::thread> posters;
    for (int p = 0; p < kPosters; ++p) {
      posters.emplace_back([&] {
        for (int i = 0; i < kTasksEach; ++i) {
          if (!executor.try_post([&] { ran.fetch_add(1, std::memory_order_relaxed); })) {
            refused.fetch_add(1, std::memory_order_relaxed);
          }
        }
      });
    }
    for (std::thread& poster : posters) poster.join();
  }
  EXPECT_EQ(ran.load() + refused.load(), kPosters * kTasksEach);
  EXPECT_GT(ran.load(), 0);
}

TEST(ExecutorTest, RejectsFewerThanOneThreadOrQueueSlot) {
  try {
    r4c::Executor executor(0);
    FAIL() << "accepted 0 threads";
  } catch (const r4c::ConfigException& e) {
    EXPECT_EQ(e.code(), "R4C-ATR-003");
    EXPECT_THAT(e.what(), HasSubstr("threads"));
  }
  try {
    r4c::Executor executor(1, 0);
    FAIL() << "accepted a queue of 0";
  } catch (const r4c::ConfigException& e) {
    EXPECT_EQ(e.code(), "R4C-ATR-003");
    EXPECT_THAT(e.what(), HasSubstr("max_queued"));
  }
}

}  // namespace
