// SPDX-License-Identifier: Apache-2.0
// What the adaptive limit's stress tests share: the limits they stress (the wait stress tests,
// synchronous and asynchronous, and the pipelines' concurrency tests).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <initializer_list>

#include "r4c/adaptive_limit.hpp"
#include "r4c/adaptive_limit_config.hpp"

namespace r4c::test {

/// Under a sanitizer, which slows each wait tenfold, the stress tests run a tenth as many.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

/// Sets `a` to AIMD from `initial` up to `max`, over windows of 1 ms of at least `samples` calls:
/// a limit that moves again and again while a concurrent test runs.
inline AdaptiveLimitConfig& aimd_per_millisecond(AdaptiveLimitConfig& a, int initial, int max,
                                                 int samples) {
  return a.algorithm(LimitAlgorithm::aimd)
      .initial_limit(initial)
      .max_limit(max)
      .window(std::chrono::milliseconds(1))
      .min_window_samples(samples);
}

/// aimd over 1 ms windows of 4 samples, its calls waiting up to `max_wait` in a queue of
/// `max_queue`: fixed at `limit`, or (moving) from `limit` between 1 and `moving_max`.
inline AdaptiveLimitConfig stress_limit(bool moving, int limit, int moving_max,
                                        std::chrono::nanoseconds max_wait, int max_queue) {
  AdaptiveLimitConfig config;
  aimd_per_millisecond(config, limit, moving ? moving_max : limit, 4)
      .min_limit(moving ? 1 : limit)
      .max_wait(max_wait)
      .max_queue(max_queue)
      .random_seed(1);
  return config;
}

/// The ways a wait ended that a stress run has seen so far. How often each comes up depends on
/// the thread schedule (a 2-core CI machine may run the clock's thread rarely), so a run goes on
/// past its quota until it has seen each one, for `kCoverageCap` of real time at most; the test
/// still fails if one never came.
class ReasonsSeen {
 public:
  void mark(RejectReason reason) noexcept {
    const std::uint32_t bit = 1u << static_cast<int>(reason);
    if ((seen_.load(std::memory_order_relaxed) & bit) == 0) {
      seen_.fetch_or(bit, std::memory_order_relaxed);
    }
  }
  [[nodiscard]] bool all(std::initializer_list<RejectReason> wanted) const noexcept {
    const std::uint32_t seen = seen_.load(std::memory_order_relaxed);
    for (RejectReason reason : wanted) {
      if ((seen & (1u << static_cast<int>(reason))) == 0) return false;
    }
    return true;
  }

 private:
  std::atomic<std::uint32_t> seen_{0};
};

inline constexpr std::chrono::seconds kCoverageCap{60};

}  // namespace r4c::test
