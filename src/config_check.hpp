// SPDX-License-Identifier: Apache-2.0
// Shared by every policy's config: how values are shown in messages, how a bad one is
// reported, and how two configs are compared. Internal to src/.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "r4c/clock.hpp"
#include "r4c/detail/setting.hpp"
#include "r4c/errors.hpp"
#include "r4c/exception_type.hpp"

namespace r4c::detail {

inline constexpr std::string_view kLimitBelowOne = "R4C-ATR-003";
inline constexpr std::string_view kBoundsOrRange = "R4C-ATR-009";
inline constexpr std::string_view kInvalidValue = "R4C-REG-001";

std::string show(std::int64_t value);
std::string show(int value);
/// The shortest text that reads back as the same double: 0.99, not 0.98999999999999999.
std::string show(double value);
std::string show(bool value);
std::string show(std::chrono::nanoseconds value);  // "1500000 ns"
std::string show(const std::vector<ExceptionType>& types);
/// A setting's value as the overloads above show its type (an enum by `choice_name`).
std::string show(const SettingValue& value, std::string_view (*choice_name)(int));

/// A type's name as C++ spells it ("r4c::CallTimeoutException"), from its mangled name.
std::string demangle(const char* mangled);

/// Throws ConfigException "<code>: <setting> is <value>; valid: <valid>".
[[noreturn]] void fail(std::string_view code, std::string_view setting, const std::string& value,
                       std::string_view valid);

/// validate()'s check for a policy that can make a call wait: observing, it lets every call
/// through at once, so `wait_setting` must be 0. Throws R4C-ATR-009 "mode is observe and
/// <wait_setting> is <wait>; valid: <wait_setting> 0 in observe mode (<why>)".
void check_no_wait_when_observing(bool observe, std::string_view wait_setting,
                                  std::chrono::nanoseconds wait, std::string_view why);

/// A policy constructor's first step: validates its config (throws ConfigException) and hands
/// it on, so the members initialised from it see only valid values.
template <class Config>
const Config& validated(const Config& config) {
  config.validate();
  return config;
}

/// A policy constructor's clock: the given one, or a new SystemClock when none was given.
inline const Clock* or_system_clock(std::shared_ptr<Clock>& clock) {
  if (!clock) clock = std::make_shared<SystemClock>();
  return clock.get();
}

/// Collects the first setting in which two configs differ.
class DifferenceFinder {
 public:
  template <class T>
  DifferenceFinder& compare(const char* setting, const T& first, const T& second) {
    if (!difference_ && !(first == second)) {
      difference_ = SettingDifference{setting, show(first), show(second)};
    }
    return *this;
  }
  std::optional<SettingDifference> result() const { return difference_; }

 private:
  std::optional<SettingDifference> difference_;
};

}  // namespace r4c::detail
