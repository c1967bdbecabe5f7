// SPDX-License-Identifier: Apache-2.0
#include "r4c/retry.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_seed.hpp"
#include "test_support.hpp"

namespace {

using r4c::test::config_message;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

using r4c::test::Busy;
using r4c::test::NotFound;
struct GoneForGood : NotFound {
  using NotFound::NotFound;
};

// The address of the object an exception_ptr holds.
const void* address_of(const std::exception_ptr& failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const std::exception& e) {
    return &e;
  }
}

class RetryTest : public ::testing::Test {
 protected:
  // Runs `call` on another thread and, whenever it waits on the clock, advances the clock by
  // `step`: an attempt after a wait starts exactly at the wait's end (waits are multiples of
  // `step`). Counts the advances in advances_; rethrows what `call` threw, the same object.
  void drive(const std::function<void()>& call, std::chrono::nanoseconds step = 1ms) {
    std::atomic<bool> done{false};
    std::exception_ptr failure;
    std::thread caller([&] {
      try {
        call();
      } catch (...) {
        failure = std::current_exception();
      }
      done.store(true);
    });
    advances_ = 0;
    while (!done.load()) {
      if (clock_->pending_tasks() > 0) {
        clock_->advance(step);
        ++advances_;
      } else {
        std::this_thread::yield();
      }
    }
    caller.join();
    if (failure) std::rethrow_exception(failure);
  }

  // A function that records the clock at each attempt and fails as `outcome(attempt)` says.
  std::function<int()> attempts_that(std::function<int(int)> outcome) {
    return [this, outcome] {
      attempt_times_.push_back(clock_->now());
      return outcome(static_cast<int>(attempt_times_.size()));
    };
  }

  // The waits between the attempts recorded by attempts_that.
  std::vector<std::chrono::nanoseconds> waits() const {
    std::vector<std::chrono::nanoseconds> between;
    for (std::size_t i = 1; i < attempt_times_.size(); ++i) {
      between.push_back(attempt_times_[i] - attempt_times_[i - 1]);
    }
    return between;
  }

  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
  std::vector<std::chrono::nanoseconds> attempt_times_;  // written by the caller thread only
  int advances_ = 0;
};

TEST_F(RetryTest, SucceedsAtOnceWithoutWaiting) {
  r4c::Retry retry("orders", r4c::RetryConfig(), clock_);
  int result = 0;
  drive([&] { result = retry.execute(attempts_that([](int) { return 42; })); });
  EXPECT_EQ(result, 42);
  EXPECT_EQ(attempt_times_.size(), 1u);
  EXPECT_EQ(advances_, 0);
  EXPECT_EQ(retry.snapshot().successful_without_retry, 1u);
  EXPECT_EQ(retry.snapshot().retries, 0u);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
}

TEST_F(RetryTest, RetriesAFailureAfterItsWaitAndReturnsTheLaterSuccess) {
  r4c::Retry retry("orders", r4c::RetryConfig().wait(500ms), clock_);
  std::atomic<int> attempts{0};
  int result = 0;
  std::thread caller([&] {
    result = retry.execute([&] {
      attempt_times_.push_back(clock_->now());
      if (attempts.fetch_add(1) == 0) throw Busy("busy");
      return 7;
    });
  });
  while (clock_->pending_tasks() == 0) std::this_thread::yield();
  EXPECT_EQ(retry.snapshot().waiting_calls, 1);
  clock_->advance(499ms);
  EXPECT_EQ(clock_->pending_tasks(), 1u);  // still waiting: the wait has not ended
  EXPECT_EQ(attempts.load(), 1);
  clock_->advance(1ms);
  caller.join();
  EXPECT_EQ(result, 7);
  EXPECT_THAT(attempt_times_, ElementsAre(0ms, 500ms));  // the retry ran when the wait ended
  EXPECT_EQ(clock_->pending_tasks(), 0u);
  const r4c::RetrySnapshot snap = retry.snapshot();
  EXPECT_EQ(snap.successful_with_retry, 1u);
  EXPECT_EQ(snap.retries, 1u);
  EXPECT_EQ(snap.waiting_calls, 0);
}

TEST_F(RetryTest, GivesUpAfterMaxAttemptsAndRethrowsTheLastFailureUnchanged) {
  r4c::Retry retry("orders", r4c::RetryConfig().max_attempts(3).wait(10ms), clock_);
  const std::vector<std::exception_ptr> failures = {std::make_exception_ptr(Busy("first")),
                                                    std::make_exception_ptr(Busy("second")),
                                                    std::make_exception_ptr(Busy("third"))};
  try {
    drive([&] {
      retry.execute(attempts_that(
          [&](int attempt) -> int { std::rethrow_exception(failures[attempt - 1]); }));
    });
    FAIL() << "nothing thrown";
  } catch (const Busy& e) {
    EXPECT_EQ(&e, address_of(failures[2]));
    EXPECT_STREQ(e.what(), "third");
  }
  EXPECT_THAT(attempt_times_, ElementsAre(0ms, 10ms, 20ms));
  const r4c::RetrySnapshot snap = retry.snapshot();
  EXPECT_EQ(snap.failed_with_retry, 1u);
  EXPECT_EQ(snap.retries, 2u);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
}

TEST_F(RetryTest, AbortOnFailsAtOnceForTheTypeAndItsDerivedTypes) {
  r4c::Retry retry("orders", r4c::RetryConfig().abort_on<NotFound>(), clock_);
  EXPECT_THROW(
      drive([&] { retry.execute(attempts_that([](int) -> int { throw GoneForGood("gone"); })); }),
      GoneForGood);
  EXPECT_EQ(attempt_times_.size(), 1u);
  EXPECT_EQ(advances_, 0);  // no wait
  EXPECT_EQ(retry.snapshot().failed_without_retry, 1u);
  EXPECT_EQ(retry.snapshot().retries, 0u);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
}

TEST_F(RetryTest, AbortOnWinsOverRetryOn) {
  r4c::Retry retry("orders", r4c::RetryConfig().retry_on<std::runtime_error>().abort_on<NotFound>(),
                   clock_);
  EXPECT_THROW(
      drive([&] { retry.execute(attempts_that([](int) -> int { throw NotFound("404"); })); }),
      NotFound);
  EXPECT_EQ(attempt_times_.size(), 1u);
  EXPECT_EQ(advances_, 0);
}

TEST_F(RetryTest, RetryOnRetriesTheListedFailures) {
  r4c::Retry retry("orders", r4c::RetryConfig().retry_on<Busy>().wait(10ms), clock_);
  int result = 0;
  drive([&] {
    result = retry.execute(attempts_that([](int attempt) {
      if (attempt < 3) throw Busy("busy");
      return attempt;
    }));
  });
  EXPECT_EQ(result, 3);
  EXPECT_EQ(retry.snapshot().successful_with_retry, 1u);
}

TEST_F(RetryTest, RetryOnLetsOtherFailuresThroughAtOnce) {
  r4c::Retry retry("orders", r4c::RetryConfig().retry_on<Busy>(), clock_);
  EXPECT_THROW(drive([&] {
                 retry.execute(attempts_that([](int) -> int { throw std::logic_error("bug"); }));
               }),
               std::logic_error);
  EXPECT_EQ(attempt_times_.size(), 1u);
  EXPECT_EQ(advances_, 0);
  EXPECT_EQ(retry.snapshot().failed_without_retry, 1u);
}

TEST_F(RetryTest, ExponentialBackoffMultipliesTheWaitUpToMaxWait) {
  r4c::Retry retry("orders",
                   r4c::RetryConfig().max_attempts(5).wait(100ms).exponential_backoff(2.0, 400ms),
                   clock_);
  EXPECT_THROW(drive([&] { retry.execute(attempts_that([](int) -> int { throw Busy("busy"); })); }),
               Busy);
  // Waits of 100, 200 and 400 ms, then 400 again where 800 would exceed max_wait.
  EXPECT_THAT(attempt_times_, ElementsAre(0ms, 100ms, 300ms, 700ms, 1100ms));
}

TEST_F(RetryTest, RandomizedWaitKeepsEachWaitWithinItsBand) {
  constexpr int kAttempts = 41;
  r4c::Retry retry(
      "orders", r4c::RetryConfig().max_attempts(kAttempts).wait(1us).randomized_wait(0.5), clock_);
  EXPECT_THROW(
      drive([&] { retry.execute(attempts_that([](int) -> int { throw Busy("busy"); })); }, 1ns),
      Busy);
  ASSERT_EQ(attempt_times_.size(), static_cast<std::size_t>(kAttempts));
  std::vector<std::chrono::nanoseconds> waits;
  for (int i = 1; i < kAttempts; ++i) {
    waits.push_back(attempt_times_[i] - attempt_times_[i - 1]);
    EXPECT_GE(waits.back(), 500ns);
    EXPECT_LE(waits.back(), 1500ns);
  }
  EXPECT_NE(std::count(waits.begin(), waits.end(), waits.front()), kAttempts - 1)
      << "every wait was the same";
}

// A random source that returns `draws` in turn, from the first again after the last.
std::function<double()> draws_of(std::vector<double> draws) {
  auto next = std::make_shared<std::size_t>(0);
  return [draws = std::move(draws), next] { return draws[(*next)++ % draws.size()]; };
}

class RetryJitterTest : public RetryTest {
 protected:
  // The waits of a call that fails 6 times with wait 100 ms, x2 up to 400 ms, jitter 0.5.
  std::vector<std::chrono::nanoseconds> waits_drawing(std::vector<double> draws) {
    r4c::Retry retry("orders",
                     r4c::RetryConfig()
                         .max_attempts(6)
                         .wait(100ms)
                         .exponential_backoff(2.0, 400ms)
                         .randomized_wait(0.5)
                         .random_source(draws_of(std::move(draws))),
                     clock_);
    EXPECT_THROW(
        drive([&] { retry.execute(attempts_that([](int) -> int { throw Busy("busy"); })); }), Busy);
    return waits();
  }
};

// Uncapped waits 100, 200, 400, 800, 1600 ms; each band [w/2, 3w/2) is drawn in, then capped.
TEST_F(RetryJitterTest, TheLowestDrawIsHalfTheUncappedWaitThenCapped) {
  EXPECT_THAT(waits_drawing({0.0}), ElementsAre(50ms, 100ms, 200ms, 400ms, 400ms));
}

TEST_F(RetryJitterTest, TheMiddleDrawIsTheUncappedWaitThenCapped) {
  EXPECT_THAT(waits_drawing({0.5}), ElementsAre(100ms, 200ms, 400ms, 400ms, 400ms));
}

TEST_F(RetryJitterTest, AHighDrawIsCappedAtMaxWaitNeverAbove) {
  EXPECT_THAT(waits_drawing({0.75}), ElementsAre(125ms, 250ms, 400ms, 400ms, 400ms));
  attempt_times_.clear();
  // A source outside [0, 1) is clamped into it: the top of the band, just under 3w/2.
  for (std::chrono::nanoseconds wait : waits_drawing({7.0})) EXPECT_LE(wait, 400ms);
}

TEST_F(RetryJitterTest, NoDefaultDrawExceedsMaxWait) {
  // The case of the issue: a cap of 100 s with jitter 0.5 used to exceed it about half the time.
  constexpr int kAttempts = 60;
  r4c::Retry retry("orders",
                   r4c::RetryConfig()
                       .max_attempts(kAttempts)
                       .wait(100us)
                       .exponential_backoff(1.5, 1ms)
                       .randomized_wait(0.5),
                   clock_);
  EXPECT_THROW(
      drive([&] { retry.execute(attempts_that([](int) -> int { throw Busy("busy"); })); }, 1us),
      Busy);
  ASSERT_EQ(attempt_times_.size(), static_cast<std::size_t>(kAttempts));
  for (int i = 1; i < kAttempts; ++i) {
    EXPECT_LE(attempt_times_[i] - attempt_times_[i - 1], 1ms) << "wait " << i;
  }
}

TEST_F(RetryTest, FailAfterMaxAttemptsFailsAResultStillRetriedWithMaxRetriesExceeded) {
  r4c::Retry retry("orders",
                   r4c::RetryConfig()
                       .wait(10ms)
                       .retry_on_result<int>([](const int& v) { return v < 0; })
                       .fail_after_max_attempts(true),
                   clock_);
  try {
    drive([&] { retry.execute(attempts_that([](int) { return -1; })); });
    ADD_FAILURE() << "no exception";
  } catch (const r4c::MaxRetriesExceededException& e) {
    EXPECT_EQ(e.attempts(), 3);
    EXPECT_EQ(e.instance_id(), "orders");
    EXPECT_THAT(e.what(), HasSubstr("gave up after 3 attempts"));
  }
  EXPECT_EQ(attempt_times_.size(), 3u);
  EXPECT_EQ(retry.snapshot().failed_with_retry, 1u);
  int result = 0;
  drive([&] { result = retry.execute(attempts_that([](int) { return 7; })); });
  EXPECT_EQ(result, 7);  // a wanted result is returned as always
}

TEST_F(RetryTest, AVoidResultPredicateRetriesUntilTheCallLeftWhatItShould) {
  int written = 0;
  r4c::Retry retry("orders",
                   r4c::RetryConfig().max_attempts(5).wait(10ms).retry_on_void_result(
                       [&] { return written < 3; }),
                   clock_);
  drive([&] { retry.execute([&] { ++written; }); });
  EXPECT_EQ(written, 3);
  EXPECT_EQ(retry.snapshot().successful_with_retry, 1u);
  EXPECT_EQ(retry.snapshot().retries, 2u);
  // Out of attempts: returns, or fails with fail_after_max_attempts.
  r4c::Retry strict("orders",
                    r4c::RetryConfig()
                        .max_attempts(2)
                        .wait(10ms)
                        .retry_on_void_result([] { return true; })
                        .fail_after_max_attempts(true),
                    clock_);
  EXPECT_THROW(drive([&] { strict.execute([] {}); }), r4c::MaxRetriesExceededException);
  EXPECT_EQ(strict.snapshot().failed_with_retry, 1u);
}

TEST_F(RetryTest, AnIntervalFunctionOfTheAttemptGivesEachWait) {
  r4c::Retry retry("orders",
                   r4c::RetryConfig().max_attempts(4).wait(1h).interval_function(
                       [](int attempt) { return attempt * 100ms; }),
                   clock_);
  EXPECT_THROW(drive([&] { retry.execute(attempts_that([](int) -> int { throw Busy("busy"); })); }),
               Busy);
  EXPECT_THAT(waits(), ElementsAre(100ms, 200ms, 300ms));
}

TEST_F(RetryTest, AnIntervalFunctionOfTheOutcomeSeesTheFailureOrTheResult) {
  std::vector<std::string> seen;
  r4c::Retry retry("orders",
                   r4c::RetryConfig()
                       .max_attempts(4)
                       .retry_on_result<int>([](const int& v) { return v < 0; })
                       .interval_function([](int) { return 1h; })  // the outcome's function wins
                       .interval_function([&](int attempt, const r4c::RetryOutcome& outcome) {
                         if (const int* result = outcome.result<int>()) {
                           seen.push_back("result " + std::to_string(*result));
                           return 200ms;
                         }
                         EXPECT_EQ(outcome.result<long>(), nullptr);
                         try {
                           std::rethrow_exception(outcome.failure);
                         } catch (const Busy&) {
                           seen.push_back("busy at " + std::to_string(attempt));
                         }
                         return 50ms;
                       }),
                   clock_);
  int result = 0;
  drive([&] {
    result = retry.execute(attempts_that([](int attempt) {
      if (attempt == 1) throw Busy("busy");
      return attempt == 4 ? 9 : -attempt;
    }));
  });
  EXPECT_EQ(result, 9);
  EXPECT_THAT(seen, ElementsAre("busy at 1", "result -2", "result -3"));
  EXPECT_THAT(waits(), ElementsAre(50ms, 200ms, 200ms));
}

TEST_F(RetryTest, AnIntervalFunctionIsClampedAndOneThatThrowsEndsTheCall) {
  r4c::Retry negative("orders",
                      r4c::RetryConfig().max_attempts(2).interval_function([](int) { return -5s; }),
                      clock_);
  EXPECT_THROW(
      drive([&] { negative.execute(attempts_that([](int) -> int { throw Busy("busy"); })); }),
      Busy);
  EXPECT_THAT(waits(), ElementsAre(0ms));
  r4c::Retry throwing("orders",
                      r4c::RetryConfig().interval_function(
                          [](int) -> std::chrono::nanoseconds { throw std::logic_error("bug"); }),
                      clock_);
  EXPECT_THROW(throwing.execute([]() -> int { throw Busy("busy"); }), std::logic_error);
  EXPECT_EQ(throwing.snapshot().failed_without_retry, 1u);
  EXPECT_EQ(throwing.snapshot().waiting_calls, 0);
}

struct HttpError : std::runtime_error {
  explicit HttpError(int status) : std::runtime_error("http"), status(status) {}
  int status;
};

TEST_F(RetryTest, ExceptionPredicatesRetryAndAbortWithAbortWinning) {
  r4c::Retry retry("orders",
                   r4c::RetryConfig()
                       .max_attempts(3)
                       .wait(10ms)
                       .retry_on<HttpError>([](const HttpError& e) { return e.status >= 500; })
                       .retry_on<Busy>()
                       .abort_on([](const std::exception_ptr& failure) {
                         try {
                           std::rethrow_exception(failure);
                         } catch (const Busy& e) {
                           return std::string(e.what()) == "for good";
                         } catch (...) {
                           return false;
                         }
                       }),
                   clock_);
  const auto attempts_for = [&](auto failure) {
    attempt_times_.clear();
    EXPECT_ANY_THROW(
        drive([&] { retry.execute(attempts_that([&](int) -> int { throw failure; })); }));
    return attempt_times_.size();
  };
  EXPECT_EQ(attempts_for(HttpError(503)), 3u);    // the predicate retries it
  EXPECT_EQ(attempts_for(HttpError(404)), 1u);    // neither type nor predicate
  EXPECT_EQ(attempts_for(Busy("busy")), 3u);      // by type
  EXPECT_EQ(attempts_for(Busy("for good")), 1u);  // aborted by predicate over the type
}

TEST_F(RetryTest, AnAttemptListenerHearsEveryAttempt) {
  r4c::Retry retry("orders", r4c::RetryConfig().wait(100ms), clock_);
  std::vector<r4c::RetryAttemptEvent> events;
  r4c::Subscription s =
      retry.on_attempt([&](const r4c::RetryAttemptEvent& e) { events.push_back(e); });
  int result = 0;
  drive([&] {
    result = retry.execute(attempts_that([](int attempt) {
      if (attempt == 1) throw Busy("busy");
      return 5;
    }));
  });
  EXPECT_EQ(result, 5);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].attempt, 1);
  EXPECT_TRUE(events[0].failed);
  EXPECT_TRUE(events[0].retrying);
  EXPECT_EQ(events[0].wait, 100ms);
  EXPECT_TRUE(events[0].failure);
  EXPECT_EQ(events[1].attempt, 2);
  EXPECT_FALSE(events[1].failed);
  EXPECT_FALSE(events[1].retrying);
  EXPECT_EQ(events[1].wait, 0ms);
  EXPECT_EQ(events[0].instance_id, "orders");
  events.clear();
  EXPECT_THROW(drive([&] { retry.execute([]() -> int { throw Busy("x"); }); }), Busy);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_TRUE(events[1].retrying);
  EXPECT_EQ(events[2].attempt, 3);
  EXPECT_TRUE(events[2].failed);
  EXPECT_FALSE(events[2].retrying);  // the last: the call gives up
}

TEST(RetryConfigTest, FailAfterMaxAttemptsIsAFileKeyAndASetting) {
  r4c::RetryConfig config;
  EXPECT_FALSE(config.fail_after_max_attempts());
  const auto* setting =
      r4c::detail::find_setting(r4c::RetryKind::settings(), "failAfterMaxAttempts");
  ASSERT_NE(setting, nullptr);
  setting->apply(config, *r4c::detail::parse(*setting, "true"));
  EXPECT_TRUE(config.fail_after_max_attempts());
  EXPECT_EQ(r4c::first_difference(config, r4c::RetryConfig())->setting, "fail_after_max_attempts");
  EXPECT_EQ(r4c::first_difference(r4c::RetryConfig().interval_function([](int) { return 1s; }),
                                  r4c::RetryConfig())
                ->setting,
            "interval_function");
  EXPECT_THROW(r4c::RetryConfig().retry_on_void_result(nullptr), r4c::ConfigException);
  EXPECT_THROW(r4c::RetryConfig().interval_function(std::function<std::chrono::nanoseconds(int)>()),
               r4c::ConfigException);
  EXPECT_THROW(r4c::RetryConfig().retry_on(r4c::detail::ExceptionPredicate()),
               r4c::ConfigException);
}

TEST(RetryConfigTest, AnEmptyRandomSourceIsRefused) {
  EXPECT_THROW(r4c::RetryConfig().random_source(nullptr), r4c::ConfigException);
}

// Retries a result of 500 and above (a server error) after 10 ms.
r4c::RetryConfig retrying_server_errors() {
  return r4c::RetryConfig().wait(10ms).retry_on_result<int>(
      [](const int& status) { return status >= 500; });
}

TEST_F(RetryTest, AResultPredicateRetriesAResultAndReturnsTheLastOneWhenAttemptsRunOut) {
  r4c::Retry retry("orders", retrying_server_errors(), clock_);
  int result = 0;
  drive([&] { result = retry.execute(attempts_that([](int attempt) { return 500 + attempt; })); });
  EXPECT_EQ(result, 503);
  EXPECT_THAT(attempt_times_, ElementsAre(0ms, 10ms, 20ms));
  EXPECT_EQ(retry.snapshot().failed_with_retry, 1u);
  EXPECT_EQ(retry.snapshot().retries, 2u);
}

TEST_F(RetryTest, AResultPredicateStopsAtAWantedResult) {
  r4c::Retry retry("orders", retrying_server_errors(), clock_);
  int result = 0;
  drive([&] {
    result = retry.execute(attempts_that([](int attempt) { return attempt == 1 ? 503 : 200; }));
  });
  EXPECT_EQ(result, 200);
  EXPECT_EQ(attempt_times_.size(), 2u);
  EXPECT_EQ(retry.snapshot().successful_with_retry, 1u);
}

TEST_F(RetryTest, AResultPredicateAppliesOnlyToItsResultType) {
  r4c::Retry retry(
      "orders",
      r4c::RetryConfig().retry_on_result<std::string>([](const std::string&) { return true; }),
      clock_);
  int result = 0;
  drive([&] { result = retry.execute(attempts_that([](int) { return 503; })); });
  EXPECT_EQ(result, 503);
  EXPECT_EQ(attempt_times_.size(), 1u);
}

TEST_F(RetryTest, RetriesVoidCallables) {
  r4c::Retry retry("orders", r4c::RetryConfig().wait(10ms), clock_);
  int attempts = 0;
  drive([&] {
    retry.execute([&] {
      if (++attempts < 2) throw Busy("busy");
    });
  });
  EXPECT_EQ(attempts, 2);
  EXPECT_EQ(retry.snapshot().successful_with_retry, 1u);
}

TEST_F(RetryTest, ReturnsMoveOnlyResultsAndReferences) {
  r4c::Retry retry("orders", r4c::RetryConfig(), clock_);
  std::unique_ptr<int> owned = retry.execute([] { return std::make_unique<int>(5); });
  EXPECT_EQ(*owned, 5);
  int value = 1;
  int& same = retry.execute([&]() -> int& { return value; });
  EXPECT_EQ(&same, &value);
}

TEST(RetryConfigTest, InvalidSettingsGiveTheirDocumentedCodesAndKeepTheOldValue) {
  EXPECT_EQ(config_message([] { r4c::RetryConfig().max_attempts(0); }),
            "R4C-ATR-003: max_attempts is 0; valid: an integer >= 1");
  EXPECT_EQ(config_message([] { r4c::RetryConfig().wait(-1ns); }),
            "R4C-REG-001: wait is -1 ns; valid: 0 .. 1 h (0 .. 3600000000000 ns)");
  EXPECT_THAT(config_message([] { r4c::RetryConfig().wait(1h + 1ns); }), HasSubstr("R4C-REG-001"));
  EXPECT_EQ(config_message([] { r4c::RetryConfig().exponential_backoff(0.5, 1s); }),
            "R4C-REG-001: backoff_multiplier is 0.5; valid: a finite number >= 1");
  EXPECT_THAT(config_message([] { r4c::RetryConfig().exponential_backoff(2.0, 2h); }),
              HasSubstr("R4C-REG-001: max_wait is 7200000000000 ns"));
  EXPECT_EQ(config_message([] { r4c::RetryConfig().randomized_wait(1.0); }),
            "R4C-REG-001: randomized_wait is 1; valid: [0, 1)");
  EXPECT_THAT(config_message([] { r4c::RetryConfig().randomized_wait(-0.1); }),
              HasSubstr("R4C-REG-001"));
  EXPECT_THAT(config_message([] { r4c::RetryConfig().retry_on_result<int>(nullptr); }),
              HasSubstr("R4C-REG-001: retry_on_result is an empty function"));
  // Settings valid on their own, wrong together: validate() and the constructor reject them.
  const auto crossed = r4c::RetryConfig().wait(500ms).exponential_backoff(2.0, 100ms);
  EXPECT_EQ(config_message([&] { crossed.validate(); }),
            "R4C-ATR-009: max_wait (100000000 ns) is less than wait (500000000 ns); valid: "
            "max_wait >= wait");
  EXPECT_THROW(r4c::Retry("orders", crossed), r4c::ConfigException);

  r4c::RetryConfig config;
  config.max_attempts(5);
  EXPECT_THROW(config.max_attempts(-1), r4c::ConfigException);
  EXPECT_EQ(config.max_attempts(), 5);
}

TEST(RetryConfigTest, HasTheDocumentedDefaults) {
  const r4c::RetryConfig defaults;
  EXPECT_EQ(r4c::test::settings_of(defaults),
            (r4c::test::RetrySettings{3, 500ms, false, 1.0, 0ns, 0.0}));
  EXPECT_TRUE(defaults.retry_on_types().empty());
  EXPECT_TRUE(defaults.abort_on_types().empty());
  EXPECT_FALSE(defaults.retry_on_result_type().has_value());
}

TEST(RetryConfigTest, FirstDifferenceNamesTheFirstDifferentSetting) {
  const r4c::RetryConfig base;
  EXPECT_FALSE(r4c::first_difference(base, r4c::RetryConfig()).has_value());
  auto setting_of = [&](const r4c::RetryConfig& other) {
    const auto difference = r4c::first_difference(base, other);
    return difference ? difference->setting : std::string("none");
  };
  EXPECT_EQ(setting_of(r4c::RetryConfig().max_attempts(4)), "max_attempts");
  EXPECT_EQ(setting_of(r4c::RetryConfig().wait(1s)), "wait");
  EXPECT_EQ(setting_of(r4c::RetryConfig().exponential_backoff(1.0, 0ns)), "exponential_backoff");
  EXPECT_EQ(setting_of(r4c::RetryConfig().randomized_wait(0.5)), "randomized_wait");
  EXPECT_EQ(setting_of(r4c::RetryConfig().retry_on<Busy>()), "retry_on");
  EXPECT_EQ(setting_of(r4c::RetryConfig().abort_on({r4c::ExceptionType::of<Busy>()})), "abort_on");
  const auto with_predicate =
      r4c::RetryConfig().retry_on_result<int>([](const int&) { return false; });
  const auto difference = r4c::first_difference(base, with_predicate);
  ASSERT_TRUE(difference.has_value());
  EXPECT_EQ(difference->setting, "retry_on_result");
  EXPECT_EQ(difference->first, "none");
  EXPECT_EQ(difference->second, "int");
  // Two predicates on the same type compare equal: only presence and type are compared.
  EXPECT_FALSE(
      r4c::first_difference(with_predicate, r4c::RetryConfig().retry_on_result<int>([](const int&) {
        return true;
      })).has_value());
  const auto backoff = r4c::RetryConfig().exponential_backoff(2.0, 1s);
  EXPECT_EQ(
      r4c::first_difference(backoff, r4c::RetryConfig().exponential_backoff(3.0, 1s))->setting,
      "backoff_multiplier");
  EXPECT_EQ(
      r4c::first_difference(backoff, r4c::RetryConfig().exponential_backoff(2.0, 2s))->setting,
      "max_wait");
}

TEST_F(RetryTest, SnapshotCountsEveryOutcome) {
  r4c::Retry retry("orders", r4c::RetryConfig().max_attempts(2).wait(10ms).abort_on<NotFound>(),
                   clock_);
  const r4c::RetryHandle handle = retry.handle();
  drive([&] { retry.execute([] { return 1; }); });  // successful without retry
  int attempt = 0;
  drive([&] {  // successful with retry
    retry.execute([&] {
      if (++attempt == 1) throw Busy("busy");
    });
  });
  EXPECT_THROW(drive([&] { retry.execute([]() -> int { throw NotFound("404"); }); }),
               NotFound);  // failed without retry
  EXPECT_THROW(drive([&] { retry.execute([]() -> int { throw Busy("busy"); }); }),
               Busy);  // failed with retry
  const r4c::RetrySnapshot snap = handle.snapshot();
  EXPECT_EQ(handle.instance_id(), "orders");
  EXPECT_EQ(snap.max_attempts, 2);
  EXPECT_EQ(snap.successful_without_retry, 1u);
  EXPECT_EQ(snap.successful_with_retry, 1u);
  EXPECT_EQ(snap.failed_without_retry, 1u);
  EXPECT_EQ(snap.failed_with_retry, 1u);
  EXPECT_EQ(snap.retries, 2u);
  EXPECT_EQ(snap.waiting_calls, 0);
}

TEST(RetryConcurrencyTest, EveryCallGetsExactlyOneOutcomeAndTheCountersAddUp) {
  constexpr int kThreads = 8;
  constexpr int kCallsPerThread = 200;
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::Retry retry("hot", r4c::RetryConfig().max_attempts(3).wait(1ms).abort_on<NotFound>(), clock);
  std::atomic<int> finished{0};
  std::atomic<std::uint64_t> attempts{0};
  std::atomic<std::uint64_t> successes{0};
  std::atomic<std::uint64_t> failures{0};
  std::vector<std::thread> threads;
  const std::uint64_t seed = r4c::test::test_seed();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(static_cast<std::uint32_t>(seed + static_cast<std::uint64_t>(t)));
      std::uniform_int_distribution<int> percent(0, 99);
      for (int i = 0; i < kCallsPerThread; ++i) {
        try {
          retry.execute([&] {
            attempts.fetch_add(1);
            const int roll = percent(random);
            if (roll < 40) throw Busy("busy");
            if (roll < 45) throw NotFound("404");
            return roll;
          });
          successes.fetch_add(1);
        } catch (const std::runtime_error&) {
          failures.fetch_add(1);
        }
      }
      finished.fetch_add(1);
    });
  }
  // The driver: moves time only while someone waits.
  while (finished.load() < kThreads) {
    if (clock->pending_tasks() > 0) {
      clock->advance(1ms);
    } else {
      std::this_thread::yield();
    }
  }
  for (auto& thread : threads) thread.join();
  const std::uint64_t calls = kThreads * kCallsPerThread;
  EXPECT_EQ(successes.load() + failures.load(), calls);
  const r4c::RetrySnapshot snap = retry.snapshot();
  EXPECT_EQ(snap.successful_without_retry + snap.successful_with_retry, successes.load());
  EXPECT_EQ(snap.failed_without_retry + snap.failed_with_retry, failures.load());
  EXPECT_EQ(snap.retries, attempts.load() - calls);
  EXPECT_GT(snap.retries, 0u);
  EXPECT_EQ(snap.waiting_calls, 0);
  EXPECT_EQ(clock->pending_tasks(), 0u);
}

}  // namespace
