// SPDX-License-Identifier: Apache-2.0
// Compiled with r4c::r4c's compile options and -Werror=attributes: g++ accepts r4c's attributes.
struct [[r4c::adaptive_limit(max_limit = 50)]] Inventory {
  virtual ~Inventory() = default;
  [[r4c::timeout("2s")]] [[using r4c: bulkhead(max_concurrent = 4)]] virtual int stock(int sku) = 0;
};
