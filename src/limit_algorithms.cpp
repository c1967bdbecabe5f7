// SPDX-License-Identifier: Apache-2.0
// Compiled with -ffp-contract=off (see CMakeLists.txt): a fused multiply-add changes the last bit
// of the estimate, and truncation turns that bit into a whole unit of limit.
#include "r4c/detail/limit_algorithms.hpp"

#include <algorithm>

namespace r4c::detail {

Gradient2::Gradient2(const AdaptiveLimitConfig& config) noexcept
    : estimate_(config.initial_limit()),
      min_limit_(config.min_limit()),
      max_limit_(config.max_limit()),
      smoothing_(config.smoothing()),
      rtt_tolerance_(config.rtt_tolerance()),
      queue_size_(config.queue_size()),
      long_alpha_(2.0 / (static_cast<double>(config.long_window()) + 1.0)) {}

// A plain mean of the first ten windows, then an exponential average.
double Gradient2::add_to_long_average(double sample) noexcept {
  constexpr int kWarmUpWindows = 10;
  if (long_count_ < kWarmUpWindows) {
    long_count_ += 1;
    long_sum_ += sample;
    long_value_ = long_sum_ / long_count_;
  } else {
    long_value_ = long_value_ * (1.0 - long_alpha_) + sample * long_alpha_;
  }
  return long_value_;
}

int Gradient2::update(const WindowAggregate& window) noexcept {
  const double previous = estimate_;
  // A manual clock can produce 0 ns windows; 0 would make the gradient NaN.
  const double latency = static_cast<double>(std::max<std::int64_t>(window.avg_latency_ns, 1));
  const double long_latency = add_to_long_average(latency);

  // After a long overload the long average decays faster once latency is normal again.
  if (long_latency / latency > 2.0) long_value_ = long_value_ * 0.95;

  // Under half the slots in use, latency says nothing about the limit.
  if (static_cast<double>(window.max_in_flight) < previous / 2.0) return limit();

  const double gradient = std::max(0.5, std::min(1.0, (rtt_tolerance_ * long_latency) / latency));
  const double target = previous * gradient + queue_size_;
  const double smoothed = previous * (1.0 - smoothing_) + target * smoothing_;
  estimate_ = std::max(min_limit_, std::min(max_limit_, smoothed));
  return limit();
}

Aimd::Aimd(const AdaptiveLimitConfig& config) noexcept
    : limit_(config.initial_limit()),
      min_limit_(config.min_limit()),
      max_limit_(config.max_limit()),
      backoff_ratio_(config.backoff_ratio()) {}

int Aimd::update(const WindowAggregate& window) noexcept {
  int next = limit_;
  if (window.dropped) {
    next = static_cast<int>(static_cast<double>(next) * backoff_ratio_);
  } else if (2 * static_cast<std::int64_t>(window.max_in_flight) >= next) {
    next = next + 1;
  }
  limit_ = std::min(max_limit_, std::max(min_limit_, next));
  return limit_;
}

namespace {
std::variant<Gradient2, Aimd> make_algorithm(const AdaptiveLimitConfig& config) noexcept {
  if (config.algorithm() == LimitAlgorithm::aimd) return Aimd(config);
  return Gradient2(config);
}
}  // namespace

LimitEstimator::LimitEstimator(const AdaptiveLimitConfig& config) noexcept
    : algorithm_(make_algorithm(config)) {}

int LimitEstimator::update(const WindowAggregate& window) noexcept {
  return std::visit([&](auto& algorithm) { return algorithm.update(window); }, algorithm_);
}

int LimitEstimator::limit() const noexcept {
  return std::visit([](const auto& algorithm) { return algorithm.limit(); }, algorithm_);
}

std::int64_t LimitEstimator::long_latency_ns() const noexcept {
  if (const auto* gradient2 = std::get_if<Gradient2>(&algorithm_)) {
    return static_cast<std::int64_t>(gradient2->long_latency_ns());
  }
  return 0;
}

}  // namespace r4c::detail
