// SPDX-License-Identifier: Apache-2.0
// How r4c's examples check that they do what their page says: a failed check prints what was
// expected, and the example exits non-zero, so the test that runs it fails. Not part of r4c.
#pragma once

#include <cstdio>

namespace r4c_example {

/// The failed checks of this example so far.
inline int failures = 0;
/// The example's name, for its messages.
inline const char* example_name = "example";

inline void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "%s: FAILED: %s\n", example_name, what);
    ++failures;
  }
}

/// Whether `call()` throws an Exception; another exception leaves the example.
template <class Exception, class Call>
bool throws(Call&& call) {
  try {
    call();
  } catch (const Exception&) {
    return true;
  }
  return false;
}

/// What main() returns: 0 when every check held (saying `done`), else 1.
inline int finish(const char* done) {
  if (failures == 0) std::puts(done);
  return failures == 0 ? 0 : 1;
}

}  // namespace r4c_example
