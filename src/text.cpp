// SPDX-License-Identifier: Apache-2.0
#include "r4c/text.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <limits>

#include "r4c/detail/setting.hpp"

namespace r4c {
namespace text {
namespace {

struct Unit {
  std::string_view name;
  std::int64_t ns;
};
// Largest first: format_duration takes the first that divides the value exactly.
constexpr Unit kUnits[] = {{"h", 3'600'000'000'000}, {"m", 60'000'000'000}, {"s", 1'000'000'000},
                           {"ms", 1'000'000},        {"us", 1'000},         {"ns", 1}};

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::optional<std::chrono::nanoseconds> parse_duration(std::string_view text) noexcept {
  std::int64_t amount = 0;
  const char* const first = text.data();
  const char* const last = text.data() + text.size();
  const auto [end, error] = std::from_chars(first, last, amount);
  const std::string_view unit(end, static_cast<std::size_t>(last - end));
  const auto* found = std::find_if(std::begin(kUnits), std::end(kUnits),
                                   [&](const Unit& u) { return u.name == unit; });
  if (error != std::errc() || end == first || amount < 0 || found == std::end(kUnits) ||
      amount > std::numeric_limits<std::int64_t>::max() / found->ns) {
    return std::nullopt;
  }
  return std::chrono::nanoseconds(amount * found->ns);
}

std::string format_duration(std::chrono::nanoseconds value) {
  const std::int64_t ns = value.count();
  if (ns == 0) return "0s";
  for (const Unit& unit : kUnits) {
    if (ns % unit.ns == 0) return std::to_string(ns / unit.ns) + std::string(unit.name);
  }
  return std::to_string(ns) + "ns";  // unreachable: 1 ns divides every value
}

std::optional<int> parse_int(std::string_view text) noexcept {
  int result = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), result);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return result;
}

std::optional<double> parse_number(std::string_view text) noexcept {
  double result = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), result);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return result;
}

std::optional<bool> parse_bool(std::string_view text) noexcept {
  if (equal_ignoring_case(text, "true")) return true;
  if (equal_ignoring_case(text, "false")) return false;
  return std::nullopt;
}

std::vector<std::string_view> split_list(std::string_view text) {
  std::vector<std::string_view> pieces;
  while (!trim(text).empty()) {
    const auto comma = text.find(',');
    pieces.push_back(trim(text.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    text = text.substr(comma + 1);
  }
  return pieces;
}

std::string_view closest(std::string_view word,
                         std::span<const std::string_view> candidates) noexcept {
  std::string_view best;
  std::size_t best_distance = std::numeric_limits<std::size_t>::max();
  for (std::string_view candidate : candidates) {
    const std::size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace text

namespace detail {

std::optional<SettingValue> parse_value(SettingType type,
                                        std::optional<int> (*choice)(std::string_view),
                                        std::string_view text) {
  SettingValue value;
  value.type = type;
  // The parsed value into the type's member, or nullopt for malformed text.
  auto take = [&value](const auto& parsed, auto& member) -> std::optional<SettingValue> {
    if (!parsed) return std::nullopt;
    member = *parsed;
    return value;
  };
  switch (type) {
    case SettingType::integer:
      return take(text::parse_int(text), value.integer);
    case SettingType::number:
      return take(text::parse_number(text), value.number);
    case SettingType::boolean:
      return take(text::parse_bool(text), value.boolean);
    case SettingType::duration:
      return take(text::parse_duration(text), value.duration);
    case SettingType::choice:
      return take(choice != nullptr ? choice(text) : std::nullopt, value.choice);
    case SettingType::exception_types:
      for (std::string_view name : text::split_list(text)) value.type_names.emplace_back(name);
      return value;
    case SettingType::named_numbers:
      for (std::string_view pair : text::split_list(text)) {
        const std::size_t colon = pair.find(':');
        if (colon == std::string_view::npos) return std::nullopt;
        std::string_view name = pair.substr(0, colon);
        while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.remove_suffix(1);
        std::string_view number = pair.substr(colon + 1);
        while (!number.empty() && (number.front() == ' ' || number.front() == '\t'))
          number.remove_prefix(1);
        const std::optional<double> parsed = text::parse_number(number);
        if (!parsed) return std::nullopt;
        value.named_numbers.emplace_back(std::string(name), *parsed);
      }
      return value;
  }
  return std::nullopt;
}

std::string expected_value(SettingType type, std::string (*choices)()) {
  switch (type) {
    case SettingType::integer:
      return "an integer";
    case SettingType::number:
      return "a number";
    case SettingType::boolean:
      return "true or false";
    case SettingType::duration:
      return "a duration: " + std::string(text::kDurationGrammar);
    case SettingType::choice:
      return choices != nullptr ? choices() : std::string("one of its names");
    case SettingType::exception_types:
      return "exception type names separated by commas";
    case SettingType::named_numbers:
      return "name:number pairs separated by commas, e.g. user:0.6, prefetch:0.3";
  }
  return {};
}

std::string format_value(const SettingValue& value, std::string_view (*choice_name)(int)) {
  switch (value.type) {
    case SettingType::integer:
      return std::to_string(value.integer);
    case SettingType::number: {
      char text[32];
      const auto result = std::to_chars(text, text + sizeof text, value.number);
      return std::string(text, result.ptr);
    }
    case SettingType::boolean:
      return value.boolean ? "true" : "false";
    case SettingType::duration:
      return text::format_duration(value.duration);
    case SettingType::choice:
      return choice_name != nullptr ? std::string(choice_name(value.choice))
                                    : std::to_string(value.choice);
    case SettingType::exception_types: {
      std::string text;
      const std::size_t count =
          value.type_names.empty() ? value.types.size() : value.type_names.size();
      for (std::size_t i = 0; i < count; ++i) {
        if (!text.empty()) text += ", ";
        text += value.type_names.empty() ? value.types[i].name() : value.type_names[i];
      }
      return text;
    }
    case SettingType::named_numbers: {
      std::string text;
      for (const auto& [name, number] : value.named_numbers) {
        char digits[32];
        const auto result = std::to_chars(digits, digits + sizeof digits, number);
        text += (text.empty() ? "" : ", ") + name + ":" + std::string(digits, result.ptr);
      }
      return text;
    }
  }
  return {};
}

bool same_value(const SettingValue& first, const SettingValue& second) noexcept {
  // A value sets only its type's member; the others keep their defaults on both sides.
  return first.type == second.type && first.integer == second.integer &&
         first.number == second.number && first.boolean == second.boolean &&
         first.duration == second.duration && first.choice == second.choice &&
         first.types == second.types && first.named_numbers == second.named_numbers;
}

}  // namespace detail
}  // namespace r4c
