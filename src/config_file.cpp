// SPDX-License-Identifier: Apache-2.0
#include "r4c/detail/config_file.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <fstream>
#include <limits>
#include <sstream>

#include "r4c/errors.hpp"

namespace r4c::detail {
namespace {

constexpr std::string_view kUnreadable = "R4C-CFG-001";
constexpr std::string_view kMalformedLine = "R4C-CFG-002";
constexpr std::string_view kUnknownName = "R4C-CFG-003";
constexpr std::string_view kWrongType = "R4C-CFG-004";
constexpr std::string_view kDurationSyntax = "R4C-ATR-001";

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\f\v");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t\r\f\v") - first + 1);
}

std::string in_quotes(std::string_view text) { return quote(text); }

std::string joined(std::span<const std::string_view> names) {
  std::string text;
  for (std::string_view name : names) {
    if (!text.empty()) text += ", ";
    text += name;
  }
  return text;
}

[[noreturn]] void wrong_type(const std::string& where, std::string_view value,
                             std::string_view expected) {
  throw ConfigException(kWrongType,
                        where + " is " + in_quotes(value) + "; expected " + std::string(expected));
}

// Splits "<scope>.<...>.<kind>.<key>" into an entry; the caller has checked it has a dot.
ConfigEntry split_key(std::string_view key, const std::string& where) {
  ConfigEntry entry;
  const auto key_dot = key.rfind('.');
  const auto kind_dot = key_dot == 0 ? std::string_view::npos : key.rfind('.', key_dot - 1);
  auto malformed = [&](std::string_view what) {
    throw ConfigException(kMalformedLine,
                          where + ": " + std::string(what) +
                              "; expected defaults.<kind>.<key>, configs.<name>.<kind>.<key> or "
                              "instances.<id>.<kind>.<key>");
  };
  if (key_dot == std::string_view::npos || kind_dot == std::string_view::npos) {
    malformed("too few parts");
  }
  entry.key = std::string(key.substr(key_dot + 1));
  entry.kind = std::string(key.substr(kind_dot + 1, key_dot - kind_dot - 1));
  const std::string_view head = key.substr(0, kind_dot);
  const std::string_view first = head.substr(0, head.find('.'));
  if (first == "defaults" && head != "defaults") {
    malformed(in_quotes(key) + " has a part too many for defaults");
  }
  if ((first == "configs" || first == "instances") && head == first) {
    malformed(in_quotes(key) + " names no " +
              std::string(first == "configs" ? "config" : "instance"));
  }
  if (head == "defaults") {
    entry.scope = ConfigScope::defaults;
  } else if (head.starts_with("configs.") || head.starts_with("instances.")) {
    const bool named = head.starts_with("configs.");
    entry.scope = named ? ConfigScope::named : ConfigScope::instance;
    entry.scope_name = std::string(head.substr(head.find('.') + 1));
  } else {
    const std::array<std::string_view, 3> scopes = {"defaults", "configs", "instances"};
    throw ConfigException(kUnknownName, where + ": unknown scope " + in_quotes(first) +
                                            "; did you mean " + in_quotes(closest(first, scopes)) +
                                            "? valid: defaults, configs.<name>, instances.<id>");
  }
  if (entry.key.empty() || entry.kind.empty() ||
      (entry.scope != ConfigScope::defaults && entry.scope_name.empty())) {
    malformed("an empty part");
  }
  return entry;
}

}  // namespace

std::string quote(std::string_view text) {
  constexpr std::string_view kHex = "0123456789abcdef";
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('\'');
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    // UTF-8 passes through whole; a byte that starts no valid sequence is escaped.
    std::size_t length = 1;
    if (byte >= 0x80) {
      length = byte >= 0xc2 && byte <= 0xdf   ? 2
               : byte >= 0xe0 && byte <= 0xef ? 3
               : byte >= 0xf0 && byte <= 0xf4 ? 4
                                              : 0;
      for (std::size_t k = 1; k < length; ++k) {
        if (i + k >= text.size() || (static_cast<unsigned char>(text[i + k]) & 0xc0) != 0x80) {
          length = 0;
        }
      }
    }
    if (byte == '\\' || byte == '\'') {
      out.push_back('\\');
      out.push_back(static_cast<char>(byte));
    } else if (byte == '\t') {
      out.append("\\t");
    } else if (byte == '\n') {
      out.append("\\n");
    } else if (byte == '\r') {
      out.append("\\r");
    } else if (byte < 0x20 || byte == 0x7f || length == 0) {
      out.append("\\x").push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 0xf]);
    } else {
      out.append(text.substr(i, length));
      i += length - 1;
    }
  }
  out.push_back('\'');
  return out;
}

std::string ConfigEntry::where() const {
  std::string scope_key;
  switch (scope) {
    case ConfigScope::defaults:
      scope_key = "defaults";
      break;
    case ConfigScope::named:
      scope_key = "configs." + scope_name;
      break;
    case ConfigScope::instance:
      scope_key = "instances." + scope_name;
      break;
  }
  return origin + ":" + std::to_string(line) + ": key " + scope_key + "." + kind + "." + key;
}

std::string_view closest(std::string_view word, std::span<const std::string_view> candidates) {
  return text::closest(word, candidates);
}

std::vector<ConfigEntry> parse_config(std::string_view text, std::string_view origin,
                                      std::span<const KindKeys> kinds,
                                      std::vector<ConfigError>& errors) {
  std::vector<ConfigEntry> entries;
  std::vector<std::string_view> kind_names;
  for (const KindKeys& kind : kinds) kind_names.push_back(kind.kind);
  // One line; throws its error, which the loop collects.
  auto parse_line = [&](std::string_view line, int line_number) {
    const std::string where = std::string(origin) + ":" + std::to_string(line_number);
    const auto eq = line.find('=');
    if (eq == std::string_view::npos) {
      throw ConfigException(kMalformedLine,
                            where + ": " + in_quotes(line) + " has no '='; expected key=value");
    }
    const std::string_view key = trim(line.substr(0, eq));
    if (key.empty()) {
      throw ConfigException(kMalformedLine, where + ": the key is empty; expected key=value");
    }
    ConfigEntry entry = split_key(key, where);
    entry.value = std::string(trim(line.substr(eq + 1)));
    entry.origin = std::string(origin);
    entry.line = line_number;

    const auto kind = std::find_if(kinds.begin(), kinds.end(),
                                   [&](const KindKeys& k) { return k.kind == entry.kind; });
    if (kind == kinds.end()) {
      throw ConfigException(kUnknownName, where + ": unknown policy kind " + in_quotes(entry.kind) +
                                              " in " + in_quotes(key) + "; did you mean " +
                                              in_quotes(closest(entry.kind, kind_names)) +
                                              "? valid: " + joined(kind_names));
    }
    if (std::find(kind->keys.begin(), kind->keys.end(), entry.key) == kind->keys.end()) {
      throw ConfigException(kUnknownName, where + ": unknown key " + in_quotes(entry.key) +
                                              " for " + entry.kind + " in " + in_quotes(key) +
                                              "; did you mean " +
                                              in_quotes(closest(entry.key, kind->keys)) +
                                              "? valid: " + joined(kind->keys));
    }
    entries.push_back(std::move(entry));
  };
  int line_number = 0;
  while (!text.empty()) {
    const auto end = text.find('\n');
    const std::string_view raw = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    ++line_number;
    const std::string_view line = trim(raw);
    if (line.empty() || line.front() == '#' || line.front() == '!') continue;
    try {
      parse_line(line, line_number);
    } catch (const ConfigException& e) {
      errors.push_back({e.code(), e.what()});
    }
  }
  return entries;
}

std::vector<ConfigEntry> parse_config(std::string_view text, std::string_view origin,
                                      std::span<const KindKeys> kinds) {
  std::vector<ConfigError> errors;
  std::vector<ConfigEntry> entries = parse_config(text, origin, kinds, errors);
  if (!errors.empty()) throw ConfigException(errors.front().message);
  return entries;
}

std::string read_config_file(const std::filesystem::path& path) {
  // An ifstream opens a directory and reads nothing from it: an empty configuration, silently.
  std::error_code kind_error;
  if (std::filesystem::is_directory(path, kind_error)) {
    throw ConfigException(kUnreadable, "config file " + in_quotes(path.string()) +
                                           " is a directory; give .config_file() a readable file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code error;
    const bool exists = std::filesystem::exists(path, error);
    throw ConfigException(kUnreadable, "config file " + in_quotes(path.string()) +
                                           (exists ? " cannot be read" : " does not exist") +
                                           "; give .config_file() a readable file");
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    throw ConfigException(
        kUnreadable, "config file " + in_quotes(path.string()) + " could not be read to the end");
  }
  return text.str();
}

int parse_int(std::string_view value, const std::string& where) {
  const auto parsed = text::parse_int(value);
  if (!parsed) wrong_type(where, value, expected_value(SettingType::integer, nullptr));
  return *parsed;
}

double parse_double(std::string_view value, const std::string& where) {
  const auto parsed = text::parse_number(value);
  if (!parsed) wrong_type(where, value, expected_value(SettingType::number, nullptr));
  return *parsed;
}

bool parse_bool(std::string_view value, const std::string& where) {
  const auto parsed = text::parse_bool(value);
  if (!parsed) wrong_type(where, value, expected_value(SettingType::boolean, nullptr));
  return *parsed;
}

std::chrono::nanoseconds parse_duration(std::string_view value, const std::string& where) {
  const auto parsed = text::parse_duration(value);
  if (!parsed) malformed_value(SettingType::duration, "", value, where);
  return *parsed;
}

void malformed_value(SettingType type, const std::string& expected, std::string_view value,
                     const std::string& where) {
  if (type == SettingType::duration) {
    throw ConfigException(kDurationSyntax, where + " is " + in_quotes(value) + "; expected " +
                                               expected_value(SettingType::duration, nullptr));
  }
  wrong_type(where, value, expected);
}

}  // namespace r4c::detail
