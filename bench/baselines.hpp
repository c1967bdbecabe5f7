// SPDX-License-Identifier: Apache-2.0
// What a user would write without r4c, to measure the adaptive limit against.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

#include "r4c/detail/cache_line.hpp"

namespace r4c::bench {

/// A counting bulkhead with a fixed maximum: one compare-and-swap to enter, one decrement to
/// leave, no clock. The cheapest limiter there is, and the one r4c's adaptive limit replaces.
class FixedBulkhead {
 public:
  explicit FixedBulkhead(std::int32_t max_concurrent) noexcept : max_(max_concurrent) {}

  [[nodiscard]] bool try_acquire() noexcept {
    // relaxed: a slot guards no data.
    std::int32_t running = in_flight_.load(std::memory_order_relaxed);
    do {
      if (running >= max_) return false;
    } while (!in_flight_.compare_exchange_weak(running, running + 1, std::memory_order_relaxed,
                                               std::memory_order_relaxed));
    return true;
  }
  void release() noexcept { in_flight_.fetch_sub(1, std::memory_order_relaxed); }

 private:
  alignas(detail::kCacheLine) std::atomic<std::int32_t> in_flight_{0};
  const std::int32_t max_;
};

/// A windowed adaptive limiter as one would write it in an afternoon: one mutex around
/// everything, every latency kept in a vector until the window ends, then a crude rule (back
/// off 10% when the window's average latency doubles the best seen, else grow by one).
class MutexLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  MutexLimiter(int initial_limit, int min_limit, int max_limit)
      : limit_(initial_limit), min_limit_(min_limit), max_limit_(max_limit) {}

  /// Takes a slot and returns true with the call's start time, or returns false when full.
  [[nodiscard]] bool try_acquire(Clock::time_point& start) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (in_flight_ >= limit_) return false;
      ++in_flight_;
    }
    start = Clock::now();
    return true;
  }

  /// Ends a call that took a slot at `start`.
  void on_success(Clock::time_point start) {
    const Clock::time_point now = Clock::now();
    std::lock_guard<std::mutex> lock(mutex_);
    --in_flight_;
    samples_.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(now - start).count());
    if (now >= window_end_) close_window(now);
  }

  int limit() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return limit_;
  }

 private:
  void close_window(Clock::time_point now) {
    std::int64_t sum = 0;
    for (std::int64_t sample : samples_) sum += sample;
    const std::int64_t average = sum / static_cast<std::int64_t>(samples_.size());
    if (best_average_ == 0 || average < best_average_)
      best_average_ = std::max<std::int64_t>(average, 1);
    if (average > 2 * best_average_) {
      limit_ = std::max(min_limit_, limit_ * 9 / 10);
    } else {
      limit_ = std::min(max_limit_, limit_ + 1);
    }
    samples_.clear();
    window_end_ = now + std::chrono::seconds(1);
  }

  mutable std::mutex mutex_;
  int in_flight_ = 0;
  int limit_;
  const int min_limit_;
  const int max_limit_;
  std::vector<std::int64_t> samples_;
  std::int64_t best_average_ = 0;
  Clock::time_point window_end_ = Clock::now() + std::chrono::seconds(1);
};

}  // namespace r4c::bench
