// SPDX-License-Identifier: Apache-2.0
// The async policies as cases of a typed suite: each policy alone inside an adaptive limit,
// whose in_flight() shows a slot left behind. The contract, teardown and stress suites run the
// same cases with their own time settings (a ManualClock suite and a real-time stress need
// different ones), and check what a call left behind with one function.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "r4c/asio.hpp"

namespace r4c::testing {

// The time-dependent settings a suite gives its cases.
struct CaseSettings {
  std::chrono::nanoseconds timeout;
  std::chrono::nanoseconds retry_wait;
  std::chrono::nanoseconds hedge_delay;
  int rate_limit_for_period;
  std::chrono::nanoseconds rate_period;
  std::chrono::nanoseconds rate_wait;
  int bulkhead_max_concurrent;
};

// For ManualClock suites: every timer is far enough for the test to choose when it fires.
inline constexpr CaseSettings kManualClockSettings{std::chrono::milliseconds(1),
                                                   std::chrono::seconds(1),
                                                   std::chrono::milliseconds(1),
                                                   2,
                                                   std::chrono::seconds(1),
                                                   std::chrono::seconds(10),
                                                   25};

// `add` puts the policy in the pipeline; `first_attempt_fails` makes the operation's first
// completion a failure (a retry then waits); `prepare` runs before a call that must stand at the
// policy's step (a rate limiter's permit taken, so that the call waits for the next period);
// `timer` is how far the clock goes to fire the policy's timer (zero: it has none);
// `expect_counted` checks what the policy recorded of `completed` calls that completed without
// a failure (the others were cancelled or abandoned).
struct LimitOnly {
  template <class Builder>
  static void add(Builder&, const CaseSettings&) {}
  static constexpr bool first_attempt_fails = false;
  template <class Pipeline>
  static void prepare(Pipeline&) {}
  static constexpr std::chrono::nanoseconds timer(const CaseSettings&) { return {}; }
  template <class Pipeline>
  static void expect_counted(Pipeline&, std::uint64_t) {}
};
struct WithBulkhead : LimitOnly {
  template <class Builder>
  static void add(Builder& b, const CaseSettings& s) {
    b.bulkhead([&s](BulkheadConfig& c) { c.max_concurrent(s.bulkhead_max_concurrent); });
  }
};
struct WithCircuitBreaker : LimitOnly {
  template <class Builder>
  static void add(Builder& b, const CaseSettings&) {
    b.circuit_breaker();
  }
  template <class Pipeline>
  static void expect_counted(Pipeline& pipeline, std::uint64_t completed) {
    EXPECT_EQ(pipeline.circuit_breaker()->snapshot().buffered_calls, completed);
  }
};
struct WithTimeout : LimitOnly {
  template <class Builder>
  static void add(Builder& b, const CaseSettings& s) {
    b.timeout([&s](TimeoutConfig& t) { t.timeout(s.timeout); });
  }
  static constexpr std::chrono::nanoseconds timer(const CaseSettings& s) { return 2 * s.timeout; }
  template <class Pipeline>
  static void expect_counted(Pipeline& pipeline, std::uint64_t) {
    EXPECT_EQ(pipeline.timeout()->snapshot().timed_out, 0u);
  }
};
struct WithRetry : LimitOnly {
  template <class Builder>
  static void add(Builder& b, const CaseSettings& s) {
    b.retry([&s](RetryConfig& r) { r.max_attempts(3).wait(s.retry_wait); });
  }
  static constexpr bool first_attempt_fails = true;
  static constexpr std::chrono::nanoseconds timer(const CaseSettings& s) { return s.retry_wait; }
};
struct WithRateLimiter : LimitOnly {
  template <class Builder>
  static void add(Builder& b, const CaseSettings& s) {
    b.rate_limiter([&s](RateLimiterConfig& r) {
      r.limit_for_period(s.rate_limit_for_period)
          .refresh_period(s.rate_period)
          .timeout_duration(s.rate_wait);
    });
  }
  template <class Pipeline>
  static void prepare(Pipeline& pipeline) {
    // This period's permits taken: the call waits for the next.
    while (pipeline.rate_limiter()->try_acquire()) {
    }
  }
  static constexpr std::chrono::nanoseconds timer(const CaseSettings& s) { return s.rate_period; }
};
struct WithHedge : LimitOnly {
  template <class Builder>
  static void add(Builder& b, const CaseSettings& s) {
    b.hedge([&s](HedgeConfig& h) { h.delay(s.hedge_delay).max_attempts(2); });
  }
  static constexpr std::chrono::nanoseconds timer(const CaseSettings& s) { return s.hedge_delay; }
};

using PolicyCases = ::testing::Types<LimitOnly, WithBulkhead, WithCircuitBreaker, WithTimeout,
                                     WithRetry, WithRateLimiter, WithHedge>;

// A pipeline of T named `name`: an adaptive limit (its defaults), then the Case's policy.
template <class Case, class T = std::string>
std::unique_ptr<Pipeline<T>> case_pipeline(ResilienceRegistry& registry, const std::string& name,
                                           const CaseSettings& settings = kManualClockSettings) {
  auto builder = Pipeline<T>::builder(registry, name).adaptive_limit();
  Case::add(builder, settings);
  return std::make_unique<Pipeline<T>>(builder.build());
}

// That no call of `pipeline` holds anything: no slot of its limit or bulkhead, no wait of its
// retry or rate limiter. (Its clock's timers are the caller's to check: a real-time suite waits
// for them.)
template <class Pipeline>
void expect_released(Pipeline& pipeline) {
  EXPECT_EQ(pipeline.adaptive_limit()->in_flight(), 0);
  if (pipeline.bulkhead() != nullptr) {
    EXPECT_EQ(pipeline.bulkhead()->in_flight(), 0);
  }
  if (pipeline.retry() != nullptr) {
    EXPECT_EQ(pipeline.retry()->snapshot().waiting_calls, 0);
  }
  if (pipeline.rate_limiter() != nullptr) {
    EXPECT_EQ(pipeline.rate_limiter()->snapshot().waiting_calls, 0);
  }
}

}  // namespace r4c::testing
