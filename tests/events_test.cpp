// SPDX-License-Identifier: Apache-2.0
// Events (<r4c/events.hpp>): limit changes, breaker transitions and retries giving up; what
// publishes nothing; listeners that throw, unsubscribe or call back.
#include "r4c/events.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "r4c/adaptive_limit.hpp"
#include "r4c/circuit_breaker.hpp"
#include "r4c/registry.hpp"
#include "r4c/retry.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using State = r4c::CircuitBreakerState;

struct Unavailable : std::runtime_error {
  Unavailable() : std::runtime_error("unavailable") {}
};

// Captures what reaches the listener error hook during a test, and restores the default.
class HookCapture {
 public:
  HookCapture() {
    r4c::set_listener_error_hook([this](const r4c::ListenerError& error) {
      std::lock_guard lock(mutex_);
      std::string what;
      try {
        std::rethrow_exception(error.exception);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
        what = "?";
      }
      lines_.push_back(std::string(error.kind) + " " + std::string(error.instance_id) + ": " +
                       what);
    });
  }
  ~HookCapture() { r4c::set_listener_error_hook({}); }
  std::vector<std::string> lines() {
    std::lock_guard lock(mutex_);
    return lines_;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> lines_;
};

// An aimd limit's settings, with windows of `window` that one sample may end.
r4c::AdaptiveLimitConfig aimd(std::chrono::nanoseconds window) {
  return r4c::AdaptiveLimitConfig()
      .algorithm(r4c::LimitAlgorithm::aimd)
      .min_window_samples(1)
      .window(window);
}

class LimitEventsTest : public r4c::test::AimdRegistryTest {
 protected:
  // One call of `latency` that ends the window: a drop or a success.
  void call(std::chrono::nanoseconds latency, bool drop) {
    r4c::Permit permit = limit_.try_acquire();
    ASSERT_TRUE(permit);
    clock_->advance(latency);
    if (drop) {
      permit.on_drop();
    } else {
      permit.on_success();
    }
  }

  r4c::AdaptiveLimit& limit_ = registry_.adaptive_limit_policy("shop::Orders#place(int)", "orders",
                                                               "", {.initial_limit = 10});
  std::vector<r4c::LimitChangeEvent> events_;
  r4c::Subscription subscription_ = registry_.adaptive_limit("orders").on_limit_change(
      [this](const r4c::LimitChangeEvent& e) { events_.push_back(e); });
};

TEST_F(LimitEventsTest, AWindowThatChangesTheLimitPublishesItsFigures) {
  call(1s, /*drop=*/true);  // aimd: 10 * 0.9
  ASSERT_EQ(events_.size(), 1u);
  const r4c::LimitChangeEvent& e = events_[0];
  EXPECT_EQ(e.instance_id, "orders");
  EXPECT_EQ(e.old_limit, 10);
  EXPECT_EQ(e.new_limit, 9);
  EXPECT_EQ(e.window_latency, 1s);
  EXPECT_EQ(e.max_in_flight, 1);
  EXPECT_TRUE(e.dropped);
  EXPECT_EQ(e.long_latency, 0ns);  // aimd keeps none
}

TEST_F(LimitEventsTest, AdmittedCallsAndAWindowThatKeepsTheLimitPublishNothing) {
  for (int i = 0; i < 100; ++i) call(1ms, /*drop=*/false);  // inside one window: no close
  EXPECT_TRUE(events_.empty());
  call(1s, /*drop=*/false);  // closes a window with 1 in flight of 10: aimd keeps the limit
  EXPECT_EQ(limit_.snapshot().windows, 1u);
  EXPECT_EQ(limit_.limit(), 10);
  EXPECT_TRUE(events_.empty());
}

TEST_F(LimitEventsTest, AResetSubscriptionHearsNothingMore) {
  call(1s, true);
  subscription_.reset();
  EXPECT_FALSE(subscription_);
  call(1s, true);
  EXPECT_EQ(events_.size(), 1u);
  EXPECT_EQ(limit_.limit(), 8);
}

TEST_F(LimitEventsTest, AListenerSeesTheChangeInASnapshotAndMayCallTheLimit) {
  int seen_limit = 0;
  bool admitted = false;
  r4c::Subscription inner = limit_.on_limit_change([&](const r4c::LimitChangeEvent&) {
    seen_limit = limit_.snapshot().limit;
    r4c::Permit permit = limit_.try_acquire();  // the window is closing: no second close
    admitted = static_cast<bool>(permit);
  });
  call(1s, true);
  EXPECT_EQ(seen_limit, 9);
  EXPECT_TRUE(admitted);
  EXPECT_EQ(limit_.in_flight(), 0);
}

TEST_F(LimitEventsTest, AThrowingListenerIsIsolatedAndReported) {
  HookCapture hook;
  int after = 0;
  r4c::Subscription thrower = limit_.on_limit_change(
      [](const r4c::LimitChangeEvent&) { throw std::runtime_error("listener bug"); });
  r4c::Subscription counter =
      limit_.on_limit_change([&](const r4c::LimitChangeEvent&) { ++after; });
  call(1s, true);
  EXPECT_EQ(events_.size(), 1u);  // subscribed before the thrower
  EXPECT_EQ(after, 1);            // subscribed after it: still called
  EXPECT_EQ(limit_.limit(), 9);   // the window closed normally
  EXPECT_EQ(hook.lines(), std::vector<std::string>{"adaptivelimit orders: listener bug"});
  EXPECT_EQ(limit_.in_flight(), 0);
}

TEST_F(LimitEventsTest, AListenerMayUnsubscribeItselfWhileBeingCalled) {
  int calls = 0;
  r4c::Subscription once;
  once = limit_.on_limit_change([&](const r4c::LimitChangeEvent&) {
    ++calls;
    once.reset();
  });
  call(1s, true);
  call(1s, true);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(events_.size(), 2u);
}

TEST(LimitEventsConcurrencyTest, ChangesFromManyThreadsArriveInWindowOrder) {
  // Windows close on whichever thread ends a call after the window did; each event must start
  // from the limit the previous one ended at.
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("orders", aimd(1ms).initial_limit(50), clock);
  std::mutex mutex;
  std::vector<std::pair<int, int>> chain;
  r4c::Subscription s = limit.on_limit_change([&](const r4c::LimitChangeEvent& e) {
    std::lock_guard lock(mutex);
    chain.emplace_back(e.old_limit, e.new_limit);
  });
  // The callers move the clock themselves, so windows end while the others' calls run.
  r4c::test::on_threads(4, [&](int t) {
    for (int i = 0; i < 2000; ++i) {
      if (i % 20 == 0) clock->advance(1ms);
      if (r4c::Permit permit = limit.try_acquire()) {
        if ((i + t) % 7 == 0) {
          permit.on_drop();
        } else {
          permit.on_success();
        }
      }
    }
  });
  std::lock_guard lock(mutex);
  ASSERT_GE(chain.size(), 5u);  // 400 windows end, most with a drop
  EXPECT_EQ(chain.front().first, 50);
  for (std::size_t i = 1; i < chain.size(); ++i) {
    ASSERT_EQ(chain[i].first, chain[i - 1].second) << "event " << i;
  }
  EXPECT_EQ(chain.back().second, limit.limit());
  EXPECT_EQ(chain.size(), limit.snapshot().limit_changes);
}

TEST(SubscriptionTest, OutlivingItsPolicyIsHarmless) {
  r4c::Subscription subscription;
  {
    r4c::AdaptiveLimit limit("gone");
    subscription = limit.on_limit_change([](const r4c::LimitChangeEvent&) {});
    EXPECT_TRUE(subscription);
  }
  EXPECT_FALSE(subscription);
  subscription.reset();  // the limit is gone: nothing to do
}

TEST(SubscriptionTest, AnEmptyListenerIsRefused) {
  r4c::AdaptiveLimit limit("orders");
  EXPECT_THROW(limit.on_limit_change({}), std::invalid_argument);
}

class BreakerEventsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    subscription_ =
        breaker_.handle().on_state_transition([this](const r4c::CircuitBreakerTransitionEvent& e) {
          std::lock_guard lock(mutex_);
          events_.push_back(e);
        });
  }
  void fail() {
    EXPECT_THROW(breaker_.execute([]() -> int { throw Unavailable(); }), Unavailable);
  }
  void succeed() {
    breaker_.execute([] { return 1; });
  }
  std::vector<std::pair<State, State>> moves() {
    std::lock_guard lock(mutex_);
    std::vector<std::pair<State, State>> out;
    for (const auto& e : events_) out.emplace_back(e.from, e.to);
    return out;
  }

  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
  r4c::CircuitBreaker breaker_{"inventory",
                               r4c::CircuitBreakerConfig()
                                   .sliding_window_size(4)
                                   .minimum_number_of_calls(4)
                                   .permitted_calls_in_half_open(2)
                                   .wait_in_open(10s),
                               clock_};
  std::mutex mutex_;
  std::vector<r4c::CircuitBreakerTransitionEvent> events_;
  r4c::Subscription subscription_;
};

TEST_F(BreakerEventsTest, EveryTransitionIsPublishedInOrderWithTheRatesThatDecidedIt) {
  succeed();
  fail();
  fail();
  EXPECT_TRUE(moves().empty());  // calls publish nothing
  fail();                        // 3 of 4 failed: 75% >= 50%
  ASSERT_EQ(moves(), (std::vector<std::pair<State, State>>{{State::closed, State::open}}));
  EXPECT_EQ(events_[0].instance_id, "inventory");
  EXPECT_DOUBLE_EQ(events_[0].failure_rate, 75.0);
  EXPECT_DOUBLE_EQ(events_[0].slow_call_rate, 0.0);

  clock_->advance(10s);
  succeed();  // the first call after the wait moves it to half-open
  succeed();  // the second trial decides: closed
  EXPECT_EQ(moves(), (std::vector<std::pair<State, State>>{{State::closed, State::open},
                                                           {State::open, State::half_open},
                                                           {State::half_open, State::closed}}));
  EXPECT_EQ(events_[1].failure_rate, -1);  // the wait decided it, not calls
  EXPECT_DOUBLE_EQ(events_[2].failure_rate, 0.0);
  EXPECT_EQ(breaker_.snapshot().transitions, 3u);
}

TEST_F(BreakerEventsTest, AListenerMayReadAndMoveTheBreaker) {
  std::vector<State> seen;
  r4c::Subscription reopen =
      breaker_.on_state_transition([&](const r4c::CircuitBreakerTransitionEvent& e) {
        seen.push_back(breaker_.snapshot().state);  // the lock is not held: no deadlock
        if (e.to == State::open) breaker_.transition_to_closed();  // queued behind this one
      });
  breaker_.transition_to_open();
  EXPECT_EQ(breaker_.state(), State::closed);
  EXPECT_EQ(moves(), (std::vector<std::pair<State, State>>{{State::closed, State::open},
                                                           {State::open, State::closed}}));
  // The listener's own transition was published after the one it was called for.
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], State::closed);
}

TEST_F(BreakerEventsTest, ConcurrentTransitionsArePublishedInOrder) {
  // One publisher at a time, oldest first: transition numbers only grow, and an event that
  // follows its predecessor's number starts where that one ended. A breaker forced to flap on
  // four threads may outrun its listeners by more than the queue holds; the oldest are then
  // dropped, which shows as a gap in the numbers.
  constexpr int kThreads = 4;
  constexpr int kRounds = 500;
  r4c::test::on_threads(kThreads, [this](int t) {
    for (int i = 0; i < kRounds; ++i) {
      if ((i + t) % 2 == 0) {
        breaker_.transition_to_open();
      } else {
        breaker_.transition_to_closed();
      }
    }
  });
  std::lock_guard lock(mutex_);
  ASSERT_FALSE(events_.empty());
  for (std::size_t i = 1; i < events_.size(); ++i) {
    ASSERT_GT(events_[i].transition, events_[i - 1].transition) << "event " << i;
    if (events_[i].transition == events_[i - 1].transition + 1) {
      ASSERT_EQ(events_[i].from, events_[i - 1].to) << "event " << i;
    }
  }
  // The last transition is always published, by the thread that made it or the publisher.
  EXPECT_EQ(events_.back().transition, breaker_.snapshot().transitions);
  EXPECT_EQ(events_.back().to, breaker_.state());
}

TEST_F(BreakerEventsTest, ListenersThatFallBehindLoseTheOldestTransitions) {
  // The listener makes 40 transitions while handling the first: they queue behind it, and the
  // queue keeps the newest kUnpublishedTransitions of them.
  constexpr std::uint64_t kQueue = r4c::CircuitBreaker::kUnpublishedTransitions;
  bool flapped = false;
  r4c::Subscription flapper =
      breaker_.on_state_transition([&](const r4c::CircuitBreakerTransitionEvent&) {
        if (std::exchange(flapped, true)) return;
        for (int i = 0; i < 20; ++i) {
          breaker_.transition_to_closed();
          breaker_.transition_to_open();
        }
      });
  breaker_.transition_to_open();
  std::lock_guard lock(mutex_);
  ASSERT_EQ(events_.size(), 1 + kQueue);
  EXPECT_EQ(events_[0].transition, 1u);
  EXPECT_EQ(events_[1].transition, 41 - kQueue + 1);  // 41 made, the newest kQueue kept
  EXPECT_EQ(events_.back().transition, 41u);
  EXPECT_EQ(events_.back().to, State::open);
}

TEST(RetryEventsTest, ACallThatRunsOutOfAttemptsGivesUpOnce) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::Retry retry("search", r4c::RetryConfig().max_attempts(3).wait(0ns), clock);
  std::vector<r4c::RetryGiveUpEvent> events;
  r4c::Subscription s =
      retry.handle().on_give_up([&](const r4c::RetryGiveUpEvent& e) { events.push_back(e); });
  EXPECT_EQ(retry.execute([] { return 1; }), 1);  // success: nothing
  int attempts = 0;
  EXPECT_EQ(retry.execute([&] {
    if (++attempts < 2) throw Unavailable();
    return 2;
  }),
            2);  // success after a retry: nothing
  EXPECT_TRUE(events.empty());
  EXPECT_THROW(retry.execute([]() -> int { throw Unavailable(); }), Unavailable);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].instance_id, "search");
  EXPECT_EQ(events[0].attempts, 3);
}

TEST(RetryEventsTest, AFailureThatIsNeverRetriedIsNoGivingUp) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::Retry retry("search", r4c::RetryConfig().max_attempts(3).wait(0ns).abort_on<Unavailable>(),
                   clock);
  int events = 0;
  r4c::Subscription s = retry.on_give_up([&](const r4c::RetryGiveUpEvent&) { ++events; });
  EXPECT_THROW(retry.execute([]() -> int { throw Unavailable(); }), Unavailable);
  EXPECT_EQ(events, 0);
  EXPECT_EQ(retry.snapshot().failed_without_retry, 1u);
}

TEST(ListenerErrorHookTest, AHookThatThrowsBreaksNothing) {
  r4c::set_listener_error_hook([](const r4c::ListenerError&) { throw std::logic_error("hook"); });
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("orders", aimd(1s), clock);
  int after = 0;
  r4c::Subscription thrower =
      limit.on_limit_change([](const r4c::LimitChangeEvent&) { throw std::runtime_error("bug"); });
  r4c::Subscription counter = limit.on_limit_change([&](const r4c::LimitChangeEvent&) { ++after; });
  {
    r4c::Permit permit = limit.try_acquire();
    clock->advance(1s);
    permit.on_drop();  // ends the window: the listener throws, then the hook does
  }
  r4c::set_listener_error_hook({});
  EXPECT_EQ(after, 1);
  EXPECT_EQ(limit.limit(), 18);
  EXPECT_EQ(limit.in_flight(), 0);
}

TEST(ListenerErrorHookTest, TheDefaultHookWritesOneLineToStandardError) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("orders", aimd(1s), clock);
  r4c::Subscription s =
      limit.on_limit_change([](const r4c::LimitChangeEvent&) { throw std::runtime_error("bug"); });
  ::testing::internal::CaptureStderr();
  {
    r4c::Permit permit = limit.try_acquire();
    clock->advance(1s);
    permit.on_drop();  // ends the window: 20 -> 18
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "r4c: a listener of adaptivelimit 'orders' threw: bug\n");
  EXPECT_EQ(limit.limit(), 18);
}

}  // namespace
