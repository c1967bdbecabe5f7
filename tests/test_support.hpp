// SPDX-License-Identifier: Apache-2.0
// Helpers shared by r4c's tests.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "r4c/circuit_breaker.hpp"
#include "r4c/errors.hpp"
#include "r4c/metrics.hpp"
#include "r4c/registry.hpp"
#include "r4c/retry.hpp"

namespace r4c::test {

/// Failures an operation under test throws, each of a type of its own.
struct Unavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct NotFound : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct Busy : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Calls `call` twice, each time refused with an Exception that it passes to `check`: both
/// refusals are one preallocated object. The first is kept alive, so a second throw by value
/// could not reuse its address.
template <class Exception, class Call, class Check>
void expect_one_preallocated_refusal(Call call, Check check) {
  std::exception_ptr kept;
  const void* first = nullptr;
  for (int i = 0; i < 2; ++i) {
    try {
      call();
      ADD_FAILURE() << "not rejected";
    } catch (const Exception& e) {
      check(e);
      if (first == nullptr) {
        first = &e;
        kept = std::current_exception();
      }
      EXPECT_EQ(&e, first);  // one preallocated object
    }
  }
}

/// The value of the first metric `name` in `metrics` that has the label `label`=`value` (any
/// labels when `label` is empty), or -1 when there is none.
inline double metric_value(const std::vector<metrics::Metric>& metrics, const std::string& name,
                           const std::string& label = "", const std::string& value = "") {
  for (const metrics::Metric& metric : metrics) {
    if (metric.name != name) continue;
    if (label.empty()) return metric.value;
    for (const metrics::Label& each : metric.labels) {
      if (each.name == label && each.value == value) return metric.value;
    }
  }
  return -1.0;
}

/// Runs `action`, expecting a ConfigException; returns it (or records a failure).
inline ConfigException config_error(const std::function<void()>& action) {
  try {
    action();
  } catch (const ConfigException& e) {
    return e;
  }
  ADD_FAILURE() << "no ConfigException was thrown";
  return ConfigException("none");
}

/// The message of the ConfigException `set()` throws, or "none".
template <class Set>
std::string config_message(Set&& set) {
  try {
    set();
  } catch (const ConfigException& e) {
    return e.what();
  }
  return "none";
}

/// The values of a RetryConfig's settings (its exception lists aside), in the order of its
/// accessors: max_attempts, wait, exponential_backoff, backoff_multiplier, max_wait,
/// randomized_wait. Compared in one expectation, which prints every value.
using RetrySettings =
    std::tuple<int, std::chrono::nanoseconds, bool, double, std::chrono::nanoseconds, double>;

inline RetrySettings settings_of(const RetryConfig& c) {
  return {c.max_attempts(),       c.wait(),     c.exponential_backoff(),
          c.backoff_multiplier(), c.max_wait(), c.randomized_wait()};
}

/// A CircuitBreakerConfig's main settings: failure_rate_threshold, slow_call_rate_threshold,
/// slow_call_duration, sliding_window_type, sliding_window_size, minimum_number_of_calls,
/// wait_in_open, permitted_calls_in_half_open.
using BreakerSettings = std::tuple<double, double, std::chrono::nanoseconds, SlidingWindowType, int,
                                   int, std::chrono::nanoseconds, int>;

inline BreakerSettings settings_of(const CircuitBreakerConfig& c) {
  return {c.failure_rate_threshold(), c.slow_call_rate_threshold(),    c.slow_call_duration(),
          c.sliding_window_type(),    c.sliding_window_size(),         c.minimum_number_of_calls(),
          c.wait_in_open(),           c.permitted_calls_in_half_open()};
}

/// An AdaptiveLimitConfig's settings: algorithm, initial_limit, min_limit, max_limit, window,
/// min_window_samples, smoothing, rtt_tolerance, long_window, queue_size, backoff_ratio, enabled.
using LimitSettings = std::tuple<LimitAlgorithm, int, int, int, std::chrono::nanoseconds, int,
                                 double, double, int, int, double, bool>;

inline LimitSettings settings_of(const AdaptiveLimitConfig& c) {
  return {c.algorithm(),   c.initial_limit(),      c.min_limit(),     c.max_limit(),
          c.window(),      c.min_window_samples(), c.smoothing(),     c.rtt_tolerance(),
          c.long_window(), c.queue_size(),         c.backoff_ratio(), c.enabled()};
}

/// That `call` throws its caller the very Exception object `original` holds, not a copy.
template <class Exception, class Call>
::testing::AssertionResult throws_the_original(const std::exception_ptr& original, Call call) {
  const void* original_address = nullptr;
  try {
    std::rethrow_exception(original);
  } catch (const Exception& e) {
    original_address = &e;
  }
  try {
    call();
  } catch (const Exception& e) {
    if (&e == original_address) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "a copy was thrown";
  }
  return ::testing::AssertionFailure() << "nothing thrown";
}

/// That `execute(method)` refuses the call with an Exception of instance `id` whose message holds
/// `message` (and whose kind is `kind`, when given), without calling `method`. Fatal when nothing
/// is thrown: call it inside ASSERT_NO_FATAL_FAILURE.
template <class Exception, class Execute>
void expect_refused(Execute execute, const std::string& id, const std::string& message,
                    std::string_view kind = {}) {
  bool called = false;
  try {
    execute([&called] { called = true; });
    FAIL() << "not refused";
  } catch (const Exception& e) {
    EXPECT_EQ(e.instance_id(), id);
    EXPECT_NE(std::string_view(e.what()).find(message), std::string_view::npos) << e.what();
    if (!kind.empty()) {
      EXPECT_EQ(e.kind(), kind);
    }
  }
  EXPECT_FALSE(called);
}

/// Runs `body(0)` .. `body(count - 1)`, each on a thread of its own, and joins them.
inline void on_threads(int count, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int t = 0; t < count; ++t) threads.emplace_back(body, t);
  for (std::thread& thread : threads) thread.join();
}

/// A registry on a ManualClock whose adaptive limits are aimd, with windows of 1 s that one
/// sample may end.
class AimdRegistryTest : public ::testing::Test {
 protected:
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  ResilienceRegistry registry_ =
      r4c::testing::registry(clock_)
          .adaptive_limit_defaults([](AdaptiveLimitConfig& a) {
            a.algorithm(LimitAlgorithm::aimd).min_window_samples(1).window(std::chrono::seconds(1));
          })
          .build();
};

}  // namespace r4c::test
