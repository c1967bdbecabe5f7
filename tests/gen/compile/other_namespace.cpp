// SPDX-License-Identifier: Apache-2.0
// Compiled as r4c_only.cpp is, and expected to fail: r4c's switch leaves other namespaces'
// unknown attributes warned about.
struct Inventory {
  virtual ~Inventory() = default;
  [[acme::timeout("2s")]] virtual int stock(int sku) = 0;
};
