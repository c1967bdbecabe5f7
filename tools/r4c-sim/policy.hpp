// SPDX-License-Identifier: Apache-2.0
// A group's policy as r4c's real pipeline: what both engines call through. The pipeline's id is
// the group's name, so each group has its own policies in the registry.
#pragma once

#include <optional>

#include "r4c/pipeline.hpp"
#include "r4c/registry.hpp"
#include "scenario.hpp"

namespace r4c::sim {

/// adaptive_limit: the adaptive limit with the group's settings (its algorithm among them);
/// bulkhead: a bulkhead of max_concurrent; throttle: the throttle with its `throttle` table
/// (by default every failure, queue_limit's 503s and the timeouts, is a refusal); none: no
/// policy. A group's timeout
/// goes inside (for aimd, its drop signal).
inline Pipeline<void> build_pipeline(ResilienceRegistry& registry, const GroupSpec& group) {
  auto builder = Pipeline<void>::builder(
      registry, group.shared_limit.empty() ? group.name : group.shared_limit);
  switch (group.policy) {
    case kAdaptiveLimit:
      builder.adaptive_limit([&group](AdaptiveLimitConfig& config) { config = group.limit; });
      break;
    case kBulkhead:
      builder.bulkhead(
          [&group](BulkheadConfig& config) { config.max_concurrent(group.max_concurrent); });
      break;
    case kThrottle:
      builder.throttle([&group](ThrottleConfig& config) { config = group.throttle; });
      break;
    default:  // kNoPolicy
      break;
  }
  if (group.timeout) {
    builder.timeout([&group](TimeoutConfig& config) { config.timeout(*group.timeout); });
  }
  return builder.build();
}

/// The group's limit now: the adaptive limit's, the bulkhead's size, or none.
inline std::optional<int> current_limit(const Pipeline<void>& pipeline, const GroupSpec& group) {
  if (const AdaptiveLimit* limit = pipeline.adaptive_limit()) return limit->limit();
  if (group.policy == kBulkhead) return group.max_concurrent;
  return std::nullopt;
}

}  // namespace r4c::sim
