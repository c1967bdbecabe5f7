// SPDX-License-Identifier: Apache-2.0
// Every C++ block of docs/declarative.md, run: resilience4cata 0.6.0's annotated SearchClient and
// InventoryService (shop/search_client.hpp), their wrappers generated at build time by
// r4c_generate_resilient(), and the "Probarlo con ManualClock" scenario.
#include <asio/async_result.hpp>
#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>

#include "../example_checks.hpp"
#include "completed_later.hpp"
#include "r4c/r4c.hpp"
// [doc:include]
#include "search_client.resilient.hpp"  // generated from shop/search_client.hpp
// [/doc:include]

namespace {

using namespace std::chrono_literals;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "declarative_docs: %s\n", what);
    std::exit(1);
  }
}

// The dependency behind the interface; place_async stays pending until the test completes it.
class Backend : public shop::SearchClient {
 public:
  std::string search(const std::string& query) override { return "hits for " + query; }
  std::string cancel(const std::string& order) override { return "cancelled " + order; }
  asio::awaitable<std::string> place_async(std::string order) override {
    co_return co_await shop_fakes::completed_later(pending[order]);
  }
  std::map<std::string, std::function<void(std::string)>> pending;
};

template <class T>
bool ready(const std::future<T>& f) {
  return f.wait_for(0s) == std::future_status::ready;
}

void wrap_an_interface() {
  auto registry = r4c::ResilienceRegistry::builder().build();
  // [doc:make_resilient]
  auto backend = std::make_shared<Backend>();  // any implementation of shop::SearchClient
  std::unique_ptr<shop::SearchClient> client =
      r4c::make_resilient<shop::SearchClient>(backend, registry);
  std::string hits = client->search("c++");  // through the adaptive limit of search()
  r4c::AdaptiveLimitHandle limit =
      registry.adaptive_limit("shop::SearchClient#search(const std::string&)");
  // [/doc:make_resilient]
  check(hits == "hits for c++", "search went through");
  check(limit.in_flight() == 0 && limit.limit() == 20, "search's limit");

  // [doc:ids]
  registry.adaptive_limit("orders");  // cancel's, named by its attribute
  registry.timeout("shop::SearchClient#cancel(const std::string&)");  // its timeout: no name
  registry.adaptive_limit("orders-async");                            // place_async's
  // [/doc:ids]
  check(registry.adaptive_limit("orders").limit() == 10, "cancel's limit");
}

void wrap_a_class() {
  auto registry = r4c::ResilienceRegistry::builder().build();
  // [doc:make_resilient_class]
  std::unique_ptr<shop::InventoryService> inventory =
      r4c::make_resilient<shop::InventoryService>(registry);  // constructor arguments follow
  int units = inventory->stock("sku-1");  // InventoryService::stock, under the class's limit
  // [/doc:make_resilient_class]
  check(units == 7, "stock");
  check(registry.adaptive_limit("shop::InventoryService#stock(const std::string&)")
                .snapshot()
                .max_limit == 50,
        "the class's max_limit");
}

void configure_from_outside() {
  // [doc:configure]
  auto registry =
      r4c::ResilienceRegistry::builder()
          .adaptive_limit_defaults([](r4c::AdaptiveLimitConfig& a) { a.max_limit(100); })
          .config_text(
              "instances.orders.adaptiveLimit.initialLimit=5\n"  // over the attribute's 10
              "instances.shop::SearchClient#search(const std::string&).adaptiveLimit.maxLimit=150")
          .build();
  auto client = r4c::make_resilient<shop::SearchClient>(std::make_shared<Backend>(), registry);
  // registry.adaptive_limit("orders").limit() == 5
  // [/doc:configure]
  check(registry.adaptive_limit("orders").limit() == 5, "the file's instance setting");
  check(registry.adaptive_limit("shop::SearchClient#search(const std::string&)")
                .snapshot()
                .max_limit == 150,
        "the file's setting for a method id");
  check(registry.adaptive_limit("orders").snapshot().max_limit == 100, "registry defaults");
}

void manual_clock_scenario() {
  asio::io_context io;
  auto clock = std::make_shared<r4c::ManualClock>();
  auto backend = std::make_shared<Backend>();
  // [doc:manual_clock]
  auto registry = r4c::testing::registry(clock)
                      .adaptive_limit_defaults([](r4c::AdaptiveLimitConfig& a) {
                        a.min_window_samples(1);  // end a window after a single call
                      })
                      .build();
  auto orders = r4c::make_resilient<shop::SearchClient>(backend, registry);
  r4c::AdaptiveLimitHandle limit = registry.adaptive_limit("orders-async");

  auto a = asio::co_spawn(io, orders->place_async("a"), asio::use_future);  // holds a slot
  auto b = asio::co_spawn(io, orders->place_async("b"), asio::use_future);  // the other
  auto c = asio::co_spawn(io, orders->place_async("c"), asio::use_future);
  io.poll();  // c is ready at once: c.get() throws r4c::LimitExceededException

  clock->advance(std::chrono::seconds(1));  // the calls took 1 s; the window is over
  backend->pending.at("a")("placed a");     // ends the window
  backend->pending.at("b")("placed b");
  io.poll();
  // limit.snapshot().windows == 1, limit.snapshot().window_latency == 1 s
  // [/doc:manual_clock]
  check(ready(c), "c rejected at once");
  check(r4c_example::throws<r4c::LimitExceededException>([&] { c.get(); }),
        "c failed with LimitExceededException");
  check(a.get() == "placed a" && b.get() == "placed b", "a and b completed");
  check(limit.snapshot().windows == 1, "one window");
  check(limit.snapshot().window_latency == 1s, "its latency");
}

}  // namespace

int main() {
  wrap_an_interface();
  wrap_a_class();
  configure_from_outside();
  manual_clock_scenario();
  std::puts("declarative_docs: ok");
  return 0;
}
