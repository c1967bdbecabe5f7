// SPDX-License-Identifier: Apache-2.0
// A file's whole text, for the tests that compare a file with what they expect.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace r4c::test {

/// The bytes of `file`, unchanged (binary: no newline translation); empty when it cannot be read.
inline std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace r4c::test
