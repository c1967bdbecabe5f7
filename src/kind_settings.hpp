// SPDX-License-Identifier: Apache-2.0
// How src/<policy>.cpp writes its kind's table of settings: one row per setting.
#pragma once

#include <string_view>

#include "r4c/detail/setting.hpp"

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

}  // namespace r4c::detail
