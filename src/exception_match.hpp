// SPDX-License-Identifier: Apache-2.0
// Whether a caught failure is of one type: what the hedge and the timeout ask of an
// exception_ptr; and how a policy's check written for its catch block answers for an
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

/// What `current`, a member of `policy` that checks the exception being handled (the one its own
/// catch block calls), says of `failure` (not null): rethrows it and asks inside the handler.
/// Always inlined: it is on a failed call's path, which costs what the catch written out did.
template <auto current, class Policy>
[[gnu::always_inline]] inline auto ask_rethrown(const Policy& policy,
                                                const std::exception_ptr& failure) {
  try {
    std::rethrow_exception(failure);
  } catch (...) {
    return (policy.*current)();
  }
}

}  // namespace r4c::detail
