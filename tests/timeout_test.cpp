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

// On a SystemClock a token's deadline is in the calling thread's slots, each with its own stop
// source (docs/pipeline.md, "Timeout"): a call in time hands its source to the thread's next
// call at the same depth, a nested call gets a source of its own, and a source stopped by the
// scanner is never handed on.
TEST(TimeoutSystemClockTest, TheSlotsHandOnASourceInTimeAndNeverAStoppedOne) {
  if (r4c::detail::DeadlineSlots::block() == nullptr) GTEST_SKIP() << "no scanner here";
  r4c::Timeout timeout("slots", r4c::TimeoutConfig().timeout(1h));
  std::stop_token first;
  std::stop_token nested;
  timeout.execute([&](std::stop_token stop) {
    first = stop;
    timeout.execute([&](std::stop_token inner) { nested = inner; });
  });
  EXPECT_FALSE(first.stop_requested());
  EXPECT_FALSE(nested.stop_requested());
  std::stop_token second;
  timeout.execute([&](std::stop_token stop) { second = stop; });
  EXPECT_TRUE(first.stop_possible());
  EXPECT_TRUE(first == second);   // handed on: the documented caveat
  EXPECT_FALSE(first == nested);  // the nested call's own

  r4c::Timeout short_timeout("short", r4c::TimeoutConfig().timeout(2ms));
  std::stop_token stopped;
  EXPECT_THROW(short_timeout.execute([&](std::stop_token stop) {
    stopped = stop;
    while (!stop.stop_requested()) std::this_thread::yield();
  }),
               r4c::CallTimeoutException);
  EXPECT_TRUE(stopped.stop_requested());
  EXPECT_TRUE(stopped == first);  // the same slot's source: this call was first at its depth
  EXPECT_TRUE(first.stop_requested());

  std::stop_token fresh;
  EXPECT_EQ(timeout.execute([&](std::stop_token stop) {
    fresh = stop;
    return stop.stop_requested() ? 0 : 5;
  }),
            5);
  EXPECT_FALSE(fresh.stop_requested());  // a new source, not the stopped one
  EXPECT_FALSE(fresh == stopped);
  EXPECT_EQ(timeout.snapshot().timed_out, 0u);
  EXPECT_EQ(short_timeout.snapshot().timed_out, 1u);
}

// A callable may take its token by reference (no reference count changes) or by value, on the
// slots and on the clock's timers alike; either is stopped at the deadline.
TEST_F(TimeoutTest, ATokenTakenByReferenceIsStoppedAtTheDeadline) {
  auto timeout = make(1s);
  EXPECT_EQ(timeout->execute([](const std::stop_token& stop) { return stop.stop_possible(); }),
            true);
  EXPECT_THROW(timeout->execute([&](const std::stop_token& stop) {
    clock_->advance(1s);
    EXPECT_TRUE(stop.stop_requested());
  }),
               r4c::CallTimeoutException);
  r4c::Timeout system("by-reference", r4c::TimeoutConfig().timeout(2ms));
  auto outcome = system.try_execute([](const std::stop_token& stop) {
    while (!stop.stop_requested()) std::this_thread::yield();
    return 1;
  });
  EXPECT_TRUE(outcome.failed());
  EXPECT_EQ(system.execute([](std::stop_token&& stop) {
    const std::stop_token mine = std::move(stop);
    return mine.stop_possible() ? 3 : 0;
  }),
            3);
}

// A call that ends past its deadline fails even when the scanner has not stopped its token
// yet, and its source, never stopped, goes to the next call unstopped.
TEST(TimeoutSystemClockTest, ACallPastItsDeadlineFailsWhetherOrNotItsTokenWasStopped) {
  r4c::Timeout timeout("late", r4c::TimeoutConfig().timeout(1us));
  int late = 0;
  for (int i = 0; i < 50; ++i) {
    auto outcome = timeout.try_execute([](std::stop_token) {
      const auto until = std::chrono::steady_clock::now() + 20us;
      while (std::chrono::steady_clock::now() < until) {
      }
      return 1;
    });
    if (outcome.failed()) ++late;
  }
  EXPECT_EQ(late, 50);
  EXPECT_EQ(timeout.snapshot().timed_out, 50u);
  r4c::Timeout roomy("roomy", r4c::TimeoutConfig().timeout(1h));
  EXPECT_EQ(roomy.execute([](std::stop_token stop) { return stop.stop_requested() ? 0 : 2; }), 2);
}

}  // namespace
