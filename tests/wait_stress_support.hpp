// SPDX-License-Identifier: Apache-2.0
// What the adaptive limit's wait stress tests (synchronous and asynchronous) share: the limit
// they stress.
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

/// aimd over 1 ms windows of 4 samples, its calls waiting up to `max_wait` in a queue of
/// `max_queue`: fixed at `limit`, or (moving) from `limit` between 1 and `moving_max`.
inline AdaptiveLimitConfig stress_limit(bool moving, int limit, int moving_max,
                                        std::chrono::nanoseconds max_wait, int max_queue) {
  AdaptiveLimitConfig config;
  config.algorithm(LimitAlgorithm::aimd)
      .initial_limit(limit)
      .min_limit(moving ? 1 : limit)
      .max_limit(moving ? moving_max : limit)
      .window(std::chrono::milliseconds(1))
      .min_window_samples(4)
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
