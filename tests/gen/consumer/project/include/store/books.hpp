// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "store/common.hpp"

namespace store {

// clang-format off
struct [[r4c::adaptive_limit(max_limit = 40)]] Books {
  virtual ~Books() = default;
  virtual std::string title(const Isbn& isbn) { return "title of " + isbn; }
};
// clang-format on

}  // namespace store
