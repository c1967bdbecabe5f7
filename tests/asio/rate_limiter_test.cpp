// SPDX-License-Identifier: Apache-2.0
// The rate limiter's asynchronous face (<r4c/asio.hpp>): a permit free now starts the operation
// at once, a reserved one is waited for on a timer on the limiter's clock (no thread blocked),
// none completes at once with RequestNotPermittedException; cancellation; the three styles.
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
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace r4c::testing;  // the async suites' shared backend and answers

using namespace std::chrono_literals;

// What a callback received.
using Outcome = r4c::testing::Answer;

// The backend is destroyed first: operations left pending are abandoned.
class AsyncRateLimiterTest : public AsyncWaitTest<r4c::RateLimiter, r4c::RateLimiterConfig> {
 protected:
  AsyncRateLimiterTest()
      : AsyncWaitTest(
            "search",
            r4c::RateLimiterConfig().limit_for_period(1).refresh_period(1s).timeout_duration(2s)) {}

  std::unique_ptr<r4c::RateLimiter>& limiter_ = policy_;
};

TEST_F(AsyncRateLimiterTest, APermitFreeNowStartsTheOperationAtOnce) {
  Outcome outcome;
  limiter_->async_execute<std::string>(backend_.place("a"), on_io(outcome));
  EXPECT_EQ(backend_.started("a"), 1);  // inside async_execute
  EXPECT_EQ(limiter_->snapshot().available_permissions, 0);
  EXPECT_EQ(limiter_->snapshot().waiting_calls, 0);
  EXPECT_EQ(clock_->pending_tasks(), 0u);  // nothing to wait for
  backend_.complete("a", "hits");
  poll();
  ASSERT_TRUE(succeeded_with(outcome, "hits"));
}

// The call waits on the limiter's clock: async_execute returns on this thread (the same thread
// then advances the clock), the operation starts only when the reserved permit's period comes.
TEST_F(AsyncRateLimiterTest, ACallWithoutAPermitWaitsOnTheClockWithoutBlockingAThread) {
  ASSERT_TRUE(limiter_->try_acquire());
  Outcome outcome;
  limiter_->async_execute<std::string>(backend_.place("b"), on_io(outcome));
  EXPECT_EQ(backend_.started("b"), 0);
  r4c::RateLimiterSnapshot snapshot = limiter_->snapshot();
  EXPECT_EQ(snapshot.waiting_calls, 1);
  EXPECT_EQ(snapshot.available_permissions, -1);  // reserved, as a synchronous waiter's
  EXPECT_EQ(clock_->pending_tasks(), 1u);

  clock_->advance(999ms);
  poll();
  EXPECT_FALSE(io_.stopped());  // the waiting call keeps the context running, as a timer would
  EXPECT_EQ(backend_.started("b"), 0);
  clock_->advance(1ms);  // the next period: the timer fires and posts the start to io_
  EXPECT_EQ(backend_.started("b"), 0);  // on the caller's executor, not the advancing call
  EXPECT_EQ(limiter_->snapshot().waiting_calls, 1);
  poll();
  EXPECT_EQ(backend_.started("b"), 1);
  EXPECT_EQ(limiter_->snapshot().waiting_calls, 0);
  EXPECT_EQ(limiter_->snapshot().available_permissions, 0);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
  backend_.complete("b", "hits");
  poll();
  ASSERT_TRUE(succeeded_with(outcome, "hits"));
  EXPECT_EQ(limiter_->snapshot().rejected, 0u);
}

TEST_F(AsyncRateLimiterTest, ACallThatCannotGetAPermitInTimeFailsAtOnce) {
  ASSERT_TRUE(limiter_->try_acquire());
  auto b = limiter_->async_execute<std::string>(backend_.place("b"), asio::use_future);  // 1 s
  auto c = limiter_->async_execute<std::string>(backend_.place("c"), asio::use_future);  // 2 s
  auto d = limiter_->async_execute<std::string>(backend_.place("d"), asio::use_future);  // 3 s
  ASSERT_EQ(d.wait_for(0s), std::future_status::ready);  // before async_execute returned
  const auto refusal = exception_of<r4c::RequestNotPermittedException>(d);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->instance_id(), "search");
  EXPECT_EQ(backend_.started("d"), 0);
  r4c::RateLimiterSnapshot snapshot = limiter_->snapshot();
  EXPECT_EQ(snapshot.rejected, 1u);
  EXPECT_EQ(snapshot.waiting_calls, 2);
  EXPECT_EQ(snapshot.available_permissions, -2);

  // use_future: the operations start on a system thread once their periods come.
  clock_->advance(1s);
  ASSERT_TRUE(backend_.wait_started("b", 1));
  EXPECT_EQ(backend_.started("c"), 0);
  backend_.complete("b", "b");
  EXPECT_EQ(b.get(), "b");
  clock_->advance(1s);
  ASSERT_TRUE(backend_.wait_started("c", 1));
  backend_.complete("c", "c");
  EXPECT_EQ(c.get(), "c");
}

// Synchronous and asynchronous callers share one accounting: the reservations queue up in
// order, and waiting_calls counts both kinds.
TEST_F(AsyncRateLimiterTest, SynchronousAndAsynchronousWaitersShareTheAccounting) {
  Outcome first;
  Outcome third;
  limiter_->async_execute<std::string>(backend_.place("a"), on_io(first));  // the permit now
  std::atomic<bool> sync_done{false};
  std::thread sync_caller([&] {
    limiter_->acquire();  // reserves period 1 and sleeps on the clock
    sync_done.store(true);
  });
  while (limiter_->snapshot().waiting_calls == 0) std::this_thread::yield();
  limiter_->async_execute<std::string>(backend_.place("c"), on_io(third));  // period 2
  EXPECT_EQ(limiter_->snapshot().waiting_calls, 2);
  EXPECT_EQ(limiter_->snapshot().available_permissions, -2);
  EXPECT_FALSE(limiter_->try_acquire());

  clock_->advance(1s);
  sync_caller.join();
  EXPECT_TRUE(sync_done.load());
  poll();
  EXPECT_EQ(backend_.started("c"), 0);
  EXPECT_EQ(limiter_->snapshot().waiting_calls, 1);
  clock_->advance(1s);
  poll();
  EXPECT_EQ(backend_.started("c"), 1);
  EXPECT_EQ(limiter_->snapshot().waiting_calls, 0);
  backend_.complete("a", "a");
  backend_.complete("c", "c");
  poll();
  EXPECT_EQ(first.value, "a");
  EXPECT_EQ(third.value, "c");
}

// Cancelling a waiting call: operation_aborted at once, the timer cancelled, the operation
// never started. The reserved permit stays taken (documented choice).
TEST_F(AsyncRateLimiterTest, CancellingAWaitingCallCompletesAtOnceAndNeverStartsTheOperation) {
  ASSERT_TRUE(limiter_->try_acquire());
  asio::cancellation_signal cancel;
  Outcome outcome;
  limiter_->async_execute<std::string>(backend_.place("b"), on_io(outcome, cancel));
  ASSERT_NO_FATAL_FAILURE(cancel_the_wait(cancel, outcome));

  clock_->advance(1s);
  poll();
  EXPECT_EQ(backend_.started("b"), 0);
  EXPECT_EQ(outcome.calls, 1);
  // Period 1 paid back the reserved permit: none is left in it.
  EXPECT_EQ(limiter_->snapshot().available_permissions, 0);
  EXPECT_FALSE(limiter_->try_acquire());
  EXPECT_TRUE(io_.stopped());  // the wait's work ended with it
}

// The limiter holds nothing while the operation runs: cancelling completes the caller at
// once, forwards the cancellation, and the late completion is ignored.
TEST_F(AsyncRateLimiterTest, CancellingARunningCallForwardsItAndIgnoresTheLateCompletion) {
  asio::cancellation_signal cancel_now;
  asio::cancellation_signal cancel_later;
  Outcome now;
  Outcome later;
  limiter_->async_execute<std::string>(backend_.place("a"),
                                       asio::bind_cancellation_slot(cancel_now.slot(), on_io(now)));
  limiter_->async_execute<std::string>(
      backend_.place("b"), asio::bind_cancellation_slot(cancel_later.slot(), on_io(later)));
  clock_->advance(1s);
  poll();
  ASSERT_EQ(backend_.started("b"), 1);  // started after its wait

  cancel_now.emit(asio::cancellation_type::terminal);
  cancel_later.emit(asio::cancellation_type::terminal);
  EXPECT_TRUE(backend_.cancelled("a"));
  EXPECT_TRUE(backend_.cancelled("b"));
  poll();
  ASSERT_EQ(now.calls, 1);
  ASSERT_EQ(later.calls, 1);
  EXPECT_TRUE(aborted(now.failure));
  EXPECT_TRUE(aborted(later.failure));
  backend_.complete("a", "late");
  backend_.complete("b", "late");
  poll();
  EXPECT_EQ(now.calls, 1);
  EXPECT_EQ(later.calls, 1);
}

TEST_F(AsyncRateLimiterTest, ACoroutineAwaitsItsPermitAndItsResult) {
  std::string first;
  std::string second;
  bool refused = false;
  spawn(io_, [&]() -> asio::awaitable<void> {
    first = co_await limiter_->async_execute<std::string>(backend_.place("a"), asio::use_awaitable);
    second =
        co_await limiter_->async_execute<std::string>(backend_.place("b"), asio::use_awaitable);
    make(r4c::RateLimiterConfig().limit_for_period(1));  // no waiting: refusals
    co_await limiter_->async_execute<std::string>(backend_.place("x"), asio::use_awaitable);
    refused = co_await co_throws<r4c::RequestNotPermittedException>([&] {
      return limiter_->async_execute<std::string>(backend_.place("y"), asio::use_awaitable);
    });
  });
  poll();
  backend_.complete("a", "first");
  poll();
  EXPECT_EQ(first, "first");
  EXPECT_EQ(limiter_->snapshot().waiting_calls, 1);  // the second waits for period 1
  EXPECT_EQ(backend_.started("b"), 0);
  clock_->advance(1s);
  poll();
  backend_.complete("b", "second");
  poll();
  EXPECT_EQ(second, "second");
  backend_.complete("x", "x");
  poll();
  EXPECT_TRUE(refused);
  EXPECT_EQ(backend_.started("y"), 0);
  EXPECT_TRUE(io_.stopped());  // the coroutine finished
}

// A coroutine cancelled through awaitable_operators while it waits for its permit.
TEST_F(AsyncRateLimiterTest, ACoroutineCancelledWhileWaitingNeverStartsItsOperation) {
  using namespace asio::experimental::awaitable_operators;
  ASSERT_TRUE(limiter_->try_acquire());
  bool timer_won = false;
  spawn(io_, [&]() -> asio::awaitable<void> {
    asio::steady_timer timer(io_, 1ms);
    auto outcome =
        co_await (limiter_->async_execute<std::string>(backend_.place("b"), asio::use_awaitable) ||
                  timer.async_wait(asio::use_awaitable));
    timer_won = outcome.index() == 1;
  });
  io_.run();  // returns: the cancelled wait no longer keeps io_ running
  EXPECT_TRUE(timer_won);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
  clock_->advance(1s);
  poll();
  EXPECT_EQ(backend_.started("b"), 0);
}

TEST_F(AsyncRateLimiterTest, VoidOperationsAndErrorCodesWork) {
  std::exception_ptr failure;
  int calls = 0;
  auto fails = [](auto handler) {
    std::move(handler)(asio::error::make_error_code(asio::error::connection_refused));
  };
  limiter_->async_execute<void>(fails, [&](std::exception_ptr e) {
    failure = e;
    ++calls;
  });
  ASSERT_EQ(calls, 1);  // no executor of its own: completed inline
  try {
    std::rethrow_exception(failure);
  } catch (const asio::system_error& e) {
    EXPECT_EQ(e.code(), asio::error::connection_refused);
  }

  auto succeeds = [](auto handler) { std::move(handler)(std::error_code()); };
  std::future<void> waited = limiter_->async_execute<void>(succeeds, asio::use_future);
  EXPECT_EQ(waited.wait_for(0s), std::future_status::timeout);  // waits for period 1
  clock_->advance(1s);
  waited.get();  // started and completed on a system thread
}

// An operation destroyed without completing (its context went away) ends the call; its
// handler is destroyed uncalled.
TEST_F(AsyncRateLimiterTest, AnAbandonedOperationEndsTheCall) {
  ASSERT_TRUE(limiter_->try_acquire());
  {
    asio::io_context other;
    limiter_->async_execute<std::string>(
        [&other](auto handler) {
          asio::post(other,
                     [h = std::move(handler)]() mutable { std::move(h)(std::error_code(), "x"); });
        },
        asio::bind_executor(io_, [](std::exception_ptr, std::string) { ADD_FAILURE(); }));
    clock_->advance(1s);
    poll();  // starts the operation, which posts to `other`
  }
  poll();
  EXPECT_TRUE(io_.stopped());
}

// Many calls on a thread pool, each on its own strand (where its cancellation is emitted, as
// Asio requires), some started at once, some waiting, some refused, some cancelled, while this
// thread advances the clock: every handler runs once, no permit is handed out twice.
TEST_F(AsyncRateLimiterTest, ManyConcurrentCallsWithWaitsRefusalsAndCancellations) {
  make(r4c::RateLimiterConfig().limit_for_period(10).refresh_period(10ms).timeout_duration(50ms));
  constexpr int kCalls = 300;
  struct Call {
    asio::cancellation_signal cancel;
    std::atomic<int> answers{0};
    std::atomic<bool> started{false};
    std::atomic<bool> refused{false};
  };
  std::vector<std::unique_ptr<Call>> calls;
  for (int i = 0; i < kCalls; ++i) calls.push_back(std::make_unique<Call>());
  std::atomic<int> answered{0};
  std::atomic<int> started{0};
  {
    asio::thread_pool pool(2);
    for (int i = 0; i < kCalls; ++i) {
      auto strand = asio::make_strand(pool);
      auto op = [&, i](auto handler) {
        calls[i]->started.store(true);
        started.fetch_add(1);
        auto executor = asio::get_associated_executor(handler);
        asio::post(executor, [h = std::move(handler)]() mutable {
          std::move(h)(std::exception_ptr(), std::string("ok"));
        });
      };
      asio::post(strand, [&, strand, op, i] {
        limiter_->async_execute<std::string>(
            op, asio::bind_cancellation_slot(
                    calls[i]->cancel.slot(),
                    asio::bind_executor(strand, [&, i](std::exception_ptr e, std::string) {
                      try {
                        if (e) std::rethrow_exception(e);
                      } catch (const r4c::RequestNotPermittedException&) {
                        calls[i]->refused.store(true);
                      } catch (...) {
                      }
                      calls[i]->answers.fetch_add(1);
                      answered.fetch_add(1);
                    })));
        if (i % 4 == 0) {
          asio::post(strand, [&, i] { calls[i]->cancel.emit(asio::cancellation_type::terminal); });
        }
      });
    }
    for (int rounds = 0; answered.load() < kCalls && rounds < 1000000; ++rounds) {
      clock_->advance(1ms);
      std::this_thread::yield();
    }
    pool.join();
  }
  ASSERT_EQ(answered.load(), kCalls);
  std::uint64_t refused = 0;
  for (const auto& call : calls) {
    EXPECT_EQ(call->answers.load(), 1);
    if (call->refused.load()) {
      ++refused;
      EXPECT_FALSE(call->started.load());
    }
  }
  const r4c::RateLimiterSnapshot snapshot = limiter_->snapshot();
  EXPECT_EQ(snapshot.rejected, refused);
  // At most limit_for_period per period since the start, the last period included.
  const auto periods = clock_->now() / 10ms + 1;
  EXPECT_LE(started.load(), 10 * periods);
  EXPECT_EQ(snapshot.waiting_calls, 0);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
}

}  // namespace
