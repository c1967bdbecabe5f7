// SPDX-License-Identifier: Apache-2.0
// Included by books.hpp only: a change here regenerates books.resilient.hpp alone.
#pragma once

#include <string>

namespace store {
using Isbn = std::string;
}  // namespace store
