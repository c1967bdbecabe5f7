// SPDX-License-Identifier: Apache-2.0
#include <memory>
#include <string>

#include "books.resilient.hpp"

std::string book_title() {
  auto registry = r4c::ResilienceRegistry::builder().build();
  auto books = r4c::make_resilient<store::Books>(registry);
  const int max_limit =
      registry.adaptive_limit("store::Books#title(const store::Isbn&)").snapshot().max_limit;
  return books->title("0-306-40615-2") + (max_limit == 40 ? "" : " (wrong limit)");
}
