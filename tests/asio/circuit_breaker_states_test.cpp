// SPDX-License-Identifier: Apache-2.0
// The circuit breaker's states, figures and classification, asynchronously: forced_open,
// disabled and metrics_only, the figures of a reopened breaker, max_wait_in_half_open, the
// exception predicates and the result predicate behave as for execute().
#include <gtest/gtest.h>

#include <asio/use_future.hpp>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>

#include "async_support.hpp"
#include "r4c/asio.hpp"

namespace {

using namespace std::chrono_literals;
using r4c::testing::Answer;
using r4c::testing::holds_exception;
using State = r4c::CircuitBreakerState;

struct IoError : std::runtime_error {
  explicit IoError(int code = 0) : std::runtime_error("io error"), code(code) {}
  int code;
};

class AsyncCircuitBreakerStatesTest : public ::testing::Test {
 protected:
  std::unique_ptr<r4c::CircuitBreaker> make(r4c::CircuitBreakerConfig config) {
    return std::make_unique<r4c::CircuitBreaker>("inventory", std::move(config), clock_);
  }
  static r4c::CircuitBreakerConfig small() {
    return r4c::CircuitBreakerConfig()
        .sliding_window_size(4)
        .minimum_number_of_calls(4)
        .wait_in_open(10s)
        .permitted_calls_in_half_open(2);
  }
  // One call, failed with `failure` or else completed with `value`; returns what the caller got.
  Answer call(r4c::CircuitBreaker& breaker, std::exception_ptr failure, std::string value = {}) {
    // append: GCC 12 at -O3 warns falsely on "literal" + std::string&& (-Wstringop-overflow).
    const std::string key = std::string("k").append(std::to_string(keys_++));
    Answer answer;
    breaker.async_execute<std::string>(backend_.place(key), answer.handler());
    if (!backend_.has(key)) return answer;  // rejected at once
    failure ? backend_.fail(key, std::move(failure)) : backend_.complete(key, std::move(value));
    return answer;
  }
  std::exception_ptr fail(r4c::CircuitBreaker& breaker, std::exception_ptr failure) {
    return call(breaker, std::move(failure)).failure;
  }
  std::string succeed(r4c::CircuitBreaker& breaker, std::string value) {
    return call(breaker, nullptr, std::move(value)).value;
  }

  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
  r4c::testing::AsyncBackend backend_;
  int keys_ = 0;
};

TEST_F(AsyncCircuitBreakerStatesTest, ForcedOpenRejectsAtOnceWithoutStartingTheOperation) {
  auto breaker = make(small().initial_state(State::forced_open));
  EXPECT_TRUE(holds_exception<r4c::CallNotPermittedException>(
      fail(*breaker, std::make_exception_ptr(IoError()))));
  EXPECT_EQ(backend_.started(), 0);
  EXPECT_EQ(breaker->snapshot().not_permitted_calls, 1u);
}

// Both permit every call: disabled records nothing, metrics_only records and never opens.
TEST_F(AsyncCircuitBreakerStatesTest, DisabledAndMetricsOnlyPermitEveryCall) {
  for (State state : {State::disabled, State::metrics_only}) {
    auto breaker = make(small().initial_state(state));
    for (int i = 0; i < 8; ++i) fail(*breaker, std::make_exception_ptr(IoError()));
    const r4c::CircuitBreakerSnapshot snap = breaker->snapshot();
    EXPECT_EQ(std::tuple(snap.state, snap.buffered_calls, snap.failure_rate),
              state == State::disabled ? std::tuple(state, std::uint64_t{0}, -1.0)
                                       : std::tuple(state, std::uint64_t{4}, 100.0));
  }
  EXPECT_EQ(backend_.started(), 16);
}

TEST_F(AsyncCircuitBreakerStatesTest, AReopenedBreakerShowsTheTrialsThatReopenedIt) {
  auto breaker = make(small());
  breaker->transition_to_open();
  clock_->advance(10s);
  succeed(*breaker, "ok");
  fail(*breaker, std::make_exception_ptr(IoError()));  // 1 of 2 trials failed: 50 %
  const r4c::CircuitBreakerSnapshot snap = breaker->snapshot();
  EXPECT_EQ(std::tuple(snap.state, snap.buffered_calls, snap.failed_calls, snap.failure_rate),
            std::tuple(State::open, std::uint64_t{2}, std::uint64_t{1}, 50.0));
}

TEST_F(AsyncCircuitBreakerStatesTest, MaxWaitInHalfOpenResolvesWhileATrialHangs) {
  auto breaker = make(small().permitted_calls_in_half_open(1).max_wait_in_half_open(3s));
  breaker->transition_to_half_open();
  Answer hanging;
  breaker->async_execute<std::string>(backend_.place("hang"), hanging.handler());
  clock_->advance(3s);
  EXPECT_TRUE(holds_exception<r4c::CallNotPermittedException>(
      fail(*breaker, std::make_exception_ptr(IoError()))));
  EXPECT_EQ(breaker->state(), State::open);
  backend_.complete("hang", "late");  // not a trial of a half-open period that ended
  EXPECT_EQ(hanging.value, "late");
  EXPECT_EQ(breaker->state(), State::open);
}

TEST_F(AsyncCircuitBreakerStatesTest, PredicatesClassifyFailuresAndResults) {
  auto breaker =
      make(small()
               .minimum_number_of_calls(100)
               .sliding_window_size(100)
               .record_on<IoError>([](const IoError& e) { return e.code >= 500; })
               .ignore_on(
                   [](const std::exception_ptr& e) { return holds_exception<std::logic_error>(e); })
               .record_result<std::string>([](const std::string& v) { return v == "error"; }));
  fail(*breaker, std::make_exception_ptr(IoError(503)));             // recorded
  fail(*breaker, std::make_exception_ptr(IoError(404)));             // a success
  fail(*breaker, std::make_exception_ptr(std::logic_error("bug")));  // ignored
  EXPECT_EQ(succeed(*breaker, "error"), "error");                    // recorded, still returned
  const r4c::CircuitBreakerSnapshot snap = breaker->snapshot();
  EXPECT_EQ(snap.buffered_calls, 3u);
  EXPECT_EQ(snap.failed_calls, 2u);
}

}  // namespace
