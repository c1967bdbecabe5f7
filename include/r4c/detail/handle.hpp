// SPDX-License-Identifier: Apache-2.0
// What policy kinds share: the handle's view of its policy (AdaptiveLimitHandle,
// CircuitBreakerHandle, RetryHandle, ...: every kind's), and a descriptor's types and make()
// (every FooKind; see <r4c/detail/kinds.hpp>).
#pragma once

#include <memory>
#include <string>
#include <type_traits>
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
/// config, the registry's clock). Config, Snapshot and Handle are the policy's own: what its
/// config(), snapshot() and handle() return. A descriptor derives from it and adds kNames,
/// settings() and metrics() (and a make() of its own when its policy takes more).
template <class PolicyT, class ExceptionT>
struct KindBase {
  using Policy = PolicyT;
  using Config = std::remove_cvref_t<decltype(std::declval<const Policy&>().config())>;
  using Snapshot = decltype(std::declval<const Policy&>().snapshot());
  using Handle = decltype(std::declval<const Policy&>().handle());
  /// The exception the policy itself fails a call with (its refusal; void for none); the
  /// file's exception lists know it by its class name.
  using Exception = ExceptionT;

  /// A new instance; a registry's resources give it its clock.
  template <class Resources>
  static std::unique_ptr<Policy> make(std::string id, Config config, Resources& resources) {
    return std::make_unique<Policy>(std::move(id), std::move(config), resources.clock());
  }
};

}  // namespace r4c::detail
