// SPDX-License-Identifier: Apache-2.0
// The [[r4c::...]] attributes: found in a declaration's tokens, checked, and turned into the
// settings the generated constructor hands to the registry.
//
// Compilers drop attributes of a namespace they do not know, and so does libclang, so r4c-gen
// reads them from the tokens in front of each declaration. This file knows nothing of libclang:
// it works on plain tokens, which keeps the rules in one place and testable.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "diagnostics.hpp"
#include "r4c/detail/kinds.hpp"

namespace r4c::gen {

/// One token of the header, as written.
struct Token {
  enum class Kind { punctuation, keyword, identifier, literal };
  Kind kind = Kind::punctuation;
  std::string text;
  Location where;
};

/// A policy kind: its position in the library's one list of kinds (r4c::detail::AllKinds),
/// which is the pipeline's order from the outside in. Everything r4c-gen knows of a kind (its
/// names, its settings, how a value is parsed and applied) comes from that list.
using PolicyKind = std::size_t;
inline constexpr std::size_t kKindCount = r4c::detail::kKindCount;
inline constexpr PolicyKind kRetry = r4c::detail::kKindIndex<r4c::RetryKind>;
inline constexpr PolicyKind kHedge = r4c::detail::kKindIndex<r4c::HedgeKind>;
inline constexpr PolicyKind kAdaptiveLimit = r4c::detail::kKindIndex<r4c::AdaptiveLimitKind>;

/// The one r4c attribute that is no policy: [[r4c::bypass]] on a method.
inline constexpr std::string_view kBypassAttribute = "bypass";

/// "adaptive_limit": the attribute's name, which also names the registry's adaptive_limit_policy().
std::string_view attribute_name(PolicyKind kind) noexcept;
/// "adaptive limit", for messages.
std::string_view label(PolicyKind kind) noexcept;
/// Whether a call through the policy may fail with the policy's own exception (every policy but
/// the retry, which only passes on what the call threw).
bool can_throw(PolicyKind kind) noexcept;

/// One [[r4c::<policy>(...)]] attribute, checked.
struct Policy {
  PolicyKind kind = kAdaptiveLimit;
  Location where;           // of the attribute's name
  std::string written;      // the attribute as written, e.g. "r4c::timeout(\"2s\")"
  std::string name;         // the instance name ("" = the method id)
  std::string config;       // the named config ("" = none)
  std::string config_type;  // the policy's config as C++ spells it: "r4c::TimeoutConfig"
  // adaptive_limit only: the class its calls say (call_class = bulk), as C++:
  // "r4c::CallClass::bulk"; "" = critical.
  std::string call_class;
  // The settings, as C++. For the adaptive limit: designated initializers of
  // r4c::AdaptiveLimitAttributes, in member order (".initial_limit = 10"). For the others:
  // calls on the config `c`, in the order written ("c.max_attempts(3)").
  std::vector<std::string> settings;
};

/// The r4c attributes of one attribute-specifier `[[...]]`, and where it ends.
struct AttributeGroup {
  std::size_t begin = 0;  // index of the first '['
  std::size_t end = 0;    // one past the closing "]]"
  std::vector<Policy> policies;
  bool has_r4c = false;  // some item is r4c's (checked or not)
  // [[r4c::bypass]]: the method takes none of its class's policies (a gRPC health check).
  std::optional<Location> bypass;
};

/// Parses the attribute-specifier whose "[[" starts at `tokens[begin]`. Items of other
/// namespaces are skipped; r4c's are checked, each error reported to `diagnostics` (the
/// policy is then left out). Returns nullopt when `tokens[begin]` does not start a "[[".
std::optional<AttributeGroup> parse_attribute_group(const std::vector<Token>& tokens,
                                                    std::size_t begin, Diagnostics& diagnostics);

}  // namespace r4c::gen
