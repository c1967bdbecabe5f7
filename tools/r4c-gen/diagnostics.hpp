// SPDX-License-Identifier: Apache-2.0
// Where r4c-gen's messages point, and how they are printed: like a compiler's,
// `file:line:col: error: R4C-...: message`, so editors and CI logs link them to the source.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace r4c::gen {

/// A position in a source file, counted from 1 (column in bytes, as compilers count).
struct Location {
  std::string file;
  unsigned line = 0;
  unsigned column = 0;
};

/// The generator's own codes (documented in docs/declarative.md); the attribute values reuse the
/// library's (R4C-ATR-001, R4C-ATR-003, R4C-ATR-009, R4C-REG-001).
inline constexpr std::string_view kUnknownAttribute = "R4C-GEN-001";
inline constexpr std::string_view kUnknownKey = "R4C-GEN-002";
inline constexpr std::string_view kMalformed = "R4C-GEN-003";
inline constexpr std::string_view kNotWrappable = "R4C-GEN-004";
inline constexpr std::string_view kNoexceptThrows = "R4C-GEN-005";
inline constexpr std::string_view kArgumentsNotRepeatable = "R4C-GEN-006";
inline constexpr std::string_view kInput = "R4C-GEN-007";

struct Diagnostic {
  enum class Severity { error, warning, note };
  Location where;
  Severity severity = Severity::error;
  std::string message;  // starts with its code when it has one
};

/// Collects messages; nothing is printed until the run ends, so a failed run prints every error
/// at once and writes no file. They are printed in source order, notes after their message.
class Diagnostics {
 public:
  void error(const Location& where, std::string_view code, const std::string& message);
  void warning(const Location& where, const std::string& message);
  void note(const Location& where, const std::string& message);
  /// A message that already carries its own location and severity (clang's).
  void raw(std::string text, bool is_error);

  bool has_errors() const noexcept { return errors_ > 0; }
  int error_count() const noexcept { return errors_; }
  /// Every message, one per line, as a compiler prints them.
  std::string text() const;

 private:
  struct Entry {
    Location where;
    std::size_t order = 0;  // found order: ties and clang's messages keep it
    bool first = false;     // clang's own messages come before r4c-gen's
    std::vector<std::string> lines;
  };
  void add(const Location& where, std::string line, bool first);

  std::vector<Entry> entries_;
  int errors_ = 0;
};

}  // namespace r4c::gen
