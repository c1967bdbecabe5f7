// SPDX-License-Identifier: Apache-2.0
// The external configuration's text format: one `key=value` per line, `#` and `!` comments,
// blank lines, spaces around the key, the `=` and the value ignored. Keys are
//   defaults.<kind>.<key>=...            every instance of a policy kind
//   configs.<name>.<kind>.<key>=...      a named config
//   instances.<id>.<kind>.<key>=...      one instance (an id may contain dots: the last two
//                                        segments are always the kind and the key)
// The registry parses and applies it; the values' meaning lives with each policy's keys.
#pragma once

#include <chrono>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "r4c/detail/setting.hpp"
#include "r4c/errors.hpp"

namespace r4c::detail {

enum class ConfigScope { defaults, named, instance };

/// One `key=value` line.
struct ConfigEntry {
  ConfigScope scope = ConfigScope::defaults;
  std::string scope_name;  // the named config or instance id; "" for defaults
  std::string kind;        // e.g. "adaptiveLimit"
  std::string key;         // e.g. "maxLimit"
  std::string value;       // trimmed
  std::string origin;      // the file's path, or "config text"
  int line = 0;
  /// "r4c.properties:3: key defaults.adaptiveLimit.maxLimit", for messages.
  std::string where() const;
};

/// A policy kind's name in the file and the keys it accepts.
struct KindKeys {
  std::string_view kind;
  std::span<const std::string_view> keys;
};

/// Parses the text; checks every line's shape, kind and key (R4C-CFG-002 for a malformed
/// line, R4C-CFG-003 for an unknown kind or key, naming the closest valid one). Values are
/// checked later, by the kind that applies them.
std::vector<ConfigEntry> parse_config(std::string_view text, std::string_view origin,
                                      std::span<const KindKeys> kinds);
/// The same, collecting every bad line's error into `errors` (in line order) instead of throwing
/// at the first; returns the good lines.
std::vector<ConfigEntry> parse_config(std::string_view text, std::string_view origin,
                                      std::span<const KindKeys> kinds,
                                      std::vector<ConfigError>& errors);

/// Reads a whole file; R4C-CFG-001 naming the path when it is missing or unreadable.
std::string read_config_file(const std::filesystem::path& path);

/// `text` in single quotes, in a printable form whatever it holds: a NUL, a control character
/// or a byte that is not UTF-8 is escaped (\x00, \t, \xff), as are quotes and backslashes, so a
/// message names bad input exactly and is never cut short.
std::string quote(std::string_view text);

/// text::closest, under its older name.
std::string_view closest(std::string_view word, std::span<const std::string_view> candidates);

/// Strict value parsers; each throws ConfigException naming `where`, the value and the type
/// expected (R4C-CFG-004), or R4C-ATR-001 for a malformed duration.
int parse_int(std::string_view value, const std::string& where);
double parse_double(std::string_view value, const std::string& where);
bool parse_bool(std::string_view value, const std::string& where);
/// text::parse_duration's grammar: an integer with a unit, ns, us, ms, s, m or h ("500ms").
std::chrono::nanoseconds parse_duration(std::string_view value, const std::string& where);

/// Throws the file's message for `value`, which is not a `type`: R4C-ATR-001 for a duration,
/// R4C-CFG-004 otherwise ("<where> is '<value>'; expected <expected>").
[[noreturn]] void malformed_value(SettingType type, const std::string& expected,
                                  std::string_view value, const std::string& where);

/// One setting's value from the file: parsed by the setting's own type, or rejected with the
/// file's message (exception type names are left to the caller to resolve).
template <class Config>
SettingValue parse_setting(const Setting<Config>& setting, std::string_view value,
                           const std::string& where) {
  std::optional<SettingValue> parsed = parse(setting, value);
  if (!parsed) malformed_value(setting.type, expected(setting), value, where);
  return *std::move(parsed);
}

}  // namespace r4c::detail
