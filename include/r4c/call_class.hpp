// SPDX-License-Identifier: Apache-2.0
// How a server reads a call's priority class from what the caller sent: a header (HTTP) or a
// metadata entry (gRPC) naming one of the adaptive limit's classes, `critical`, `degraded`,
// `best_effort` or `bulk` (case ignored; see docs/adaptive-limit.md for what a class gets).
//
//   r4c::ClassFromRequest rule;                  // reads "r4c-class"; none: critical
//   rule.default_class(r4c::CallClass::best_effort).highest(r4c::CallClass::degraded);
//   rule.resolve("bulk");       // CallClass::bulk
//   rule.resolve("critical");   // CallClass::degraded: a caller cannot climb above highest()
//   rule.resolve("nonsense");   // CallClass::best_effort, as a request that names none
//
// A request is the caller's word, so a server decides how far it trusts it: highest() caps what
// a request may claim, and `bypass` is never taken from a request (a caller that could name it
// would escape the limit): a server bypasses by path or method instead. The defaults trust a
// request to lower its own priority only, since a call that names no class is critical.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "r4c/adaptive_limit_config.hpp"
#include "r4c/text.hpp"

namespace r4c {

/// Reads a request's priority class from one of its headers or metadata entries.
/// Thread safety: a rule is a plain value; resolve() may be called from any thread at once.
class ClassFromRequest {
 public:
  /// The key a caller names its class under: gRPC metadata keys are lower case, HTTP header
  /// names are matched ignoring case.
  static constexpr std::string_view kDefaultKey = "r4c-class";

  /// The key read ("r4c-class"); empty: no class is read, every request is default_class().
  ClassFromRequest& key(std::string value) {
    key_ = std::move(value);
    return *this;
  }
  /// The class of a request that names none, or a value that is no class or is `bypass`
  /// (critical). `bypass` itself throws std::invalid_argument: a server bypasses by path or
  /// method, never for every request.
  ClassFromRequest& default_class(CallClass value) {
    check("default_class", value);
    default_ = value;
    return *this;
  }
  /// The highest class a request may claim (critical); one that claims a higher class gets this
  /// one. `bypass` throws std::invalid_argument.
  ClassFromRequest& highest(CallClass value) {
    check("highest", value);
    highest_ = value;
    return *this;
  }

  const std::string& key() const noexcept { return key_; }
  CallClass default_class() const noexcept { return default_; }
  CallClass highest() const noexcept { return highest_; }

  /// The class of a request whose entry under key() holds `value` (nullopt: it has none).
  CallClass resolve(std::optional<std::string_view> value) const noexcept {
    if (!value || key_.empty()) return default_;
    const std::optional<CallClass> named = from_string<CallClass>(*value);
    if (!named || *named == CallClass::bypass) return default_;
    // Classes are declared from the highest down: a smaller value is a higher class.
    return *named < highest_ ? highest_ : *named;
  }

 private:
  static void check(const char* setting, CallClass value) {
    if (value == CallClass::bypass)
      throw std::invalid_argument(std::string("r4c::ClassFromRequest::") + setting +
                                  ": bypass is no class a request may be given; valid: "
                                  "critical, degraded, best_effort, bulk");
  }

  std::string key_{kDefaultKey};
  CallClass default_ = CallClass::critical;
  CallClass highest_ = CallClass::critical;
};

}  // namespace r4c
