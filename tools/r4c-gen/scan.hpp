// SPDX-License-Identifier: Apache-2.0
// Reads a header with libclang, as the compiler would (the target's include paths and
// definitions), and finds the classes carrying [[r4c::...]] attributes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "diagnostics.hpp"
#include "model.hpp"

namespace r4c::gen {

/// Parses `path` with `clang_args` (-I, -D, -std ...) and returns what to generate. Every
/// problem found goes to `diagnostics`; the result is nullopt when the header does not parse.
std::optional<Header> scan(const std::string& path, const std::vector<std::string>& clang_args,
                           Diagnostics& diagnostics);

}  // namespace r4c::gen
