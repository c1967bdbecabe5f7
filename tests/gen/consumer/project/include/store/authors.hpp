// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

namespace store {

// clang-format off
class Authors {
 public:
  virtual ~Authors() = default;
#if GEN_CONSUMER_LIMIT == 3  // the target's definition reaches r4c-gen
  [[r4c::bulkhead(max_concurrent = 3)]]
#else
  [[r4c::bulkhead(max_concurrent = 1)]]
#endif
  virtual std::string name(int id) = 0;
};
// clang-format on

}  // namespace store
