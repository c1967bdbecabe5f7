// SPDX-License-Identifier: Apache-2.0
// Destroying the caller's io_context with a call in flight, for every async policy (a typed
// suite): at the step each policy adds (a fired timeout, a retry's wait, a rate limiter's wait, a
// hedge's delay), before and after its timer fired. The call ends without an answer, as Asio's
// own operations do: the caller's handler is destroyed uncalled, exactly once; every slot, wait
// and timer is given back; and no timer fires into the dead context later (under ASan, one that
// did would be a heap-use-after-free).
#include <gtest/gtest.h>

#include <asio/bind_executor.hpp>
#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "async_support.hpp"
#include "policy_cases.hpp"
#include "r4c/asio.hpp"

namespace {

using namespace std::chrono_literals;

// What became of the caller's handler.
struct HandlerLife {
  int calls = 0;
  int destructions = 0;  // of the one live handler (moved-from copies do not count)
};

struct TrackedHandler {
  explicit TrackedHandler(HandlerLife* life) noexcept : life_(life) {}
  TrackedHandler(TrackedHandler&& other) noexcept : life_(std::exchange(other.life_, nullptr)) {}
  TrackedHandler& operator=(TrackedHandler&&) = delete;
  ~TrackedHandler() {
    if (life_ != nullptr) ++life_->destructions;
  }
  void operator()(std::exception_ptr, std::string) { ++life_->calls; }

 private:
  HandlerLife* life_;
};

template <class Policy>
class AsyncTeardownTest : public ::testing::Test {
 protected:
  AsyncTeardownTest() : pipeline_(r4c::testing::case_pipeline<Policy>(registry_, "orders")) {}

  // Starts one call whose operation posts its completion to the io_context, and runs what is
  // ready (a retry's first, failing attempt): the call then stands at its policy's step.
  void start_call() {
    Policy::prepare(*pipeline_);
    auto op = [this](auto handler) {
      const bool fail = Policy::first_attempt_fails && attempts_++ == 0;
      asio::post(*io_, [handler = std::move(handler), fail]() mutable {
        std::move(handler)(
            fail ? make_error_code(asio::error::connection_refused) : std::error_code(),
            std::string("done"));
      });
    };
    pipeline_->async_execute(op, asio::bind_executor(*io_, TrackedHandler(&life_)));
    if (Policy::first_attempt_fails) io_->poll();
    ASSERT_EQ(life_.calls, 0);
    ASSERT_EQ(life_.destructions, 0);
  }

  // Destroys the io_context, then checks that the call ended without an answer and left
  // nothing behind, even after its timer would have fired.
  void destroy_context_and_expect_nothing_left() {
    io_.reset();
    EXPECT_EQ(life_.calls, 0);
    EXPECT_EQ(life_.destructions, 1);
    r4c::testing::expect_released(*pipeline_);
    EXPECT_EQ(clock_->pending_tasks(), 0u);  // no timer left to fire into the dead context
    clock_->advance(1h);
    EXPECT_EQ(life_.calls, 0);
    EXPECT_EQ(life_.destructions, 1);
  }

  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
  r4c::ResilienceRegistry registry_ = r4c::testing::registry(clock_).build();
  std::unique_ptr<r4c::Pipeline<std::string>> pipeline_;
  std::unique_ptr<asio::io_context> io_ = std::make_unique<asio::io_context>();
  HandlerLife life_;
  int attempts_ = 0;
};

TYPED_TEST_SUITE(AsyncTeardownTest, r4c::testing::PolicyCases);

// How far the clock goes to fire the case's timer.
template <class Case>
constexpr std::chrono::nanoseconds kTimer = Case::timer(r4c::testing::kManualClockSettings);

// The policy's timer (a deadline, a wait, a delay) is still on the clock when the context goes.
TYPED_TEST(AsyncTeardownTest, DestroyingTheContextBeforeTheTimerFiresEndsTheCallWithoutAnAnswer) {
  this->start_call();
  this->destroy_context_and_expect_nothing_left();
}

// The policy's timer fired and posted its step (the timeout's answer, the end of a wait, a
// hedge's launch) to the context, which is destroyed before it runs.
TYPED_TEST(AsyncTeardownTest, DestroyingTheContextAfterTheTimerFiredEndsTheCallWithoutAnAnswer) {
  this->start_call();
  if (kTimer < TypeParam >> 0ns) this->clock_->advance(kTimer<TypeParam>);
  EXPECT_EQ(this->life_.calls, 0);
  this->destroy_context_and_expect_nothing_left();
}

// The context is run to the end instead: the same call is answered once (the test's own check).
TYPED_TEST(AsyncTeardownTest, RunningTheContextAnswersTheCallOnce) {
  this->start_call();
  if (kTimer < TypeParam >> 0ns) this->clock_->advance(kTimer<TypeParam>);
  this->io_->run();
  EXPECT_EQ(this->life_.calls, 1);
  EXPECT_EQ(this->life_.destructions, 1);
  EXPECT_EQ(this->pipeline_->adaptive_limit()->in_flight(), 0);
  this->io_.reset();
  this->clock_->advance(1h);
  EXPECT_EQ(this->clock_->pending_tasks(), 0u);
}

}  // namespace
