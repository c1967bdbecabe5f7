// SPDX-License-Identifier: Apache-2.0
// The throttle's asynchronous face (<r4c/asio.hpp>): outcomes counted as execute() counts them,
// a local rejection answered at once, a cancelled call counted as nothing, and a pipeline's
// async_execute through it.
#include "async_support.hpp"
#include "r4c/asio.hpp"

#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>
#include <exception>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>

namespace {

using namespace std::chrono_literals;
using r4c::testing::aborted;

struct Overloaded : std::runtime_error {
  Overloaded() : std::runtime_error("503") {}
};

class AsyncThrottleTest : public ::testing::Test {
 protected:
  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
  double draw_ = 0.9999999;  // lets every call with a probability below 1 through
  r4c::Throttle throttle_{"search", r4c::ThrottleConfig(), clock_, [this] { return draw_; }};
  r4c::testing::AsyncBackend backend_;
};

TEST_F(AsyncThrottleTest, AnAnsweredCallCountsAsAnAcceptOrARefusal) {
  auto accepted = throttle_.async_execute<std::string>(backend_.place("a"), asio::use_future);
  auto refused = throttle_.async_execute<std::string>(backend_.place("b"), asio::use_future);
  EXPECT_EQ(throttle_.snapshot().requests, 0u);  // counted when answered
  backend_.complete("a", "hits");
  backend_.fail("b", std::make_exception_ptr(Overloaded()));
  EXPECT_EQ(accepted.get(), "hits");
  EXPECT_THROW(refused.get(), Overloaded);
  const r4c::ThrottleSnapshot s = throttle_.snapshot();
  EXPECT_EQ(s.requests, 2u);
  EXPECT_EQ(s.accepts, 1u);
  EXPECT_EQ(s.refused, 1u);
}

// refused_result and refused_on(predicate) classify an asynchronous outcome as execute() does.
TEST_F(AsyncThrottleTest, TheResultAndFailurePredicatesClassifyTheOutcome) {
  r4c::Throttle throttle(
      "search",
      r4c::ThrottleConfig()
          .refused_result<std::string>([](const std::string& reply) { return reply == "busy"; })
          .refused_on<Overloaded>([](const Overloaded&) { return false; }),
      clock_, [this] { return draw_; });
  auto busy = throttle.async_execute<std::string>(backend_.place("a"), asio::use_future);
  auto hits = throttle.async_execute<std::string>(backend_.place("b"), asio::use_future);
  auto failed = throttle.async_execute<std::string>(backend_.place("c"), asio::use_future);
  backend_.complete("a", "busy");
  backend_.complete("b", "hits");
  backend_.fail("c", std::make_exception_ptr(Overloaded()));
  EXPECT_EQ(busy.get(), "busy");  // returned, and a refusal
  EXPECT_EQ(hits.get(), "hits");
  EXPECT_THROW(failed.get(), Overloaded);  // the predicate says no: an accept
  const r4c::ThrottleSnapshot s = throttle.snapshot();
  EXPECT_EQ(s.requests, 3u);
  EXPECT_EQ(s.accepts, 2u);
  EXPECT_EQ(s.refused, 1u);
}

TEST_F(AsyncThrottleTest, ALocallyRejectedCallCompletesAtOnceWithoutStartingTheOperation) {
  for (int i = 0; i < 4; ++i) throttle_.try_acquire().on_refused();  // p = 4 / 5
  draw_ = 0.5;
  auto reply = throttle_.async_execute<std::string>(backend_.place("c"), asio::use_future);
  ASSERT_EQ(reply.wait_for(0s), std::future_status::ready);  // before async_execute returned
  EXPECT_THROW(reply.get(), r4c::ThrottledException);
  EXPECT_EQ(backend_.started("c"), 0);
  EXPECT_EQ(throttle_.snapshot().throttled, 1u);
  EXPECT_EQ(throttle_.snapshot().requests, 5u);
  EXPECT_EQ(throttle_.snapshot().refused, 4u);
}

TEST_F(AsyncThrottleTest, ACancelledCallCountsAsNothing) {
  asio::io_context io;
  asio::cancellation_signal cancel;
  std::exception_ptr failure;
  throttle_.async_execute<std::string>(
      backend_.place("d"),
      asio::bind_cancellation_slot(
          cancel.slot(),
          asio::bind_executor(io, [&](std::exception_ptr e, std::string) { failure = e; })));
  cancel.emit(asio::cancellation_type::terminal);
  io.run();
  EXPECT_TRUE(aborted(failure));
  EXPECT_TRUE(backend_.cancelled("d"));
  backend_.complete("d", "late");  // ignored
  EXPECT_EQ(throttle_.snapshot().requests, 0u);
}

TEST(AsyncThrottlePipelineTest, APipelinesAsyncCallPassesTheThrottle) {
  auto clock = std::make_shared<r4c::ManualClock>();
  auto registry = r4c::testing::registry(clock).build();
  auto pipeline =
      r4c::Pipeline<std::string>::builder(registry, "search").throttle().bulkhead().build();
  r4c::testing::AsyncBackend backend;
  auto reply = pipeline.async_execute(backend.place("e"), asio::use_future);
  EXPECT_EQ(pipeline.bulkhead()->in_flight(), 1);
  backend.fail("e", std::make_exception_ptr(Overloaded()));
  EXPECT_THROW(reply.get(), Overloaded);
  EXPECT_EQ(pipeline.throttle()->snapshot().refused, 1u);
  EXPECT_EQ(pipeline.bulkhead()->in_flight(), 0);
}

}  // namespace
