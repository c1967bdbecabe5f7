// SPDX-License-Identifier: Apache-2.0
#include "diagnostics.hpp"

#include <algorithm>
#include <tuple>

namespace r4c::gen {

namespace {

std::string prefix(const Location& where) {
  if (where.file.empty()) return "r4c-gen: ";
  if (where.line == 0) return where.file + ": ";
  return where.file + ":" + std::to_string(where.line) + ":" + std::to_string(where.column) + ": ";
}

}  // namespace

void Diagnostics::add(const Location& where, std::string line, bool first) {
  entries_.push_back(Entry{where, entries_.size(), first, {std::move(line)}});
}

void Diagnostics::error(const Location& where, std::string_view code, const std::string& message) {
  std::string line = prefix(where) + "error: ";
  if (!code.empty()) line += std::string(code) + ": ";
  add(where, line + message, false);
  ++errors_;
}

void Diagnostics::warning(const Location& where, const std::string& message) {
  add(where, prefix(where) + "warning: " + message, false);
}

void Diagnostics::note(const Location& where, const std::string& message) {
  const std::string line = prefix(where) + "note: " + message;
  if (entries_.empty()) {
    add(where, line, false);
  } else {
    entries_.back().lines.push_back(line);
  }
}

void Diagnostics::raw(std::string text, bool is_error) {
  add(Location{}, std::move(text), true);
  if (is_error) ++errors_;
}

std::string Diagnostics::text() const {
  std::vector<const Entry*> sorted;
  for (const Entry& entry : entries_) sorted.push_back(&entry);
  // Source order; messages about a whole file (no line) after those about a line of it.
  auto key = [](const Entry* e) {
    const unsigned line = e->where.line == 0 ? ~0u : e->where.line;
    return std::make_tuple(!e->first, e->first ? 0u : line, e->where.column, e->order);
  };
  std::stable_sort(sorted.begin(), sorted.end(),
                   [&](const Entry* a, const Entry* b) { return key(a) < key(b); });
  std::string all;
  for (const Entry* entry : sorted) {
    for (const std::string& line : entry->lines) all += line + "\n";
  }
  return all;
}

}  // namespace r4c::gen
