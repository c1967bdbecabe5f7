// SPDX-License-Identifier: Apache-2.0
// What every async policy promises, as a typed suite over each policy alone inside an adaptive
// limit, on a ManualClock: a cancelled call is answered at once with operation_aborted, reaches
// its operation and records nothing; a completion that comes first wins over a later
// cancellation; coroutines await results and can be cancelled by a race; void operations work;
// an operation abandoned with its context ends the call without an answer. Each time nothing is
// left behind: no slot, no wait, no timer. What is particular to one policy stays in its own
// file (tests/asio/<policy>_test.cpp).
#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <chrono>
#include <exception>
#include <future>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "async_support.hpp"
#include "policy_cases.hpp"
#include "r4c/asio.hpp"

namespace {

using namespace r4c::testing;  // the async suites' shared backend and answers

using namespace std::chrono_literals;

template <class Case>
class AsyncContractTest : public ::testing::Test {
 protected:
  AsyncContractTest()
      : pipeline_(case_pipeline<Case>(registry_, "orders")),
        void_pipeline_(case_pipeline<Case, void>(registry_, "audit")) {}

  // Nothing held, nothing scheduled, `completed` calls recorded, even once every timer could
  // have fired.
  void expect_left_behind_nothing(std::uint64_t completed) {
    r4c::testing::expect_released(*pipeline_);
    EXPECT_EQ(clock_->pending_tasks(), 0u);
    clock_->advance(1h);
    Case::expect_counted(*pipeline_, completed);
  }

  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
  r4c::ResilienceRegistry registry_ = r4c::testing::registry(clock_).build();
  std::unique_ptr<r4c::Pipeline<std::string>> pipeline_;
  std::unique_ptr<r4c::Pipeline<void>> void_pipeline_;
  asio::io_context io_;  // destroyed after the backend's pending operations
  r4c::testing::AsyncBackend backend_;
};

TYPED_TEST_SUITE(AsyncContractTest, r4c::testing::PolicyCases);

// Cancelling a running call: answered at once with operation_aborted, the cancellation
// forwarded to the operation, the late completion ignored, nothing recorded.
TYPED_TEST(AsyncContractTest, CancellingARunningCallAnswersAtOnceAndReachesTheOperation) {
  asio::cancellation_signal cancel;
  Answer answer;
  this->pipeline_->async_execute(
      this->backend_.place("a"),
      asio::bind_cancellation_slot(cancel.slot(),
                                   asio::bind_executor(this->io_, answer.handler())));
  ASSERT_EQ(this->pipeline_->adaptive_limit()->in_flight(), 1);
  cancel.emit(asio::cancellation_type::terminal);
  EXPECT_EQ(this->pipeline_->adaptive_limit()->in_flight(), 0);  // freed at once
  EXPECT_TRUE(this->backend_.cancelled("a"));
  this->io_.run();
  ASSERT_EQ(answer.calls, 1);
  EXPECT_TRUE(aborted(answer.failure));

  this->clock_->advance(5s);
  this->backend_.complete("a", "too late");
  this->io_.restart();
  this->io_.run();
  EXPECT_EQ(answer.calls, 1);
  this->expect_left_behind_nothing(0);
}

TYPED_TEST(AsyncContractTest, ACompletionBeforeTheCancellationWins) {
  asio::cancellation_signal cancel;
  Answer answer;
  this->pipeline_->async_execute(this->backend_.place("a"),
                                 asio::bind_cancellation_slot(cancel.slot(), answer.handler()));
  this->backend_.complete("a", "done");
  cancel.emit(asio::cancellation_type::terminal);  // the slot was cleared: nothing happens
  ASSERT_TRUE(succeeded_with(answer, "done"));
  this->expect_left_behind_nothing(1);
}

TYPED_TEST(AsyncContractTest, ACoroutineAwaitsTheResult) {
  std::string result;
  spawn(this->io_, [&]() -> asio::awaitable<void> {
    result =
        co_await this->pipeline_->async_execute(this->backend_.place("a"), asio::use_awaitable);
  });
  while (!this->backend_.has("a")) this->io_.run_one();
  EXPECT_EQ(this->pipeline_->adaptive_limit()->in_flight(), 1);
  this->backend_.complete("a", "placed");
  this->io_.run();
  EXPECT_EQ(result, "placed");
  this->expect_left_behind_nothing(1);
}

// A coroutine cancelled through awaitable_operators: an Asio timer (real time, 1 ms: the race
// needs a real loser) wins.
TYPED_TEST(AsyncContractTest, ACoroutineCancelledByARaceLeavesNothingBehind) {
  using namespace asio::experimental::awaitable_operators;
  bool timer_won = false;
  spawn(this->io_, [&]() -> asio::awaitable<void> {
    asio::steady_timer timer(this->io_, 1ms);
    auto outcome =
        co_await (this->pipeline_->async_execute(this->backend_.place("a"), asio::use_awaitable) ||
                  timer.async_wait(asio::use_awaitable));
    timer_won = outcome.index() == 1;
  });
  this->io_.run();
  EXPECT_TRUE(timer_won);
  EXPECT_TRUE(this->backend_.cancelled("a"));
  this->backend_.complete("a", "late");  // ignored
  this->expect_left_behind_nothing(0);
}

TYPED_TEST(AsyncContractTest, VoidOperationsWork) {
  auto done = [](auto handler) { std::move(handler)(std::error_code()); };
  Answer answer;
  this->void_pipeline_->async_execute(
      done, [&](std::exception_ptr e) { answer.handler()(std::move(e), "void"); });
  ASSERT_EQ(answer.calls, 1);
  EXPECT_FALSE(answer.failure);
  std::future<void> future = this->void_pipeline_->async_execute(done, asio::use_future);
  EXPECT_NO_THROW(future.get());
  r4c::testing::expect_released(*this->void_pipeline_);
  EXPECT_EQ(this->clock_->pending_tasks(), 0u);
  TypeParam::expect_counted(*this->void_pipeline_, 2);
}

// An operation destroyed without completing (its context went away) ends the call without an
// answer: the caller's handler is destroyed uncalled.
TYPED_TEST(AsyncContractTest, AnAbandonedOperationEndsTheCallAndLeavesNothingBehind) {
  {
    asio::io_context io;
    this->pipeline_->async_execute(
        [&io](auto handler) {
          asio::post(io,
                     [h = std::move(handler)]() mutable { std::move(h)(std::error_code(), "x"); });
        },
        [](std::exception_ptr, std::string) { ADD_FAILURE() << "called"; });
    EXPECT_EQ(this->pipeline_->adaptive_limit()->in_flight(), 1);
  }
  this->expect_left_behind_nothing(0);
}

}  // namespace
