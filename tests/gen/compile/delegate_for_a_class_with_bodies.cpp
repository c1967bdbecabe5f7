// SPDX-License-Identifier: Apache-2.0
// Must not compile: a class whose methods have bodies is wrapped by derivation, built from its
// constructor arguments, not around a delegate.
#include <memory>

#include "cases.resilient.hpp"

int main() {
  auto registry = r4c::ResilienceRegistry::builder().build();
  auto warehouse = std::make_shared<gen_test::Warehouse>(3);
  auto wrapped = r4c::make_resilient<gen_test::Warehouse>(warehouse, registry);
  return wrapped != nullptr;
}
