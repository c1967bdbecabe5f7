// SPDX-License-Identifier: Apache-2.0
// The timeout's asynchronous face (<r4c/asio.hpp>): the deadline runs on the timeout's clock,
// so a ManualClock's advance() fires it; callback, future and coroutine styles.
#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/thread_pool.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "async_support.hpp"
#include "r4c/asio/timeout.hpp"

namespace {

using namespace r4c::testing;  // the async suites' shared backend and answers

using namespace std::chrono_literals;

class AsyncTimeoutTest : public AsyncPolicyTest<r4c::Timeout> {
 protected:
  AsyncTimeoutTest()
      : AsyncPolicyTest([](const std::shared_ptr<r4c::ManualClock>& clock) {
          return r4c::Timeout("search", r4c::TimeoutConfig().timeout(2s), clock);
        }) {}

  r4c::Timeout& timeout_ = policy_;
};

TEST_F(AsyncTimeoutTest, ACompletionInTimePassesThroughAndUnschedulesTheDeadline) {
  Answer answer;
  timeout_.async_execute<std::string>(backend_.place("a"), answer.handler());
  EXPECT_EQ(clock_->pending_tasks(), 1u);  // armed when the operation started
  clock_->advance(1999ms);
  EXPECT_EQ(answer.calls, 0);
  backend_.complete("a", "hits");
  EXPECT_EQ(clock_->pending_tasks(), 0u);
  ASSERT_TRUE(succeeded_with(answer, "hits"));
  clock_->advance(1h);
  EXPECT_EQ(answer.calls, 1);
  EXPECT_EQ(timeout_.snapshot().timed_out, 0u);
}

TEST_F(AsyncTimeoutTest, FailuresInTimePassThroughUnchanged) {
  std::future<std::string> a =
      timeout_.async_execute<std::string>(backend_.place("a"), asio::use_future);
  std::future<std::string> b =
      timeout_.async_execute<std::string>(backend_.place("b"), asio::use_future);
  EXPECT_EQ(clock_->pending_tasks(), 2u);
  clock_->advance(1s);
  expect_failures_pass_through<NotFound>(a, b);
  EXPECT_EQ(timeout_.snapshot().timed_out, 0u);
}

// The deadline fires from advance(): the caller gets this timeout's CallTimeoutException
// (counted), the operation is cancelled through its slot, and its late completion is ignored.
TEST_F(AsyncTimeoutTest, TheDeadlineFiresFromAdvanceAndCancelsTheOperation) {
  Answer answer;
  timeout_.async_execute<std::string>(backend_.place("a"),
                                      asio::bind_executor(io_, answer.handler()));
  clock_->advance(1999ms);
  io_.poll();
  EXPECT_EQ(answer.calls, 0);
  io_.restart();  // poll() found no work and stopped it
  clock_->advance(1ms);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
  io_.run();
  ASSERT_EQ(answer.calls, 1);
  ASSERT_TRUE(holds_exception<r4c::CallTimeoutException>(answer.failure));
  try {
    std::rethrow_exception(answer.failure);
  } catch (const r4c::CallTimeoutException& e) {
    EXPECT_NE(std::string(e.what()).find("timeout 'search'"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(backend_.cancelled("a"));
  EXPECT_EQ(timeout_.snapshot().timed_out, 1u);

  backend_.complete("a", "too late");  // ignored
  io_.restart();
  io_.run();
  EXPECT_EQ(answer.calls, 1);
  EXPECT_EQ(timeout_.snapshot().timed_out, 1u);
}

// Like an Asio timer, an armed deadline is work on the caller's executor: an io_context whose
// only pending thing is the deadline does not run out of work.
TEST_F(AsyncTimeoutTest, AnArmedDeadlineKeepsTheCallersContextBusy) {
  Answer answer;
  std::function<void()> keep;  // an operation that registers no work of its own
  timeout_.async_execute<std::string>(
      [&keep](auto handler) {
        keep = [h = std::make_shared<decltype(handler)>(std::move(handler))] {};
      },
      asio::bind_executor(io_, answer.handler()));
  io_.poll();
  EXPECT_FALSE(io_.stopped());
  clock_->advance(2s);
  io_.run();  // returns once the caller is answered: the work is given back
  ASSERT_EQ(answer.calls, 1);
  EXPECT_TRUE(holds_exception<r4c::CallTimeoutException>(answer.failure));
  keep = nullptr;  // the operation's handler, destroyed late: nothing more happens
}

// The deadline decides at the instant it fires: a completion that arrives after it, even before
// the caller's executor has run, is discarded like the synchronous path's late result.
TEST_F(AsyncTimeoutTest, ACompletionAfterTheDeadlineFiredIsIgnored) {
  Answer answer;
  timeout_.async_execute<std::string>(backend_.place("a"),
                                      asio::bind_executor(io_, answer.handler()));
  clock_->advance(2s);
  backend_.complete("a", "late");
  io_.run();
  ASSERT_EQ(answer.calls, 1);
  EXPECT_TRUE(holds_exception<r4c::CallTimeoutException>(answer.failure));
  EXPECT_EQ(timeout_.snapshot().timed_out, 1u);
}

TEST_F(AsyncTimeoutTest, AFutureFailsWithTheTimeout) {
  std::future<std::string> a =
      timeout_.async_execute<std::string>(backend_.place("a"), asio::use_future);
  clock_->advance(5s);
  EXPECT_THROW(a.get(), r4c::CallTimeoutException);  // answered from asio's system executor
  EXPECT_TRUE(backend_.cancelled("a"));
  EXPECT_EQ(timeout_.snapshot().timed_out, 1u);
}

TEST_F(AsyncTimeoutTest, ACancellationAfterTheDeadlineFiredDoesNothing) {
  asio::cancellation_signal cancel;
  Answer answer;
  timeout_.async_execute<std::string>(backend_.place("a"), on_io(answer, cancel));
  clock_->advance(2s);
  cancel.emit(asio::cancellation_type::terminal);  // the deadline already claimed the call
  io_.run();
  ASSERT_EQ(answer.calls, 1);
  EXPECT_TRUE(holds_exception<r4c::CallTimeoutException>(answer.failure));
  EXPECT_EQ(timeout_.snapshot().timed_out, 1u);
}

TEST_F(AsyncTimeoutTest, CoroutinesAwaitTheResultOrTheTimeout) {
  std::string first;
  bool timed_out = false;
  spawn(io_, [&]() -> asio::awaitable<void> {
    first = co_await timeout_.async_execute<std::string>(backend_.place("a"), asio::use_awaitable);
    timed_out = co_await co_throws<r4c::CallTimeoutException>([&] {
      return timeout_.async_execute<std::string>(backend_.place("b"), asio::use_awaitable);
    });
  });
  while (!backend_.has("a")) io_.run_one();
  clock_->advance(1s);
  backend_.complete("a", "a");
  while (!backend_.has("b")) io_.run_one();
  clock_->advance(2s);
  io_.run();
  EXPECT_EQ(first, "a");
  EXPECT_TRUE(timed_out);
  EXPECT_TRUE(backend_.cancelled("b"));
  EXPECT_EQ(timeout_.snapshot().timed_out, 1u);
}

// A void operation that never completes: its future fails with the timeout, its late
// completion is ignored.
TEST_F(AsyncTimeoutTest, AVoidFutureFailsWithTheTimeout) {
  std::function<void(std::error_code)> stored;
  auto never = [&](auto handler) {
    stored = [h = std::make_shared<decltype(handler)>(std::move(handler))](std::error_code c) {
      (std::move(*h))(c);
    };
  };
  std::future<void> f = timeout_.async_execute<void>(never, asio::use_future);
  clock_->advance(2s);
  EXPECT_THROW(f.get(), r4c::CallTimeoutException);
  stored(std::error_code());  // late: ignored
  stored = nullptr;
}

// A deadline that passes while the operation is being started (here the operation itself
// advances the clock) answers only once the operation has started.
TEST_F(AsyncTimeoutTest, ADeadlinePassingWhileTheOperationStartsWaitsForIt) {
  Answer answer;
  auto place = backend_.place("a");
  timeout_.async_execute<std::string>(
      [&](auto handler) {
        clock_->advance(3s);  // fires the deadline inside the initiation
        place(std::move(handler));
      },
      asio::bind_executor(io_, answer.handler()));
  io_.run();
  ASSERT_EQ(answer.calls, 1);
  EXPECT_TRUE(holds_exception<r4c::CallTimeoutException>(answer.failure));
  EXPECT_TRUE(backend_.cancelled("a"));  // its handler was in place for the cancellation
  EXPECT_EQ(timeout_.snapshot().timed_out, 1u);
}

TEST_F(AsyncTimeoutTest, AnOperationThatThrowsLeavesNoDeadlineAndIsNotCounted) {
  Answer answer;
  EXPECT_THROW(timeout_.async_execute<std::string>([&](auto) -> void { throw NotFound(); },
                                                   answer.handler()),
               NotFound);
  EXPECT_THROW(timeout_.async_execute<std::string>(
                   [&](auto) -> void {
                     clock_->advance(3s);  // the deadline passes first, then the op throws
                     throw NotFound();
                   },
                   asio::bind_executor(io_, answer.handler())),
               NotFound);
  io_.run();
  EXPECT_EQ(answer.calls, 0);  // the handlers were destroyed uncalled
  EXPECT_EQ(timeout_.snapshot().timed_out, 0u);
}

// Real time, several threads: each call is answered once, every timeout it answers is counted
// and no other, and no deadline is left behind. Half the operations complete after a random
// delay (racing their deadline); the other half only when the timeout cancels them.
TEST(AsyncTimeoutStressTest, ConcurrentCallsRacingTheirDeadlines) {
  auto clock = std::make_shared<r4c::SystemClock>();
  r4c::Timeout timeout("race", r4c::TimeoutConfig().timeout(300us), clock);
  asio::thread_pool pool(2);
  constexpr int kCalls = 2000;
  std::atomic<int> answers{0};
  std::atomic<int> timeouts{0};
  std::atomic<int> duplicates{0};
  int hanging = 0;
  std::vector<std::atomic<bool>> answered(kCalls);
  std::mt19937 random(static_cast<std::uint32_t>(r4c::testing::test_seed()));
  for (int i = 0; i < kCalls; ++i) {
    auto answer = asio::bind_executor(pool, [&, i](std::exception_ptr e, std::string) {
      if (answered[i].exchange(true)) ++duplicates;
      if (e && holds_exception<r4c::CallTimeoutException>(e)) ++timeouts;
      ++answers;
    });
    if (random() % 2 == 0) {
      const auto delay = std::chrono::microseconds(random() % 600);
      timeout.async_execute<std::string>(
          [&pool, delay](auto handler) {
            auto timer = std::make_shared<asio::steady_timer>(pool, delay);
            timer->async_wait([timer, h = std::move(handler)](std::error_code) mutable {
              std::move(h)(std::error_code(), "ok");
            });
          },
          answer);
    } else {
      ++hanging;
      timeout.async_execute<std::string>(
          [](auto handler) {
            // Completes only through the cancellation the timeout forwards.
            auto slot = asio::get_associated_cancellation_slot(handler);
            auto stored = std::make_shared<std::optional<decltype(handler)>>(std::move(handler));
            slot.assign([stored](asio::cancellation_type) {
              auto inner = std::move(**stored);
              stored->reset();
              std::move(inner)(asio::error::make_error_code(asio::error::operation_aborted), "");
            });
          },
          answer);
    }
  }
  pool.join();
  EXPECT_EQ(answers.load(), kCalls);
  EXPECT_EQ(duplicates.load(), 0);
  EXPECT_GE(timeouts.load(), hanging);
  EXPECT_EQ(timeout.snapshot().timed_out, static_cast<std::uint64_t>(timeouts.load()));
  EXPECT_EQ(clock->pending_tasks(), 0u);
}

}  // namespace
