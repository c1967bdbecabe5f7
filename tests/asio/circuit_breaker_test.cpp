// SPDX-License-Identifier: Apache-2.0
// The circuit breaker's asynchronous face (<r4c/asio.hpp>): permission when the operation
// starts, its outcome recorded with its duration to completion, a refusal at once, nothing
// recorded for a cancelled call; callback, future and coroutine styles.
#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/thread_pool.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <atomic>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "async_support.hpp"
#include "r4c/asio/circuit_breaker.hpp"

namespace {

using namespace r4c::testing;  // the async suites' shared backend and answers

using namespace std::chrono_literals;

struct IoError : std::runtime_error {
  IoError() : std::runtime_error("io error") {}
};

class AsyncCircuitBreakerTest : public AsyncPolicyTest<r4c::CircuitBreaker> {
 protected:
  AsyncCircuitBreakerTest()
      : AsyncPolicyTest([](const std::shared_ptr<r4c::ManualClock>& clock) {
          return r4c::CircuitBreaker("inventory", config(), clock);
        }) {}

  // Opens at 50% failures of the last 4 calls; 2 s or longer is slow; one trial when half-open.
  static r4c::CircuitBreakerConfig config() {
    return r4c::CircuitBreakerConfig()
        .sliding_window_size(4)
        .minimum_number_of_calls(4)
        .failure_rate_threshold(50)
        .slow_call_duration(2s)
        .wait_in_open(10s)
        .permitted_calls_in_half_open(1);
  }

  // Fails `n` calls through async_execute.
  void fail_calls(int n) {
    for (int i = 0; i < n; ++i) {
      const std::string key = "fail" + std::to_string(failures_++);
      auto f = breaker_.async_execute<std::string>(backend_.place(key), asio::use_future);
      backend_.fail(key, std::make_exception_ptr(IoError()));
      EXPECT_THROW(f.get(), IoError);
    }
  }

  // Opens the breaker and waits out wait_in_open: the next call is the one half-open trial.
  void open_until_half_open() {
    fail_calls(4);
    clock_->advance(10s);
  }

  // Completes the trial pending on `key` with `value`: its caller gets it, the breaker closes.
  void expect_the_trial_closes_it(std::future<std::string>& trial, const std::string& key,
                                  const std::string& value = "ok") {
    backend_.complete(key, value);
    EXPECT_EQ(trial.get(), value);
    EXPECT_EQ(breaker_.state(), r4c::CircuitBreakerState::closed);
  }

  r4c::CircuitBreaker& breaker_ = policy_;
  int failures_ = 0;
};

// A success passes through and is recorded with its duration to completion (3 s: slow).
TEST_F(AsyncCircuitBreakerTest, ASuccessPassesThroughAndIsRecordedWithItsDuration) {
  Answer answer;
  breaker_.async_execute<std::string>(backend_.place("a"), answer.handler());
  EXPECT_EQ(breaker_.snapshot().buffered_calls, 0u);  // nothing until it completes
  clock_->advance(3s);
  backend_.complete("a", "42");
  ASSERT_TRUE(succeeded_with(answer, "42"));
  const r4c::CircuitBreakerSnapshot snapshot = breaker_.snapshot();
  EXPECT_EQ(snapshot.buffered_calls, 1u);
  EXPECT_EQ(snapshot.failed_calls, 0u);
  EXPECT_EQ(snapshot.slow_calls, 1u);

  breaker_.async_execute<std::string>(backend_.place("b"), answer.handler());
  clock_->advance(1s);
  backend_.complete("b", "43");
  EXPECT_EQ(breaker_.snapshot().buffered_calls, 2u);
  EXPECT_EQ(breaker_.snapshot().slow_calls, 1u);  // 1 s is not slow
}

TEST_F(AsyncCircuitBreakerTest, FailuresPassThroughUnchangedAndAreRecorded) {
  auto a = breaker_.async_execute<std::string>(backend_.place("a"), asio::use_future);
  auto b = breaker_.async_execute<std::string>(backend_.place("b"), asio::use_future);
  expect_failures_pass_through<IoError>(a, b);
  EXPECT_EQ(breaker_.snapshot().buffered_calls, 2u);
  EXPECT_EQ(breaker_.snapshot().failed_calls, 2u);
}

// The failure is classified as execute() classifies what it catches: ignore_on, then record_on.
TEST(AsyncCircuitBreakerClassificationTest, IgnoreOnThenRecordOn) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::CircuitBreaker breaker(
      "classified",
      r4c::CircuitBreakerConfig().record_on<IoError, asio::system_error>().ignore_on<NotFound>(),
      clock);
  r4c::testing::AsyncBackend backend;
  auto ignored = breaker.async_execute<std::string>(backend.place("a"), asio::use_future);
  backend.fail("a", std::make_exception_ptr(NotFound()));
  EXPECT_THROW(ignored.get(), NotFound);
  EXPECT_EQ(breaker.snapshot().buffered_calls, 0u);  // ignored: not recorded at all

  auto not_recorded = breaker.async_execute<std::string>(backend.place("b"), asio::use_future);
  backend.fail("b", std::make_exception_ptr(std::logic_error("bug")));
  EXPECT_THROW(not_recorded.get(), std::logic_error);
  EXPECT_EQ(breaker.snapshot().buffered_calls, 1u);  // a failure not recorded is a success
  EXPECT_EQ(breaker.snapshot().failed_calls, 0u);

  auto recorded = breaker.async_execute<std::string>(backend.place("c"), asio::use_future);
  backend.fail("c", std::make_exception_ptr(IoError()));
  EXPECT_THROW(recorded.get(), IoError);
  auto code = breaker.async_execute<std::string>(backend.place("d"), asio::use_future);
  backend.fail("d", asio::error::make_error_code(asio::error::connection_reset));
  EXPECT_THROW(code.get(), asio::system_error);
  EXPECT_EQ(breaker.snapshot().buffered_calls, 3u);
  EXPECT_EQ(breaker.snapshot().failed_calls, 2u);
  EXPECT_EQ(clock->pending_tasks(), 0u);
}

// Failures through async calls open the breaker; an open breaker fails at once without starting
// the operation; after wait_in_open a trial call is let through and closes it again.
TEST_F(AsyncCircuitBreakerTest, FailuresOpenTheBreakerWhichThenRejectsAtOnce) {
  fail_calls(2);
  auto ok1 = breaker_.async_execute<std::string>(backend_.place("ok1"), asio::use_future);
  auto ok2 = breaker_.async_execute<std::string>(backend_.place("ok2"), asio::use_future);
  backend_.complete("ok1", "x");
  EXPECT_EQ(breaker_.state(), r4c::CircuitBreakerState::closed);  // 3 calls: below the minimum
  backend_.complete("ok2", "x");
  EXPECT_EQ(breaker_.state(), r4c::CircuitBreakerState::open);  // 2 of 4 failed: 50%
  ok1.get();
  ok2.get();

  const int started = backend_.started();
  std::future<std::string> refused =
      breaker_.async_execute<std::string>(backend_.place("r"), asio::use_future);
  ASSERT_EQ(refused.wait_for(0s), std::future_status::ready);
  const auto refusal = exception_of<r4c::CallNotPermittedException>(refused);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->instance_id(), "inventory");
  EXPECT_EQ(backend_.started(), started);  // the operation never started
  EXPECT_FALSE(backend_.has("r"));
  EXPECT_EQ(breaker_.snapshot().not_permitted_calls, 1u);

  // A callback with an executor is answered through it.
  expect_refused_through_io<r4c::CallNotPermittedException>("r2");
  EXPECT_EQ(breaker_.snapshot().not_permitted_calls, 2u);

  clock_->advance(10s);  // wait_in_open is over: one trial call
  auto trial = breaker_.async_execute<std::string>(backend_.place("t"), asio::use_future);
  EXPECT_EQ(breaker_.state(), r4c::CircuitBreakerState::half_open);
  auto extra = breaker_.async_execute<std::string>(backend_.place("e"), asio::use_future);
  EXPECT_THROW(extra.get(), r4c::CallNotPermittedException);  // the one trial is taken
  expect_the_trial_closes_it(trial, "t", "back");
}

TEST_F(AsyncCircuitBreakerTest, AFailedTrialOpensTheBreakerAgain) {
  fail_calls(4);
  ASSERT_EQ(breaker_.state(), r4c::CircuitBreakerState::open);
  clock_->advance(10s);
  auto trial = breaker_.async_execute<std::string>(backend_.place("t"), asio::use_future);
  clock_->advance(1s);
  backend_.fail("t", asio::error::make_error_code(asio::error::connection_refused));
  EXPECT_THROW(trial.get(), asio::system_error);
  EXPECT_EQ(breaker_.state(), r4c::CircuitBreakerState::open);
}

// A half-open trial is given back at once when its call is cancelled, and when its operation is
// abandoned, so the breaker can still let a trial through.
TEST_F(AsyncCircuitBreakerTest, AHalfOpenTrialIsGivenBackOnCancellation) {
  open_until_half_open();
  asio::cancellation_signal cancel;
  Answer answer;
  breaker_.async_execute<std::string>(backend_.place("t1"), on_io(answer, cancel));
  ASSERT_EQ(breaker_.state(), r4c::CircuitBreakerState::half_open);
  cancel.emit(asio::cancellation_type::terminal);

  // The operation has not completed yet, and the trial is already back.
  auto trial = breaker_.async_execute<std::string>(backend_.place("t2"), asio::use_future);
  ASSERT_EQ(trial.wait_for(0s), std::future_status::timeout);  // permitted, not refused
  EXPECT_EQ(breaker_.snapshot().not_permitted_calls, 0u);
  io_.run();
  EXPECT_TRUE(aborted(answer.failure));
  backend_.fail("t1", std::make_exception_ptr(IoError()));  // late: must not rate half-open
  EXPECT_EQ(breaker_.state(), r4c::CircuitBreakerState::half_open);
  expect_the_trial_closes_it(trial, "t2");
}

TEST_F(AsyncCircuitBreakerTest, AHalfOpenTrialIsGivenBackWhenItsOperationIsAbandoned) {
  open_until_half_open();
  {
    asio::io_context io;
    breaker_.async_execute<std::string>(
        [&io](auto handler) {
          asio::post(io,
                     [h = std::move(handler)]() mutable { std::move(h)(std::error_code(), "x"); });
        },
        [](std::exception_ptr, std::string) { ADD_FAILURE() << "called"; });
    ASSERT_EQ(breaker_.state(), r4c::CircuitBreakerState::half_open);
    auto refused = breaker_.async_execute<std::string>(backend_.place("r"), asio::use_future);
    EXPECT_THROW(refused.get(), r4c::CallNotPermittedException);  // the one trial is taken
  }  // abandoned: the trial is given back, nothing recorded

  auto trial = breaker_.async_execute<std::string>(backend_.place("t"), asio::use_future);
  ASSERT_EQ(trial.wait_for(0s), std::future_status::timeout);  // permitted
  expect_the_trial_closes_it(trial, "t");
}

// An operation that throws from its initiation gives its permission back; the exception
// leaves async_execute.
TEST_F(AsyncCircuitBreakerTest, AnOperationThatThrowsGivesThePermissionBack) {
  open_until_half_open();
  EXPECT_THROW(breaker_.async_execute<std::string>(
                   [](auto) -> void { throw NotFound(); },
                   [](std::exception_ptr, std::string) { ADD_FAILURE() << "called"; }),
               NotFound);
  auto trial = breaker_.async_execute<std::string>(backend_.place("t"), asio::use_future);
  ASSERT_EQ(trial.wait_for(0s), std::future_status::timeout);  // permitted
  backend_.complete("t", "ok");
  EXPECT_EQ(trial.get(), "ok");
}

TEST_F(AsyncCircuitBreakerTest, CoroutinesAwaitTheResultOrTheRefusal) {
  std::string result;
  bool refused = false;
  spawn(io_, [&]() -> asio::awaitable<void> {
    result = co_await breaker_.async_execute<std::string>(backend_.place("a"), asio::use_awaitable);
    breaker_.transition_to_open();
    refused = co_await co_throws<r4c::CallNotPermittedException>([&] {
      return breaker_.async_execute<std::string>(backend_.place("b"), asio::use_awaitable);
    });
  });
  while (!backend_.has("a")) io_.run_one();
  clock_->advance(1s);
  backend_.complete("a", "stock");
  io_.run();
  EXPECT_EQ(result, "stock");
  EXPECT_TRUE(refused);
  EXPECT_FALSE(backend_.has("b"));
}

// Several threads, real time: random success, failure and cancellation move the breaker
// through its states (wait_in_open 1 ms). Every caller is answered exactly once, and every
// refusal it answers is counted.
TEST(AsyncCircuitBreakerStressTest, EveryCallerIsAnsweredOnce) {
  auto clock = std::make_shared<r4c::SystemClock>();
  r4c::CircuitBreaker breaker("stress",
                              r4c::CircuitBreakerConfig()
                                  .sliding_window_size(20)
                                  .minimum_number_of_calls(10)
                                  .wait_in_open(1ms)
                                  .permitted_calls_in_half_open(3),
                              clock);
  asio::thread_pool pool(2);
  constexpr int kCalls = 3000;
  std::atomic<int> answers{0};
  std::atomic<int> duplicates{0};
  std::atomic<int> refused{0};
  std::vector<std::atomic<bool>> answered(kCalls);
  std::vector<std::unique_ptr<asio::cancellation_signal>> signals;
  std::mt19937 random(static_cast<std::uint32_t>(r4c::testing::test_seed()));
  for (int i = 0; i < kCalls; ++i) {
    signals.push_back(std::make_unique<asio::cancellation_signal>());
    auto strand = asio::make_strand(pool);
    const unsigned kind = random() % 4;  // 0: fails, 3: cancelled, else succeeds
    const auto delay = std::chrono::microseconds(random() % 300);
    breaker.async_execute<std::string>(
        [&pool, delay, kind](auto handler) {
          auto timer = std::make_shared<asio::steady_timer>(pool, delay);
          timer->async_wait([timer, kind, h = std::move(handler)](std::error_code) mutable {
            if (kind == 0) {
              std::move(h)(std::make_exception_ptr(IoError()), "");
            } else {
              std::move(h)(std::error_code(), "ok");
            }
          });
        },
        asio::bind_cancellation_slot(
            signals.back()->slot(),
            asio::bind_executor(strand, [&, i](std::exception_ptr e, std::string) {
              if (answered[i].exchange(true)) ++duplicates;
              if (e && holds_exception<r4c::CallNotPermittedException>(e)) ++refused;
              ++answers;
            })));
    if (kind == 3) {
      // The caller cancels from its own strand, as Asio requires.
      asio::post(strand, [signal = signals.back().get()] {
        signal->emit(asio::cancellation_type::terminal);
      });
    }
  }
  pool.join();
  EXPECT_EQ(answers.load(), kCalls);
  EXPECT_EQ(duplicates.load(), 0);
  EXPECT_EQ(breaker.snapshot().not_permitted_calls, static_cast<std::uint64_t>(refused.load()));
  EXPECT_EQ(clock->pending_tasks(), 0u);
}

}  // namespace
