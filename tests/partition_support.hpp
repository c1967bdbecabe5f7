// SPDX-License-Identifier: Apache-2.0
// The partitioned limit the pipeline tests of partitions share, synchronous and asynchronous.
#pragma once

#include "r4c/adaptive_limit_config.hpp"

namespace r4c::test {

/// Sets `a` to a limit fixed at `limit`, shared by the partitions "user" (share `user`) and
/// "prefetch" (share `prefetch`), which borrow nothing from each other.
inline AdaptiveLimitConfig& fixed_user_and_prefetch(AdaptiveLimitConfig& a, int limit, double user,
                                                    double prefetch) {
  return a.initial_limit(limit)
      .min_limit(limit)
      .max_limit(limit)
      .partition("user", user)
      .partition("prefetch", prefetch)
      .partition_borrow(false);
}

}  // namespace r4c::test
