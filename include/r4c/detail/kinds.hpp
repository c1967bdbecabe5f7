// SPDX-License-Identifier: Apache-2.0
// The one list of policy kinds, in pipeline order (outside to inside):
//
//   retry -> hedge -> throttle -> circuit breaker -> rate limiter -> adaptive limit -> timeout
//   -> bulkhead
//
// The registry (defaults, named configs, instances, lookups, snapshot()), the external file's
// kinds and keys, the sync and async pipelines, metrics::collect, r4c-gen and r4c-sim all take
// the kinds, their names and their order from here. Each kind's descriptor (FooKind: names,
// types, settings, metrics, make) lives beside its policy; adding a kind means its own files
// plus one entry below.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "r4c/adaptive_limit.hpp"
#include "r4c/bulkhead.hpp"
#include "r4c/circuit_breaker.hpp"
#include "r4c/hedge.hpp"
#include "r4c/rate_limiter.hpp"
#include "r4c/retry.hpp"
#include "r4c/throttle.hpp"
#include "r4c/timeout.hpp"

namespace r4c::detail {

template <class... Kinds>
struct KindList {
  static constexpr std::size_t size = sizeof...(Kinds);
  /// `Template<Kind>...` as a tuple, e.g. one table per kind.
  template <template <class> class Template>
  using Tuple = std::tuple<Template<Kinds>...>;
  /// Every kind's names, in list order.
  static constexpr std::array<KindNames, size> names = {Kinds::kNames...};
};

/// Every policy kind, in pipeline order.
/// The throttle sits outside the circuit breaker and the rate limiter: the calls it sheds take
/// no permit and never count as the breaker's failures, and the breaker's and the limiters'
/// refusals (RejectedExceptions from inside) count in the throttle as nothing.
using AllKinds = KindList<RetryKind, HedgeKind, ThrottleKind, CircuitBreakerKind, RateLimiterKind,
                          AdaptiveLimitKind, TimeoutKind, BulkheadKind>;

inline constexpr std::size_t kKindCount = AllKinds::size;

/// The kind at position `I` of the list.
template <std::size_t I>
using KindAt = std::tuple_element_t<I, AllKinds::Tuple<std::type_identity_t>>;

namespace kinds_impl {
template <class Kind, class... Kinds>
constexpr std::size_t index_in(KindList<Kinds...>) noexcept {
  constexpr bool matches[] = {std::is_same_v<Kind, Kinds>...};
  for (std::size_t i = 0; i < sizeof...(Kinds); ++i) {
    if (matches[i]) return i;
  }
  return sizeof...(Kinds);
}
}  // namespace kinds_impl

/// The position of `Kind` in the list (kKindCount for a type that is no kind).
template <class Kind>
inline constexpr std::size_t kKindIndex = kinds_impl::index_in<Kind>(AllKinds{});

namespace kinds_impl {
template <class Policy, class... Kinds>
constexpr std::size_t policy_index_in(KindList<Kinds...>) noexcept {
  constexpr bool matches[] = {std::is_same_v<Policy, typename Kinds::Policy>...};
  for (std::size_t i = 0; i < sizeof...(Kinds); ++i) {
    if (matches[i]) return i;
  }
  return sizeof...(Kinds);
}
}  // namespace kinds_impl

/// The kind whose policy type is `Policy` (AdaptiveLimit -> AdaptiveLimitKind).
template <class Policy>
using KindOf = KindAt<kinds_impl::policy_index_in<Policy>(AllKinds{})>;

/// Calls `f(std::type_identity<Kind>{})` for every kind, in pipeline order.
template <class F>
constexpr void for_each_kind(F&& f) {
  [&]<std::size_t... I>(std::index_sequence<I...>) { (f(std::type_identity<KindAt<I>>{}), ...); }
  (std::make_index_sequence<kKindCount>{});
}

/// Calls `f(std::type_identity<Kind>{})` for the kind at position `index` (< kKindCount) and
/// returns what it returns (every kind's call must return the same type).
template <class F>
auto visit_kind(std::size_t index, F&& f) -> decltype(f(std::type_identity<KindAt<0>>{})) {
  using Result = decltype(f(std::type_identity<KindAt<0>>{}));
  using Call = Result (*)(F&);
  static constexpr auto kCalls = []<std::size_t... I>(std::index_sequence<I...>) {
    return std::array<Call, kKindCount>{
        [](F& g) -> Result { return g(std::type_identity<KindAt<I>>{}); }...};
  }
  (std::make_index_sequence<kKindCount>{});
  return kCalls[index](f);
}

/// The position of the kind whose `field` name is `name` (e.g. &KindNames::file,
/// "adaptiveLimit"); nullopt when none is.
constexpr std::optional<std::size_t> find_kind(std::string_view KindNames::*field,
                                               std::string_view name) noexcept {
  for (std::size_t i = 0; i < kKindCount; ++i) {
    if (AllKinds::names[i].*field == name) return i;
  }
  return std::nullopt;
}

/// One name of every kind, in list order, e.g. for a "did you mean" hint.
constexpr std::array<std::string_view, kKindCount> kind_names(
    std::string_view KindNames::*field) noexcept {
  std::array<std::string_view, kKindCount> names{};
  for (std::size_t i = 0; i < kKindCount; ++i) names[i] = AllKinds::names[i].*field;
  return names;
}

}  // namespace r4c::detail
