// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>

namespace r4c::detail {

/// The unit of false sharing r4c pads hot atomics to. A project constant rather than
/// std::hardware_destructive_interference_size, whose value g++ warns may change between
/// compiler versions and so is not ABI-stable.
inline constexpr std::size_t kCacheLine = 64;

}  // namespace r4c::detail
