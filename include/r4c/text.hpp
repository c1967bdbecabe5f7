// SPDX-License-Identifier: Apache-2.0
// r4c's text vocabulary: how a value is written wherever r4c reads one, in the external config
// file, in an [[r4c::...]] attribute and in an r4c-sim scenario. One grammar per type, so the
// same text means the same thing in all three.
//
//   r4c::from_string<r4c::LimitAlgorithm>("AIMD");   // LimitAlgorithm::aimd (case ignored)
//   r4c::to_string(r4c::LimitAlgorithm::aimd);       // "aimd"
//   r4c::text::parse_duration("500ms");              // 500 ms; "1.5s" and "-1s" are nullopt
//   r4c::text::format_duration(std::chrono::seconds(90));   // "90s"
//   r4c::text::closest("maxLimt", keys);             // "maxLimit", for "did you mean" hints
//
// Every parser here returns nullopt for text it does not accept and never throws; the caller
// words the message (the registry's are in docs/configuration.md). An enum joins the vocabulary
// with a table of names beside it, found by argument-dependent lookup:
//
//   inline constexpr r4c::EnumName<Color> kColorNames[] = {{"red", Color::red}, ...};
//   constexpr std::span<const r4c::EnumName<Color>> enum_names(Color) { return kColorNames; }
#pragma once

#include <chrono>
#include <concepts>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace r4c {

/// One spelling of an enum value. A value's first entry is its name (what to_string writes);
/// later entries for the same value are aliases from_string also accepts.
template <class E>
struct EnumName {
  std::string_view name;
  E value;
};

/// An enum with a table of names: `enum_names(E{})`, found by argument-dependent lookup.
template <class E>
concept NamedEnum = std::is_enum_v<E> && requires {
  { enum_names(E{}) } -> std::convertible_to<std::span<const EnumName<E>>>;
};

namespace text {

/// Whether two words are equal ignoring ASCII case.
constexpr bool equal_ignoring_case(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

}  // namespace text

/// The value `text` names (ASCII case ignored, aliases included); nullopt when none does.
template <NamedEnum E>
constexpr std::optional<E> from_string(std::string_view text) noexcept {
  for (const EnumName<E>& entry : std::span<const EnumName<E>>(enum_names(E{}))) {
    if (text::equal_ignoring_case(entry.name, text)) return entry.value;
  }
  return std::nullopt;
}

/// The name of `value`; "unknown" for a value outside the enum. (LimitAlgorithm,
/// CircuitBreakerState and SlidingWindowType also have non-template overloads, which agree.)
template <NamedEnum E>
constexpr std::string_view to_string(E value) noexcept {
  for (const EnumName<E>& entry : std::span<const EnumName<E>>(enum_names(E{}))) {
    if (entry.value == value) return entry.name;
  }
  return "unknown";
}

namespace text {

/// The names of an enum for a message, "gradient2 or aimd" (aliases left out).
template <NamedEnum E>
std::string choices() {
  std::vector<std::string_view> names;
  for (const EnumName<E>& entry : std::span<const EnumName<E>>(enum_names(E{}))) {
    if (to_string(entry.value) == entry.name) names.push_back(entry.name);
  }
  std::string list;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) list += i + 1 == names.size() ? " or " : ", ";
    list += names[i];
  }
  return list;
}

/// What parse_duration accepts, for messages.
inline constexpr std::string_view kDurationGrammar =
    "a non-negative integer followed by ns, us, ms, s, m or h, e.g. 500ms or 2s";

/// A duration: a non-negative integer directly followed by one of ns, us, ms, s, m, h
/// ("500ms", "2s", "0s"). Nullopt for anything else: no unit, a fraction ("1.5s"), a sign,
/// spaces, or more nanoseconds than int64 holds.
std::optional<std::chrono::nanoseconds> parse_duration(std::string_view text) noexcept;

/// The text parse_duration reads back as `value`, in the largest unit that divides it
/// exactly: "90s", "1500ms", "0s". A negative value is written with a leading '-' (which
/// parse_duration refuses).
std::string format_duration(std::chrono::nanoseconds value);

/// A decimal int, all of `text` ("12", "-3"; not "+3", " 3", "3.0" or out of range).
std::optional<int> parse_int(std::string_view text) noexcept;
/// A decimal number, all of `text` ("0.9", "1e3", "2"; not "0.9x" or "").
std::optional<double> parse_number(std::string_view text) noexcept;
/// "true" or "false", ASCII case ignored.
std::optional<bool> parse_bool(std::string_view text) noexcept;

/// `text` split at commas, each piece trimmed of spaces and tabs, up to where only blanks are
/// left: "A, B," is {"A", "B"}; "A,,B" is {"A", "", "B"}, whose empty name the caller refuses.
std::vector<std::string_view> split_list(std::string_view text);

/// The candidate closest to `word` by edit distance, ASCII case ignored (for "did you mean"
/// hints); the first of equally close ones; "" when there is no candidate.
std::string_view closest(std::string_view word,
                         std::span<const std::string_view> candidates) noexcept;

}  // namespace text
}  // namespace r4c
