// SPDX-License-Identifier: Apache-2.0
// How src/<policy>.cpp writes its kind's table of settings: one row per setting.
#pragma once

#include <chrono>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "config_check.hpp"
#include "r4c/detail/setting.hpp"
#include "r4c/errors.hpp"

namespace r4c::detail {

/// A Field whose value SettingValue's `member` holds and whose getter returns a ReadType.
template <class ReadType, SettingType type, auto member>
struct ValueField {
  static constexpr SettingType kType = type;
  using Read = ReadType;
  static const auto& of(const SettingValue& value) noexcept { return value.*member; }
};

/// How a setting of type T reaches a config's plain setter `Config& name(T)` and comes back from
/// its getter (`Read name() const`).
template <class T>
struct Field;
template <>
struct Field<int> : ValueField<int, SettingType::integer, &SettingValue::integer> {};
template <>
struct Field<double> : ValueField<double, SettingType::number, &SettingValue::number> {};
template <>
struct Field<bool> : ValueField<bool, SettingType::boolean, &SettingValue::boolean> {};
template <>
struct Field<std::chrono::nanoseconds>
    : ValueField<std::chrono::nanoseconds, SettingType::duration, &SettingValue::duration> {};
/// The getter of exception types is `name_types()`, and returns the config's own list.
template <>
struct Field<std::vector<ExceptionType>>
    : ValueField<const std::vector<ExceptionType>&, SettingType::exception_types,
                 &SettingValue::types> {};
template <NamedEnum E>
struct Field<E> {
  static constexpr SettingType kType = SettingType::choice;
  using Read = E;
  static E of(const SettingValue& value) noexcept { return static_cast<E>(value.choice); }
};

template <class Config>
struct SettingRows {
  using Apply = void (*)(Config&, const SettingValue&);
  /// Reads the value back: `[](const auto& c) { return value_of(c.max_limit()); }`.
  using Read = SettingValue (*)(const Config&);

  static constexpr Setting<Config> row(std::string_view key, std::string_view name,
                                       SettingType type, Apply apply, Read read = nullptr,
                                       bool attribute = true) {
    return {key, name, type, attribute, nullptr, nullptr, apply, read, nullptr};
  }

  /// A setting the file takes and an [[r4c::...]] attribute does not.
  static constexpr Setting<Config> file_only(std::string_view key, std::string_view name,
                                             SettingType type, Apply apply, Read read = nullptr) {
    return row(key, name, type, apply, read, false);
  }

  template <class T>
  using Setter = Config& (Config::*)(T);
  template <class T>
  using Getter = typename Field<T>::Read (Config::*)() const;

  /// A setting that is one setter and one getter of the config, which check the value:
  /// `field<int, &Config::max_limit, &Config::max_limit>("maxLimit", "max_limit")`. Settings
  /// with logic of their own (a pair of settings behind one setter, ...) write `row` instead.
  template <class T, Setter<T> set, Getter<T> get>
  static constexpr Setting<Config> field(std::string_view key, std::string_view name,
                                         bool attribute = true) {
    if constexpr (NamedEnum<T>) {
      return choice<T>(key, name, &apply_field<T, set>, &read_field<T, get>, attribute);
    } else {
      return row(key, name, Field<T>::kType, &apply_field<T, set>, &read_field<T, get>, attribute);
    }
  }

  /// A field the file takes and an [[r4c::...]] attribute does not.
  template <class T, Setter<T> set, Getter<T> get>
  static constexpr Setting<Config> file_field(std::string_view key, std::string_view name) {
    return field<T, set, get>(key, name, false);
  }

  template <NamedEnum E>
  static constexpr Setting<Config> choice(std::string_view key, std::string_view name, Apply apply,
                                          Read read = nullptr, bool attribute = true) {
    return {key,   name, SettingType::choice, attribute, &choice_of<E>, &text::choices<E>,
            apply, read, &choice_name_of<E>};
  }

 private:
  template <class T, Setter<T> set>
  static void apply_field(Config& config, const SettingValue& value) {
    (config.*set)(Field<T>::of(value));
  }
  template <class T, Getter<T> get>
  static SettingValue read_field(const Config& config) {
    return value_of((config.*get)());
  }
};

/// How `setting` differs between two configs, shown as detail::show shows its type; nullopt when
/// its values are the same or it cannot be read back.
template <class Config>
std::optional<SettingDifference> setting_difference(const Setting<Config>& setting,
                                                    const Config& first, const Config& second) {
  if (!setting.read) return std::nullopt;  // nothing to compare it by
  const SettingValue a = setting.read(first);
  const SettingValue b = setting.read(second);
  if (same_value(a, b)) return std::nullopt;
  return SettingDifference{std::string(setting.name), show(a, setting.choice_name),
                           show(b, setting.choice_name)};
}

/// first_difference for a kind that compares its settings and nothing else: the first setting,
/// in the table's order, whose values differ.
template <class Kind>
std::optional<SettingDifference> settings_difference(const typename Kind::Config& first,
                                                     const typename Kind::Config& second) {
  for (const auto& setting : Kind::settings()) {
    if (auto difference = setting_difference(setting, first, second)) return difference;
  }
  return std::nullopt;
}

/// The same over the settings `names` (snake_case, each in the kind's table), in that order: for
/// a kind whose first_difference has an order of its own.
template <class Kind>
std::optional<SettingDifference> settings_difference(
    const typename Kind::Config& first, const typename Kind::Config& second,
    std::initializer_list<std::string_view> names) {
  for (const std::string_view name : names) {
    const auto* setting = find_setting(Kind::settings(), name);
    if (setting == nullptr) throw std::logic_error("no setting " + std::string(name));
    if (auto difference = setting_difference(*setting, first, second)) return difference;
  }
  return std::nullopt;
}

}  // namespace r4c::detail
