// SPDX-License-Identifier: Apache-2.0
// A generated method's per-call code allocates nothing: counts operator new over 10^4 calls
// through wrappers with one policy, with a limit and a timeout, and with every policy but the
// hedge (whose attempts share allocated state by design; docs/pipeline.md).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "alloc_counter.hpp"
#include "fakes.hpp"
#include "r4c/r4c.hpp"
#include "r4c/resilient.hpp"

namespace gen_test {
namespace {

using namespace std::chrono_literals;
using r4c::bench::allocations_during;  // every thread's operator new calls
constexpr int kCalls = 10000;

struct LeanBackend : Lean {
  int add(int a, const std::string& b) override { return a + static_cast<int>(b.size()); }
};

struct QuietSearch : shop::SearchClient {
  std::string search(const std::string&) override { return "short"; }  // fits the SSO buffer
  std::string cancel(const std::string&) override { return "cancelled"; }
  asio::awaitable<std::string> place_async(std::string) override { co_return "placed"; }
};

TEST(GeneratedWrapperAllocationTest, WrappedCallsAllocateNothing) {
  auto clock = std::make_shared<r4c::ManualClock>();
  auto registry = r4c::testing::registry(clock)
                      .adaptive_limit_defaults([](r4c::AdaptiveLimitConfig& a) {
                        a.window(1ms).min_window_samples(1);  // window ends included
                      })
                      .build();
  auto lean = r4c::make_resilient<Lean>(std::make_shared<LeanBackend>(), registry);
  auto search = r4c::make_resilient<shop::SearchClient>(std::make_shared<QuietSearch>(), registry);
  const std::string query = "a query long enough to live on the heap, made before counting";
  int sum = lean->add(1, query);  // first calls set up this thread's stripes
  search->search(query);
  search->cancel(query);

  const std::uint64_t count = allocations_during([&] {
    for (int i = 0; i < kCalls; ++i) {
      clock->advance(100us);
      sum += lean->add(i, query);  // retry, breaker, rate limiter, limit, timeout, bulkhead
      sum += static_cast<int>(search->search(query).size());  // limit
      sum += static_cast<int>(search->cancel(query).size());  // limit and timeout
    }
  });
  EXPECT_EQ(count, 0u);
  EXPECT_GT(sum, 0);
  // The count is real: a delegate whose answer needs the heap is seen allocating.
  struct Chatty : QuietSearch {
    std::string search(const std::string& query) override { return query + query; }
  };
  auto chatty = r4c::make_resilient<shop::SearchClient>(std::make_shared<Chatty>(), registry);
  EXPECT_GE(allocations_during([&] { sum += static_cast<int>(chatty->search(query).size()); }), 1u);
  EXPECT_GE(
      registry.adaptive_limit("gen_test::Lean#add(int, const std::string&)").snapshot().windows,
      1000u);
}

}  // namespace
}  // namespace gen_test
