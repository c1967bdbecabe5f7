// SPDX-License-Identifier: Apache-2.0
// How src/<policy>.cpp writes its kind's table of settings: one row per setting.
#pragma once

#include <string_view>

#include "r4c/detail/setting.hpp"

namespace r4c::detail {

template <class Config>
struct SettingRows {
  using Apply = void (*)(Config&, const SettingValue&);

  static constexpr Setting<Config> row(std::string_view key, std::string_view name,
                                       SettingType type, Apply apply, bool attribute = true) {
    return {key, name, type, attribute, nullptr, nullptr, apply};
  }

  /// A setting the file takes and an [[r4c::...]] attribute does not.
  static constexpr Setting<Config> file_only(std::string_view key, std::string_view name,
                                             SettingType type, Apply apply) {
    return row(key, name, type, apply, false);
  }

  template <NamedEnum E>
  static constexpr Setting<Config> choice(std::string_view key, std::string_view name, Apply apply,
                                          bool attribute = true) {
    return {key, name, SettingType::choice, attribute, &choice_of<E>, &text::choices<E>, apply};
  }
};

}  // namespace r4c::detail
