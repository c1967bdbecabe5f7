// SPDX-License-Identifier: Apache-2.0
// The retry's asynchronous face (<r4c/asio.hpp>): attempts driven by a ManualClock (no thread
// sleeps), the synchronous retry's decisions and counters, cancellation during a wait and
// during an attempt, and the three styles.
#include "async_support.hpp"
#include "r4c/asio.hpp"

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
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace r4c::testing;  // the async suites' shared backend and answers

using namespace std::chrono_literals;

struct Busy : std::runtime_error {
  Busy() : std::runtime_error("busy") {}
};

// What a callback received.
using Outcome = r4c::testing::Answer;

// The outcome counters of a snapshot, for comparisons.
std::vector<std::uint64_t> counters(const r4c::RetrySnapshot& s) {
  return {s.successful_without_retry, s.successful_with_retry, s.failed_without_retry,
          s.failed_with_retry, s.retries};
}

// The backend is destroyed first: operations left pending are abandoned.
class AsyncRetryTest : public AsyncWaitTest<r4c::Retry, r4c::RetryConfig> {
 protected:
  AsyncRetryTest() : AsyncWaitTest("orders", r4c::RetryConfig().max_attempts(3).wait(100ms)) {}

  std::unique_ptr<r4c::Retry>& retry_ = policy_;

  // A call on "a" that `cancel` can cancel: its first attempt failed, it waits for its second.
  void start_a_call_that_waits_to_retry(asio::cancellation_signal& cancel, Outcome& outcome) {
    retry_->async_execute<std::string>(backend_.place("a"), on_io(outcome, cancel));
    backend_.fail("a", std::make_exception_ptr(Busy()));
  }
};

// Each wait ends when the test thread advances the clock; the next attempt then starts on the
// caller's executor.
TEST_F(AsyncRetryTest, SucceedsAfterFailedAttemptsDrivenByTheClock) {
  Outcome outcome;
  retry_->async_execute<std::string>(backend_.place("a"), on_io(outcome));
  EXPECT_EQ(backend_.started("a"), 1);  // the first attempt starts inside async_execute
  backend_.fail("a", std::make_exception_ptr(Busy()));
  EXPECT_EQ(retry_->snapshot().waiting_calls, 1);
  EXPECT_EQ(retry_->snapshot().retries, 1u);  // counted when the wait begins, as execute() does
  EXPECT_EQ(clock_->pending_tasks(), 1u);
  clock_->advance(99ms);
  poll();
  EXPECT_FALSE(io_.stopped());  // the waiting call keeps the context running, as a timer would
  EXPECT_EQ(backend_.started("a"), 1);
  clock_->advance(1ms);
  EXPECT_EQ(backend_.started("a"), 1);  // on the caller's executor, not the advancing call
  poll();
  EXPECT_EQ(backend_.started("a"), 2);
  EXPECT_EQ(retry_->snapshot().waiting_calls, 0);

  backend_.fail("a", std::make_exception_ptr(Busy()));
  clock_->advance(100ms);
  poll();
  EXPECT_EQ(backend_.started("a"), 3);
  backend_.complete("a", "placed");
  poll();
  ASSERT_TRUE(succeeded_with(outcome, "placed"));
  const r4c::RetrySnapshot snapshot = retry_->snapshot();
  EXPECT_EQ(snapshot.successful_with_retry, 1u);
  EXPECT_EQ(snapshot.successful_without_retry, 0u);
  EXPECT_EQ(snapshot.retries, 2u);
  EXPECT_EQ(snapshot.waiting_calls, 0);
}

TEST_F(AsyncRetryTest, WaitsTheExponentialBackoffOnTheClock) {
  make(r4c::RetryConfig().max_attempts(4).wait(100ms).exponential_backoff(2.0, 300ms));
  Outcome outcome;
  retry_->async_execute<std::string>(backend_.place("a"), on_io(outcome));
  const std::chrono::milliseconds waits[] = {100ms, 200ms, 300ms};  // the last one capped
  for (int retry = 0; retry < 3; ++retry) {
    backend_.fail("a", std::make_exception_ptr(Busy()));
    clock_->advance(waits[retry] - 1ms);
    poll();
    EXPECT_EQ(backend_.started("a"), retry + 1) << "retry " << retry;
    clock_->advance(1ms);
    poll();
    EXPECT_EQ(backend_.started("a"), retry + 2) << "retry " << retry;
  }
  backend_.complete("a", "placed");
  poll();
  EXPECT_EQ(outcome.value, "placed");
}

// Out of attempts: the caller gets the last failure, the same exception object.
TEST_F(AsyncRetryTest, TheFinalFailureIsTheLastFailureItself) {
  make(r4c::RetryConfig().max_attempts(2).wait(0ms));
  Outcome outcome;
  retry_->async_execute<std::string>(backend_.place("a"), on_io(outcome));
  const std::exception_ptr first = std::make_exception_ptr(Busy());
  const std::exception_ptr last = std::make_exception_ptr(Busy());
  backend_.fail("a", first);
  poll();  // no wait: the timer fired at once and posted the second attempt
  ASSERT_EQ(backend_.started("a"), 2);
  backend_.fail("a", last);
  poll();
  ASSERT_EQ(outcome.calls, 1);
  EXPECT_EQ(outcome.failure, last);
  const r4c::RetrySnapshot snapshot = retry_->snapshot();
  EXPECT_EQ(snapshot.failed_with_retry, 1u);
  EXPECT_EQ(snapshot.retries, 1u);
}

// abort_on wins over retry_on; a failure retry_on does not list is not retried either.
TEST_F(AsyncRetryTest, AbortOnAndUnlistedFailuresFailAtOnce) {
  make(r4c::RetryConfig().wait(100ms).retry_on<std::runtime_error>().abort_on<NotFound>());
  Outcome aborted;
  retry_->async_execute<std::string>(backend_.place("a"), on_io(aborted));
  const std::exception_ptr not_found = std::make_exception_ptr(NotFound());
  backend_.fail("a", not_found);
  EXPECT_EQ(clock_->pending_tasks(), 0u);  // no wait
  poll();
  ASSERT_EQ(aborted.calls, 1);
  EXPECT_EQ(aborted.failure, not_found);

  Outcome unlisted;
  retry_->async_execute<std::string>(backend_.place("b"), on_io(unlisted));
  backend_.fail("b", std::make_exception_ptr(std::logic_error("bug")));
  poll();
  ASSERT_EQ(unlisted.calls, 1);
  EXPECT_THROW(std::rethrow_exception(unlisted.failure), std::logic_error);
  EXPECT_EQ(backend_.started("a"), 1);
  EXPECT_EQ(backend_.started("b"), 1);
  const r4c::RetrySnapshot snapshot = retry_->snapshot();
  EXPECT_EQ(snapshot.failed_without_retry, 2u);
  EXPECT_EQ(snapshot.retries, 0u);
}

// Error codes reach the retry as asio::system_error: retried like any failure, matched by
// retry_on / abort_on as one, and the caller's final failure carries the code.
TEST_F(AsyncRetryTest, ErrorCodesAreRetriedAsSystemErrors) {
  make(r4c::RetryConfig().max_attempts(2).wait(10ms).retry_on<std::system_error>());
  Outcome outcome;
  retry_->async_execute<std::string>(backend_.place("a"), on_io(outcome));
  backend_.fail("a", asio::error::make_error_code(asio::error::connection_refused));
  clock_->advance(10ms);
  poll();
  ASSERT_EQ(backend_.started("a"), 2);
  backend_.fail("a", asio::error::make_error_code(asio::error::connection_reset));
  poll();
  ASSERT_EQ(outcome.calls, 1);
  try {
    std::rethrow_exception(outcome.failure);
  } catch (const asio::system_error& e) {
    EXPECT_EQ(e.code(), asio::error::connection_reset);
  }
  EXPECT_EQ(retry_->snapshot().failed_with_retry, 1u);

  make(r4c::RetryConfig().wait(10ms).abort_on<std::system_error>());
  Outcome aborted;
  retry_->async_execute<std::string>(backend_.place("b"), on_io(aborted));
  backend_.fail("b", asio::error::make_error_code(asio::error::connection_refused));
  poll();
  ASSERT_EQ(aborted.calls, 1);
  EXPECT_THROW(std::rethrow_exception(aborted.failure), asio::system_error);
  EXPECT_EQ(retry_->snapshot().failed_without_retry, 1u);
}

// retry_on_result: an unwanted result is retried; out of attempts, the last result is returned
// and the call counts as failed, as in execute().
TEST_F(AsyncRetryTest, UnwantedResultsAreRetriedAndTheLastOneIsReturned) {
  make(r4c::RetryConfig().max_attempts(3).wait(50ms).retry_on_result<std::string>(
      [](const std::string& r) { return r == "busy"; }));
  Outcome retried;
  retry_->async_execute<std::string>(backend_.place("a"), on_io(retried));
  backend_.complete("a", "busy");
  clock_->advance(50ms);
  poll();
  backend_.complete("a", "placed");
  poll();
  EXPECT_EQ(retried.value, "placed");
  EXPECT_EQ(retry_->snapshot().successful_with_retry, 1u);

  Outcome exhausted;
  retry_->async_execute<std::string>(backend_.place("b"), on_io(exhausted));
  for (int attempt = 1; attempt <= 3; ++attempt) {
    ASSERT_EQ(backend_.started("b"), attempt);
    backend_.complete("b", "busy");
    clock_->advance(50ms);
    poll();
  }
  ASSERT_TRUE(succeeded_with(exhausted, "busy"));
  const r4c::RetrySnapshot snapshot = retry_->snapshot();
  EXPECT_EQ(snapshot.failed_with_retry, 1u);
  EXPECT_EQ(snapshot.retries, 3u);  // one for the first call, two for the second
}

// The same outcomes, synchronous and asynchronous, give the same counters.
TEST_F(AsyncRetryTest, CountersAreExactlyThoseOfSynchronousCalls) {
  const auto config = [] {
    return r4c::RetryConfig().max_attempts(3).wait(0ms).abort_on<NotFound>();
  };
  r4c::Retry sync("sync", config(), clock_);
  make(config());
  // Each scenario: the failures (nullptr: success) of successive attempts.
  const std::exception_ptr busy = std::make_exception_ptr(Busy());
  const std::exception_ptr not_found = std::make_exception_ptr(NotFound());
  const std::vector<std::vector<std::exception_ptr>> scenarios = {
      {nullptr},              // successful_without_retry
      {busy, nullptr},        // successful_with_retry
      {busy, busy, nullptr},  // successful_with_retry
      {not_found},            // failed_without_retry
      {busy, not_found},      // failed_with_retry
      {busy, busy, busy},     // failed_with_retry (out of attempts)
  };
  for (const auto& scenario : scenarios) {
    std::size_t attempt = 0;
    try {
      sync.execute([&] {
        if (const std::exception_ptr failure = scenario[attempt++]) std::rethrow_exception(failure);
        return std::string("ok");
      });
    } catch (...) {
    }
    Outcome outcome;
    retry_->async_execute<std::string>(backend_.place("a"), on_io(outcome));
    for (const std::exception_ptr& failure : scenario) {
      if (failure) {
        backend_.fail("a", failure);
      } else {
        backend_.complete("a", "ok");
      }
      poll();
    }
    EXPECT_EQ(outcome.calls, 1);
  }
  EXPECT_EQ(counters(retry_->snapshot()), counters(sync.snapshot()));
  EXPECT_EQ(counters(retry_->snapshot()), (std::vector<std::uint64_t>{1, 2, 1, 2, 6}));
}

// Cancelling during a wait: operation_aborted at once, the timer cancelled, no further attempt.
TEST_F(AsyncRetryTest, CancellingDuringAWaitEndsTheCallAtOnce) {
  asio::cancellation_signal cancel;
  Outcome outcome;
  start_a_call_that_waits_to_retry(cancel, outcome);
  ASSERT_NO_FATAL_FAILURE(cancel_the_wait(cancel, outcome));
  clock_->advance(1s);
  poll();
  EXPECT_EQ(backend_.started("a"), 1);
  EXPECT_TRUE(io_.stopped());  // the wait's work ended with it
  const r4c::RetrySnapshot snapshot = retry_->snapshot();
  EXPECT_EQ(counters(snapshot), (std::vector<std::uint64_t>{0, 0, 0, 0, 1}));  // no outcome
}

// Cancelling during an attempt: operation_aborted at once, the cancellation forwarded to the
// attempt, its late completion ignored, no further attempt.
TEST_F(AsyncRetryTest, CancellingDuringAnAttemptForwardsItAndIgnoresTheLateCompletion) {
  asio::cancellation_signal cancel;
  Outcome outcome;
  start_a_call_that_waits_to_retry(cancel, outcome);
  clock_->advance(100ms);
  poll();
  ASSERT_EQ(backend_.started("a"), 2);
  cancel.emit(asio::cancellation_type::terminal);
  EXPECT_TRUE(backend_.cancelled("a"));
  poll();
  ASSERT_EQ(outcome.calls, 1);
  EXPECT_TRUE(aborted(outcome.failure));
  backend_.fail("a", std::make_exception_ptr(Busy()));  // late: ignored, not retried
  poll();
  clock_->advance(1s);
  poll();
  EXPECT_EQ(outcome.calls, 1);
  EXPECT_EQ(backend_.started("a"), 2);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
  EXPECT_EQ(counters(retry_->snapshot()), (std::vector<std::uint64_t>{0, 0, 0, 0, 1}));
}

TEST_F(AsyncRetryTest, ACoroutineAwaitsTheRetriedResult) {
  std::string result;
  spawn(io_, [&]() -> asio::awaitable<void> {
    result = co_await retry_->async_execute<std::string>(backend_.place("a"), asio::use_awaitable);
  });
  poll();
  backend_.fail("a", asio::error::make_error_code(asio::error::timed_out));
  poll();
  clock_->advance(100ms);
  poll();
  backend_.complete("a", "placed");
  poll();
  EXPECT_EQ(result, "placed");
  EXPECT_EQ(retry_->snapshot().successful_with_retry, 1u);
}

// A coroutine cancelled through awaitable_operators while it waits between attempts.
TEST_F(AsyncRetryTest, ACoroutineCancelledByARaceDuringAWaitStopsRetrying) {
  using namespace asio::experimental::awaitable_operators;
  bool timer_won = false;
  spawn(io_, [&]() -> asio::awaitable<void> {
    asio::steady_timer timer(io_, 5ms);
    auto outcome =
        co_await (retry_->async_execute<std::string>(
                      [&](auto handler) {
                        std::move(handler)(std::make_exception_ptr(Busy()), std::string());
                      },
                      asio::use_awaitable) ||
                  timer.async_wait(asio::use_awaitable));
    timer_won = outcome.index() == 1;
  });
  io_.run();  // returns: the cancelled wait no longer keeps io_ running
  EXPECT_TRUE(timer_won);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
  EXPECT_EQ(retry_->snapshot().retries, 1u);
}

// use_future, with an operation that completes inline: later attempts run on the future's
// executor (a system thread) once the clock says so.
TEST_F(AsyncRetryTest, AFutureGetsTheResultOfALaterAttempt) {
  std::atomic<int> attempts{0};
  auto op = [&attempts](auto handler) {
    if (attempts.fetch_add(1) < 2) {
      std::move(handler)(asio::error::make_error_code(asio::error::try_again), std::string());
    } else {
      std::move(handler)(std::error_code(), std::string("placed"));
    }
  };
  std::future<std::string> placed = retry_->async_execute<std::string>(op, asio::use_future);
  EXPECT_EQ(placed.wait_for(0s), std::future_status::timeout);
  clock_->advance(100ms);
  // The second attempt fails on a system thread, which then schedules the second wait.
  while (clock_->pending_tasks() == 0) std::this_thread::yield();
  EXPECT_EQ(attempts.load(), 2);
  clock_->advance(100ms);
  EXPECT_EQ(placed.get(), "placed");
  EXPECT_EQ(attempts.load(), 3);
  EXPECT_EQ(retry_->snapshot().successful_with_retry, 1u);
}

TEST_F(AsyncRetryTest, VoidOperationsAreRetried) {
  int attempts = 0;
  std::exception_ptr failure = std::make_exception_ptr(Busy());
  int calls = 0;
  auto op = [&](auto handler) {
    ++attempts;
    std::move(handler)(attempts < 3 ? failure : std::exception_ptr());
  };
  retry_->async_execute<void>(op, asio::bind_executor(io_, [&](std::exception_ptr e) {
                                ++calls;
                                failure = e;
                              }));
  for (int i = 0; i < 2; ++i) {
    clock_->advance(100ms);
    poll();
  }
  ASSERT_EQ(calls, 1);
  EXPECT_FALSE(failure);
  EXPECT_EQ(attempts, 3);
}

// An attempt destroyed without completing (its context went away) ends the call; its handler
// is destroyed uncalled and nothing is counted.
TEST_F(AsyncRetryTest, AnAbandonedAttemptEndsTheCall) {
  {
    asio::io_context other;
    retry_->async_execute<std::string>(
        [&other](auto handler) {
          asio::post(other,
                     [h = std::move(handler)]() mutable { std::move(h)(std::error_code(), "x"); });
        },
        asio::bind_executor(io_, [](std::exception_ptr, std::string) { ADD_FAILURE(); }));
  }
  poll();
  EXPECT_TRUE(io_.stopped());
  EXPECT_EQ(counters(retry_->snapshot()), (std::vector<std::uint64_t>{0, 0, 0, 0, 0}));
}

// Many calls on a thread pool, each on its own strand (where its cancellation is emitted, as
// Asio requires), with attempts completing on the pool, random failures and cancellations,
// while this thread advances the clock: every handler runs once, every outcome is counted once,
// nothing is left waiting.
TEST_F(AsyncRetryTest, ManyConcurrentCallsWithFailuresAndCancellations) {
  make(r4c::RetryConfig().max_attempts(3).wait(10ms));
  constexpr int kCalls = 300;
  struct Call {
    asio::cancellation_signal cancel;
    std::atomic<int> answers{0};
    std::atomic<bool> aborted{false};
    std::atomic<int> attempts{0};
  };
  std::vector<std::unique_ptr<Call>> calls;
  for (int i = 0; i < kCalls; ++i) calls.push_back(std::make_unique<Call>());
  std::atomic<int> answered{0};
  {
    asio::thread_pool pool(2);
    std::vector<asio::strand<asio::thread_pool::executor_type>> strands;
    for (int i = 0; i < kCalls; ++i) strands.push_back(asio::make_strand(pool));
    for (int i = 0; i < kCalls; ++i) {
      auto strand = strands[i];
      Call& call = *calls[i];
      // Fails its first attempts by a pattern that covers 1, 2 and 3 attempts.
      auto op = [&call, i](auto handler) {
        const int attempt = call.attempts.fetch_add(1) + 1;
        const bool fails = attempt <= i % 4;
        auto executor = asio::get_associated_executor(handler);
        asio::post(executor, [h = std::move(handler), fails]() mutable {
          std::move(h)(fails ? std::make_exception_ptr(Busy()) : std::exception_ptr(),
                       std::string("ok"));
        });
      };
      asio::post(strand, [&, strand, op, i] {
        retry_->async_execute<std::string>(
            op, asio::bind_cancellation_slot(
                    calls[i]->cancel.slot(),
                    asio::bind_executor(strand, [&, i](std::exception_ptr e, std::string) {
                      calls[i]->aborted.store(aborted(e));
                      calls[i]->answers.fetch_add(1);
                      answered.fetch_add(1);
                    })));
        if (i % 5 == 0) {
          // Next on the same strand: after the first attempt (during the wait when it failed).
          asio::post(strand, [&, i] { calls[i]->cancel.emit(asio::cancellation_type::terminal); });
        }
      });
    }
    for (int rounds = 0; answered.load() < kCalls && rounds < 1000000; ++rounds) {
      if (rounds == 2) {
        // While others run: during an attempt or a wait, or after the answer.
        for (int i = 3; i < kCalls; i += 7) {
          asio::post(strands[i], [&, i] { calls[i]->cancel.emit(asio::cancellation_type::all); });
        }
      }
      clock_->advance(5ms);
      std::this_thread::yield();
    }
    pool.join();
  }
  ASSERT_EQ(answered.load(), kCalls);
  std::uint64_t finished = 0;
  for (const auto& call : calls) {
    EXPECT_EQ(call->answers.load(), 1);
    if (!call->aborted.load()) ++finished;
    EXPECT_LE(call->attempts.load(), 3);
  }
  const r4c::RetrySnapshot snapshot = retry_->snapshot();
  EXPECT_EQ(snapshot.successful_without_retry + snapshot.successful_with_retry +
                snapshot.failed_without_retry + snapshot.failed_with_retry,
            finished);
  EXPECT_EQ(snapshot.waiting_calls, 0);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
}

}  // namespace
