// SPDX-License-Identifier: Apache-2.0
// Writes the generated header: one wrapper class per annotated class, and the
// r4c::ResilientWrapper specializations make_resilient finds them by.
#pragma once

#include <string>

#include "model.hpp"

namespace r4c::gen {

/// The generated header's text. `include` is how it includes the annotated header, e.g.
/// "shop/search_client.hpp" (written as #include "<include>").
std::string emit(const Header& header, const std::string& include);

}  // namespace r4c::gen
