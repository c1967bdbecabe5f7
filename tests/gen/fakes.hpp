// SPDX-License-Identifier: Apache-2.0
// Test delegates for the generated wrappers: each records what reached it, and lets a test act
// from inside a call (advance the clock, call the wrapper again, throw).
#pragma once

#include <asio/awaitable.hpp>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cases.resilient.hpp"
#include "completed_later.hpp"
#include "search_client.resilient.hpp"

namespace gen_test {

// The SearchClient of resilience4cata 0.6.0's "Adaptive limit" page; place_async stays pending
// until the test completes it.
class FakeSearch : public shop::SearchClient {
 public:
  std::string search(const std::string& query) override {
    ++calls;
    if (during_call) during_call();
    return "hits for " + query;
  }
  std::string cancel(const std::string& order) override {
    ++calls;
    if (during_call) during_call();
    return "cancelled " + order;
  }
  asio::awaitable<std::string> place_async(std::string order) override {
    ++calls;
    co_return co_await shop_fakes::completed_later(pending[order]);
  }

  int calls = 0;
  std::function<void()> during_call;
  std::map<std::string, std::function<void(std::string)>> pending;
};

}  // namespace gen_test
