// SPDX-License-Identifier: Apache-2.0
#include "r4c/hedge.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <latch>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "hedge_test_support.hpp"
#include "test_seed.hpp"

namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

using r4c::test::counts;
using r4c::test::ShardFull;
using r4c::test::SlowReplica;

// Spins (yielding, never sleeping) until `done` holds.
template <class Predicate>
void wait_until(Predicate done) {
  while (!done()) std::this_thread::yield();
}

// What the attempts of one call share with the test; held by the callable through a
// shared_ptr, as late attempts may outlive the call.
struct Attempts {
  std::atomic<int> started{0};
  std::atomic<int> in_flight{0};
  std::atomic<int> most_in_flight{0};
  std::atomic<bool> release{false};
  std::atomic<bool> first_saw_stop{false};

  int begin() {
    const int now = in_flight.fetch_add(1) + 1;
    int most = most_in_flight.load();
    while (now > most && !most_in_flight.compare_exchange_weak(most, now)) {
    }
    return started.fetch_add(1) + 1;
  }
  void end() { in_flight.fetch_sub(1); }
  // Blocks until the test releases the attempts or the attempt's token is stopped.
  void block(const std::stop_token& stop) {
    wait_until([&] { return release.load() || stop.stop_requested(); });
  }
};

// An attempt that blocks until the test releases it or its token is stopped; it returns its
// number.
auto blocking(std::shared_ptr<Attempts> attempts) {
  return [attempts](std::stop_token stop) {
    const int attempt = attempts->begin();
    attempts->block(stop);
    attempts->end();
    return attempt;
  };
}

class HedgeTest : public ::testing::Test {
 protected:
  // `hedge.execute(attempt)` on a thread of its own, while the test drives the clock.
  template <class Attempt>
  static auto execute_async(r4c::Hedge& hedge, Attempt attempt) {
    return std::async(std::launch::async, [&hedge, attempt] { return hedge.execute(attempt); });
  }
  // Occupies one of the executor's threads until `release` counts down.
  void occupy_a_thread(std::latch& release) {
    ASSERT_TRUE(executor_->try_post([this, &release] {
      busy_.count_down();
      release.wait();
    }));
    busy_.wait();
  }
  std::unique_ptr<r4c::Hedge> make(r4c::HedgeConfig config, int threads = 2, int max_queued = 64) {
    executor_ = std::make_shared<r4c::Executor>(threads, max_queued);
    return std::make_unique<r4c::Hedge>("reads", config, clock_, executor_);
  }
  // Once the call's first attempt is running and its timer is on the clock.
  void wait_for_timer(const Attempts& attempts, int started) {
    wait_until([&] { return attempts.started.load() == started && clock_->pending_tasks() == 1; });
  }
  void TearDown() override { EXPECT_EQ(clock_->pending_tasks(), 0u); }

  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
  std::shared_ptr<r4c::Executor> executor_;
  std::latch busy_{1};  // counted down by occupy_a_thread's task
};

TEST_F(HedgeTest, AFastFirstAttemptLaunchesNoHedgeAndLeavesNoTimer) {
  auto hedge = make(r4c::HedgeConfig().delay(100ms));
  EXPECT_EQ(hedge->execute([](std::stop_token) { return 7; }), 7);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
  EXPECT_EQ(hedge->execute([] { return std::string("eight"); }), "eight");
  std::atomic<bool> ran{false};
  hedge->execute([&ran] { ran = true; });
  EXPECT_TRUE(ran.load());
  EXPECT_EQ(counts(hedge->snapshot()), (std::vector<std::uint64_t>{3, 0, 0, 0}));
}

TEST_F(HedgeTest, ASlowFirstAttemptGetsAHedgeWhoseSuccessWinsAndStopsTheFirst) {
  auto hedge = make(r4c::HedgeConfig().delay(100ms));
  auto attempts = std::make_shared<Attempts>();
  auto result = execute_async(*hedge, [attempts](std::stop_token stop) {
    const int attempt = attempts->begin();
    if (attempt == 1) {
      attempts->block(stop);
      attempts->first_saw_stop = stop.stop_requested();
    }
    attempts->end();
    return attempt;
  });
  wait_for_timer(*attempts, 1);
  clock_->advance(99ms);
  EXPECT_EQ(attempts->started.load(), 1);
  clock_->advance(1ms);  // fires the delay: the caller launches the hedge
  EXPECT_EQ(result.get(), 2);
  wait_until([&] { return attempts->in_flight.load() == 0; });
  EXPECT_TRUE(attempts->first_saw_stop.load());
  EXPECT_EQ(counts(hedge->snapshot()), (std::vector<std::uint64_t>{1, 1, 1, 0}));
}

TEST_F(HedgeTest, WhenEveryAttemptFailsTheCallerGetsTheLastFailure) {
  auto hedge = make(r4c::HedgeConfig().delay(100ms));
  auto attempts = std::make_shared<Attempts>();
  auto result = execute_async(*hedge, [attempts](std::stop_token stop) -> int {
    const int attempt = attempts->begin();
    if (attempt == 1) attempts->block(stop);
    attempts->end();
    throw SlowReplica("attempt " + std::to_string(attempt));
  });
  wait_for_timer(*attempts, 1);
  clock_->advance(100ms);
  wait_until([&] { return executor_->completed() == 1; });  // the hedge failed and reported
  attempts->release = true;
  try {
    result.get();
    FAIL() << "no failure";
  } catch (const SlowReplica& e) {
    EXPECT_STREQ(e.what(), "attempt 1");
  }
  const r4c::HedgeSnapshot snapshot = hedge->snapshot();
  EXPECT_EQ(snapshot.calls, 1u);
  EXPECT_EQ(snapshot.hedges_launched, 1u);
  EXPECT_EQ(snapshot.failed, 1u);
}

TEST_F(HedgeTest, AFailedAttemptDoesNotEndTheCallWhileAnotherIsInFlight) {
  auto hedge = make(r4c::HedgeConfig().delay(100ms));
  auto attempts = std::make_shared<Attempts>();
  auto hedge_may_end = std::make_shared<std::atomic<bool>>(false);
  auto result = execute_async(*hedge, [attempts, hedge_may_end](std::stop_token stop) {
    const int attempt = attempts->begin();
    if (attempt == 1) {
      attempts->block(stop);
      attempts->end();
      throw SlowReplica("attempt 1");
    }
    wait_until([&] { return hedge_may_end->load(); });
    attempts->end();
    return attempt;
  });
  wait_for_timer(*attempts, 1);
  clock_->advance(100ms);
  wait_until([&] { return attempts->started.load() == 2; });
  attempts->release = true;
  wait_until([&] { return executor_->completed() == 1; });  // the first failed and reported
  *hedge_may_end = true;
  EXPECT_EQ(result.get(), 2);
  EXPECT_EQ(hedge->snapshot().failed, 0u);
  EXPECT_EQ(hedge->snapshot().won_by_hedge, 1u);
}

TEST_F(HedgeTest, AFirstAttemptRejectedByAnInnerPolicyEndsTheCallWithoutAHedge) {
  auto hedge = make(r4c::HedgeConfig().delay(100ms).max_attempts(3));
  EXPECT_THROW(hedge->execute([]() -> int { throw r4c::LimitExceededException("full"); }),
               r4c::LimitExceededException);
  clock_->advance(1s);
  EXPECT_EQ(hedge->snapshot().hedges_launched, 0u);
  EXPECT_EQ(hedge->snapshot().failed, 1u);
}

TEST_F(HedgeTest, AHedgeRejectedByAnInnerPolicyStopsFurtherLaunches) {
  auto hedge = make(r4c::HedgeConfig().delay(100ms).max_attempts(3), 3);
  auto attempts = std::make_shared<Attempts>();
  auto result = execute_async(*hedge, [attempts](std::stop_token stop) {
    const int attempt = attempts->begin();
    if (attempt == 2) {
      attempts->end();
      throw ShardFull("shard 3 is full");  // derived from BulkheadFullException
    }
    attempts->block(stop);
    attempts->end();
    return attempt;
  });
  wait_for_timer(*attempts, 1);
  clock_->advance(100ms);
  // The hedge has failed and reported, and the caller has armed the timer again.
  wait_until([&] { return executor_->completed() == 1 && clock_->pending_tasks() == 1; });
  clock_->advance(100ms);  // due, but the rejection ended the launching
  clock_->advance(1s);
  attempts->release = true;
  EXPECT_EQ(result.get(), 1);
  EXPECT_EQ(attempts->started.load(), 2);
  EXPECT_EQ(hedge->snapshot().hedges_launched, 1u);
  EXPECT_EQ(hedge->snapshot().won_by_hedge, 0u);
}

TEST_F(HedgeTest, MaxAttemptsBoundsTheAttemptsInFlight) {
  auto hedge = make(r4c::HedgeConfig().delay(100ms).max_attempts(3), 4);
  auto attempts = std::make_shared<Attempts>();
  auto result = execute_async(*hedge, blocking(attempts));
  wait_for_timer(*attempts, 1);
  clock_->advance(100ms);
  wait_for_timer(*attempts, 2);
  clock_->advance(100ms);
  wait_until([&] { return attempts->started.load() == 3; });
  clock_->advance(1s);  // no timer left: the third was the last
  EXPECT_EQ(clock_->pending_tasks(), 0u);
  attempts->release = true;
  const int winner = result.get();
  EXPECT_GE(winner, 1);
  EXPECT_LE(winner, 3);
  wait_until([&] { return attempts->in_flight.load() == 0; });
  EXPECT_EQ(attempts->started.load(), 3);
  EXPECT_EQ(attempts->most_in_flight.load(), 3);
  EXPECT_EQ(hedge->snapshot().hedges_launched, 2u);
}

TEST_F(HedgeTest, AFirstAttemptTheExecutorRefusesRunsOnTheCallersThread) {
  auto hedge = make(r4c::HedgeConfig().delay(100ms), 1, 1);
  std::latch release(1);
  ASSERT_NO_FATAL_FAILURE(occupy_a_thread(release));
  ASSERT_TRUE(executor_->try_post([] {}));  // fills the queue
  EXPECT_EQ(hedge->execute([](std::stop_token) { return std::this_thread::get_id(); }),
            std::this_thread::get_id());
  release.count_down();
  EXPECT_EQ(hedge->snapshot().calls, 1u);
  EXPECT_EQ(hedge->snapshot().hedges_launched, 0u);
  EXPECT_EQ(hedge->snapshot().executor_refusals, 1u);
  hedge.reset();
  executor_.reset();  // joins the blocker before `release` dies
}

TEST_F(HedgeTest, AHedgeTheExecutorRefusesEndsTheLaunching) {
  auto hedge = make(r4c::HedgeConfig().delay(100ms).max_attempts(3), 2, 1);
  auto attempts = std::make_shared<Attempts>();
  std::latch release(1);
  ASSERT_NO_FATAL_FAILURE(occupy_a_thread(release));
  auto result = execute_async(*hedge, blocking(attempts));
  wait_for_timer(*attempts, 1);
  ASSERT_TRUE(executor_->try_post([] {}));  // both threads busy: the queue is full
  clock_->advance(100ms);                   // the hedge is refused
  wait_until([&] { return hedge->snapshot().executor_refusals == 1; });
  clock_->advance(1s);
  attempts->release = true;
  EXPECT_EQ(result.get(), 1);
  release.count_down();
  EXPECT_EQ(attempts->started.load(), 1);
  EXPECT_EQ(hedge->snapshot().hedges_launched, 0u);
  hedge.reset();
  executor_.reset();  // joins the blocker before `release` dies
}

TEST_F(HedgeTest, InvalidSettingsAreRejectedWithTheirCodes) {
  r4c::HedgeConfig config;
  auto code_of = [](auto&& set) -> std::string {
    try {
      set();
    } catch (const r4c::ConfigException& e) {
      return e.code();
    }
    return "accepted";
  };
  EXPECT_EQ(code_of([&] { config.delay(0ns); }), "R4C-REG-001");
  EXPECT_EQ(code_of([&] { config.delay(-1ms); }), "R4C-REG-001");
  EXPECT_EQ(code_of([&] { config.delay(1h + 1ns); }), "R4C-REG-001");
  EXPECT_EQ(code_of([&] { config.max_attempts(0); }), "R4C-ATR-003");
  EXPECT_EQ(config.delay(), r4c::HedgeConfig::kDefaultDelay);  // kept its old value
  EXPECT_EQ(config.max_attempts(), 2);
  EXPECT_EQ(code_of([&] { config.delay(1h).max_attempts(1); }), "accepted");
  EXPECT_EQ(code_of([&] { r4c::Hedge("reads", {}, clock_, nullptr); }), "R4C-REG-001");
  try {
    config.delay(0ns);
  } catch (const r4c::ConfigException& e) {
    EXPECT_THAT(e.what(), HasSubstr("delay"));
  }
}

TEST_F(HedgeTest, FirstDifferenceNamesTheFirstSettingThatDiffers) {
  EXPECT_FALSE(r4c::first_difference(r4c::HedgeConfig(), r4c::HedgeConfig()).has_value());
  const auto difference =
      r4c::first_difference(r4c::HedgeConfig().max_attempts(3), r4c::HedgeConfig().max_attempts(4));
  ASSERT_TRUE(difference.has_value());
  EXPECT_EQ(difference->setting, "max_attempts");
  EXPECT_EQ(difference->first, "3");
  EXPECT_EQ(difference->second, "4");
  EXPECT_EQ(r4c::first_difference(r4c::HedgeConfig().delay(1ms), r4c::HedgeConfig())->setting,
            "delay");
}

TEST_F(HedgeTest, ConcurrentCallsEachGetExactlyOneOutcomeAndTheCountersAddUp) {
  constexpr int kCallers = 8;
  constexpr int kCallsEach = 40;
  auto hedge = make(r4c::HedgeConfig().delay(10ms).max_attempts(3), 4, 1024);
  auto clock = clock_;
  auto next = std::make_shared<std::atomic<std::uint64_t>>(0);
  std::atomic<int> succeeded{0};
  std::atomic<int> failed{0};
  std::atomic<int> callers_done{0};
  std::thread driver([&] {
    while (callers_done.load() < kCallers) {
      clock_->advance(1ms);
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> callers;
  const std::uint64_t seed = r4c::test::test_seed();
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      std::mt19937 random(static_cast<unsigned>(seed + static_cast<std::uint64_t>(c)));
      for (int i = 0; i < kCallsEach; ++i) {
        const unsigned seed = random();
        try {
          hedge->execute([clock, next, seed](std::stop_token stop) {
            // Each attempt draws its own behaviour: fast or slow, success or failure.
            std::mt19937 draw(seed + static_cast<unsigned>(next->fetch_add(1)));
            const unsigned behaviour = draw() % 4;
            if (behaviour >= 2) {
              const auto until = clock->now() + std::chrono::milliseconds(draw() % 30);
              wait_until([&] { return stop.stop_requested() || clock->now() >= until; });
            }
            if (behaviour % 2 == 1) throw SlowReplica("failed");
            return 1;
          });
          succeeded.fetch_add(1);
        } catch (const SlowReplica&) {
          failed.fetch_add(1);
        }
      }
      callers_done.fetch_add(1);
    });
  }
  for (std::thread& caller : callers) caller.join();
  driver.join();
  EXPECT_EQ(succeeded.load() + failed.load(), kCallers * kCallsEach);
  const r4c::HedgeSnapshot snapshot = hedge->snapshot();
  EXPECT_EQ(snapshot.calls, static_cast<std::uint64_t>(kCallers * kCallsEach));
  EXPECT_EQ(snapshot.failed, static_cast<std::uint64_t>(failed.load()));
  EXPECT_LE(snapshot.won_by_hedge, snapshot.hedges_launched);
  EXPECT_LE(snapshot.hedges_launched, 2u * kCallers * kCallsEach);
}

}  // namespace
