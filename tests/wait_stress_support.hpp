// SPDX-License-Identifier: Apache-2.0
// What the adaptive limit's wait stress tests (synchronous and asynchronous) share: the limit
// they stress.
#pragma once

#include <chrono>

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

}  // namespace r4c::test
