// SPDX-License-Identifier: Apache-2.0
// What policy kinds share: the handle's view of its policy (AdaptiveLimitHandle,
// CircuitBreakerHandle, RetryHandle, ...: every kind's), and a descriptor's types and make()
// (every FooKind; see <r4c/detail/kinds.hpp>).
#pragma once

#include <memory>
#include <string>
#include <utility>

namespace r4c::metrics {
class Emitter;  // a descriptor's metrics() writes to one (<r4c/metrics.hpp>)
}  // namespace r4c::metrics

namespace r4c::detail {

/// A view of a `Policy`, valid while the policy lives; the kind's handle derives from it and
/// adds what else operators may see.
template <class Policy>
class HandleBase {
 public:
  explicit HandleBase(const Policy& policy) noexcept : policy_(&policy) {}
  /// A copy of the policy's state now.
  auto snapshot() const { return policy_->snapshot(); }
  /// The policy's id.
  const std::string& instance_id() const noexcept { return policy_->instance_id(); }

 protected:
  const Policy& policy() const noexcept { return *policy_; }

 private:
  const Policy* policy_;
};

/// The types a kind's descriptor names, and its make() for a policy constructed from (id,
/// config), with the registry's clock when `kClocked`. A descriptor derives from it and adds
/// kNames, settings() and metrics().
template <class ConfigT, class PolicyT, class SnapshotT, class HandleT, class ExceptionT,
          bool kClocked>
struct KindBase {
  using Config = ConfigT;
  using Policy = PolicyT;
  using Snapshot = SnapshotT;
  using Handle = HandleT;
  /// The exception the policy itself fails a call with (its refusal); the file's exception
  /// lists know it by its class name.
  using Exception = ExceptionT;

  /// A new instance; a registry's resources give it its clock.
  template <class Resources>
  static std::unique_ptr<Policy> make(std::string id, Config config,
                                      [[maybe_unused]] Resources& resources) {
    if constexpr (kClocked) {
      return std::make_unique<Policy>(std::move(id), std::move(config), resources.clock());
    } else {
      return std::make_unique<Policy>(std::move(id), std::move(config));
    }
  }
};

}  // namespace r4c::detail
