// SPDX-License-Identifier: Apache-2.0
// What every policy's config shares, whatever its kind: an exception type a failure is matched
// against (`drop_on`, `retry_on`, `record_on`, ...), and the first setting in which two configs
// differ (how the registry explains R4C-REG-008). A policy includes this, not the adaptive
// limit's config, unless it uses the adaptive limit.
#pragma once

#include <string>
#include <typeindex>
#include <typeinfo>

namespace r4c {

/// An exception type that a failure may match by dynamic type (derived classes included).
class ExceptionType {
 public:
  template <class E>
  static ExceptionType of() noexcept {
    return ExceptionType(typeid(E), &matches_current<E>);
  }
  std::type_index type() const noexcept { return type_; }
  /// The type's name as C++ spells it, e.g. "r4c::CallTimeoutException".
  std::string name() const;
  /// Whether the exception being handled right now (inside a `catch`) is an `E` or derives
  /// from it. Only valid while an exception is being handled.
  bool matches_current() const noexcept { return matches_(); }
  friend bool operator==(const ExceptionType& a, const ExceptionType& b) noexcept {
    return a.type_ == b.type_;
  }

 private:
  using Matcher = bool (*)() noexcept;
  ExceptionType(const std::type_info& type, Matcher matches) noexcept
      : type_(type), matches_(matches) {}

  template <class E>
  static bool matches_current() noexcept {
    try {
      throw;  // rethrows the exception being handled; no allocation
    } catch (const E&) {
      return true;
    } catch (...) {
      return false;
    }
  }

  std::type_index type_;
  Matcher matches_;
};

/// The first setting, in declaration order, in which two configs differ.
struct SettingDifference {
  std::string setting;  // e.g. "max_limit"
  std::string first;    // its value in the first config, as text
  std::string second;   // its value in the second config
};

}  // namespace r4c
