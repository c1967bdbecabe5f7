// SPDX-License-Identifier: Apache-2.0
// Must not compile: make_resilient for a class whose wrapper was not generated (or whose
// .resilient.hpp is not included) says which header to include.
#include <memory>

#include "r4c/resilient.hpp"

struct NotAnnotated {
  virtual ~NotAnnotated() = default;
  virtual int get() = 0;
};

int main() {
  auto registry = r4c::ResilienceRegistry::builder().build();
  std::shared_ptr<NotAnnotated> backend;
  auto wrapped = r4c::make_resilient<NotAnnotated>(backend, registry);
  return wrapped != nullptr;
}
