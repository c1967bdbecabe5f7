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
#include "r4c/asio.hpp"

namespace {

using namespace std::chrono_literals;
using Builder = r4c::Pipeline<std::string>::Builder;

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

// Each policy, alone inside an adaptive limit whose in_flight() shows a slot left behind. `add`
// puts it in the pipeline; `first_attempt_fails` makes the operation's first completion a
// failure (a retry then waits); `prepare` runs before the call (a rate limiter's permit taken,
// so that the call waits for the next period); `timer` is how far the clock goes to fire the
// policy's timer (zero: it has none).
struct LimitOnly {
  static void add(Builder&) {}
  static constexpr bool first_attempt_fails = false;
  static void prepare(r4c::Pipeline<std::string>&) {}
  static constexpr std::chrono::nanoseconds timer{0};
};
struct WithBulkhead : LimitOnly {
  static void add(Builder& b) { b.bulkhead(); }
};
struct WithCircuitBreaker : LimitOnly {
  static void add(Builder& b) { b.circuit_breaker(); }
};
struct WithTimeout : LimitOnly {
  static void add(Builder& b) {
    b.timeout([](r4c::TimeoutConfig& t) { t.timeout(1ms); });
  }
  static constexpr std::chrono::nanoseconds timer = 2ms;
};
struct WithRetry : LimitOnly {
  static void add(Builder& b) {
    b.retry([](r4c::RetryConfig& r) { r.max_attempts(3).wait(1s); });
  }
  static constexpr bool first_attempt_fails = true;
  static constexpr std::chrono::nanoseconds timer = 1s;
};
struct WithRateLimiter : LimitOnly {
  static void add(Builder& b) {
    b.rate_limiter([](r4c::RateLimiterConfig& r) {
      r.limit_for_period(1).refresh_period(1s).timeout_duration(10s);
    });
  }
  static void prepare(r4c::Pipeline<std::string>& pipeline) {
    pipeline.rate_limiter()->acquire();  // this period's permit: the call waits for the next
  }
  static constexpr std::chrono::nanoseconds timer = 1s;
};
struct WithHedge : LimitOnly {
  static void add(Builder& b) {
    b.hedge([](r4c::HedgeConfig& h) { h.delay(1ms).max_attempts(2); });
  }
  static constexpr std::chrono::nanoseconds timer = 1ms;
};

template <class Policy>
class AsyncTeardownTest : public ::testing::Test {
 protected:
  AsyncTeardownTest() {
    Builder builder = r4c::Pipeline<std::string>::builder(registry_, "orders").adaptive_limit();
    Policy::add(builder);
    pipeline_ = std::make_unique<r4c::Pipeline<std::string>>(builder.build());
  }

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
    EXPECT_EQ(pipeline_->adaptive_limit()->in_flight(), 0);
    if (pipeline_->bulkhead() != nullptr) {
      EXPECT_EQ(pipeline_->bulkhead()->in_flight(), 0);
    }
    if (pipeline_->retry() != nullptr) {
      EXPECT_EQ(pipeline_->retry()->snapshot().waiting_calls, 0);
    }
    if (pipeline_->rate_limiter() != nullptr) {
      EXPECT_EQ(pipeline_->rate_limiter()->snapshot().waiting_calls, 0);
    }
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

using Policies = ::testing::Types<LimitOnly, WithBulkhead, WithCircuitBreaker, WithTimeout,
                                  WithRetry, WithRateLimiter, WithHedge>;
TYPED_TEST_SUITE(AsyncTeardownTest, Policies);

// The policy's timer (a deadline, a wait, a delay) is still on the clock when the context goes.
TYPED_TEST(AsyncTeardownTest, DestroyingTheContextBeforeTheTimerFiresEndsTheCallWithoutAnAnswer) {
  this->start_call();
  this->destroy_context_and_expect_nothing_left();
}

// The policy's timer fired and posted its step (the timeout's answer, the end of a wait, a
// hedge's launch) to the context, which is destroyed before it runs.
TYPED_TEST(AsyncTeardownTest, DestroyingTheContextAfterTheTimerFiredEndsTheCallWithoutAnAnswer) {
  this->start_call();
  if (TypeParam::timer > 0ns) this->clock_->advance(TypeParam::timer);
  EXPECT_EQ(this->life_.calls, 0);
  this->destroy_context_and_expect_nothing_left();
}

// The context is run to the end instead: the same call is answered once (the test's own check).
TYPED_TEST(AsyncTeardownTest, RunningTheContextAnswersTheCallOnce) {
  this->start_call();
  if (TypeParam::timer > 0ns) this->clock_->advance(TypeParam::timer);
  this->io_->run();
  EXPECT_EQ(this->life_.calls, 1);
  EXPECT_EQ(this->life_.destructions, 1);
  EXPECT_EQ(this->pipeline_->adaptive_limit()->in_flight(), 0);
  this->io_.reset();
  this->clock_->advance(1h);
  EXPECT_EQ(this->clock_->pending_tasks(), 0u);
}

}  // namespace
