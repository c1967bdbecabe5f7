// SPDX-License-Identifier: Apache-2.0
// Generated wrappers, synchronous methods: the policies each method's attributes name, resolved
// once by id through the registry, applied in the pipeline's order around the delegate (or the
// class's own method), for every shape of method.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "fakes.hpp"
#include "r4c/r4c.hpp"
#include "r4c/resilient.hpp"

namespace gen_test {
namespace {

using namespace std::chrono_literals;

r4c::ConfigException config_error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const r4c::ConfigException& e) {
    return e;
  }
  ADD_FAILURE() << "no ConfigException was thrown";
  return r4c::ConfigException("none");
}

class GeneratedWrapperTest : public ::testing::Test {
 protected:
  // A registry on clock_ whose adaptive limits need a single sample per window.
  r4c::ResilienceRegistry one_sample_registry() {
    return r4c::testing::registry(clock_)
        .adaptive_limit_defaults([](auto& a) { a.min_window_samples(1); })
        .build();
  }

  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
};

TEST_F(GeneratedWrapperTest, ResolvesEachMethodsLimitByItsMethodIdAndCallsTheDelegate) {
  auto registry = r4c::testing::registry(clock_).build();
  auto backend = std::make_shared<FakeSearch>();
  std::unique_ptr<shop::SearchClient> client =
      r4c::make_resilient<shop::SearchClient>(backend, registry);
  r4c::AdaptiveLimitHandle limit =
      registry.adaptive_limit("shop::SearchClient#search(const std::string&)");
  int in_flight_inside = -1;
  backend->during_call = [&] { in_flight_inside = limit.in_flight(); };

  EXPECT_EQ(client->search("c++"), "hits for c++");
  EXPECT_EQ(in_flight_inside, 1);  // the call held a slot of that limit
  EXPECT_EQ(limit.in_flight(), 0);
  EXPECT_EQ(limit.snapshot().max_limit, 200);  // no attribute settings: the defaults
  // The other methods' policies exist as soon as the wrapper does.
  EXPECT_EQ(registry.adaptive_limit("orders").snapshot().algorithm, r4c::LimitAlgorithm::aimd);
  EXPECT_EQ(registry.adaptive_limit("orders").limit(), 10);
  EXPECT_EQ(registry.timeout("shop::SearchClient#cancel(const std::string&)").snapshot().timeout,
            2s);
  EXPECT_EQ(registry.adaptive_limit("orders-async").limit(), 2);
}

TEST_F(GeneratedWrapperTest, AFullLimitRejectsWithoutCallingTheDelegate) {
  // The file's instances.<id> lines override the attributes, as for any call site.
  auto registry = r4c::testing::registry(clock_)
                      .config_text("instances.orders.adaptiveLimit.initialLimit=1")
                      .build();
  auto backend = std::make_shared<FakeSearch>();
  auto client = r4c::make_resilient<shop::SearchClient>(backend, registry);
  bool rejected = false;
  bool nested = false;
  backend->during_call = [&] {
    if (std::exchange(nested, true)) return;
    try {
      client->cancel("nested");  // the one slot is taken by the outer call
    } catch (const r4c::LimitExceededException& e) {
      rejected = e.instance_id() == "orders";
    }
  };
  EXPECT_EQ(client->cancel("o-1"), "cancelled o-1");
  EXPECT_TRUE(rejected);
  EXPECT_EQ(backend->calls, 1);
  EXPECT_EQ(registry.adaptive_limit("orders").snapshot().rejected, 1u);
}

class FakeFeeds : public Feeds {
 public:
  int user(int n) override {
    if (during_user) during_user();
    return n;
  }
  int prefetch(int n) override { return n; }
  std::function<void()> during_user;
};

TEST_F(GeneratedWrapperTest, ACallClassAttributeSaysTheMethodsClassToItsLimit) {
  auto registry = r4c::testing::registry(clock_).build();
  auto backend = std::make_shared<FakeFeeds>();
  auto feeds = r4c::make_resilient<Feeds>(backend, registry);
  bool nested = false;
  bool bulk_rejected = false;
  int nested_user = 0;
  backend->during_user = [&] {
    if (std::exchange(nested, true)) return;
    try {
      (void)feeds->prefetch(1);  // bulk: 1 in flight is its whole share (0.5 of 2)
    } catch (const r4c::LimitExceededException&) {
      bulk_rejected = true;
    }
    nested_user = feeds->user(7);  // critical: the limit's second slot
  };
  EXPECT_EQ(feeds->user(1), 1);
  EXPECT_TRUE(bulk_rejected);
  EXPECT_EQ(nested_user, 7);
  EXPECT_EQ(feeds->prefetch(2), 2);  // nothing in flight: bulk gets in
  const r4c::AdaptiveLimitSnapshot snapshot = registry.adaptive_limit("feeds").snapshot();
  EXPECT_EQ(snapshot.rejected_by_class[static_cast<int>(r4c::CallClass::bulk)], 1u);
  EXPECT_EQ(snapshot.rejected, 1u);
}

TEST_F(GeneratedWrapperTest, ATimeoutInsideTheLimitIsADropAndAimdBacksOff) {
  auto registry = one_sample_registry();
  auto backend = std::make_shared<FakeSearch>();
  auto client = r4c::make_resilient<shop::SearchClient>(backend, registry);
  backend->during_call = [&] { clock_->advance(2s); };  // [[r4c::timeout("2s")]] passes
  EXPECT_THROW(client->cancel("o-1"), r4c::CallTimeoutException);
  const r4c::AdaptiveLimitSnapshot snap = registry.adaptive_limit("orders").snapshot();
  EXPECT_TRUE(snap.window_dropped);
  EXPECT_EQ(snap.window_latency, 2s);
  EXPECT_EQ(snap.limit, 9);  // AIMD: 10 * 0.9
}

TEST_F(GeneratedWrapperTest, DropOnFromTheAttributeMakesTheBackendsTimeoutADrop) {
  auto registry = one_sample_registry();
  auto backend = std::make_shared<FakeSearch>();
  auto client = r4c::make_resilient<shop::SearchClient>(backend, registry);
  const auto failure = std::make_shared<shop::SocketTimeout>("socket timed out");
  backend->during_call = [&] {
    clock_->advance(1500ms);
    throw *failure;
  };
  try {
    client->cancel("o-1");
    FAIL() << "the backend's failure did not reach the caller";
  } catch (const shop::SocketTimeout& e) {
    EXPECT_STREQ(e.what(), "socket timed out");
  }
  EXPECT_TRUE(registry.adaptive_limit("orders").snapshot().window_dropped);
  EXPECT_EQ(registry.adaptive_limit("orders").limit(), 9);
}

TEST_F(GeneratedWrapperTest, ANullDelegateIsRefused) {
  auto registry = r4c::testing::registry(clock_).build();
  EXPECT_THROW(r4c::make_resilient<shop::SearchClient>(nullptr, registry), std::invalid_argument);
}

// ---- sharing and named configs ------------------------------------------------------------

class FakeOrders : public Orders {
 public:
  std::string place(const std::string& item) override { return inside("placed " + item); }
  std::string cancel(const std::string& item) override { return inside("cancelled " + item); }
  std::string status(const std::string& item) override { return item + ": shipped"; }
  std::string inside(std::string result) {
    if (during_call) during_call();
    return result;
  }
  std::function<void()> during_call;
};

TEST_F(GeneratedWrapperTest, MethodsWithTheSameNameShareOneLimit) {
  auto registry = r4c::testing::registry(clock_)
                      .adaptive_limit("backend", [](r4c::AdaptiveLimitConfig&) {})
                      .build();
  auto backend = std::make_shared<FakeOrders>();
  auto orders = r4c::make_resilient<Orders>(backend, registry);
  r4c::AdaptiveLimitHandle shared = registry.adaptive_limit("orders");
  std::vector<int> seen;
  backend->during_call = [&] { seen.push_back(shared.in_flight()); };
  orders->place("book");
  orders->cancel("book");
  EXPECT_EQ(seen, (std::vector<int>{1, 1}));
  EXPECT_EQ(shared.snapshot().max_limit, 100);
  // A second wrapper of the same class reuses the same limits.
  auto again = r4c::make_resilient<Orders>(backend, registry);
  EXPECT_EQ(registry.snapshot().adaptive_limits().size(), 2u);  // "orders" and status's
}

TEST_F(GeneratedWrapperTest, ASharedNameWithDifferentSettingsFailsTheConstructorWithReg008) {
  auto registry = r4c::testing::registry(clock_).build();
  struct Fake : Conflicting {
    int reserve(int count) override { return count; }
    int release(int count) override { return count; }
  };
  const r4c::ConfigException error = config_error_of(
      [&] { r4c::make_resilient<Conflicting>(std::make_shared<Fake>(), registry); });
  EXPECT_EQ(error.code(), "R4C-REG-008");
  const std::string message = error.what();
  EXPECT_NE(message.find("gen_test::Conflicting#reserve(int)"), std::string::npos) << message;
  EXPECT_NE(message.find("gen_test::Conflicting#release(int)"), std::string::npos) << message;
  EXPECT_NE(message.find("max_limit is 100 for the first and 50 for the second"), std::string::npos)
      << message;
}

TEST_F(GeneratedWrapperTest, TheAttributesConfigNamesANamedConfig) {
  auto registry =
      r4c::testing::registry(clock_)
          .adaptive_limit("backend",
                          [](r4c::AdaptiveLimitConfig& a) { a.initial_limit(5).max_limit(7); })
          .build();
  auto orders = r4c::make_resilient<Orders>(std::make_shared<FakeOrders>(), registry);
  EXPECT_EQ(orders->status("o-1"), "o-1: shipped");
  EXPECT_EQ(
      registry.adaptive_limit("gen_test::Orders#status(const std::string&)").snapshot().max_limit,
      7);

  auto without = r4c::testing::registry(clock_).build();
  EXPECT_EQ(config_error_of([&] {
              r4c::make_resilient<Orders>(std::make_shared<FakeOrders>(), without);
            }).code(),
            "R4C-REG-004");
}

// ---- classes with bodies ------------------------------------------------------------------

TEST_F(GeneratedWrapperTest, AClassWithBodiesRunsItsOwnMethodsUnderItsClassAttribute) {
  auto registry = r4c::testing::registry(clock_).build();
  std::unique_ptr<shop::InventoryService> inventory =
      r4c::make_resilient<shop::InventoryService>(registry);
  EXPECT_EQ(inventory->stock("sku-1"), 7);
  const r4c::AdaptiveLimitSnapshot snap =
      registry.adaptive_limit("shop::InventoryService#stock(const std::string&)").snapshot();
  EXPECT_EQ(snap.max_limit, 50);
  EXPECT_EQ(snap.in_flight, 0);
}

TEST_F(GeneratedWrapperTest, AMethodsAttributeReplacesTheClasssOfItsKindOnly) {
  auto registry = r4c::testing::registry(clock_).build();
  auto warehouse = r4c::make_resilient<Warehouse>(registry, 12);  // Warehouse(int initial)
  EXPECT_EQ(warehouse->stock("sku"), 12);
  EXPECT_EQ(warehouse->reserve("sku", 5), 7);
  EXPECT_EQ(static_cast<Warehouse&>(*warehouse).peek(), 7);  // the wrapper is the object
  const std::string stock = "gen_test::Warehouse#stock(const std::string&)";
  const std::string reserve = "gen_test::Warehouse#reserve(const std::string&, int)";
  EXPECT_EQ(registry.adaptive_limit(stock).snapshot().max_limit, 50);    // the class's
  EXPECT_EQ(registry.adaptive_limit(reserve).snapshot().max_limit, 10);  // the method's own
  EXPECT_EQ(registry.bulkhead(stock).max_concurrent(), 3);               // the class's bulkhead
  EXPECT_EQ(registry.bulkhead(reserve).max_concurrent(), 3);             // kept by reserve
}

// ---- method shapes ------------------------------------------------------------------------

class FakeCatalog : public Catalog {
 public:
  std::string describe(int sku) const override { return "item " + std::to_string(sku); }
  int size() const noexcept override { return ++size_calls < 2 ? -1 : 42; }
  std::string name() & override { return "lvalue"; }
  std::string name() && override { return "rvalue"; }
  std::string find(int sku) override { return "by sku " + std::to_string(sku); }
  std::string find(const std::string& title) override { return "by title " + title; }
  void erase(int sku) override { erased.push_back(sku); }
  std::unique_ptr<Order> place(std::unique_ptr<Order> order) override {
    order->item += " (placed)";
    return order;
  }
  void append(std::vector<std::string>& into, std::string&& item) override {
    into.push_back(std::move(item));
  }
  const std::string& title() const override { return title_; }
  explicit operator bool() const override { return true; }
  std::string unguarded(int sku) override { return "unguarded " + std::to_string(sku); }

  mutable int size_calls = 0;
  std::vector<int> erased;
  std::string title_ = "The Catalog";
};

class MethodShapesTest : public GeneratedWrapperTest {
 protected:
  r4c::ResilienceRegistry registry_ = r4c::testing::registry(clock_).build();
  std::shared_ptr<FakeCatalog> backend_ = std::make_shared<FakeCatalog>();
  std::unique_ptr<Catalog> catalog_ = r4c::make_resilient<Catalog>(backend_, registry_);
};

TEST_F(MethodShapesTest, ConstMethodsAreWrappedAsConst) {
  const Catalog& view = *catalog_;
  EXPECT_EQ(view.describe(3), "item 3");
  EXPECT_EQ(registry_.bulkhead("gen_test::Catalog#describe(int) const").max_concurrent(), 1);
}

TEST_F(MethodShapesTest, ANoexceptMethodStaysNoexceptUnderARetryWhichRetriesItsResultOnly) {
  static_assert(noexcept(std::declval<const Catalog&>().size()));
  EXPECT_EQ(catalog_->size(), -1);  // no result predicate: -1 is a result like any other
  EXPECT_EQ(registry_.retry("gen_test::Catalog#size() const").snapshot().successful_without_retry,
            1u);
}

TEST_F(MethodShapesTest, RefQualifiedOverloadsReachTheirOwnOverloadWithTheirOwnLimit) {
  EXPECT_EQ(catalog_->name(), "lvalue");
  EXPECT_EQ(std::move(*catalog_).name(), "rvalue");
  EXPECT_EQ(registry_.adaptive_limit("gen_test::Catalog#name() &").instance_id(),
            "gen_test::Catalog#name() &");
  EXPECT_EQ(registry_.adaptive_limit("gen_test::Catalog#name() &&").instance_id(),
            "gen_test::Catalog#name() &&");
}

TEST_F(MethodShapesTest, OverloadsNamedAlikeShareOneLimit) {
  EXPECT_EQ(catalog_->find(4), "by sku 4");
  EXPECT_EQ(catalog_->find(std::string("Dune")), "by title Dune");
  EXPECT_EQ(registry_.snapshot().adaptive_limits().count("lookup"), 1u);
}

TEST_F(MethodShapesTest, VoidMoveOnlyAndReferenceParametersPassThrough) {
  catalog_->erase(9);
  EXPECT_EQ(backend_->erased, std::vector<int>{9});

  auto order = std::make_unique<Order>(Order{"book"});
  std::unique_ptr<Order> placed = catalog_->place(std::move(order));
  ASSERT_NE(placed, nullptr);
  EXPECT_EQ(placed->item, "book (placed)");

  std::vector<std::string> into;
  std::string item = "a long enough string to live on the heap";
  catalog_->append(into, std::move(item));
  EXPECT_EQ(into, std::vector<std::string>{"a long enough string to live on the heap"});

  const std::string& title = catalog_->title();
  EXPECT_EQ(&title, &backend_->title_);  // a reference result is the delegate's own object
}

TEST_F(MethodShapesTest, AConversionOperatorIsWrapped) {
  EXPECT_TRUE(static_cast<bool>(*catalog_));
  EXPECT_EQ(registry_.bulkhead("gen_test::Catalog#operator bool() const").in_flight(), 0);
}

TEST_F(MethodShapesTest, MethodsWithoutAPolicyAreForwarded) {
  EXPECT_EQ(catalog_->unguarded(5), "unguarded 5");
  EXPECT_EQ(registry_.snapshot().bulkheads().count("gen_test::Catalog#unguarded(int)"), 0u);
}

TEST_F(GeneratedWrapperTest, InheritedMethodsKeepTheirAttributesUnderTheDerivedClasssId) {
  auto registry = r4c::testing::registry(clock_).build();
  struct Fake : Store {
    std::string read(int key) override { return "value " + std::to_string(key); }
    void write(int key, std::string value) override { written = std::to_string(key) + value; }
    std::string written;
  };
  auto fake = std::make_shared<Fake>();
  auto store = r4c::make_resilient<Store>(fake, registry);
  EXPECT_EQ(store->read(1), "value 1");
  store->write(2, "=two");
  EXPECT_EQ(fake->written, "2=two");
  EXPECT_EQ(registry.bulkhead("gen_test::Store#read(int)").max_concurrent(), 4);
  registry.adaptive_limit("gen_test::Store#write(int, std::string)");
}

TEST_F(GeneratedWrapperTest, AttributesInInactiveIfBranchesDoNotCount) {
  auto registry = r4c::testing::registry(clock_).build();
  struct Fake : Preprocessed {
    int value() override { return 1; }
  };
  auto wrapped = r4c::make_resilient<Preprocessed>(std::make_shared<Fake>(), registry);
  EXPECT_EQ(wrapped->value(), 1);
  registry.adaptive_limit("preprocessed");  // the #ifdef branch CMake's definition selects
  EXPECT_EQ(config_error_of([&] { registry.adaptive_limit("wrong-branch"); }).code(),
            "R4C-REG-009");
  EXPECT_EQ(config_error_of([&] { registry.bulkhead("gen_test::Preprocessed#value()"); }).code(),
            "R4C-REG-009");  // under #if 0
}

// ---- the pipeline's order -----------------------------------------------------------------

TEST_F(GeneratedWrapperTest, AllSevenPoliciesApplyInThePipelinesOrder) {
  auto registry = r4c::testing::registry(clock_).build();
  struct Fake : Everything {
    std::string call(const std::string& what) override {
      ++calls;
      if (what == "flaky" && calls == 1) throw std::runtime_error("first attempt fails");
      if (what == "missing") throw NotFound("no such thing");
      if (what == "nested") {
        // The outer attempt holds the limit's only slot: both attempts of this call are
        // rejected by the limit, after the rate limiter gave each a permit.
        try {
          wrapper->call("inner");
        } catch (const r4c::LimitExceededException&) {
          inner_rejected = true;
        }
      }
      return "did " + what;
    }
    std::atomic<int> calls{0};
    Everything* wrapper = nullptr;
    bool inner_rejected = false;
  };
  auto fake = std::make_shared<Fake>();
  auto wrapped = r4c::make_resilient<Everything>(fake, registry);
  fake->wrapper = wrapped.get();
  const std::string id = "gen_test::Everything#call(const std::string&)";

  // The retry is outermost: its second attempt passes every other policy again.
  EXPECT_EQ(wrapped->call("flaky"), "did flaky");
  EXPECT_EQ(registry.retry(id).snapshot().retries, 1u);
  EXPECT_EQ(registry.hedge(id).snapshot().calls, 2u);  // each attempt is one hedged call
  EXPECT_EQ(registry.circuit_breaker(id).snapshot().buffered_calls, 2u);
  EXPECT_EQ(registry.circuit_breaker(id).snapshot().failed_calls, 1u);
  EXPECT_EQ(registry.rate_limiter(id).snapshot().available_permissions, 98);

  // The rate limiter and the breaker are outside the limit: a call the limit rejects has taken
  // a permit and counts as a failure of the breaker.
  EXPECT_EQ(wrapped->call("nested"), "did nested");
  EXPECT_TRUE(fake->inner_rejected);
  EXPECT_EQ(registry.adaptive_limit(id).snapshot().rejected, 2u);  // both inner attempts
  EXPECT_EQ(registry.rate_limiter(id).snapshot().available_permissions, 95);
  EXPECT_EQ(registry.circuit_breaker(id).snapshot().failed_calls, 3u);
  EXPECT_EQ(registry.bulkhead(id).snapshot().rejected, 0u);  // inside: never reached

  // abort_on and ignore_on from the attributes: a NotFound is not retried, and the breaker
  // does not count it.
  const std::uint64_t retries = registry.retry(id).snapshot().retries;
  const std::uint64_t buffered = registry.circuit_breaker(id).snapshot().buffered_calls;
  EXPECT_THROW(wrapped->call("missing"), NotFound);
  EXPECT_EQ(registry.retry(id).snapshot().retries, retries);
  EXPECT_EQ(registry.circuit_breaker(id).snapshot().buffered_calls, buffered);

  EXPECT_EQ(registry.timeout(id).snapshot().timeout, 1s);
  EXPECT_EQ(registry.bulkhead(id).max_concurrent(), 5);
}

}  // namespace
}  // namespace gen_test
