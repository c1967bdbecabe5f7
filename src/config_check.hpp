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
#include <type_traits>
#include <utility>
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

/// A factor that only grows what it multiplies (a backoff's multiplier, a latency tolerance):
/// throws R4C-REG-001 "<setting> is <value>; valid: a finite number >= 1" otherwise, NaN too.
void check_factor(std::string_view setting, double value);

/// validate()'s check for a policy that can make a call wait: observing, it lets every call
/// through at once, so `wait_setting` must be 0. Throws R4C-ATR-009 "mode is observe and
/// <wait_setting> is <wait>; valid: <wait_setting> 0 in observe mode (<why>)".
void check_no_wait_when_observing(bool observe, std::string_view wait_setting,
                                  std::chrono::nanoseconds wait, std::string_view why);

/// A plain setter's body: stores `value` in `member` and returns `config`, for chaining.
template <class Config, class Member, class Value>
Config& store(Config& config, Member& member,
              Value&& value) noexcept(std::is_nothrow_assignable_v<Member&, Value&&>) {
  member = std::forward<Value>(value);
  return config;
}

/// A checked setter's body: `check(leading..., value)` throws ConfigException for a bad value
/// before anything is stored, so a setter that throws leaves the config as it was (what
/// Setting::apply promises); a good value is stored as `store` stores it. `leading` is what the
/// check takes before the value, usually the setting's name: `check_limit("min_limit", value)`.
template <class Config, class Member, class Value, class Check, class... Leading>
Config& store_checked(Config& config, Member& member, Value&& value, Check&& check,
                      const Leading&... leading) {
  check(leading..., std::as_const(value));
  return store(config, member, std::forward<Value>(value));
}

/// Throws R4C-REG-001 "<setting> is an empty function; valid: a callable" unless `present`.
void check_present(std::string_view setting, bool present);

/// store_checked's check of a callable setting (a std::function), by check_present.
struct CallableCheck {
  template <class Callable>
  void operator()(std::string_view setting, const Callable& callable) const {
    check_present(setting, static_cast<bool>(callable));
  }
};
inline constexpr CallableCheck check_callable{};

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
