// SPDX-License-Identifier: Apache-2.0
// Test delegates for the generated wrappers: each records what reached it, and lets a test act
// from inside a call (advance the clock, call the wrapper again, throw).
#pragma once

#include <asio/async_result.hpp>
#include <asio/awaitable.hpp>
#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cases.resilient.hpp"
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
    // The initiation captures a pointer only: with g++ 12, an initiation capturing a
    // std::string, given to async_initiate with use_awaitable, frees a pointer it never
    // allocated when Asio destroys it (seen under ASan in a program of a few lines).
    std::function<void(std::string)>* slot = &pending[order];
    co_return co_await asio::async_initiate<const asio::use_awaitable_t<>&, void(std::string)>(
        [slot](auto handler) {
          auto shared = std::make_shared<decltype(handler)>(std::move(handler));
          *slot = [shared](std::string result) {
            // Completed through the coroutine's executor, as a real I/O object would.
            auto executor = asio::get_associated_executor(*shared);
            asio::post(executor, [shared, result]() mutable { (*shared)(std::move(result)); });
          };
        },
        asio::use_awaitable);
  }

  int calls = 0;
  std::function<void()> during_call;
  std::map<std::string, std::function<void(std::string)>> pending;
};

}  // namespace gen_test
