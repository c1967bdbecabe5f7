// The [[r4c::...]] attributes: found in a declaration's tokens, checked, and turned into the
// settings the generated constructor hands to the registry.
//
// Compilers drop attributes of a namespace they do not know, and so does libclang, so r4c-gen
// reads them from the tokens in front of each declaration. This file knows nothing of libclang:
// it works on plain tokens, which keeps the rules in one place and testable.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "diagnostics.hpp"

namespace r4c::gen {

/// One token of the header, as written.
struct Token {
  enum class Kind { punctuation, keyword, identifier, literal };
  Kind kind = Kind::punctuation;
  std::string text;
  Location where;
};

/// The policies, in the pipeline's order from the outside in.
enum class PolicyKind {
  retry,
  hedge,
  circuit_breaker,
  rate_limiter,
  adaptive_limit,
  timeout,
  bulkhead
};
inline constexpr std::array<PolicyKind, 7> kPolicyKinds = {
    PolicyKind::retry,        PolicyKind::hedge,          PolicyKind::circuit_breaker,
    PolicyKind::rate_limiter, PolicyKind::adaptive_limit, PolicyKind::timeout,
    PolicyKind::bulkhead};

/// "adaptive_limit": the attribute's name, which is also the PipelineStages member's.
std::string_view attribute_name(PolicyKind kind) noexcept;
/// "adaptive limit", for messages.
std::string_view label(PolicyKind kind) noexcept;
/// Whether a call through the policy may fail with the policy's own exception (every policy but
/// the retry, which only passes on what the call threw).
bool can_throw(PolicyKind kind) noexcept;

/// One [[r4c::<policy>(...)]] attribute, checked.
struct Policy {
  PolicyKind kind = PolicyKind::adaptive_limit;
  Location where;       // of the attribute's name
  std::string written;  // the attribute as written, e.g. "r4c::timeout(\"2s\")"
  std::string name;     // the instance name ("" = the method id)
  std::string config;   // the named config ("" = none)
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
};

/// Parses the attribute-specifier whose "[[" starts at `tokens[begin]`. Items of other
/// namespaces are skipped; r4c's are checked, each error reported to `diagnostics` (the
/// policy is then left out). Returns nullopt when `tokens[begin]` does not start a "[[".
std::optional<AttributeGroup> parse_attribute_group(const std::vector<Token>& tokens,
                                                    std::size_t begin, Diagnostics& diagnostics);

}  // namespace r4c::gen
