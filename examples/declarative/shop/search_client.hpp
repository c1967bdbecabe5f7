// SPDX-License-Identifier: Apache-2.0
// resilience4cata 0.6.0's examples ("Ejemplo mínimo", "En una clase"), in C++: an interface and
// a class whose methods carry [[r4c::...]] attributes. r4c_generate_resilient() turns this
// header into search_client.resilient.hpp (see docs/declarative.md).
#pragma once

#include <asio/awaitable.hpp>
#include <stdexcept>
#include <string>

#include "r4c/errors.hpp"

namespace shop {

/// The backend's socket timed out: an overload signal, listed in drop_on below.
struct SocketTimeout : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// clang-format 14 would pull each attribute onto its declaration's line.
// clang-format off
// [doc:search_client]
class SearchClient {
 public:
  virtual ~SearchClient() = default;

  [[r4c::adaptive_limit]]
  virtual std::string search(const std::string& query) = 0;

  [[r4c::adaptive_limit(name = "orders", algorithm = aimd, initial_limit = 10,
                        drop_on = {shop::SocketTimeout, r4c::CallTimeoutException})]]
  [[r4c::timeout("2s")]]  // inside the limit: a timeout is a drop, and the limit backs off
  virtual std::string cancel(const std::string& order) = 0;

  [[r4c::adaptive_limit(name = "orders-async", initial_limit = 2)]]
  virtual asio::awaitable<std::string> place_async(std::string order) = 0;
};
// [/doc:search_client]

// [doc:inventory_service]
struct [[r4c::adaptive_limit(max_limit = 50)]] InventoryService {  // every virtual method
  virtual ~InventoryService() = default;
  virtual int stock(const std::string& sku) { return sku.empty() ? 0 : 7; }
};
// [/doc:inventory_service]
// clang-format on

}  // namespace shop
