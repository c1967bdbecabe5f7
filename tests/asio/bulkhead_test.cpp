// SPDX-License-Identifier: Apache-2.0
// The bulkhead's asynchronous face (<r4c/asio.hpp>): a call holds its slot until its operation
// completes, a full bulkhead fails at once, a cancelled call frees its slot at once; callback,
// future and coroutine styles.
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
#include "r4c/asio/bulkhead.hpp"
#include "r4c/clock.hpp"

namespace {

using namespace r4c::testing;  // the async suites' shared backend and answers

using namespace std::chrono_literals;

// The bulkhead schedules nothing; a ManualClock is still what the other async tests use.
class AsyncBulkheadTest : public AsyncPolicyTest<r4c::Bulkhead> {
 protected:
  AsyncBulkheadTest()
      : AsyncPolicyTest([](const auto&) {
          return r4c::Bulkhead("pool", r4c::BulkheadConfig().max_concurrent(2));
        }) {}

  r4c::Bulkhead& bulkhead_ = policy_;
};

TEST_F(AsyncBulkheadTest, ACallHoldsItsSlotUntilItsOperationCompletes) {
  Answer answer;
  bulkhead_.async_execute<std::string>(backend_.place("a"), answer.handler());
  EXPECT_EQ(backend_.started(), 1);
  EXPECT_EQ(bulkhead_.in_flight(), 1);
  clock_->advance(3s);
  EXPECT_EQ(bulkhead_.in_flight(), 1);  // still held: the operation has not completed
  EXPECT_EQ(answer.calls, 0);
  backend_.complete("a", "rows");
  EXPECT_EQ(bulkhead_.in_flight(), 0);
  ASSERT_TRUE(succeeded_with(answer, "rows"));
}

TEST_F(AsyncBulkheadTest, FailuresPassThroughUnchangedAndFreeTheSlot) {
  std::future<std::string> a =
      bulkhead_.async_execute<std::string>(backend_.place("a"), asio::use_future);
  std::future<std::string> b =
      bulkhead_.async_execute<std::string>(backend_.place("b"), asio::use_future);
  EXPECT_EQ(bulkhead_.in_flight(), 2);
  backend_.fail("a", std::make_exception_ptr(NotFound()));
  EXPECT_EQ(bulkhead_.in_flight(), 1);
  backend_.fail("b", asio::error::make_error_code(asio::error::connection_refused));
  EXPECT_EQ(bulkhead_.in_flight(), 0);
  EXPECT_THROW(a.get(), NotFound);
  EXPECT_EQ(error_code_of(b), asio::error::connection_refused);
  EXPECT_EQ(bulkhead_.snapshot().rejected, 0u);
}

// A full bulkhead fails at once (a ready future), without starting the operation.
TEST_F(AsyncBulkheadTest, AFullBulkheadFailsAtOnceWithoutStartingTheOperation) {
  auto a = bulkhead_.async_execute<std::string>(backend_.place("a"), asio::use_future);
  auto b = bulkhead_.async_execute<std::string>(backend_.place("b"), asio::use_future);
  std::future<std::string> c =
      bulkhead_.async_execute<std::string>(backend_.place("c"), asio::use_future);
  ASSERT_EQ(c.wait_for(0s), std::future_status::ready);
  EXPECT_THROW(c.get(), r4c::BulkheadFullException);
  EXPECT_FALSE(backend_.has("c"));
  EXPECT_EQ(backend_.started(), 2);
  EXPECT_EQ(bulkhead_.in_flight(), 2);
  EXPECT_EQ(bulkhead_.snapshot().rejected, 1u);

  // A callback with an executor of its own is answered through it, never inside the call.
  expect_refused_through_io<r4c::BulkheadFullException>("d");
  EXPECT_FALSE(backend_.has("d"));

  backend_.complete("a", "a");
  backend_.complete("b", "b");
  EXPECT_EQ(a.get(), "a");
  EXPECT_EQ(b.get(), "b");
  EXPECT_EQ(bulkhead_.in_flight(), 0);
}

// Cancelling: answered at once with operation_aborted, the slot freed at once, the cancellation
// forwarded, the late completion ignored.
TEST_F(AsyncBulkheadTest, CancellingCompletesAtOnceFreesTheSlotAndForwardsTheCancellation) {
  asio::cancellation_signal cancel;
  Answer answer;
  bulkhead_.async_execute<std::string>(backend_.place("a"), on_io(answer, cancel));
  EXPECT_EQ(bulkhead_.in_flight(), 1);
  cancel.emit(asio::cancellation_type::terminal);
  EXPECT_EQ(bulkhead_.in_flight(), 0);  // freed at once
  EXPECT_TRUE(backend_.cancelled("a"));
  io_.run();
  ASSERT_EQ(answer.calls, 1);
  EXPECT_TRUE(aborted(answer.failure));

  // The freed slot admits another call; the late completion neither answers nor frees twice.
  auto b = bulkhead_.async_execute<std::string>(backend_.place("b"), asio::use_future);
  auto c = bulkhead_.async_execute<std::string>(backend_.place("c"), asio::use_future);
  EXPECT_EQ(bulkhead_.in_flight(), 2);
  backend_.complete("a", "too late");
  io_.restart();
  io_.run();
  EXPECT_EQ(answer.calls, 1);
  EXPECT_EQ(bulkhead_.in_flight(), 2);
  backend_.complete("b", "b");
  backend_.complete("c", "c");
  EXPECT_EQ(bulkhead_.in_flight(), 0);
}

TEST_F(AsyncBulkheadTest, CoroutinesAwaitTheResultOrTheRejection) {
  std::string result;
  bool rejected = false;
  spawn(io_, [&]() -> asio::awaitable<void> {
    rejected = co_await refused_when_full<r4c::BulkheadFullException>(bulkhead_, backend_, [&] {
      return bulkhead_.async_execute<std::string>(backend_.place("c"), asio::use_awaitable);
    });
    result =
        co_await bulkhead_.async_execute<std::string>(backend_.place("d"), asio::use_awaitable);
  });
  while (!backend_.has("d")) io_.run_one();
  EXPECT_TRUE(rejected);
  EXPECT_FALSE(backend_.has("c"));
  EXPECT_EQ(bulkhead_.in_flight(), 1);
  backend_.complete("d", "placed d");
  io_.run();
  EXPECT_EQ(result, "placed d");
  EXPECT_EQ(bulkhead_.in_flight(), 0);
}

// An initiation that throws frees its slot; the exception reaches the caller.
TEST_F(AsyncBulkheadTest, AThrowingOperationFreesItsSlot) {
  EXPECT_THROW(bulkhead_.async_execute<std::string>(
                   [](auto) -> void { throw NotFound(); },
                   [](std::exception_ptr, std::string) { ADD_FAILURE() << "called"; }),
               NotFound);
  EXPECT_EQ(bulkhead_.in_flight(), 0);
}

}  // namespace
