// SPDX-License-Identifier: Apache-2.0
#include "r4c/circuit_breaker.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <exception>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "test_seed.hpp"
#include "test_support.hpp"

namespace {

using r4c::test::config_message;
using ::testing::HasSubstr;
using namespace std::chrono_literals;
using State = r4c::CircuitBreakerState;

using r4c::test::NotFound;
using r4c::test::Unavailable;
struct PartitionUnavailable : Unavailable {
  using Unavailable::Unavailable;
};

class CircuitBreakerTest : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_EQ(clock_->pending_tasks(), 0u); }

  std::unique_ptr<r4c::CircuitBreaker> make(r4c::CircuitBreakerConfig config) {
    return std::make_unique<r4c::CircuitBreaker>("inventory", std::move(config), clock_);
  }
  // A breaker that rates every `window` calls from the `minimum`-th on and waits 10 s when open.
  std::unique_ptr<r4c::CircuitBreaker> make_small(int window = 10, int minimum = 4,
                                                  int permitted = 3) {
    return make(r4c::CircuitBreakerConfig()
                    .sliding_window_size(window)
                    .minimum_number_of_calls(minimum)
                    .permitted_calls_in_half_open(permitted)
                    .wait_in_open(10s));
  }
  static void succeed(r4c::CircuitBreaker& breaker) {
    breaker.execute([] {});
  }
  template <class E = Unavailable>
  static void fail(r4c::CircuitBreaker& breaker) {
    EXPECT_THROW(breaker.execute([] { throw E("down"); }), E);
  }
  void open_and_wait(r4c::CircuitBreaker& breaker) {
    breaker.transition_to_open();
    clock_->advance(10s);
  }

  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
};

TEST_F(CircuitBreakerTest, OpensAtTheFailureRateThresholdOnlyAfterMinimumNumberOfCalls) {
  auto breaker = make_small(/*window=*/10, /*minimum=*/4);
  fail(*breaker);
  fail(*breaker);
  fail(*breaker);
  EXPECT_EQ(breaker->state(), State::closed);  // 100% failures, but only 3 calls
  EXPECT_EQ(breaker->snapshot().failure_rate, -1);
  succeed(*breaker);  // 3 of 4 failed: 75% >= 50%
  EXPECT_EQ(breaker->state(), State::open);
  const r4c::CircuitBreakerSnapshot snap = breaker->snapshot();
  EXPECT_EQ(snap.failure_rate, 75);
  EXPECT_EQ(snap.buffered_calls, 4u);
  EXPECT_EQ(snap.failed_calls, 3u);
  EXPECT_EQ(snap.transitions, 1u);
}

TEST_F(CircuitBreakerTest, StaysClosedWhileTheFailureRateIsUnderTheThreshold) {
  auto breaker = make_small(/*window=*/4, /*minimum=*/4);
  fail(*breaker);
  succeed(*breaker);
  succeed(*breaker);
  succeed(*breaker);
  EXPECT_EQ(breaker->state(), State::closed);
  EXPECT_EQ(breaker->snapshot().failure_rate, 25);
}

TEST_F(CircuitBreakerTest, ACountBasedWindowRatesOnlyTheLastCalls) {
  auto breaker = make_small(/*window=*/4, /*minimum=*/4);
  fail(*breaker);
  for (int i = 0; i < 4; ++i) succeed(*breaker);  // the failure leaves the window
  EXPECT_EQ(breaker->snapshot().buffered_calls, 4u);
  EXPECT_EQ(breaker->snapshot().failed_calls, 0u);
  fail(*breaker);
  EXPECT_EQ(breaker->state(), State::closed);  // 1 of the last 4
}

TEST_F(CircuitBreakerTest, SlowCallsOpenItThroughTheSlowCallRateThreshold) {
  auto breaker = make(r4c::CircuitBreakerConfig()
                          .sliding_window_size(2)
                          .minimum_number_of_calls(2)
                          .slow_call_duration(1s)
                          .slow_call_rate_threshold(50));
  breaker->execute([&] { clock_->advance(999ms); });  // not slow
  EXPECT_EQ(breaker->snapshot().slow_calls, 0u);
  EXPECT_EQ(breaker->state(), State::closed);
  breaker->execute([&] { clock_->advance(1s); });  // slow: 1 of 2
  EXPECT_EQ(breaker->state(), State::open);
  const r4c::CircuitBreakerSnapshot snap = breaker->snapshot();
  EXPECT_EQ(snap.slow_call_rate, 50);
  EXPECT_EQ(snap.failure_rate, 0);
}

TEST_F(CircuitBreakerTest, AnOpenBreakerRejectsWithoutCallingTheMethodWithOneException) {
  auto breaker = make_small();
  breaker->transition_to_open();
  bool called = false;
  r4c::test::expect_one_preallocated_refusal<r4c::CallNotPermittedException>(
      [&] { breaker->execute([&] { called = true; }); },
      [](const r4c::CallNotPermittedException& e) {
        EXPECT_EQ(e.instance_id(), "inventory");
        EXPECT_THAT(e.what(), HasSubstr("circuit breaker 'inventory' does not permit the call"));
      });
  EXPECT_FALSE(called);
  EXPECT_FALSE(breaker->try_acquire_permission());
  EXPECT_EQ(breaker->snapshot().not_permitted_calls, 3u);
}

TEST_F(CircuitBreakerTest, StaysOpenUntilWaitInOpenHasPassed) {
  auto breaker = make_small();
  breaker->transition_to_open();
  clock_->advance(10s - 1ns);
  EXPECT_FALSE(breaker->try_acquire());
  EXPECT_EQ(breaker->state(), State::open);
}

TEST_F(CircuitBreakerTest, MovesToHalfOpenOnTheFirstCallAfterWaitInOpen) {
  auto breaker = make_small();
  breaker->transition_to_open();
  clock_->advance(10s);
  EXPECT_EQ(breaker->state(), State::open);  // lazily: no timer moves it
  EXPECT_EQ(clock_->pending_tasks(), 0u);
  r4c::CircuitBreakerPermit permit = breaker->try_acquire();
  EXPECT_TRUE(permit);
  EXPECT_EQ(breaker->state(), State::half_open);
  EXPECT_EQ(breaker->snapshot().transitions, 2u);
}

TEST_F(CircuitBreakerTest, HalfOpenPermitsExactlyPermittedCallsInHalfOpenThenRejects) {
  auto breaker = make_small(10, 4, /*permitted=*/3);
  open_and_wait(*breaker);
  std::vector<r4c::CircuitBreakerPermit> trials;
  for (int i = 0; i < 3; ++i) trials.push_back(breaker->try_acquire());
  for (const auto& trial : trials) EXPECT_TRUE(trial);
  EXPECT_FALSE(breaker->try_acquire());
  EXPECT_THROW(succeed(*breaker), r4c::CallNotPermittedException);
  EXPECT_EQ(breaker->snapshot().not_permitted_calls, 2u);
  trials[0].release();  // an ignored trial gives its place back
  EXPECT_TRUE(breaker->try_acquire_permission());
  EXPECT_EQ(breaker->state(), State::half_open);
}

TEST_F(CircuitBreakerTest, HalfOpenClosesWhenItsTrialsAreUnderTheThresholds) {
  auto breaker = make_small(10, 4, /*permitted=*/3);
  fail(*breaker);
  open_and_wait(*breaker);
  succeed(*breaker);
  fail(*breaker);
  EXPECT_EQ(breaker->state(), State::half_open);  // waits for its last trial
  EXPECT_EQ(breaker->snapshot().failure_rate, -1);
  succeed(*breaker);  // 1 of 3 failed: 33% < 50%
  EXPECT_EQ(breaker->state(), State::closed);
  const r4c::CircuitBreakerSnapshot snap = breaker->snapshot();
  EXPECT_EQ(snap.buffered_calls, 0u);  // a fresh window
  EXPECT_EQ(snap.transitions, 3u);
}

TEST_F(CircuitBreakerTest, HalfOpenReopensWhenItsTrialsReachAThreshold) {
  auto breaker = make_small(10, 4, /*permitted=*/2);
  open_and_wait(*breaker);
  succeed(*breaker);
  fail(*breaker);  // 50%
  EXPECT_EQ(breaker->state(), State::open);
  clock_->advance(10s - 1ns);  // a new wait from the reopening
  EXPECT_FALSE(breaker->try_acquire());
  clock_->advance(1ns);
  EXPECT_TRUE(breaker->try_acquire());
  EXPECT_EQ(breaker->state(), State::half_open);
}

TEST_F(CircuitBreakerTest, AnOutcomeFromBeforeHalfOpenIsNotATrial) {
  auto breaker = make_small(10, 4, /*permitted=*/1);
  r4c::CircuitBreakerPermit straggler = breaker->try_acquire();  // admitted while closed
  open_and_wait(*breaker);
  r4c::CircuitBreakerPermit trial = breaker->try_acquire();
  straggler.on_error(1ms);
  EXPECT_EQ(breaker->state(), State::half_open);
  EXPECT_EQ(breaker->snapshot().buffered_calls, 0u);
  trial.on_success(1ms);
  EXPECT_EQ(breaker->state(), State::closed);
}

TEST_F(CircuitBreakerTest, IgnoredExceptionsAreNeitherSuccessesNorFailures) {
  auto breaker = make(r4c::CircuitBreakerConfig()
                          .sliding_window_size(2)
                          .minimum_number_of_calls(2)
                          .ignore_on<NotFound>()
                          .record_on<std::runtime_error>());  // ignore wins over record
  for (int i = 0; i < 5; ++i) fail<NotFound>(*breaker);
  EXPECT_EQ(breaker->snapshot().buffered_calls, 0u);
  EXPECT_EQ(breaker->state(), State::closed);
}

TEST_F(CircuitBreakerTest, RecordOnRestrictsWhatCountsAsAFailure) {
  auto breaker = make(r4c::CircuitBreakerConfig()
                          .sliding_window_size(4)
                          .minimum_number_of_calls(4)
                          .record_on<Unavailable>());
  fail<NotFound>(*breaker);  // not recorded: a success
  fail<Unavailable>(*breaker);
  const r4c::CircuitBreakerSnapshot snap = breaker->snapshot();
  EXPECT_EQ(snap.buffered_calls, 2u);
  EXPECT_EQ(snap.failed_calls, 1u);
}

TEST_F(CircuitBreakerTest, DerivedExceptionTypesMatch) {
  auto recorded = make(r4c::CircuitBreakerConfig().record_on<Unavailable>());
  fail<PartitionUnavailable>(*recorded);
  EXPECT_EQ(recorded->snapshot().failed_calls, 1u);
  auto ignored = make(
      r4c::CircuitBreakerConfig().ignore_on(std::vector{r4c::ExceptionType::of<Unavailable>()}));
  fail<PartitionUnavailable>(*ignored);
  EXPECT_EQ(ignored->snapshot().buffered_calls, 0u);
}

TEST_F(CircuitBreakerTest, TheOriginalExceptionIsRethrownUnchanged) {
  auto breaker = make_small();
  const std::exception_ptr original = std::make_exception_ptr(NotFound("404"));
  // The same object, not a copy.
  ASSERT_TRUE(r4c::test::throws_the_original<NotFound>(original, [&] {
    (void)breaker->execute([&]() -> int { std::rethrow_exception(original); });
  }));
  EXPECT_EQ(breaker->snapshot().failed_calls, 1u);
}

TEST_F(CircuitBreakerTest, ExecuteReturnsTheResultAndReferencesAsTheyAre) {
  auto breaker = make_small();
  EXPECT_EQ(breaker->execute([] { return 42; }), 42);
  int value = 1;
  int& same = breaker->execute([&]() -> int& { return value; });
  EXPECT_EQ(&same, &value);
  EXPECT_EQ(breaker->snapshot().buffered_calls, 2u);
}

TEST_F(CircuitBreakerTest, ATimeBasedWindowForgetsCallsOlderThanTheWindow) {
  auto breaker = make(r4c::CircuitBreakerConfig()
                          .sliding_window_type(r4c::SlidingWindowType::time_based)
                          .sliding_window_size(3)  // seconds
                          .minimum_number_of_calls(2)
                          .failure_rate_threshold(60));
  succeed(*breaker);  // second 0
  succeed(*breaker);
  clock_->advance(1s);
  fail(*breaker);  // second 1: 1 of 3
  EXPECT_EQ(breaker->snapshot().buffered_calls, 3u);
  clock_->advance(2s);  // second 3: the window is seconds 1 .. 3
  EXPECT_EQ(breaker->snapshot().buffered_calls, 1u);
  EXPECT_EQ(breaker->snapshot().failure_rate, -1);
  fail(*breaker);  // 2 of 2 (2 of 4, under 60%, had second 0 still counted)
  EXPECT_EQ(breaker->state(), State::open);
  EXPECT_EQ(breaker->snapshot().failure_rate, 100);
  clock_->advance(10s);
  EXPECT_EQ(breaker->snapshot().buffered_calls, 0u);
}

TEST_F(CircuitBreakerTest, ATimeBasedWindowRatesOnlyOnceItHoldsTheMinimum) {
  auto breaker = make(r4c::CircuitBreakerConfig()
                          .sliding_window_type(r4c::SlidingWindowType::time_based)
                          .sliding_window_size(2)
                          .minimum_number_of_calls(2));
  fail(*breaker);
  clock_->advance(2s);  // the failure leaves the window
  fail(*breaker);
  EXPECT_EQ(breaker->state(), State::closed);
  EXPECT_EQ(breaker->snapshot().failure_rate, -1);
}

TEST_F(CircuitBreakerTest, TheNonThrowingPairRecordsForOtherPolicies) {
  auto breaker = make_small(/*window=*/2, /*minimum=*/2, /*permitted=*/1);
  ASSERT_TRUE(breaker->try_acquire_permission());
  breaker->on_error(1ms);
  ASSERT_TRUE(breaker->try_acquire_permission());
  breaker->release_permission();  // ignored while closed: nothing recorded
  EXPECT_EQ(breaker->snapshot().buffered_calls, 1u);
  ASSERT_TRUE(breaker->try_acquire_permission());
  breaker->on_success(1ms);  // 1 of 2 failed
  EXPECT_EQ(breaker->state(), State::open);
  EXPECT_FALSE(breaker->try_acquire_permission());
  clock_->advance(10s);
  ASSERT_TRUE(breaker->try_acquire_permission());
  EXPECT_FALSE(breaker->try_acquire_permission());
  breaker->on_success(1ms);
  EXPECT_EQ(breaker->state(), State::closed);
  EXPECT_EQ(breaker->snapshot().not_permitted_calls, 2u);
}

TEST_F(CircuitBreakerTest, OperatorsCanCloseAndOpenItByHand) {
  auto breaker = make_small();
  fail(*breaker);
  breaker->transition_to_open();
  breaker->transition_to_open();  // already open: no change
  EXPECT_EQ(breaker->state(), State::open);
  breaker->transition_to_closed();
  EXPECT_EQ(breaker->state(), State::closed);
  const r4c::CircuitBreakerSnapshot snap = breaker->handle().snapshot();
  EXPECT_EQ(snap.transitions, 2u);
  EXPECT_EQ(snap.buffered_calls, 0u);
  EXPECT_EQ(breaker->handle().state(), State::closed);
  EXPECT_EQ(breaker->handle().instance_id(), "inventory");
}

// Snapshot figures: per state (the state's own calls) or since creation; see
// CircuitBreakerSnapshot.
class CircuitBreakerSnapshotTest : public CircuitBreakerTest {
 protected:
  // Opens, waits, and lets four trials end: slow success, quick failure, two slow failures.
  std::unique_ptr<r4c::CircuitBreaker> reopened_by_trials() {
    auto breaker = make(r4c::CircuitBreakerConfig()
                            .sliding_window_size(10)
                            .minimum_number_of_calls(4)
                            .permitted_calls_in_half_open(4)
                            .slow_call_duration(1s)
                            .wait_in_open(10s));
    for (int i = 0; i < 4; ++i) fail(*breaker);  // the closed window: 4 of 4 failed
    EXPECT_EQ(breaker->state(), State::open);
    clock_->advance(10s);
    std::vector<r4c::CircuitBreakerPermit> trials;
    for (int i = 0; i < 4; ++i) trials.push_back(breaker->try_acquire());
    trials[0].on_success(2s);
    trials[1].on_error(1ms);
    trials[2].on_error(2s);
    trials[3].on_error(2s);
    return breaker;
  }
};

TEST_F(CircuitBreakerSnapshotTest, AReopenedBreakerShowsTheTrialsThatReopenedIt) {
  auto breaker = reopened_by_trials();
  const r4c::CircuitBreakerSnapshot snap = breaker->snapshot();
  EXPECT_EQ(snap.state, State::open);
  EXPECT_EQ(snap.buffered_calls, 4u);
  EXPECT_EQ(snap.failed_calls, 3u);
  EXPECT_EQ(snap.slow_calls, 3u);
  EXPECT_EQ(snap.failure_rate, 75);
  EXPECT_EQ(snap.slow_call_rate, 75);
}

TEST_F(CircuitBreakerSnapshotTest, ABreakerOpenedFromClosedShowsTheWindowThatOpenedIt) {
  auto breaker = make_small();
  succeed(*breaker);
  for (int i = 0; i < 3; ++i) fail(*breaker);
  const r4c::CircuitBreakerSnapshot snap = breaker->snapshot();
  EXPECT_EQ(snap.state, State::open);
  EXPECT_EQ(snap.buffered_calls, 4u);
  EXPECT_EQ(snap.failed_calls, 3u);
  EXPECT_EQ(snap.failure_rate, 75);
}

TEST_F(CircuitBreakerSnapshotTest, ALateOutcomeCountsInTheFiguresThatOpenedIt) {
  auto breaker = make_small();
  r4c::CircuitBreakerPermit straggler = breaker->try_acquire();
  for (int i = 0; i < 4; ++i) fail(*breaker);
  straggler.on_success(1ms);
  EXPECT_EQ(breaker->snapshot().buffered_calls, 5u);
  EXPECT_EQ(breaker->snapshot().failure_rate, 80);
}

TEST_F(CircuitBreakerSnapshotTest, EachStateStartsWithEmptyFiguresButTheCountersSinceCreationStay) {
  auto breaker = reopened_by_trials();
  EXPECT_FALSE(breaker->try_acquire());
  clock_->advance(10s);
  std::vector<r4c::CircuitBreakerPermit> trials;
  for (int i = 0; i < 4; ++i) trials.push_back(breaker->try_acquire());
  EXPECT_FALSE(breaker->try_acquire());  // half-open with its trials taken
  r4c::CircuitBreakerSnapshot snap = breaker->snapshot();
  EXPECT_EQ(snap.state, State::half_open);
  EXPECT_EQ(snap.buffered_calls, 0u);
  EXPECT_EQ(snap.failure_rate, -1);
  for (auto& trial : trials) trial.on_success(1ms);
  snap = breaker->snapshot();
  EXPECT_EQ(snap.state, State::closed);
  EXPECT_EQ(snap.buffered_calls, 0u);
  EXPECT_EQ(snap.not_permitted_calls, 2u);  // since creation, over every state
  EXPECT_EQ(snap.transitions, 5u);          // open, half-open, open, half-open, closed
}

TEST_F(CircuitBreakerTest, ForcedOpenRejectsEveryCallUntilAnotherTransition) {
  auto breaker = make_small();
  breaker->transition_to_forced_open();
  bool ran = false;
  EXPECT_THROW(breaker->execute([&] { ran = true; }), r4c::CallNotPermittedException);
  clock_->advance(1h);  // no wait ends a forced opening
  EXPECT_FALSE(breaker->try_acquire());
  EXPECT_FALSE(ran);
  EXPECT_EQ(breaker->state(), State::forced_open);
  EXPECT_EQ(breaker->snapshot().not_permitted_calls, 2u);
  breaker->transition_to_closed();
  EXPECT_TRUE(breaker->try_acquire());
}

TEST_F(CircuitBreakerTest, DisabledPermitsEveryCallAndRecordsNothing) {
  auto breaker = make_small();
  fail(*breaker);
  breaker->transition_to_disabled();
  for (int i = 0; i < 20; ++i) fail(*breaker);
  const r4c::CircuitBreakerSnapshot snap = breaker->snapshot();
  EXPECT_EQ(snap.state, State::disabled);
  EXPECT_EQ(snap.buffered_calls, 0u);
  EXPECT_EQ(snap.failure_rate, -1);
  EXPECT_EQ(snap.not_permitted_calls, 0u);
}

TEST_F(CircuitBreakerTest, MetricsOnlyRecordsAndPublishesButNeverOpens) {
  auto breaker = make_small();
  std::vector<std::pair<State, State>> seen;
  r4c::Subscription s = breaker->on_state_transition(
      [&](const r4c::CircuitBreakerTransitionEvent& e) { seen.emplace_back(e.from, e.to); });
  breaker->transition_to_metrics_only();
  for (int i = 0; i < 10; ++i) fail(*breaker);
  const r4c::CircuitBreakerSnapshot snap = breaker->snapshot();
  EXPECT_EQ(snap.state, State::metrics_only);
  EXPECT_EQ(snap.buffered_calls, 10u);
  EXPECT_EQ(snap.failure_rate, 100);
  breaker->transition_to_closed();
  EXPECT_EQ(breaker->snapshot().buffered_calls, 0u);
  EXPECT_THAT(seen, ::testing::ElementsAre(std::pair(State::closed, State::metrics_only),
                                           std::pair(State::metrics_only, State::closed)));
}

TEST_F(CircuitBreakerTest, EveryStateIsReachedFromEveryOtherAndPublished) {
  auto breaker = make_small();
  std::vector<std::pair<State, State>> seen;
  r4c::Subscription s = breaker->on_state_transition(
      [&](const r4c::CircuitBreakerTransitionEvent& e) { seen.emplace_back(e.from, e.to); });
  const std::vector<void (r4c::CircuitBreaker::*)()> to = {
      &r4c::CircuitBreaker::transition_to_closed,
      &r4c::CircuitBreaker::transition_to_open,
      &r4c::CircuitBreaker::transition_to_half_open,
      &r4c::CircuitBreaker::transition_to_disabled,
      &r4c::CircuitBreaker::transition_to_metrics_only,
      &r4c::CircuitBreaker::transition_to_forced_open};
  std::vector<std::pair<State, State>> expected;
  for (std::size_t from = 0; from < to.size(); ++from) {
    for (std::size_t next = 0; next < to.size(); ++next) {
      if (from == next) continue;
      ((*breaker).*to[from])();
      seen.clear();
      ((*breaker).*to[next])();
      ((*breaker).*to[next])();  // already there: nothing
      EXPECT_EQ(breaker->state(), static_cast<State>(next));
      EXPECT_THAT(seen, ::testing::ElementsAre(
                            std::pair(static_cast<State>(from), static_cast<State>(next))));
    }
  }
}

TEST_F(CircuitBreakerTest, TheInitialStateIsConfigurableAndIsNotATransition) {
  auto forced = make(r4c::CircuitBreakerConfig().initial_state(State::forced_open));
  EXPECT_EQ(forced->state(), State::forced_open);
  EXPECT_FALSE(forced->try_acquire());
  EXPECT_EQ(forced->snapshot().transitions, 0u);
  auto open = make(r4c::CircuitBreakerConfig().initial_state(State::open).wait_in_open(5s));
  EXPECT_FALSE(open->try_acquire());
  clock_->advance(5s);
  EXPECT_TRUE(open->try_acquire());
  EXPECT_EQ(open->state(), State::half_open);
  auto metrics = make(r4c::CircuitBreakerConfig().initial_state(State::metrics_only));
  EXPECT_TRUE(metrics->try_acquire());
}

TEST_F(CircuitBreakerTest, ResetClosesWithEmptyStatisticsFromAnyState) {
  auto breaker = make_small();
  for (int i = 0; i < 4; ++i) fail(*breaker);
  ASSERT_EQ(breaker->state(), State::open);
  breaker->reset();
  r4c::CircuitBreakerSnapshot snap = breaker->snapshot();
  EXPECT_EQ(snap.state, State::closed);
  EXPECT_EQ(snap.buffered_calls, 0u);
  EXPECT_EQ(snap.transitions, 2u);
  fail(*breaker);
  breaker->reset();  // closed: the window empties, no transition
  snap = breaker->snapshot();
  EXPECT_EQ(snap.buffered_calls, 0u);
  EXPECT_EQ(snap.transitions, 2u);
  breaker->transition_to_metrics_only();
  fail(*breaker);
  breaker->reset();
  EXPECT_EQ(breaker->state(), State::closed);
  EXPECT_EQ(breaker->snapshot().buffered_calls, 0u);
}

TEST_F(CircuitBreakerTest, TransitionToOpenForWaitsExactlyThatLong) {
  auto breaker = make_small();  // wait_in_open 10 s
  breaker->transition_to_open_for(3s);
  clock_->advance(3s - 1ns);
  EXPECT_FALSE(breaker->try_acquire());
  clock_->advance(1ns);
  EXPECT_TRUE(breaker->try_acquire());
  EXPECT_EQ(breaker->state(), State::half_open);
  EXPECT_THROW(breaker->transition_to_open_for(-1s), r4c::ConfigException);
  EXPECT_THROW(breaker->transition_to_open_for(25h), r4c::ConfigException);
}

TEST_F(CircuitBreakerTest, TransitionToOpenForWhenOpenMovesOnlyTheEndOfTheWait) {
  auto breaker = make_small();
  breaker->transition_to_open();
  breaker->transition_to_open_for(1s);
  EXPECT_EQ(breaker->snapshot().transitions, 1u);
  clock_->advance(1s);
  EXPECT_TRUE(breaker->try_acquire());
}

TEST_F(CircuitBreakerTest, TransitionToOpenUntilWaitsUntilTheDeadlineOnTheClock) {
  auto breaker = make_small();
  clock_->advance(100s);
  breaker->transition_to_open_until(clock_->now() + 2s);
  clock_->advance(2s - 1ns);
  EXPECT_FALSE(breaker->try_acquire());
  clock_->advance(1ns);
  EXPECT_TRUE(breaker->try_acquire());
  breaker->transition_to_closed();
  breaker->transition_to_open_until(clock_->now() - 1s);  // past: the next call is a trial
  EXPECT_TRUE(breaker->try_acquire());
  EXPECT_EQ(breaker->state(), State::half_open);
}

TEST_F(CircuitBreakerTest, AManualHalfOpenLetsItsTrialsThroughAndRatesThem) {
  auto breaker = make_small(10, 4, /*permitted=*/2);
  breaker->transition_to_half_open();
  succeed(*breaker);
  EXPECT_EQ(breaker->state(), State::half_open);
  succeed(*breaker);
  EXPECT_EQ(breaker->state(), State::closed);
}

TEST_F(CircuitBreakerTest, MaxWaitInHalfOpenResolvesToOpenAtTheFirstCallAfterIt) {
  auto breaker = make(r4c::CircuitBreakerConfig()
                          .permitted_calls_in_half_open(1)
                          .wait_in_open(10s)
                          .max_wait_in_half_open(5s));
  breaker->transition_to_open();
  clock_->advance(10s);
  r4c::CircuitBreakerPermit hanging = breaker->try_acquire();
  ASSERT_TRUE(hanging);
  clock_->advance(5s - 1ns);
  EXPECT_FALSE(breaker->try_acquire());
  EXPECT_EQ(breaker->state(), State::half_open);
  clock_->advance(1ns);
  EXPECT_FALSE(breaker->try_acquire());
  EXPECT_EQ(breaker->state(), State::open);
  hanging.on_success(1ms);  // from the half-open period that ended: not a trial
  EXPECT_EQ(breaker->state(), State::open);
  clock_->advance(10s);  // a new wait from the resolution (the second opening: same wait)
  EXPECT_TRUE(breaker->try_acquire());
}

TEST_F(CircuitBreakerTest, MaxWaitInHalfOpenMayResolveToClosed) {
  auto breaker = make(r4c::CircuitBreakerConfig()
                          .permitted_calls_in_half_open(1)
                          .max_wait_in_half_open(5s)
                          .state_after_max_wait_in_half_open(State::closed));
  breaker->transition_to_half_open();
  r4c::CircuitBreakerPermit hanging = breaker->try_acquire();
  clock_->advance(5s);
  hanging.on_error(5s);  // the outcome notices the end first: the breaker closes
  EXPECT_EQ(breaker->state(), State::closed);
  // Then it counts where it arrived, as any late outcome: in the new closed window.
  EXPECT_EQ(breaker->snapshot().buffered_calls, 1u);
  EXPECT_EQ(breaker->snapshot().transitions, 2u);
}

TEST_F(CircuitBreakerTest, ExponentialWaitInOpenGrowsWithConsecutiveOpeningsUpToItsCap) {
  auto breaker = make(r4c::CircuitBreakerConfig()
                          .permitted_calls_in_half_open(1)
                          .wait_in_open(10s)
                          .exponential_wait_in_open(2.0, 30s));
  auto waits_before_trial = [&] {
    for (std::chrono::seconds waited = 0s;; waited += 1s) {
      if (r4c::CircuitBreakerPermit trial = breaker->try_acquire()) {
        trial.on_error(1ms);  // reopens
        return waited;
      }
      clock_->advance(1s);
    }
  };
  breaker->transition_to_open();  // opening 1: 10 s
  EXPECT_EQ(waits_before_trial(), 10s);
  EXPECT_EQ(waits_before_trial(), 20s);  // opening 2
  EXPECT_EQ(waits_before_trial(), 30s);  // opening 3: 40 s capped
  EXPECT_EQ(waits_before_trial(), 30s);
  clock_->advance(30s);
  succeed(*breaker);  // the trial closes it: the count starts again
  breaker->transition_to_open();
  EXPECT_EQ(waits_before_trial(), 10s);
}

TEST_F(CircuitBreakerTest, AWaitIntervalFunctionGivesTheWaitOfEachOpening) {
  std::vector<int> asked;
  auto breaker =
      make(r4c::CircuitBreakerConfig().permitted_calls_in_half_open(1).wait_interval_in_open(
          [&](int opening) {
            asked.push_back(opening);
            return opening * 3s;
          }));
  breaker->transition_to_open();
  clock_->advance(3s);
  breaker->try_acquire().on_error(1ms);
  clock_->advance(6s - 1ns);
  EXPECT_FALSE(breaker->try_acquire());
  clock_->advance(1ns);
  EXPECT_TRUE(breaker->try_acquire());
  EXPECT_THAT(asked, ::testing::ElementsAre(1, 2));
}

struct HttpError : std::runtime_error {
  explicit HttpError(int status) : std::runtime_error("http"), status(status) {}
  int status;
};

TEST_F(CircuitBreakerTest, ARecordPredicateRecordsAlongsideTheRecordedTypes) {
  auto breaker =
      make(r4c::CircuitBreakerConfig()
               .minimum_number_of_calls(100)
               .record_on<NotFound>()
               .record_on<HttpError>([](const HttpError& e) { return e.status >= 500; }));
  EXPECT_THROW(breaker->execute([] { throw HttpError(503); }), HttpError);  // recorded
  EXPECT_THROW(breaker->execute([] { throw HttpError(404); }), HttpError);  // a success
  fail<NotFound>(*breaker);                                                 // recorded by type
  fail<Unavailable>(*breaker);                                              // neither: a success
  const r4c::CircuitBreakerSnapshot snap = breaker->snapshot();
  EXPECT_EQ(snap.buffered_calls, 4u);
  EXPECT_EQ(snap.failed_calls, 2u);
}

TEST_F(CircuitBreakerTest, AnIgnorePredicateWinsOverRecordingAsResilience4jDoes) {
  auto breaker = make(
      r4c::CircuitBreakerConfig().minimum_number_of_calls(100).record_on<HttpError>().ignore_on(
          [](const std::exception_ptr& failure) {
            try {
              std::rethrow_exception(failure);
            } catch (const HttpError& e) {
              return e.status == 429;
            } catch (...) {
              return false;
            }
          }));
  EXPECT_THROW(breaker->execute([] { throw HttpError(429); }), HttpError);  // ignored
  EXPECT_THROW(breaker->execute([] { throw HttpError(500); }), HttpError);  // recorded
  EXPECT_EQ(breaker->snapshot().buffered_calls, 1u);
  EXPECT_EQ(breaker->snapshot().failed_calls, 1u);
}

TEST_F(CircuitBreakerTest, AThrowingExceptionPredicateAnswersFalse) {
  auto breaker = make(r4c::CircuitBreakerConfig().minimum_number_of_calls(100).record_on(
      [](const std::exception_ptr&) -> bool { throw std::logic_error("bug"); }));
  fail(*breaker);
  EXPECT_EQ(breaker->snapshot().failed_calls, 0u);
  EXPECT_EQ(breaker->snapshot().buffered_calls, 1u);
}

TEST_F(CircuitBreakerTest, AResultPredicateRecordsChosenResultsAsFailuresAndReturnsThem) {
  auto breaker = make(r4c::CircuitBreakerConfig()
                          .sliding_window_size(2)
                          .minimum_number_of_calls(2)
                          .record_result<int>([](const int& status) { return status >= 500; }));
  EXPECT_EQ(breaker->execute([] { return 503; }), 503);
  EXPECT_EQ(breaker->snapshot().failed_calls, 1u);
  const std::string other = breaker->execute([] { return std::string("a string"); });
  EXPECT_EQ(other, "a string");              // another type: a success
  EXPECT_EQ(breaker->state(), State::open);  // 1 of 2 failed: 50 %
}

TEST_F(CircuitBreakerTest, AThrowingResultPredicateEndsTheCallAndRecordsNothing) {
  auto breaker = make(r4c::CircuitBreakerConfig().record_result<int>(
      [](const int&) -> bool { throw std::logic_error("bug"); }));
  EXPECT_THROW(breaker->execute([] { return 1; }), std::logic_error);
  EXPECT_EQ(breaker->snapshot().buffered_calls, 0u);
}

TEST(CircuitBreakerConfigTest, TheNewSettingsNameTheirBadValues) {
  auto message_of = [](auto&& set) -> std::string {
    try {
      r4c::CircuitBreakerConfig config;
      set(config);
    } catch (const r4c::ConfigException& e) {
      return e.what();
    }
    return "no exception";
  };
  EXPECT_THAT(message_of([](auto& c) { c.exponential_wait_in_open(0.5, 1s); }),
              HasSubstr("R4C-REG-001: wait_in_open_multiplier is 0.5"));
  EXPECT_THAT(message_of([](auto& c) { c.exponential_wait_in_open(2, 25h); }),
              HasSubstr("R4C-REG-001: max_wait_in_open"));
  EXPECT_THAT(
      message_of([](auto& c) { c.wait_in_open(10s).exponential_wait_in_open(2, 1s).validate(); }),
      HasSubstr("R4C-ATR-009: max_wait_in_open"));
  EXPECT_THAT(message_of([](auto& c) { c.max_wait_in_half_open(-1s); }),
              HasSubstr("R4C-REG-001: max_wait_in_half_open"));
  EXPECT_THAT(message_of([](auto& c) { c.state_after_max_wait_in_half_open(State::half_open); }),
              HasSubstr("valid: open or closed"));
  EXPECT_THAT(message_of([](auto& c) { c.initial_state(static_cast<State>(9)); }),
              HasSubstr("R4C-REG-001: initial_state"));
  EXPECT_THAT(message_of([](auto& c) { c.record_on(r4c::detail::ExceptionPredicate()); }),
              HasSubstr("R4C-REG-001: record_on"));
  EXPECT_THAT(message_of([](r4c::CircuitBreakerConfig& c) { c.record_result<int>(nullptr); }),
              HasSubstr("R4C-REG-001: record_result"));
}

TEST(CircuitBreakerConfigTest, TheNewFileKeysSetTheirSettings) {
  r4c::CircuitBreakerConfig config;
  auto apply = [&](std::string_view key, std::string_view text) {
    const auto* setting = r4c::detail::find_setting(r4c::CircuitBreakerKind::settings(), key);
    ASSERT_NE(setting, nullptr) << key;
    const std::optional<r4c::detail::SettingValue> value = r4c::detail::parse(*setting, text);
    ASSERT_TRUE(value) << key;
    setting->apply(config, *value);
  };
  apply("waitInOpenMultiplier", "2");
  EXPECT_EQ(config.max_wait_in_open(), 24h);
  apply("maxWaitInOpen", "5m");
  apply("maxWaitInHalfOpen", "30s");
  apply("stateAfterMaxWaitInHalfOpen", "closed");
  apply("initialState", "metrics_only");
  EXPECT_EQ(config.wait_in_open_multiplier(), 2.0);
  EXPECT_EQ(config.max_wait_in_open(), 5min);
  EXPECT_EQ(config.wait_in_open_for(3), 4min);
  EXPECT_EQ(config.max_wait_in_half_open(), 30s);
  EXPECT_EQ(config.state_after_max_wait_in_half_open(), State::closed);
  EXPECT_EQ(config.initial_state(), State::metrics_only);
  EXPECT_EQ(r4c::first_difference(config, r4c::CircuitBreakerConfig())->setting,
            "wait_in_open_multiplier");
}

TEST_F(CircuitBreakerTest, StatesAndWindowTypesHaveNames) {
  EXPECT_EQ(r4c::to_string(State::closed), "closed");
  EXPECT_EQ(r4c::to_string(State::open), "open");
  EXPECT_EQ(r4c::to_string(State::half_open), "half_open");
  EXPECT_EQ(r4c::to_string(State::disabled), "disabled");
  EXPECT_EQ(r4c::to_string(State::metrics_only), "metrics_only");
  EXPECT_EQ(r4c::to_string(State::forced_open), "forced_open");
  EXPECT_EQ(r4c::to_string(r4c::SlidingWindowType::count_based), "count_based");
  EXPECT_EQ(r4c::to_string(r4c::SlidingWindowType::time_based), "time_based");
}

TEST(CircuitBreakerConfigTest, DefaultsAreResilience4js) {
  const r4c::CircuitBreakerConfig config;
  EXPECT_EQ(r4c::test::settings_of(config),
            (r4c::test::BreakerSettings{50, 100, 60s, r4c::SlidingWindowType::count_based, 100, 100,
                                        60s, 10}));
  EXPECT_TRUE(config.record_on_types().empty());
  EXPECT_TRUE(config.ignore_on_types().empty());
}

TEST(CircuitBreakerConfigTest, InvalidSettingsNameTheSettingTheValueAndTheRange) {
  using Config = r4c::CircuitBreakerConfig;
  EXPECT_EQ(config_message([] { Config().failure_rate_threshold(0); }),
            "R4C-REG-001: failure_rate_threshold is 0; valid: a percentage in (0, 100]");
  EXPECT_EQ(config_message([] { Config().failure_rate_threshold(100.5); }),
            "R4C-REG-001: failure_rate_threshold is 100.5; valid: a percentage in (0, 100]");
  EXPECT_EQ(config_message([] { Config().slow_call_rate_threshold(-1); }),
            "R4C-REG-001: slow_call_rate_threshold is -1; valid: a percentage in (0, 100]");
  EXPECT_EQ(config_message([] { Config().slow_call_duration(0ns); }),
            "R4C-REG-001: slow_call_duration is 0 ns; valid: > 0 ns");
  EXPECT_EQ(config_message([] { Config().sliding_window_type(r4c::SlidingWindowType{7}); }),
            "R4C-REG-001: sliding_window_type is 7; valid: count_based or time_based");
  EXPECT_EQ(config_message([] { Config().sliding_window_size(0); }),
            "R4C-ATR-003: sliding_window_size is 0; valid: an integer >= 1");
  EXPECT_EQ(config_message([] { Config().sliding_window_size(1'000'001); }),
            "R4C-REG-001: sliding_window_size is 1000001; valid: an integer from 1 to 1000000");
  EXPECT_EQ(config_message([] { Config().minimum_number_of_calls(0); }),
            "R4C-ATR-003: minimum_number_of_calls is 0; valid: an integer >= 1");
  EXPECT_EQ(config_message([] { Config().wait_in_open(0ns); }),
            "R4C-REG-001: wait_in_open is 0 ns; valid: 1 ns .. 24 h");
  EXPECT_EQ(config_message([] { Config().wait_in_open(24h + 1ns); }),
            "R4C-REG-001: wait_in_open is 86400000000001 ns; valid: 1 ns .. 24 h");
  EXPECT_EQ(config_message([] { Config().permitted_calls_in_half_open(-3); }),
            "R4C-ATR-003: permitted_calls_in_half_open is -3; valid: an integer >= 1");
}

TEST(CircuitBreakerConfigTest, ARejectedValueLeavesTheSettingAsItWas) {
  r4c::CircuitBreakerConfig config;
  config.failure_rate_threshold(30);
  EXPECT_THROW(config.failure_rate_threshold(0), r4c::ConfigException);
  EXPECT_EQ(config.failure_rate_threshold(), 30);
  config.validate();
}

TEST(CircuitBreakerConfigTest, FirstDifferenceNamesTheFirstSettingThatDiffers) {
  using Config = r4c::CircuitBreakerConfig;
  EXPECT_FALSE(r4c::first_difference(Config(), Config()));
  auto difference = r4c::first_difference(
      Config().sliding_window_type(r4c::SlidingWindowType::time_based).wait_in_open(1s),
      Config().wait_in_open(2s));
  ASSERT_TRUE(difference);
  EXPECT_EQ(difference->setting, "sliding_window_type");
  EXPECT_EQ(difference->first, "time_based");
  EXPECT_EQ(difference->second, "count_based");
  auto settings = [](const Config& a, const Config& b) {
    auto found = r4c::first_difference(a, b);
    return found ? found->setting : std::string("none");
  };
  EXPECT_EQ(settings(Config().failure_rate_threshold(1), Config()), "failure_rate_threshold");
  EXPECT_EQ(settings(Config().slow_call_rate_threshold(1), Config()), "slow_call_rate_threshold");
  EXPECT_EQ(settings(Config().slow_call_duration(1s), Config()), "slow_call_duration");
  EXPECT_EQ(settings(Config().sliding_window_size(1), Config()), "sliding_window_size");
  EXPECT_EQ(settings(Config().minimum_number_of_calls(1), Config()), "minimum_number_of_calls");
  EXPECT_EQ(settings(Config().wait_in_open(1s), Config()), "wait_in_open");
  EXPECT_EQ(settings(Config().permitted_calls_in_half_open(1), Config()),
            "permitted_calls_in_half_open");
  EXPECT_EQ(settings(Config().record_on<NotFound>(), Config()), "record_on");
  EXPECT_EQ(settings(Config().ignore_on<NotFound>(), Config()), "ignore_on");
}

// 8 threads call a breaker with random outcomes while a driver thread moves the clock, so it
// opens, half-opens and closes many times. A call is known to be a trial when the breaker was
// half-open before it asked and had made no transition by the time it ran; those trials, per
// half-open period, never number more than permitted_calls_in_half_open at once.
// The successes a clean closed window counts without the lock come first in everything the
// locked path does next: the window, the rates and the transitions are those of the calls in
// their order.
TEST_F(CircuitBreakerTest, LockFreeSuccessesCountInOrderBeforeTheNextFailure) {
  auto breaker = make_small(/*window=*/4, /*minimum=*/4);
  for (int i = 0; i < 6; ++i) succeed(*breaker);  // clean: counted without the lock
  EXPECT_EQ(breaker->snapshot().buffered_calls, 4u);
  fail(*breaker);  // 1 of 4
  fail(*breaker);  // 2 of 4: 50 %
  EXPECT_EQ(breaker->state(), State::open);
  EXPECT_EQ(breaker->snapshot().failed_calls, 2u);
  EXPECT_EQ(breaker->snapshot().buffered_calls, 4u);
}

TEST_F(CircuitBreakerTest, OutcomesAfterAFailureCountInOrderUntilTheFailureLeaves) {
  auto breaker = make_small(/*window=*/3, /*minimum=*/3);
  fail(*breaker);
  succeed(*breaker);
  succeed(*breaker);  // 1 of 3: 33 %, under 50 %
  EXPECT_EQ(breaker->state(), State::closed);
  EXPECT_EQ(breaker->snapshot().failed_calls, 1u);
  succeed(*breaker);  // the failure leaves the window
  EXPECT_EQ(breaker->snapshot().failed_calls, 0u);
  for (int i = 0; i < 5; ++i) succeed(*breaker);  // clean again
  fail(*breaker);
  fail(*breaker);  // 2 of 3
  EXPECT_EQ(breaker->state(), State::open);
}

// A closed count-based breaker records failures without the lock too, as long as no threshold
// is within reach: against a model of resilience4j's count-based window (the last N calls,
// rated from the minimum on), random configs and outcomes (slow ones included) open the
// breaker at exactly the call the model opens at, and every snapshot shows the model's counts.
TEST_F(CircuitBreakerTest, LockFreeFailuresOpenACountBasedWindowAtExactlyTheModelsCall) {
  std::mt19937_64 random(r4c::test::test_seed(2121));
  int openings = 0;
  for (int round = 0; round < 60; ++round) {
    const int size = 1 + static_cast<int>(random() % 80);
    const int minimum = 1 + static_cast<int>(random() % static_cast<unsigned>(size + 10));
    const double failure_threshold = static_cast<double>(1 + random() % 100);
    const double slow_threshold = static_cast<double>(1 + random() % 100);
    const unsigned failure_odds = 1 + static_cast<unsigned>(random() % 100);  // percent
    auto breaker = make(r4c::CircuitBreakerConfig()
                            .sliding_window_size(size)
                            .minimum_number_of_calls(minimum)
                            .failure_rate_threshold(failure_threshold)
                            .slow_call_rate_threshold(slow_threshold)
                            .slow_call_duration(1s));
    std::vector<std::uint8_t> ring;  // the model: the last `size` calls, 1 failed | 2 slow
    std::size_t next = 0;
    std::uint64_t failed = 0, slow = 0;
    const auto rated = static_cast<std::uint64_t>(std::min(minimum, size));
    for (int call = 0; call < 600; ++call) {
      const bool fails = random() % 100 < failure_odds;
      const bool is_slow = random() % 50 == 0;
      r4c::CircuitBreakerPermit permit = breaker->try_acquire();
      ASSERT_TRUE(permit) << "round " << round << " call " << call;
      const auto duration = is_slow ? std::chrono::nanoseconds(1s) : std::chrono::nanoseconds(1ms);
      if (fails) {
        permit.on_error(duration);
      } else {
        permit.on_success(duration);
      }
      const std::uint8_t outcome = static_cast<std::uint8_t>((fails ? 1 : 0) | (is_slow ? 2 : 0));
      if (ring.size() < static_cast<std::size_t>(size)) {
        ring.push_back(outcome);
      } else {
        failed -= ring[next] & 1U;
        slow -= (ring[next] >> 1) & 1U;
        ring[next] = outcome;
        next = (next + 1) % ring.size();
      }
      failed += fails ? 1 : 0;
      slow += is_slow ? 1 : 0;
      const auto calls = static_cast<double>(ring.size());
      const bool opens = ring.size() >= rated && (failed != 0 || slow != 0) &&
                         (static_cast<double>(failed) * 100.0 / calls >= failure_threshold ||
                          static_cast<double>(slow) * 100.0 / calls >= slow_threshold);
      ASSERT_EQ(breaker->state(), opens ? State::open : State::closed)
          << "round " << round << " call " << call;
      if (opens) {
        ++openings;
        break;
      }
      if (random() % 16 == 0) {  // a snapshot folds what was counted without the lock
        const r4c::CircuitBreakerSnapshot snap = breaker->snapshot();
        ASSERT_EQ(snap.buffered_calls, ring.size()) << "round " << round << " call " << call;
        ASSERT_EQ(snap.failed_calls, failed) << "round " << round << " call " << call;
        ASSERT_EQ(snap.slow_calls, slow) << "round " << round << " call " << call;
      }
    }
  }
  EXPECT_GT(openings, 20);  // the rounds opened it at all sorts of points, not just never
}

TEST_F(CircuitBreakerTest, LockFreeSuccessesOfATimeBasedWindowExpireWithTheirSecond) {
  auto breaker = make(r4c::CircuitBreakerConfig()
                          .sliding_window_type(r4c::SlidingWindowType::time_based)
                          .sliding_window_size(2)  // seconds
                          .minimum_number_of_calls(1));
  for (int i = 0; i < 3; ++i) succeed(*breaker);  // second 0
  clock_->advance(1s);
  for (int i = 0; i < 2; ++i) succeed(*breaker);  // second 1
  EXPECT_EQ(breaker->snapshot().buffered_calls, 5u);
  clock_->advance(1s);  // second 2: the window is seconds 1 .. 2
  EXPECT_EQ(breaker->snapshot().buffered_calls, 2u);
  succeed(*breaker);
  clock_->advance(1s);  // second 3
  EXPECT_EQ(breaker->snapshot().buffered_calls, 1u);
  fail(*breaker);  // 1 of 2: 50 %
  EXPECT_EQ(breaker->state(), State::open);
}

// Threads recording at once, most outcomes successes: not one is lost or counted twice, and the
// breaker opens exactly when the window says so.
TEST(CircuitBreakerConcurrencyTest, EveryOutcomeIsCountedOnceWithAndWithoutTheLock) {
  constexpr int kThreads = 4;
  constexpr int kCalls = 20000;
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::CircuitBreaker breaker(
      "counted",
      r4c::CircuitBreakerConfig()
          .sliding_window_size(r4c::CircuitBreakerConfig::kMaxSlidingWindowSize)
          .minimum_number_of_calls(1)
          .failure_rate_threshold(100),
      clock);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        r4c::CircuitBreakerPermit permit = breaker.try_acquire();
        ASSERT_TRUE(permit);
        if ((i + t) % 97 == 96) {
          permit.on_error(1ms);
        } else {
          permit.on_success(1ms);
        }
        if (i % 1000 == 0) (void)breaker.snapshot();  // folds the lock-free successes meanwhile
      }
    });
  }
  for (auto& thread : threads) thread.join();
  std::uint64_t failures = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kCalls; ++i) failures += (i + t) % 97 == 96 ? 1 : 0;
  }
  const r4c::CircuitBreakerSnapshot snap = breaker.snapshot();
  EXPECT_EQ(snap.state, State::closed);
  EXPECT_EQ(snap.buffered_calls, static_cast<std::uint64_t>(kThreads) * kCalls);
  EXPECT_EQ(snap.failed_calls, failures);
}

TEST(CircuitBreakerConcurrencyTest, NeverRunsMoreTrialsThanPermittedAndCountsEveryRejection) {
  constexpr int kPermitted = 3;
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::CircuitBreaker breaker("hot",
                              r4c::CircuitBreakerConfig()
                                  .sliding_window_size(10)
                                  .minimum_number_of_calls(5)
                                  .permitted_calls_in_half_open(kPermitted)
                                  .wait_in_open(1s)
                                  .ignore_on<NotFound>(),
                              clock);
  std::atomic<bool> done{false};
  std::thread driver([&] {
    while (!done.load()) {
      clock->advance(100ms);
      std::this_thread::yield();
    }
  });
  std::mutex trials_mutex;
  std::map<std::uint64_t, int> trials_running;  // by half-open period (its transition count)
  int most_trials = 0;
  std::atomic<std::uint64_t> rejected{0}, trials_seen{0};
  std::vector<std::thread> threads;
  const std::uint64_t seed = r4c::test::test_seed();
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(static_cast<unsigned>(seed + static_cast<std::uint64_t>(t)));
      for (int i = 0; i < 4000 || (i < 100000 && breaker.snapshot().transitions < 12); ++i) {
        const r4c::CircuitBreakerSnapshot before = breaker.snapshot();
        const unsigned outcome = random() % 10;
        try {
          breaker.execute([&] {
            const bool trial = before.state == State::half_open &&
                               breaker.snapshot().transitions == before.transitions;
            if (trial) {
              trials_seen.fetch_add(1);
              std::lock_guard lock(trials_mutex);
              most_trials = std::max(most_trials, ++trials_running[before.transitions]);
            }
            std::this_thread::yield();  // lets other threads in while this call runs
            if (trial) {
              std::lock_guard lock(trials_mutex);
              --trials_running[before.transitions];
            }
            if (outcome < 5) return;
            if (outcome < 9) throw Unavailable("down");
            throw NotFound("ignored");
          });
        } catch (const r4c::CallNotPermittedException&) {
          rejected.fetch_add(1);
        } catch (const std::runtime_error&) {
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  done.store(true);
  driver.join();

  const r4c::CircuitBreakerSnapshot snap = breaker.snapshot();
  EXPECT_LE(most_trials, kPermitted);
  EXPECT_GT(trials_seen.load(), 0u);
  EXPECT_GE(snap.transitions, 12u);
  EXPECT_EQ(snap.not_permitted_calls, rejected.load());
  EXPECT_EQ(snap.state, breaker.state());
  if (snap.state == State::half_open) {
    EXPECT_LT(snap.buffered_calls, static_cast<std::uint64_t>(kPermitted));
  } else {
    EXPECT_LE(snap.buffered_calls, 10u);
  }
  EXPECT_EQ(clock->pending_tasks(), 0u);
}

}  // namespace
