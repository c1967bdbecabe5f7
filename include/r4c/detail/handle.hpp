// SPDX-License-Identifier: Apache-2.0
// What every policy's handle (RateLimiterHandle, BulkheadHandle, ThrottleHandle, ...) shares: a
// view of its policy that gives its snapshot and its instance id.
#pragma once

#include <string>

namespace r4c::detail {

/// A view of a `Policy`, valid while the policy lives; the kind's handle derives from it and
/// adds what else operators may see.
template <class Policy>
class HandleBase {
 public:
  explicit HandleBase(const Policy& policy) noexcept : policy_(&policy) {}
  /// A copy of the policy's state now.
  auto snapshot() const { return policy_->snapshot(); }
  const std::string& instance_id() const noexcept { return policy_->instance_id(); }

 protected:
  const Policy& policy() const noexcept { return *policy_; }

 private:
  const Policy* policy_;
};

}  // namespace r4c::detail
