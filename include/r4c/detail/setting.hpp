// SPDX-License-Identifier: Apache-2.0
// What a policy kind's descriptor is made of: its names, and one entry per setting that text
// can set. Each kind's descriptor lives beside its policy (AdaptiveLimitKind at the end of
// <r4c/adaptive_limit.hpp>, ...); <r4c/detail/kinds.hpp> lists them in pipeline order.
//
// How a tool parses a setting and applies it (the registry's file parser, r4c-gen's attribute
// parser and r4c-sim's scenario reader all do exactly this, so a value means the same in each):
//
//   for (const auto& setting : r4c::AdaptiveLimitKind::settings()) {
//     if (setting.key != file_key && setting.name != snake_name) continue;   // find it
//     std::optional<r4c::detail::SettingValue> value = r4c::detail::parse(setting, text);
//     if (!value) error("expected " + r4c::detail::expected(setting));    // malformed text
//     // exception_types: value->type_names holds the names as written; resolve them into
//     // value->types (the registry looks them up in its catalog) before applying.
//     setting.apply(config, *value);   // the config's own setter: throws ConfigException
//   }                                  // (R4C-ATR-003, ...) for a value out of range
//
// `parse` never throws; `apply` throws only what the config's setter throws, and a setter that
// throws leaves the config as it was. Ranges and cross-setting checks stay with the config
// (`validate()`), so no tool re-implements them.
#pragma once

#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "r4c/exception_type.hpp"
#include "r4c/text.hpp"

namespace r4c {

/// A policy kind's names, one for each place it is written.
struct KindNames {
  /// C++ and attributes: "adaptive_limit" (adaptive_limit_policy(), [[r4c::adaptive_limit]],
  /// r4c-sim's tables).
  std::string_view cpp;
  /// The external file's <kind> segment: "adaptiveLimit".
  std::string_view file;
  /// Messages: "adaptive limit".
  std::string_view display;
  /// The `kind` label of metrics and events, and RejectedException::kind(): "adaptivelimit".
  std::string_view metrics;
};

namespace detail {

/// How a setting's value is written.
enum class SettingType {
  integer,          // an int: "10"
  number,           // a double: "0.9"
  boolean,          // "true" or "false"
  duration,         // text::parse_duration's grammar: "500ms"
  choice,           // a name of an enum: "aimd"
  exception_types,  // exception type names separated by commas
  named_numbers     // name:number pairs separated by commas: "user:0.6, prefetch:0.3"
};

/// A parsed value; the member for the setting's type is the one set.
struct SettingValue {
  SettingType type = SettingType::integer;
  int integer = 0;
  double number = 0;
  bool boolean = false;
  std::chrono::nanoseconds duration{0};
  int choice = 0;                       // the enum value, as its underlying int
  std::vector<std::string> type_names;  // exception_types: as written, trimmed
  std::vector<ExceptionType> types;     // exception_types: filled by the caller (see above)
  std::vector<std::pair<std::string, double>> named_numbers;  // named_numbers: in order
};

/// One setting of a kind whose config is `Config`.
template <class Config>
struct Setting {
  /// The external file's key, camelCase: "maxLimit".
  std::string_view key;
  /// The snake_case name: the attribute's and the scenario's key, and (except for the retry's
  /// backoff pair) the config setter's: "max_limit".
  std::string_view name;
  SettingType type = SettingType::integer;
  /// Whether an [[r4c::...]] attribute takes it (the adaptive limit's attribute takes the
  /// members of AdaptiveLimitAttributes only).
  bool attribute = true;
  /// choice only: the value `text` names, or nullopt; and the names, for messages.
  std::optional<int> (*choice)(std::string_view text) = nullptr;
  std::string (*choices)() = nullptr;
  /// Sets the value on `config` through its setter; throws what the setter throws.
  void (*apply)(Config& config, const SettingValue& value) = nullptr;
  /// Reads the value back from `config` through its getter (what `registry.describe()` and a
  /// live reconfiguration compare); null for a setting that cannot be read back.
  SettingValue (*read)(const Config& config) = nullptr;
  /// choice only: the name of the enum value `value`.
  std::string_view (*choice_name)(int value) = nullptr;
};

/// A value as Setting::read returns it, one overload per setting type.
inline SettingValue value_of(int value) {
  SettingValue v;
  v.type = SettingType::integer;
  v.integer = value;
  return v;
}
inline SettingValue value_of(double value) {
  SettingValue v;
  v.type = SettingType::number;
  v.number = value;
  return v;
}
inline SettingValue value_of(bool value) {
  SettingValue v;
  v.type = SettingType::boolean;
  v.boolean = value;
  return v;
}
inline SettingValue value_of(std::chrono::nanoseconds value) {
  SettingValue v;
  v.type = SettingType::duration;
  v.duration = value;
  return v;
}
inline SettingValue value_of(const std::vector<ExceptionType>& types) {
  SettingValue v;
  v.type = SettingType::exception_types;
  v.types = types;
  return v;
}
inline SettingValue value_of(std::vector<std::pair<std::string, double>> pairs) {
  SettingValue v;
  v.type = SettingType::named_numbers;
  v.named_numbers = std::move(pairs);
  return v;
}
template <NamedEnum E>
SettingValue value_of(E value) {
  SettingValue v;
  v.type = SettingType::choice;
  v.choice = static_cast<int>(value);
  return v;
}

/// Setting::choice_name for an enum of the vocabulary.
template <NamedEnum E>
std::string_view choice_name_of(int value) noexcept {
  return to_string(static_cast<E>(value));
}

/// `value` written as the external file writes it ("500ms", "aimd", "0.9"); exception types by
/// `type_names` when the caller filled them, else by their C++ names.
std::string format_value(const SettingValue& value, std::string_view (*choice_name)(int));

/// Whether two values of the same setting are equal (exception types by type, in order).
bool same_value(const SettingValue& first, const SettingValue& second) noexcept;

/// Setting::choice for an enum of the vocabulary.
template <NamedEnum E>
std::optional<int> choice_of(std::string_view text) noexcept {
  const std::optional<E> value = from_string<E>(text);
  if (!value) return std::nullopt;
  return static_cast<int>(*value);
}

/// Parses `text` as a value of `type` (`choice` for SettingType::choice); nullopt when it is
/// malformed. Exception type names are split, not resolved.
std::optional<SettingValue> parse_value(SettingType type,
                                        std::optional<int> (*choice)(std::string_view),
                                        std::string_view text);

/// What a value of the type looks like, for messages: "an integer", "gradient2 or aimd", ...
std::string expected_value(SettingType type, std::string (*choices)());

template <class Config>
std::optional<SettingValue> parse(const Setting<Config>& setting, std::string_view text) {
  return parse_value(setting.type, setting.choice, text);
}

template <class Config>
std::string expected(const Setting<Config>& setting) {
  return expected_value(setting.type, setting.choices);
}

/// The setting whose file key or snake_case name is `name`; nullptr when none is.
template <class Config>
const Setting<Config>* find_setting(std::span<const Setting<Config>> settings,
                                    std::string_view name) noexcept {
  for (const Setting<Config>& setting : settings) {
    if (setting.key == name || setting.name == name) return &setting;
  }
  return nullptr;
}

}  // namespace detail
}  // namespace r4c
