// SPDX-License-Identifier: Apache-2.0
// The limit algorithms, applied once per window. Their update rules are those of
// docs/spec/algorithms.md (Netflix concurrency-limits 0.5.4), to the last bit: the source
// file is compiled with -ffp-contract=off and keeps the specification's operation order.
#pragma once

#include <cstdint>
#include <variant>

#include "r4c/adaptive_limit_config.hpp"

namespace r4c::detail {

/// One window's aggregate, the input of an update.
struct WindowAggregate {
  std::int64_t avg_latency_ns = 0;  // trunc(sum / count)
  int max_in_flight = 0;
  bool dropped = false;
};

/// GRADIENT2: grows while the window's latency stays within rtt_tolerance of the long-term
/// average, shrinks in proportion when it does not.
class Gradient2 {
 public:
  explicit Gradient2(const AdaptiveLimitConfig& config) noexcept;
  /// Applies one window; returns the new limit.
  int update(const WindowAggregate& window) noexcept;
  int limit() const noexcept { return static_cast<int>(estimate_); }
  double estimate() const noexcept { return estimate_; }
  double long_latency_ns() const noexcept { return long_value_; }

 private:
  double add_to_long_average(double sample) noexcept;

  double estimate_;
  double min_limit_;
  double max_limit_;
  double smoothing_;
  double rtt_tolerance_;
  double queue_size_;
  double long_alpha_;
  double long_value_ = 0.0;
  double long_sum_ = 0.0;
  int long_count_ = 0;
};

/// AIMD: multiplies the limit by backoff_ratio after a window with a drop, adds one after a
/// window without drops in which at least half the limit was in use.
class Aimd {
 public:
  explicit Aimd(const AdaptiveLimitConfig& config) noexcept;
  int update(const WindowAggregate& window) noexcept;
  int limit() const noexcept { return limit_; }

 private:
  int limit_;
  int min_limit_;
  int max_limit_;
  double backoff_ratio_;
};

/// The algorithm a config selects. The config must have passed AdaptiveLimitConfig::validate()
/// (AdaptiveLimit and r4c-sim validate before they build one).
class LimitEstimator {
 public:
  explicit LimitEstimator(const AdaptiveLimitConfig& config) noexcept;
  int update(const WindowAggregate& window) noexcept;
  int limit() const noexcept;
  /// Gradient2's long-term latency average in ns; 0 for algorithms without one.
  std::int64_t long_latency_ns() const noexcept;

 private:
  std::variant<Gradient2, Aimd> algorithm_;
};

}  // namespace r4c::detail
