// SPDX-License-Identifier: Apache-2.0
#include "r4c/timeout.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Counts how many of its values are alive, to see late results destroyed.
struct Tracked {
  explicit Tracked(std::atomic<int>& alive) : alive(&alive) { alive.fetch_add(1); }
  Tracked(const Tracked& other) : alive(other.alive) { alive->fetch_add(1); }
  ~Tracked() { alive->fetch_sub(1); }
  std::atomic<int>* alive;
};

class TimeoutTest : public ::testing::Test {
 protected:
  std::unique_ptr<r4c::Timeout> make(std::chrono::nanoseconds timeout) {
    return std::make_unique<r4c::Timeout>("search", r4c::TimeoutConfig().timeout(timeout), clock_);
  }
  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
};

TEST_F(TimeoutTest, ACallThatEndsInTimeReturnsItsResult) {
  auto timeout = make(2s);
  EXPECT_EQ(timeout->execute([&] {
    clock_->advance(1999ms);
    return 7;
  }),
            7);
  EXPECT_EQ(timeout->execute([&](std::stop_token stop) {
    clock_->advance(1s);
    return stop.stop_requested() ? 0 : 8;
  }),
            8);
  EXPECT_EQ(timeout->snapshot().timed_out, 0u);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
}

TEST_F(TimeoutTest, TheTokenIsStoppedWhenTheDeadlinePassesAndTheCallFails) {
  auto timeout = make(2s);
  bool saw_stop = false;
  try {
    timeout->execute([&](std::stop_token stop) {
      clock_->advance(2s);  // fires the deadline on this thread
      saw_stop = stop.stop_requested();
      return 1;
    });
    FAIL() << "no timeout";
  } catch (const r4c::CallTimeoutException& e) {
    EXPECT_THAT(e.what(), HasSubstr("timeout 'search'"));
  }
  EXPECT_TRUE(saw_stop);
  EXPECT_EQ(timeout->snapshot().timed_out, 1u);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
}

TEST_F(TimeoutTest, ACallThatEndsLateFailsAndItsResultIsDestroyed) {
  auto timeout = make(2s);
  std::atomic<int> alive{0};
  EXPECT_THROW(timeout->execute([&] {
    clock_->advance(3s);
    return Tracked(alive);
  }),
               r4c::CallTimeoutException);
  EXPECT_EQ(alive.load(), 0);
  EXPECT_THROW(timeout->execute([&](std::stop_token) {
    clock_->advance(2s);
    return Tracked(alive);
  }),
               r4c::CallTimeoutException);
  EXPECT_EQ(alive.load(), 0);
}

TEST_F(TimeoutTest, ACallThatThrowsAfterStopWasRequestedFailsWithCallTimeoutException) {
  auto timeout = make(2s);
  EXPECT_THROW(timeout->execute([&](std::stop_token stop) -> int {
    clock_->advance(2s);
    if (stop.stop_requested()) throw std::runtime_error("cancelled by the token");
    return 1;
  }),
               r4c::CallTimeoutException);
  EXPECT_THROW(timeout->execute([&]() -> int {
    clock_->advance(5s);
    throw std::runtime_error("late failure");
  }),
               r4c::CallTimeoutException);
}

TEST_F(TimeoutTest, AFailureInTimePassesThroughUnchanged) {
  auto timeout = make(2s);
  EXPECT_THROW(timeout->execute([](std::stop_token) -> int { throw std::logic_error("bad"); }),
               std::logic_error);
  EXPECT_THROW(timeout->execute([]() -> int { throw std::logic_error("bad"); }), std::logic_error);
  EXPECT_EQ(timeout->snapshot().timed_out, 0u);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
}

TEST_F(TimeoutTest, StopCallbacksRunWhenTheDeadlineFires) {
  auto timeout = make(1s);
  std::atomic<bool> called{false};
  EXPECT_THROW(timeout->execute([&](std::stop_token stop) {
    std::stop_callback on_stop(stop, [&] { called.store(true); });
    clock_->advance(1s);
  }),
               r4c::CallTimeoutException);
  EXPECT_TRUE(called.load());
}

// docs/pipeline.md: a call that ends in time leaves its stop source to the thread's next call,
// so a token kept past its call may see a later call's deadline; a stopped source is never
// handed on.
TEST_F(TimeoutTest, ACallInTimeHandsItsSourceToTheNextCallAndAStoppedOneIsNeverReused) {
  auto timeout = make(1s);
  std::stop_token first;
  timeout->execute([&](std::stop_token stop) { first = stop; });
  EXPECT_FALSE(first.stop_requested());

  std::stop_token second;
  EXPECT_THROW(timeout->execute([&](std::stop_token stop) {
    EXPECT_FALSE(stop.stop_requested());  // handed on unstopped
    second = stop;
    clock_->advance(1s);
  }),
               r4c::CallTimeoutException);
  EXPECT_TRUE(second.stop_requested());
  EXPECT_TRUE(first.stop_requested());  // the same source: the documented caveat

  std::stop_token third;
  timeout->execute([&](std::stop_token stop) { third = stop; });
  EXPECT_FALSE(third.stop_requested());  // a fresh source, not the stopped one
}

TEST_F(TimeoutTest, VoidAndReferenceResultsWork) {
  auto timeout = make(1s);
  int value = 0;
  int& ref = timeout->execute([&]() -> int& { return value; });
  EXPECT_EQ(&ref, &value);
  timeout->execute([&](std::stop_token) { value = 3; });
  EXPECT_EQ(value, 3);
}

TEST_F(TimeoutTest, InvalidTimeoutsAreReg001) {
  for (auto bad : {0ns, -1ns, std::chrono::nanoseconds(25h)}) {
    try {
      r4c::TimeoutConfig().timeout(bad);
      FAIL();
    } catch (const r4c::ConfigException& e) {
      EXPECT_EQ(e.code(), "R4C-REG-001");
      EXPECT_THAT(e.what(), HasSubstr("1 ns .. 24 h"));
    }
  }
  EXPECT_EQ(r4c::TimeoutConfig().timeout(), 1s);
}

// Real time on purpose: the SystemClock's timer thread stops the token.
TEST(TimeoutSystemClockTest, TheTimerThreadStopsAStuckCall) {
  r4c::Timeout timeout("stuck", r4c::TimeoutConfig().timeout(20ms));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(timeout.execute([](std::stop_token stop) {
    while (!stop.stop_requested()) std::this_thread::sleep_for(1ms);
  }),
               r4c::CallTimeoutException);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 20ms);
  EXPECT_EQ(timeout.clock()->pending_tasks(), 0u);
}

}  // namespace
