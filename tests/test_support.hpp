// SPDX-License-Identifier: Apache-2.0
// Helpers shared by r4c's tests.
#pragma once

#include <gtest/gtest.h>

#include <functional>

#include "r4c/errors.hpp"

namespace r4c::test {

/// Runs `action`, expecting a ConfigException; returns it (or records a failure).
inline ConfigException config_error(const std::function<void()>& action) {
  try {
    action();
  } catch (const ConfigException& e) {
    return e;
  }
  ADD_FAILURE() << "no ConfigException was thrown";
  return ConfigException("none");
}

}  // namespace r4c::test
