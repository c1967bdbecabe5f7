// SPDX-License-Identifier: Apache-2.0
// Whether a caught failure is of one type: what the hedge and the timeout ask of an
// exception_ptr. Internal to src/.
#pragma once

#include <exception>

namespace r4c::detail {

/// Whether `failure` (not null) holds an E, or a type derived from it.
template <class E>
bool holds_exception(const std::exception_ptr& failure) noexcept {
  try {
    std::rethrow_exception(failure);
  } catch (const E&) {
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace r4c::detail
