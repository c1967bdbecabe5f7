// SPDX-License-Identifier: Apache-2.0
// Runs both generated wrappers; exits with 1 if either is not what its attributes say.
#include <cstdio>
#include <memory>
#include <string>

#include "authors.resilient.hpp"

std::string book_title();

int main() {
  struct Backend : store::Authors {
    std::string name(int id) override { return "author " + std::to_string(id); }
  };
  auto registry = r4c::ResilienceRegistry::builder().build();
  auto authors = r4c::make_resilient<store::Authors>(std::make_shared<Backend>(), registry);
  const bool ok = authors->name(7) == "author 7" &&
                  registry.bulkhead("store::Authors#name(int)").max_concurrent() == 3 &&
                  book_title() == "title of 0-306-40615-2";
  std::puts(ok ? "gen_consumer: ok" : "gen_consumer: FAILED");
  return ok ? 0 : 1;
}
