// SPDX-License-Identifier: Apache-2.0
// The adaptive limit's asynchronous face (<r4c/asio.hpp>): the async rules of
// resilience4cata 0.6.0's "Adaptive limit" page, each with a test, in the three styles (callback,
// future, coroutine).
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
#include <future>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "async_support.hpp"
#include "r4c/registry.hpp"

namespace {

using r4c::testing::refused_when_full;
using r4c::testing::spawn;

using namespace std::chrono_literals;

// 6. The limit schedules nothing: ManualClockTest checks that no task is left on the clock.
class AsyncLimitTest : public r4c::testing::AsyncRegistryTest {
 protected:
  r4c::AdaptiveLimit& limit_ = registry_.adaptive_limit_policy("orders#placeAsync", "orders-async",
                                                               "", {.initial_limit = 2});
  asio::io_context io_;  // where the callbacks and coroutines run

  // In a coroutine: whether the call `third()` awaits is refused while "a" and "b" fill limit_.
  template <class Third>
  asio::awaitable<bool> refuses_when_full(Third third) {
    return refused_when_full<r4c::LimitExceededException>(limit_, backend_, std::move(third));
  }
};

// 5. The ManualClock scenario of resilience4cata 0.6.0's "Adaptive limit" page, ported.
TEST_F(AsyncLimitTest, TwoPendingOperationsHoldBothSlotsAndTheThirdFailsAtOnce) {
  std::future<std::string> a =
      limit_.async_execute<std::string>(backend_.place("a"), asio::use_future);
  std::future<std::string> b =
      limit_.async_execute<std::string>(backend_.place("b"), asio::use_future);
  std::future<std::string> c =
      limit_.async_execute<std::string>(backend_.place("c"), asio::use_future);
  ASSERT_EQ(c.wait_for(0s), std::future_status::ready);  // full: rejected at once
  EXPECT_THROW(c.get(), r4c::LimitExceededException);
  EXPECT_FALSE(backend_.has("c"));  // the operation never started
  EXPECT_EQ(limit_.in_flight(), 2);

  place_a_and_b_after_one_second(a, b);
  EXPECT_EQ(registry_.adaptive_limit("orders-async").snapshot().rejected, 1u);
  EXPECT_EQ(limit_.in_flight(), 0);
}

// 1. The slot is held until the operation completes; its latency is measured to completion.
TEST_F(AsyncLimitTest, ACallbackCallHoldsItsSlotUntilItsOperationCompletes) {
  std::exception_ptr failure;
  std::string result;
  int calls = 0;
  limit_.async_execute<std::string>(backend_.place("a"), [&](std::exception_ptr e, std::string r) {
    failure = e;
    result = std::move(r);
    ++calls;
  });
  EXPECT_EQ(limit_.in_flight(), 1);
  clock_->advance(3s);
  EXPECT_EQ(calls, 0);
  backend_.complete("a", "done");
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(failure);
  EXPECT_EQ(result, "done");
  EXPECT_EQ(limit_.in_flight(), 0);
  EXPECT_EQ(limit_.snapshot().window_latency, 3s);
}

// An error code from the operation reaches the caller as asio::system_error; a timed_out code
// is a drop (drop_on_error's default), other codes free the slot only.
TEST_F(AsyncLimitTest, ErrorCodesBecomeSystemErrorsAndTimedOutIsADrop) {
  auto a = limit_.async_execute<std::string>(backend_.place("a"), asio::use_future);
  clock_->advance(1s);
  backend_.fail("a", asio::error::make_error_code(asio::error::timed_out));
  EXPECT_EQ(r4c::testing::error_code_of(a), asio::error::timed_out);
  EXPECT_TRUE(limit_.snapshot().window_dropped);

  auto b = limit_.async_execute<std::string>(backend_.place("b"), asio::use_future);
  clock_->advance(1s);
  backend_.fail("b", asio::error::make_error_code(asio::error::connection_refused));
  EXPECT_THROW(b.get(), asio::system_error);
  EXPECT_EQ(limit_.snapshot().windows, 1u);  // not a sample: the window did not end
  EXPECT_EQ(limit_.in_flight(), 0);
}

TEST_F(AsyncLimitTest, AnExceptionFromTheOperationIsClassifiedByDropOn) {
  auto a = limit_.async_execute<std::string>(backend_.place("a"), asio::use_future);
  clock_->advance(1s);
  backend_.fail("a", std::make_exception_ptr(r4c::CallTimeoutException("slow")));
  EXPECT_THROW(a.get(), r4c::CallTimeoutException);
  EXPECT_TRUE(limit_.snapshot().window_dropped);
  EXPECT_EQ(limit_.snapshot().window_latency, 1s);
}

// 3. Cancelling through the caller's slot completes it at once with operation_aborted, frees
// the slot without a sample, and forwards the cancellation to the operation.
// 4. The operation's completion after that is ignored.
TEST_F(AsyncLimitTest, CancellingCompletesAtOnceFreesTheSlotAndForwardsTheCancellation) {
  asio::cancellation_signal cancel;
  std::exception_ptr failure;
  int calls = 0;
  limit_.async_execute<std::string>(
      backend_.place("a"),
      asio::bind_cancellation_slot(cancel.slot(),
                                   asio::bind_executor(io_, [&](std::exception_ptr e, std::string) {
                                     failure = e;
                                     ++calls;
                                   })));
  EXPECT_EQ(limit_.in_flight(), 1);
  cancel.emit(asio::cancellation_type::terminal);
  EXPECT_EQ(limit_.in_flight(), 0);  // freed at once
  EXPECT_TRUE(backend_.cancelled("a"));
  io_.run();
  ASSERT_EQ(calls, 1);
  EXPECT_TRUE(r4c::testing::aborted(failure));
  clock_->advance(1s);
  backend_.complete("a", "too late");  // 4. ignored
  io_.restart();
  io_.run();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(limit_.snapshot().windows, 0u);  // no sample
  EXPECT_EQ(limit_.snapshot().samples, 0u);
}

// 2 and the coroutine style: a full limit is an exception in the coroutine.
TEST_F(AsyncLimitTest, CoroutinesAwaitTheResultOrTheRejection) {
  std::string first;
  bool rejected = false;
  spawn(io_, [&]() -> asio::awaitable<void> {
    rejected = co_await refuses_when_full([&] {
      return limit_.async_execute<std::string>(backend_.place("c"), asio::use_awaitable);
    });
    first = co_await limit_.async_execute<std::string>(backend_.place("d"), asio::use_awaitable);
  });
  io_.run_one();  // runs until the coroutine waits for "d"
  while (!backend_.has("d")) io_.run_one();
  EXPECT_TRUE(rejected);
  backend_.complete("d", "placed d");
  io_.run();
  EXPECT_EQ(first, "placed d");
  EXPECT_EQ(limit_.in_flight(), 0);
}

TEST_F(AsyncLimitTest, CoExecuteRunsACoroutineUnderTheLimit) {
  std::string result;
  bool rejected = false;
  spawn(io_, [&]() -> asio::awaitable<void> {
    rejected = co_await refuses_when_full(
        [&] { return limit_.co_execute([]() -> asio::awaitable<std::string> { co_return "x"; }); });
    result = co_await limit_.co_execute([&]() -> asio::awaitable<std::string> {
      EXPECT_EQ(limit_.in_flight(), 1);
      clock_->advance(2s);
      co_return "placed";
    });
  });
  io_.run();
  EXPECT_TRUE(rejected);
  EXPECT_EQ(result, "placed");
  EXPECT_EQ(limit_.in_flight(), 0);
  // The window holds a and b (0 s each) and the coroutine's call (2 s).
  EXPECT_EQ(limit_.snapshot().window_samples, 3u);
  EXPECT_EQ(limit_.snapshot().window_latency, std::chrono::nanoseconds(2s) / 3);
}

// Calls the caller cannot cancel are owned by their operation alone (no reference counting):
// thousands of them, completed, failed or abandoned on a pool's threads and answered on a
// strand or inline, each answer exactly once and every slot comes back.
TEST(AsyncLimitPoolTest, UncancellableCallsCompletedOnAPoolAnswerOnceAndReturnEverySlot) {
  constexpr int kCalls = 4000;
  r4c::ResilienceRegistry registry =
      r4c::testing::registry(std::make_shared<r4c::ManualClock>()).build();  // no window ends
  r4c::AdaptiveLimit& limit = registry.adaptive_limit_policy(
      "stress#call", "stress", "", {.initial_limit = 64, .max_limit = 64});
  asio::thread_pool pool(4);
  auto strand = asio::make_strand(pool);
  enum Outcome : int { kNone, kResult, kFailure, kRejected };
  std::vector<std::atomic<int>> answers(kCalls);
  std::vector<std::atomic<int>> outcomes(kCalls);
  std::vector<int> behaviours(kCalls);
  std::mt19937 random(static_cast<std::uint32_t>(r4c::testing::test_seed()));
  for (int call = 0; call < kCalls; ++call) {
    const int behaviour = static_cast<int>(random() % 5);  // 0-1 ok, 2 throw, 3 code, 4 abandon
    behaviours[static_cast<std::size_t>(call)] = behaviour;
    auto op = [&pool, behaviour](auto handler) {
      asio::post(pool, [handler = std::move(handler), behaviour]() mutable {
        if (behaviour == 2) {
          std::move(handler)(std::make_exception_ptr(std::runtime_error("out of stock")), 0);
        } else if (behaviour == 3) {
          std::move(handler)(std::make_error_code(std::errc::connection_reset), 0);
        } else if (behaviour < 2) {
          std::move(handler)(std::error_code(), 1);
        }  // 4: the handler is destroyed uncalled
      });
    };
    auto on_answer = [&, call](std::exception_ptr e, int value) {
      const auto index = static_cast<std::size_t>(call);
      answers[index].fetch_add(1);
      Outcome outcome = value == 1 ? kResult : kFailure;
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const r4c::LimitExceededException&) {
          outcome = kRejected;
        } catch (...) {
          outcome = kFailure;
        }
      }
      outcomes[index].store(outcome);
    };
    if (call % 2 == 0) {
      limit.async_execute<int>(op, asio::bind_executor(strand, on_answer));
    } else {
      limit.async_execute<int>(op, on_answer);  // answered inline on the pool's thread
    }
  }
  pool.join();
  int results = 0, failures = 0, rejected = 0;
  for (int call = 0; call < kCalls; ++call) {
    const auto index = static_cast<std::size_t>(call);
    const int got = answers[index].load();
    const int outcome = outcomes[index].load();
    if (outcome == kRejected) {
      EXPECT_EQ(got, 1) << "call " << call;  // refused before its operation started
      ++rejected;
      continue;
    }
    if (behaviours[index] == 4) {
      EXPECT_EQ(got, 0) << "call " << call;  // abandoned: destroyed uncalled
      continue;
    }
    const Outcome expected = behaviours[index] < 2 ? kResult : kFailure;  // 2 and 3 fail
    EXPECT_EQ(got, 1) << "call " << call;
    EXPECT_EQ(outcome, expected) << "call " << call;
    ++(expected == kResult ? results : failures);
  }
  EXPECT_GT(results, 0);
  EXPECT_GT(failures, 0);
  EXPECT_EQ(limit.in_flight(), 0);
}

}  // namespace
