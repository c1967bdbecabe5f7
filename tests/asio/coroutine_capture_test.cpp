// SPDX-License-Identifier: Apache-2.0
// The shapes docs/async.md gives for co_execute with a lambda that owns what it captures.
// g++ 12 destroys a temporary lambda that appears inside a co_await expression twice (its
// coroutine frame keeps a copy of the temporary and destroys both), so
// `co_await pipeline.co_execute([owned] { ... })` releases `owned` one time too many. The safe
// shape names the call first and awaits it after: the lambda is then an ordinary temporary of a
// declaration. These tests run those shapes with a shared_ptr capture and check its use count,
// which a double destruction would break (and which ASan, in CI's sanitizer stage, turns into a
// heap-use-after-free); they run on an io_context and a ManualClock, without waiting.
#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "r4c/asio.hpp"
#include "r4c/pipeline.hpp"
#include "r4c/registry.hpp"

namespace {

class CoroutineCaptureTest : public ::testing::Test {
 protected:
  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
  r4c::ResilienceRegistry registry_ = r4c::testing::registry(clock_).build();
  r4c::Pipeline<std::string> pipeline_ =
      r4c::Pipeline<std::string>::builder(registry_, "orders").adaptive_limit().build();
  asio::io_context io_;

  template <class Coroutine>
  std::string run(Coroutine coroutine) {
    std::future<std::string> result = asio::co_spawn(io_, std::move(coroutine), asio::use_future);
    io_.run();
    return result.get();
  }
};

TEST_F(CoroutineCaptureTest, ANamedCallAwaitedAfterKeepsAnOwningCaptureAlive) {
  auto owned = std::make_shared<std::string>("placed");
  const std::string result = run([&]() -> asio::awaitable<std::string> {
    auto call =
        pipeline_.co_execute([owned]() -> asio::awaitable<std::string> { co_return *owned; });
    co_return co_await std::move(call);
  });
  EXPECT_EQ(result, "placed");
  EXPECT_EQ(owned.use_count(), 1);  // every copy the call made was released exactly once
  EXPECT_EQ(pipeline_.adaptive_limit()->in_flight(), 0);
}

TEST_F(CoroutineCaptureTest, ANamedLambdaMovedIntoTheCallKeepsAnOwningCaptureAlive) {
  auto owned = std::make_shared<std::string>("placed");
  const std::string result = run([&]() -> asio::awaitable<std::string> {
    auto place = [owned]() -> asio::awaitable<std::string> { co_return *owned + " again"; };
    auto call = pipeline_.co_execute(std::move(place));
    co_return co_await std::move(call);
  });
  EXPECT_EQ(result, "placed again");
  EXPECT_EQ(owned.use_count(), 1);
}

TEST_F(CoroutineCaptureTest, AThrowingCallReleasesItsOwningCaptureOnce) {
  auto owned = std::make_shared<std::string>("placed");
  EXPECT_THROW(run([&]() -> asio::awaitable<std::string> {
                 auto call = pipeline_.co_execute([owned]() -> asio::awaitable<std::string> {
                   throw std::runtime_error("backend failed: " + *owned);
                   co_return *owned;
                 });
                 co_return co_await std::move(call);
               }),
               std::runtime_error);
  EXPECT_EQ(owned.use_count(), 1);
  EXPECT_EQ(pipeline_.adaptive_limit()->in_flight(), 0);
}

TEST_F(CoroutineCaptureTest, SeveralNamedCallsInOneCoroutineEachReleaseTheirCapture) {
  auto owned = std::make_shared<std::string>("x");
  const std::string result = run([&]() -> asio::awaitable<std::string> {
    std::string all;
    for (int i = 0; i < 3; ++i) {
      auto call = pipeline_.co_execute(
          [owned, i]() -> asio::awaitable<std::string> { co_return *owned + std::to_string(i); });
      all += co_await std::move(call);
    }
    co_return all;
  });
  EXPECT_EQ(result, "x0x1x2");
  EXPECT_EQ(owned.use_count(), 1);
}

}  // namespace
