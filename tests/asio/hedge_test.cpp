// SPDX-License-Identifier: Apache-2.0
// The hedge's asynchronous face (<r4c/asio.hpp>): the synchronous hedge's rules, each with a
// test, for Asio operations; cancellation; and the three styles (callback, future, coroutine).
// Time is a ManualClock the test thread advances; launches run on the caller's executor (an
// io_context the test polls, unless a test says otherwise).
#include "r4c/asio.hpp"

#include "async_support.hpp"

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
#include <chrono>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../hedge_test_support.hpp"
#include "r4c/hedge.hpp"

namespace {

using r4c::testing::co_throws;
using r4c::testing::spawn;

using namespace std::chrono_literals;

using r4c::test::counts;
using r4c::test::ShardFull;
using r4c::test::SlowReplica;
using Counts = std::vector<std::uint64_t>;

// Spins (yielding) until `done` holds; fails the test after 10 s rather than hanging.
template <class Predicate>
bool wait_until(Predicate done) {
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > give_up) {
      ADD_FAILURE() << "timed out waiting";
      return false;
    }
    std::this_thread::yield();
  }
  return true;
}

// Replicas whose reads stay pending until the test completes them. Each invocation of a read's
// initiation is one attempt, stored as "<name>#<n>" (n from 1). Like Asio's own operations, an
// attempt listens to its handler's cancellation slot while pending and clears it when it
// completes. Thread-safe: a launch may run on another thread.
class Replicas : public r4c::testing::CompletesByKey<Replicas> {
 public:
  auto read(std::string name) {
    return [this, name](auto handler) {
      auto flag = std::make_shared<std::atomic<bool>>(false);
      auto slot = asio::get_associated_cancellation_slot(handler);
      if (slot.is_connected()) {
        slot.assign([flag](asio::cancellation_type) { flag->store(true); });
      }
      auto pending = std::make_unique<Stored<decltype(handler)>>(std::move(handler), slot);
      std::lock_guard<std::mutex> lock(mutex_);
      const std::string key = name + "#" + std::to_string(++started_[name]);
      cancelled_[key] = std::move(flag);
      pending_[key] = std::move(pending);
    };
  }

  // Whether a cancellation reached the attempt (pending or not).
  bool cancelled(const std::string& key) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = cancelled_.find(key);
    return found != cancelled_.end() && found->second->load();
  }
  int started(const std::string& name) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = started_.find(name);
    return found == started_.end() ? 0 : found->second;
  }

 private:
  struct Pending {
    virtual ~Pending() = default;
    virtual void complete(std::exception_ptr failure, std::string value) = 0;
    virtual void complete(std::error_code code, std::string value) = 0;
  };
  template <class Handler>
  struct Stored final : Pending {
    Stored(Handler h, asio::cancellation_slot s) : handler(std::move(h)), slot(s) {}
    void complete(std::exception_ptr failure, std::string value) override {
      if (slot.is_connected()) slot.clear();
      std::move(handler)(std::move(failure), std::move(value));
    }
    void complete(std::error_code code, std::string value) override {
      if (slot.is_connected()) slot.clear();
      std::move(handler)(code, std::move(value));
    }
    Handler handler;
    asio::cancellation_slot slot;
  };

  friend r4c::testing::CompletesByKey<Replicas>;
  std::unique_ptr<Pending> take(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = pending_.find(key);
    if (found == pending_.end()) throw std::logic_error("no pending attempt " + key);
    auto pending = std::move(found->second);
    pending_.erase(found);
    return pending;
  }

  mutable std::mutex mutex_;
  std::map<std::string, int> started_;
  std::map<std::string, std::shared_ptr<std::atomic<bool>>> cancelled_;
  std::map<std::string, std::unique_ptr<Pending>> pending_;
};

using r4c::testing::Answer;  // what a callback received
using r4c::testing::succeeded_with;

asio::error_code code_of(const std::exception_ptr& failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const asio::system_error& e) {
    return e.code();
  } catch (...) {
    return {};
  }
}

std::string what_of(const std::exception_ptr& failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "";
  }
}

class AsyncHedgeTest : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_EQ(clock_->pending_tasks(), 0u); }

  r4c::Hedge& make(r4c::HedgeConfig config) {
    hedge_ = std::make_unique<r4c::Hedge>("reads", config, clock_, executor_);
    return *hedge_;
  }
  // A callback on the io_context that records what it received.
  auto into(Answer& answer) {
    return asio::bind_executor(io_, [&answer](std::exception_ptr e, std::string v) {
      ++answer.calls;
      answer.failure = e;
      answer.value = std::move(v);
    });
  }
  // Runs what is ready on the caller's executor.
  void run_ready() {
    io_.restart();
    io_.poll();
  }
  void advance(std::chrono::nanoseconds by) {
    clock_->advance(by);
    run_ready();
  }

  // Declared so that pending attempts (replicas_) go first, then the caller's executor, then the
  // hedge their calls refer to.
  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
  std::shared_ptr<r4c::Executor> executor_ = std::make_shared<r4c::Executor>(1);
  std::unique_ptr<r4c::Hedge> hedge_;
  asio::io_context io_;
  Replicas replicas_;
};

TEST_F(AsyncHedgeTest, AFastFirstAttemptLaunchesNoHedgeAndLeavesNoTimer) {
  r4c::Hedge& hedge = make(r4c::HedgeConfig().delay(100ms));
  Answer a;
  hedge.async_execute<std::string>(replicas_.read("a"), into(a));
  EXPECT_EQ(replicas_.started("a"), 1);
  EXPECT_EQ(clock_->pending_tasks(), 1u);  // the delay
  advance(99ms);
  replicas_.complete("a#1", "fast");
  EXPECT_EQ(clock_->pending_tasks(), 0u);  // taken off the clock at once
  run_ready();
  EXPECT_EQ(a.calls, 1);
  EXPECT_FALSE(a.failure);
  EXPECT_EQ(a.value, "fast");
  advance(1s);
  EXPECT_EQ(replicas_.started("a"), 1);

  // An operation that completes inside its initiation arms nothing.
  Answer b;
  hedge.async_execute<std::string>(
      [](auto handler) { std::move(handler)(std::error_code(), std::string("inline")); }, into(b));
  EXPECT_EQ(clock_->pending_tasks(), 0u);
  run_ready();
  EXPECT_EQ(b.value, "inline");

  bool called = false;
  hedge.async_execute<void>([](auto handler) { std::move(handler)(std::exception_ptr()); },
                            [&](std::exception_ptr e) {
                              EXPECT_FALSE(e);
                              called = true;
                            });
  EXPECT_TRUE(called);

  EXPECT_EQ(counts(hedge.snapshot()), (Counts{3, 0, 0, 0}));
}

TEST_F(AsyncHedgeTest, ASlowFirstAttemptGetsAHedgeOnTheExecutorWhoseSuccessWinsAndCancelsIt) {
  r4c::Hedge& hedge = make(r4c::HedgeConfig().delay(100ms));
  std::vector<bool> on_executor;
  auto read = replicas_.read("a");
  auto op = [&, read](auto handler) {
    on_executor.push_back(io_.get_executor().running_in_this_thread());
    read(std::move(handler));
  };
  Answer a;
  hedge.async_execute<std::string>(op, into(a));
  advance(99ms);
  EXPECT_EQ(replicas_.started("a"), 1);
  clock_->advance(1ms);  // the delay passed: the launch is posted to the caller's executor
  EXPECT_EQ(replicas_.started("a"), 1);
  run_ready();
  ASSERT_EQ(replicas_.started("a"), 2);
  EXPECT_EQ(on_executor, (std::vector<bool>{false, true}));
  EXPECT_EQ(clock_->pending_tasks(), 0u);  // max_attempts 2: nothing more to launch

  replicas_.complete("a#2", "from the hedge");
  EXPECT_TRUE(replicas_.cancelled("a#1"));  // through its own slot
  EXPECT_FALSE(replicas_.cancelled("a#2"));
  run_ready();
  EXPECT_EQ(a.calls, 1);
  EXPECT_FALSE(a.failure);
  EXPECT_EQ(a.value, "from the hedge");

  replicas_.complete("a#1", "late");  // ignored
  run_ready();
  EXPECT_EQ(a.calls, 1);
  EXPECT_EQ(counts(hedge.snapshot()), (Counts{1, 1, 1, 0}));
}

TEST_F(AsyncHedgeTest, WhenEveryAttemptFailsTheCallerGetsTheLastFailure) {
  r4c::Hedge& hedge = make(r4c::HedgeConfig().delay(100ms).max_attempts(3));
  Answer a;
  hedge.async_execute<std::string>(replicas_.read("a"), into(a));
  advance(100ms);
  ASSERT_EQ(replicas_.started("a"), 2);
  replicas_.fail("a#2", asio::error::make_error_code(asio::error::connection_refused));
  run_ready();
  EXPECT_EQ(a.calls, 0);                   // attempt 1 still runs
  EXPECT_EQ(clock_->pending_tasks(), 1u);  // and a third may still come
  const std::exception_ptr last = std::make_exception_ptr(SlowReplica("attempt 1"));
  replicas_.fail("a#1", last);
  EXPECT_EQ(clock_->pending_tasks(), 0u);  // no third: the call is over
  run_ready();
  ASSERT_EQ(a.calls, 1);
  EXPECT_EQ(a.failure, last);  // the same object
  advance(1s);
  EXPECT_EQ(replicas_.started("a"), 2);

  // The last failure an error code: the caller gets it as asio::system_error.
  Answer b;
  hedge.async_execute<std::string>(replicas_.read("b"), into(b));
  advance(100ms);
  replicas_.fail("b#1", std::make_exception_ptr(SlowReplica("attempt 1")));
  replicas_.fail("b#2", asio::error::make_error_code(asio::error::connection_reset));
  run_ready();
  ASSERT_EQ(b.calls, 1);
  EXPECT_EQ(code_of(b.failure), asio::error::connection_reset);

  EXPECT_EQ(counts(hedge.snapshot()), (Counts{2, 2, 0, 2}));
}

TEST_F(AsyncHedgeTest, AFailedAttemptDoesNotEndTheCallWhileAnotherIsInFlight) {
  r4c::Hedge& hedge = make(r4c::HedgeConfig().delay(100ms));
  Answer a;
  hedge.async_execute<std::string>(replicas_.read("a"), into(a));
  advance(100ms);
  replicas_.fail("a#1", std::make_exception_ptr(SlowReplica("attempt 1")));
  run_ready();
  EXPECT_EQ(a.calls, 0);
  EXPECT_FALSE(replicas_.cancelled("a#2"));
  replicas_.complete("a#2", "second");
  run_ready();
  ASSERT_TRUE(succeeded_with(a, "second"));
  EXPECT_EQ(hedge.snapshot().failed, 0u);
  EXPECT_EQ(hedge.snapshot().won_by_hedge, 1u);
}

// A hedge is not a retry: a first attempt that fails before the delay ends the call at once.
TEST_F(AsyncHedgeTest, AFirstAttemptFailingBeforeTheDelayEndsTheCallWithoutAHedge) {
  r4c::Hedge& hedge = make(r4c::HedgeConfig().delay(100ms).max_attempts(3));
  Answer a;
  hedge.async_execute<std::string>(replicas_.read("a"), into(a));
  advance(50ms);
  replicas_.fail("a#1", std::make_exception_ptr(SlowReplica("attempt 1")));
  EXPECT_EQ(clock_->pending_tasks(), 0u);
  run_ready();
  ASSERT_EQ(a.calls, 1);
  EXPECT_EQ(what_of(a.failure), "attempt 1");
  advance(1s);
  EXPECT_EQ(replicas_.started("a"), 1);
  EXPECT_EQ(hedge.snapshot().hedges_launched, 0u);
  EXPECT_EQ(hedge.snapshot().failed, 1u);
}

// The synchronous hedge's rule: a hedge stops launching attempts when the limit rejects one, as
// with an open breaker or a full bulkhead (or a rate limit), derived types included. Any other
// failure does not stop it.
TEST_F(AsyncHedgeTest, AnAttemptRejectedByAnInnerPolicyStopsFurtherLaunches) {
  const std::vector<std::exception_ptr> rejections = {
      std::make_exception_ptr(r4c::LimitExceededException("limit full")),
      std::make_exception_ptr(r4c::CallNotPermittedException("breaker open")),
      std::make_exception_ptr(r4c::BulkheadFullException("bulkhead full")),
      std::make_exception_ptr(ShardFull("shard 3 is full")),
      std::make_exception_ptr(r4c::RequestNotPermittedException("rate limited")),
  };
  for (std::size_t i = 0; i < rejections.size(); ++i) {
    SCOPED_TRACE(what_of(rejections[i]));
    r4c::Hedge& hedge = make(r4c::HedgeConfig().delay(100ms).max_attempts(3));
    const std::string name = "r" + std::to_string(i);
    Answer a;
    hedge.async_execute<std::string>(replicas_.read(name), into(a));
    advance(100ms);
    ASSERT_EQ(replicas_.started(name), 2);
    replicas_.fail(name + "#2", rejections[i]);
    run_ready();
    EXPECT_EQ(a.calls, 0);  // attempt 1 still runs
    advance(100ms);         // the delay passes, but the rejection ended the launching
    advance(1s);
    EXPECT_EQ(replicas_.started(name), 2);
    replicas_.complete(name + "#1", "first");
    run_ready();
    EXPECT_EQ(a.value, "first");
    EXPECT_EQ(hedge.snapshot().hedges_launched, 1u);
    EXPECT_EQ(hedge.snapshot().won_by_hedge, 0u);
  }

  // The control: an ordinary failure of the hedge leaves the launching on.
  r4c::Hedge& hedge = make(r4c::HedgeConfig().delay(100ms).max_attempts(3));
  Answer a;
  hedge.async_execute<std::string>(replicas_.read("x"), into(a));
  advance(100ms);
  replicas_.fail("x#2", std::make_exception_ptr(SlowReplica("attempt 2")));
  advance(100ms);
  EXPECT_EQ(replicas_.started("x"), 3);
  replicas_.complete("x#3", "third");
  run_ready();
  EXPECT_EQ(a.value, "third");
  EXPECT_TRUE(replicas_.cancelled("x#1"));
  EXPECT_EQ(hedge.snapshot().won_by_hedge, 1u);
}

TEST_F(AsyncHedgeTest, MaxAttemptsBoundsTheAttemptsAndTheWinnerCancelsEveryOther) {
  r4c::Hedge& hedge = make(r4c::HedgeConfig().delay(100ms).max_attempts(3));
  Answer a;
  hedge.async_execute<std::string>(replicas_.read("a"), into(a));
  advance(100ms);
  EXPECT_EQ(replicas_.started("a"), 2);
  EXPECT_EQ(clock_->pending_tasks(), 1u);
  advance(100ms);
  EXPECT_EQ(replicas_.started("a"), 3);
  EXPECT_EQ(clock_->pending_tasks(), 0u);  // the third was the last
  advance(1s);
  EXPECT_EQ(replicas_.started("a"), 3);

  replicas_.complete("a#2", "second");
  EXPECT_TRUE(replicas_.cancelled("a#1"));
  EXPECT_FALSE(replicas_.cancelled("a#2"));
  EXPECT_TRUE(replicas_.cancelled("a#3"));
  run_ready();
  EXPECT_EQ(a.value, "second");
  // Late completions, a success and a failure, are ignored.
  replicas_.complete("a#1", "late");
  replicas_.fail("a#3", asio::error::make_error_code(asio::error::operation_aborted));
  run_ready();
  EXPECT_EQ(a.calls, 1);
  EXPECT_EQ(counts(hedge.snapshot()), (Counts{1, 2, 1, 0}));

  // max_attempts(1) turns hedging off: no delay is armed at all.
  r4c::Hedge& single = make(r4c::HedgeConfig().delay(100ms).max_attempts(1));
  Answer b;
  single.async_execute<std::string>(replicas_.read("b"), into(b));
  EXPECT_EQ(clock_->pending_tasks(), 0u);
  advance(1s);
  EXPECT_EQ(replicas_.started("b"), 1);
  replicas_.complete("b#1", "only");
  run_ready();
  EXPECT_EQ(b.value, "only");
}

TEST_F(AsyncHedgeTest, CancellingAbortsAtOnceCancelsEveryAttemptAndTakesTheDelayOffTheClock) {
  r4c::Hedge& hedge = make(r4c::HedgeConfig().delay(100ms).max_attempts(3));
  asio::cancellation_signal cancel;
  Answer a;
  hedge.async_execute<std::string>(replicas_.read("a"),
                                   asio::bind_cancellation_slot(cancel.slot(), into(a)));
  advance(100ms);
  ASSERT_EQ(replicas_.started("a"), 2);
  EXPECT_EQ(clock_->pending_tasks(), 1u);
  cancel.emit(asio::cancellation_type::terminal);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
  EXPECT_TRUE(replicas_.cancelled("a#1"));
  EXPECT_TRUE(replicas_.cancelled("a#2"));
  run_ready();
  ASSERT_EQ(a.calls, 1);
  EXPECT_EQ(code_of(a.failure), asio::error::operation_aborted);
  advance(1s);
  EXPECT_EQ(replicas_.started("a"), 2);
  replicas_.complete("a#2", "late");  // ignored
  replicas_.fail("a#1", asio::error::make_error_code(asio::error::operation_aborted));
  run_ready();
  EXPECT_EQ(a.calls, 1);
  // Ended, with a failure for its caller.
  EXPECT_EQ(counts(hedge.snapshot()), (Counts{1, 1, 0, 1}));
}

// The delay fired and its launch is queued on the caller's executor when the caller cancels:
// the launch does nothing.
TEST_F(AsyncHedgeTest, ALaunchQueuedBeforeACancellationStartsNothing) {
  r4c::Hedge& hedge = make(r4c::HedgeConfig().delay(100ms).max_attempts(3));
  asio::cancellation_signal cancel;
  Answer a;
  hedge.async_execute<std::string>(replicas_.read("a"),
                                   asio::bind_cancellation_slot(cancel.slot(), into(a)));
  clock_->advance(100ms);  // the launch is posted, not run
  cancel.emit(asio::cancellation_type::terminal);
  run_ready();
  EXPECT_EQ(code_of(a.failure), asio::error::operation_aborted);
  EXPECT_EQ(replicas_.started("a"), 1);
  EXPECT_TRUE(replicas_.cancelled("a#1"));
  EXPECT_EQ(hedge.snapshot().hedges_launched, 0u);
  replicas_.complete("a#1", "late");
  run_ready();
  EXPECT_EQ(a.calls, 1);
}

// An exception from a later attempt's initiation has no caller on its stack: it is that
// attempt's failure. One from the first attempt's leaves async_execute, as with every policy.
TEST_F(AsyncHedgeTest, AnInitiationThatThrowsFailsItsAttempt) {
  r4c::Hedge& hedge = make(r4c::HedgeConfig().delay(100ms).max_attempts(3));
  int invocations = 0;
  auto read = replicas_.read("a");
  auto op = [&, read](auto handler) {
    if (++invocations == 2) throw r4c::LimitExceededException("no room for a hedge");
    read(std::move(handler));
  };
  Answer a;
  hedge.async_execute<std::string>(op, into(a));
  advance(100ms);
  EXPECT_EQ(invocations, 2);
  advance(100ms);  // the throw was a rejection: no third
  EXPECT_EQ(invocations, 2);
  EXPECT_EQ(a.calls, 0);
  const std::exception_ptr last = std::make_exception_ptr(SlowReplica("attempt 1"));
  replicas_.fail("a#1", last);  // the last attempt running: the call ends
  run_ready();
  ASSERT_EQ(a.calls, 1);
  EXPECT_EQ(a.failure, last);

  auto witness = std::make_shared<int>(0);
  EXPECT_THROW(hedge.async_execute<std::string>(
                   [](auto) { throw SlowReplica("cannot start"); },
                   [witness](std::exception_ptr, std::string) { ADD_FAILURE() << "called"; }),
               SlowReplica);
  EXPECT_EQ(witness.use_count(), 1);  // the handler was destroyed uncalled
  EXPECT_EQ(hedge.snapshot().calls, 1u);
}

// Attempts destroyed uncalled (their context shut down) end without an outcome; when every
// attempt went that way the caller's handler is destroyed uncalled, as Asio does.
TEST_F(AsyncHedgeTest, AbandonedAttemptsEndTheCallWithoutAnAnswer) {
  r4c::Hedge& hedge = make(r4c::HedgeConfig().delay(100ms));
  auto witness = std::make_shared<int>(0);
  {
    asio::io_context elsewhere;
    auto op = [&elsewhere](auto handler) {
      asio::post(elsewhere, [h = std::move(handler)]() mutable {
        std::move(h)(std::error_code(), std::string("never"));
      });
    };
    hedge.async_execute<std::string>(
        op, asio::bind_executor(
                io_, [witness](std::exception_ptr, std::string) { ADD_FAILURE() << "called"; }));
    advance(100ms);
    EXPECT_EQ(witness.use_count(), 2);
  }  // both attempts' handlers are destroyed with `elsewhere`
  run_ready();
  EXPECT_EQ(witness.use_count(), 1);
  EXPECT_EQ(hedge.snapshot().calls, 0u);
}

// use_future with no executor of its own: the launch runs on Asio's system executor, so the
// test waits for it.
TEST_F(AsyncHedgeTest, AFutureGetsTheWinnerOrTheLastFailure) {
  r4c::Hedge& hedge = make(r4c::HedgeConfig().delay(100ms));
  std::future<std::string> f =
      hedge.async_execute<std::string>(replicas_.read("f"), asio::use_future);
  clock_->advance(100ms);
  ASSERT_TRUE(wait_until([&] { return replicas_.started("f") == 2; }));
  EXPECT_EQ(f.wait_for(0s), std::future_status::timeout);
  replicas_.complete("f#2", "hedged");
  ASSERT_EQ(f.wait_for(0s), std::future_status::ready);
  EXPECT_EQ(f.get(), "hedged");
  EXPECT_TRUE(replicas_.cancelled("f#1"));
  replicas_.complete("f#1", "late");

  std::future<std::string> g =
      hedge.async_execute<std::string>(replicas_.read("g"), asio::use_future);
  replicas_.fail("g#1", std::make_exception_ptr(r4c::CallNotPermittedException("open")));
  EXPECT_THROW(g.get(), r4c::CallNotPermittedException);
  EXPECT_EQ(hedge.snapshot().calls, 2u);
  EXPECT_EQ(hedge.snapshot().failed, 1u);
}

TEST_F(AsyncHedgeTest, ACoroutineAwaitsTheFirstSuccess) {
  r4c::Hedge& hedge = make(r4c::HedgeConfig().delay(100ms));
  std::string result;
  bool failed = false;
  spawn(io_, [&]() -> asio::awaitable<void> {
    result = co_await hedge.async_execute<std::string>(replicas_.read("c"), asio::use_awaitable);
    failed = co_await co_throws<SlowReplica>(
        [&] { return hedge.async_execute<std::string>(replicas_.read("d"), asio::use_awaitable); });
  });
  run_ready();
  ASSERT_EQ(replicas_.started("c"), 1);
  advance(100ms);
  ASSERT_EQ(replicas_.started("c"), 2);
  replicas_.complete("c#1", "first");
  EXPECT_TRUE(replicas_.cancelled("c#2"));
  run_ready();
  EXPECT_EQ(result, "first");
  ASSERT_EQ(replicas_.started("d"), 1);
  replicas_.fail("d#1", std::make_exception_ptr(SlowReplica("d")));
  run_ready();
  EXPECT_TRUE(failed);
  EXPECT_EQ(hedge.snapshot().won_by_hedge, 0u);
  EXPECT_EQ(hedge.snapshot().calls, 2u);
}

// A coroutine cancelled through awaitable_operators (a timer wins the race).
TEST_F(AsyncHedgeTest, ACoroutineCancelledByARaceCancelsItsAttempts) {
  using namespace asio::experimental::awaitable_operators;
  r4c::Hedge& hedge = make(r4c::HedgeConfig().delay(100ms));
  bool timer_won = false;
  spawn(io_, [&]() -> asio::awaitable<void> {
    asio::steady_timer timer(io_, 100ms);  // after the hedge is launched
    auto outcome =
        co_await (hedge.async_execute<std::string>(replicas_.read("r"), asio::use_awaitable) ||
                  timer.async_wait(asio::use_awaitable));
    timer_won = outcome.index() == 1;
  });
  run_ready();
  advance(100ms);
  ASSERT_EQ(replicas_.started("r"), 2);
  io_.restart();
  io_.run();
  EXPECT_TRUE(timer_won);
  EXPECT_TRUE(replicas_.cancelled("r#1"));
  EXPECT_TRUE(replicas_.cancelled("r#2"));
  replicas_.complete("r#1", "late");
  replicas_.complete("r#2", "late");
  run_ready();
  EXPECT_EQ(hedge.snapshot().calls, 1u);
  EXPECT_EQ(hedge.snapshot().won_by_hedge, 0u);
}

// Thousands of calls on a thread pool, each on its strand, their attempts completing on other
// threads at random (success, failure, rejection, slowly), some callers cancelling, while a
// driver thread moves the clock: every caller is answered once, the counters add up, every
// call's state is freed and no delay is left on the clock.
TEST_F(AsyncHedgeTest, ConcurrentCallsAreEachAnsweredOnceAndFreeEverything) {
  constexpr int kCalls = 2000;
  r4c::Hedge& hedge = make(r4c::HedgeConfig().delay(1ms).max_attempts(3));

  struct Attempt {
    virtual ~Attempt() = default;
    virtual void complete(int kind) = 0;  // 0 success, 1 failure, 2 rejection, 3 aborted
    std::shared_ptr<std::atomic<bool>> cancelled = std::make_shared<std::atomic<bool>>(false);
    int delays = 0;  // times it is put back before completing
  };
  struct Work {
    std::mutex mutex;
    std::vector<std::unique_ptr<Attempt>> attempts;
    std::mt19937 random{static_cast<std::uint32_t>(r4c::testing::test_seed())};
  };
  auto work = std::make_shared<Work>();
  auto sentinel = std::make_shared<int>(0);  // one copy in each call's state (in the op)

  auto op = [work, sentinel](auto handler) {
    using Handler = decltype(handler);
    struct Held final : Attempt {
      explicit Held(Handler h) : handler(std::move(h)) {}
      void complete(int kind) override {
        switch (kind) {
          case 0:
            std::move(handler)(std::exception_ptr(), std::string("ok"));
            break;
          case 1:
            std::move(handler)(std::make_exception_ptr(SlowReplica("failed")), std::string());
            break;
          case 2:
            std::move(handler)(std::make_exception_ptr(r4c::BulkheadFullException("full")),
                               std::string());
            break;
          default:
            std::move(handler)(asio::error::make_error_code(asio::error::operation_aborted),
                               std::string());
        }
      }
      Handler handler;
    };
    auto held = std::make_unique<Held>(std::move(handler));
    auto slot = asio::get_associated_cancellation_slot(held->handler);
    slot.assign([flag = held->cancelled](asio::cancellation_type) { flag->store(true); });
    std::lock_guard<std::mutex> lock(work->mutex);
    held->delays = static_cast<int>(work->random() % 4);
    work->attempts.push_back(std::move(held));
  };

  asio::thread_pool pool(3);
  std::vector<std::unique_ptr<asio::cancellation_signal>> cancels;
  std::vector<asio::strand<asio::thread_pool::executor_type>> strands;
  std::vector<std::unique_ptr<std::atomic<int>>> answers;
  for (int i = 0; i < kCalls; ++i) {
    cancels.push_back(std::make_unique<asio::cancellation_signal>());
    strands.push_back(asio::make_strand(pool));
    answers.push_back(std::make_unique<std::atomic<int>>(0));
  }
  std::atomic<int> answered{0};
  std::atomic<int> failures{0};
  std::atomic<bool> stop{false};

  // Completes attempts on their own threads, in random order.
  const std::uint64_t seed = r4c::testing::test_seed();
  std::vector<std::thread> completers;
  for (int t = 0; t < 2; ++t) {
    completers.emplace_back([&, t] {
      std::mt19937 random(static_cast<std::uint32_t>(seed + t));
      for (;;) {
        std::unique_ptr<Attempt> attempt;
        {
          std::lock_guard<std::mutex> lock(work->mutex);
          if (!work->attempts.empty()) {
            const std::size_t at = random() % work->attempts.size();
            std::swap(work->attempts[at], work->attempts.back());
            attempt = std::move(work->attempts.back());
            work->attempts.pop_back();
            if (!attempt->cancelled->load() && attempt->delays-- > 0) {
              work->attempts.push_back(std::move(attempt));  // slow: later
            }
          } else if (stop.load()) {
            return;
          }
        }
        if (!attempt) {
          std::this_thread::yield();
          continue;
        }
        const unsigned draw = random() % 10;
        const int kind = attempt->cancelled->load() ? 3 : draw < 5 ? 0 : draw < 9 ? 1 : 2;
        attempt->complete(kind);
      }
    });
  }
  std::thread driver([&] {
    const auto give_up = std::chrono::steady_clock::now() + 60s;
    while (answered.load() < kCalls && std::chrono::steady_clock::now() < give_up) {
      clock_->advance(1ms);
      std::this_thread::yield();
    }
  });

  std::mt19937 random(static_cast<std::uint32_t>(r4c::testing::test_seed()));
  for (int i = 0; i < kCalls; ++i) {
    asio::post(strands[i], [&, i] {
      hedge.async_execute<std::string>(
          op, asio::bind_cancellation_slot(
                  cancels[i]->slot(),
                  asio::bind_executor(strands[i], [&, i](std::exception_ptr e, std::string) {
                    answers[i]->fetch_add(1);
                    if (e) failures.fetch_add(1);
                    answered.fetch_add(1);
                  })));
    });
    if (random() % 8 == 0) {
      // The caller's signal is emitted where the caller runs: on its strand.
      asio::post(strands[i], [&, i] { cancels[i]->emit(asio::cancellation_type::terminal); });
    }
  }
  driver.join();
  // Every call is answered, so nothing launches any more once the strands are idle; then the
  // completers drain the attempts still pending (losers, late ones) and stop.
  pool.join();
  wait_until([&] {
    std::lock_guard<std::mutex> lock(work->mutex);
    return work->attempts.empty();
  });
  stop = true;
  for (std::thread& completer : completers) completer.join();

  for (int i = 0; i < kCalls; ++i) ASSERT_EQ(answers[i]->load(), 1) << "call " << i;
  const r4c::HedgeSnapshot snapshot = hedge.snapshot();
  EXPECT_EQ(snapshot.calls, static_cast<std::uint64_t>(kCalls));
  EXPECT_EQ(snapshot.failed, static_cast<std::uint64_t>(failures.load()));
  EXPECT_GT(snapshot.hedges_launched, 0u);
  EXPECT_LE(snapshot.won_by_hedge, snapshot.hedges_launched);
  EXPECT_EQ(sentinel.use_count(), 2);  // `op` and this: every call's state was freed
}

}  // namespace
