// SPDX-License-Identifier: Apache-2.0
// What every policy's config shares: how values are shown in messages and reported when bad.
#include "config_check.hpp"

#include <cxxabi.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <memory>

namespace r4c {
namespace detail {

std::string show(std::int64_t value) { return std::to_string(value); }
std::string show(int value) { return std::to_string(value); }

std::string show(double value) {
  char text[32];
  const auto result = std::to_chars(text, text + sizeof text, value);
  return std::string(text, result.ptr);
}

std::string show(bool value) { return value ? "true" : "false"; }

std::string show(std::chrono::nanoseconds value) { return show(value.count()) + " ns"; }

std::string show(const std::vector<ExceptionType>& types) {
  std::string text = "{";
  for (const ExceptionType& type : types) {
    if (text.size() > 1) text += ", ";
    text += type.name();
  }
  return text + "}";
}

std::string show(const SettingValue& value, std::string_view (*choice_name)(int)) {
  // Only these two are written otherwise in the file (format_value: "1500us", "A, B").
  if (value.type == SettingType::duration) return show(value.duration);
  if (value.type == SettingType::exception_types) return show(value.types);
  return format_value(value, choice_name);
}

std::string demangle(const char* mangled) {
  int status = 0;
  const std::unique_ptr<char, void (*)(void*)> demangled(
      abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  return status == 0 && demangled ? std::string(demangled.get()) : std::string(mangled);
}

void fail(std::string_view code, std::string_view setting, const std::string& value,
          std::string_view valid) {
  throw ConfigException(code,
                        std::string(setting) + " is " + value + "; valid: " + std::string(valid));
}

void check_present(std::string_view setting, bool present) {
  if (!present) fail(kInvalidValue, setting, "an empty function", "a callable");
}

void check_factor(std::string_view setting, double value) {
  if (!(value >= 1.0 && std::isfinite(value))) {
    fail(kInvalidValue, setting, show(value), "a finite number >= 1");
  }
}

void check_no_wait_when_observing(bool observe, std::string_view wait_setting,
                                  std::chrono::nanoseconds wait, std::string_view why) {
  if (!observe || wait.count() <= 0) return;
  const std::string setting(wait_setting);
  fail(kBoundsOrRange, "mode", "observe and " + setting + " is " + show(wait),
       setting + " 0 in observe mode (" + std::string(why) + ")");
}

}  // namespace detail

std::string ExceptionType::name() const { return detail::demangle(type_.name()); }

}  // namespace r4c
