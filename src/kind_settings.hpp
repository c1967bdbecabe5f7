// SPDX-License-Identifier: Apache-2.0
// How src/<policy>.cpp writes its kind's table of settings: one row per setting.
#pragma once

#include <string>
#include <string_view>

#include "r4c/detail/setting.hpp"
#include "r4c/errors.hpp"

namespace r4c::detail {

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

  template <NamedEnum E>
  static constexpr Setting<Config> choice(std::string_view key, std::string_view name, Apply apply,
                                          Read read = nullptr, bool attribute = true) {
    return {key,   name, SettingType::choice, attribute, &choice_of<E>, &text::choices<E>,
            apply, read, &choice_name_of<E>};
  }
};

/// What a policy's reconfigure() checks first: every setting its `live_setting(key)` says is
/// fixed has the same value in `next` as in `current`. Throws R4C-REG-011 for the first that
/// differs (the registry checks the same before it applies anything, see src/registry.cpp).
template <class Kind>
void check_fixed_settings(const typename Kind::Config& current, const typename Kind::Config& next,
                          std::string_view instance_id) {
  for (const auto& setting : Kind::settings()) {
    if (!setting.read || Kind::Policy::live_setting(setting.key)) continue;
    const SettingValue was = setting.read(current);
    if (same_value(was, setting.read(next))) continue;
    throw ConfigException("R4C-REG-011", std::string(Kind::kNames.display) + " '" +
                                             std::string(instance_id) +
                                             "': " + std::string(setting.key) +
                                             " cannot change on a live instance yet (it is "
                                             "fixed when the policy is built); valid: " +
                                             format_value(was, setting.choice_name));
  }
}

}  // namespace r4c::detail
