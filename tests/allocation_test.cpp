// SPDX-License-Identifier: Apache-2.0
// Zero heap allocations per call, window ends included: counts every thread's operator new calls
// over 10^5 calls, with the one counting allocator of r4c's tests and benchmarks
// (bench/alloc_counter.hpp). (The C++ runtime's throw machinery allocates its small exception
// header with malloc, not operator new; see docs/performance.md.)
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>

#include "alloc_counter.hpp"
#include "r4c/adaptive_limit.hpp"
#include "r4c/bulkhead.hpp"
#include "r4c/circuit_breaker.hpp"
#include "r4c/pipeline.hpp"
#include "r4c/rate_limiter.hpp"
#include "r4c/retry.hpp"

namespace {

using namespace std::chrono_literals;
using r4c::bench::allocations_during;
constexpr int kCalls = 100000;
// 0 + 1 + ... + (kCalls - 1): what the calls return in all, so every call is seen to have run.
constexpr std::int64_t kSumOfCalls = std::int64_t{kCalls} * (kCalls - 1) / 2;

// One policy's synchronous execute(), warmed up (its thread stripes set up) by one call before
// counting. Each case says how to call it and what its counters must show afterwards, so that a
// count of zero means "ran and allocated nothing", never "did not run".

struct AdaptiveLimitCase {
  static constexpr const char* kName = "AdaptiveLimit";
  std::shared_ptr<r4c::ManualClock> clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit{"alloc", r4c::AdaptiveLimitConfig().window(1ms).min_window_samples(1),
                           clock};
  int call(int i) {
    return limit.execute([&] {
      clock->advance(100us);
      return i;
    });
  }
  void expect_ran() const { EXPECT_GE(limit.snapshot().windows, 9000u) << "window ends included"; }
};

struct RetryCase {
  static constexpr const char* kName = "Retry";
  struct NotFound : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  r4c::Retry retry{"orders",
                   r4c::RetryConfig().abort_on<NotFound>().retry_on_result<int>(
                       [](const int&) { return false; }),
                   std::make_shared<r4c::ManualClock>()};
  int call(int i) {
    return retry.execute([i] { return i; });  // a success at the first attempt
  }
  void expect_ran() const {}  // the sum of the results says every call ran
};

struct BulkheadCase {
  static constexpr const char* kName = "Bulkhead";
  r4c::Bulkhead bulkhead{"alloc"};
  int call(int i) {
    return bulkhead.execute([i] { return i; });
  }
  void expect_ran() const { EXPECT_EQ(bulkhead.snapshot().rejected, 0u); }
};

struct RateLimiterCase {
  static constexpr const char* kName = "RateLimiter";
  std::shared_ptr<r4c::ManualClock> clock = std::make_shared<r4c::ManualClock>();
  r4c::RateLimiter limiter{
      "alloc", r4c::RateLimiterConfig().limit_for_period(1000).refresh_period(1ms), clock};
  int call(int i) {
    return limiter.execute([&] {
      clock->advance(100us);  // 10 calls a period of 1000 permits: never refused
      return i;
    });
  }
  void expect_ran() const { EXPECT_EQ(limiter.snapshot().rejected, 0u); }
};

struct CircuitBreakerCase {
  static constexpr const char* kName = "CircuitBreaker";
  std::shared_ptr<r4c::ManualClock> clock = std::make_shared<r4c::ManualClock>();
  r4c::CircuitBreaker breaker{"alloc", {}, clock};
  int call(int i) {
    return breaker.execute([&] {
      clock->advance(100us);
      return i;
    });
  }
  void expect_ran() const {
    EXPECT_GT(breaker.snapshot().buffered_calls, 0u) << "the outcomes were recorded";
    EXPECT_EQ(breaker.snapshot().not_permitted_calls, 0u);
  }
};

// Nothing on the pipeline's call path allocates when the callable does not: a callable without a
// token needs no timer.
struct PipelineCase {
  static constexpr const char* kName = "Pipeline";
  std::shared_ptr<r4c::ManualClock> clock = std::make_shared<r4c::ManualClock>();
  r4c::ResilienceRegistry registry = r4c::testing::registry(clock).build();
  r4c::Pipeline<int> pipeline =
      r4c::Pipeline<int>::builder(registry, "alloc")
          .adaptive_limit([](r4c::AdaptiveLimitConfig& a) { a.window(1ms).min_window_samples(1); })
          .timeout([](r4c::TimeoutConfig& t) { t.timeout(1s); })
          .bulkhead()
          .rate_limiter(
              [](r4c::RateLimiterConfig& r) { r.limit_for_period(1000).refresh_period(1ms); })
          .build();
  int call(int i) {
    return pipeline.execute([&] {
      clock->advance(100us);
      return i;
    });
  }
  void expect_ran() const { EXPECT_GT(pipeline.adaptive_limit()->snapshot().windows, 1000u); }
};

template <class Case>
class WarmCallAllocationTest : public ::testing::Test {
 protected:
  void SetUp() override { EXPECT_EQ(case_.call(0), 0); }
  Case case_;
};

struct CaseName {
  template <class Case>
  static std::string GetName(int) {
    return Case::kName;
  }
};

using Policies = ::testing::Types<AdaptiveLimitCase, RetryCase, BulkheadCase, RateLimiterCase,
                                  CircuitBreakerCase, PipelineCase>;
TYPED_TEST_SUITE(WarmCallAllocationTest, Policies, CaseName);

TYPED_TEST(WarmCallAllocationTest, AdmittedCallsAllocateNothing) {
  std::int64_t sum = 0;
  const std::uint64_t count = allocations_during([&] {
    for (int i = 0; i < kCalls; ++i) sum += this->case_.call(i);
  });
  EXPECT_EQ(count, 0u);
  EXPECT_EQ(sum, kSumOfCalls);
  this->case_.expect_ran();
}

// The compiler may drop a new/delete pair whose block nobody reads; this block escapes.
void allocate_for_real() {
  auto block = std::make_unique<std::string>(100, 'x');
  asm volatile("" : : "g"(block.get()) : "memory");
}

// The counter sees what it should: without this, a zero above could come from a counter that
// counts nothing.
TEST(AllocationCounterTest, SeesAnAllocationOnTheCallingThreadAndOnAnother) {
  EXPECT_GE(allocations_during([] { allocate_for_real(); }), 2u);  // the string and its buffer
  EXPECT_GE(allocations_during([] { std::jthread other([] { allocate_for_real(); }); }),
            3u);  // the thread's state, the string and its buffer
}

// Every malloc-family call of the calling thread is counted, the aligned forms included: Asio
// allocates its operations with std::aligned_alloc, and a counter blind to it once made an async
// benchmark's "no more allocations than the baseline" (bench target 10) hold for nothing.
TEST(AllocationCounterTest, CountsEveryFormOfMallocTheAlignedOnesIncluded) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer owns malloc: the counter counts operator new only there";
#else
  const auto escape = [](void* block) {
    asm volatile("" : : "g"(block) : "memory");
    return block;
  };
  const auto mallocs_in = [](auto allocate) {
    const std::uint64_t before = r4c::bench::thread_alloc_count().mallocs;
    void* block = allocate();
    const std::uint64_t counted = r4c::bench::thread_alloc_count().mallocs - before;
    std::free(block);
    return counted;
  };
  EXPECT_EQ(mallocs_in([&] { return escape(std::malloc(24)); }), 1u);
  EXPECT_EQ(mallocs_in([&] { return escape(std::calloc(3, 8)); }), 1u);
  EXPECT_EQ(mallocs_in([&] { return escape(std::realloc(nullptr, 24)); }), 1u);
  EXPECT_EQ(mallocs_in([&] { return escape(std::aligned_alloc(64, 128)); }), 1u);
  EXPECT_EQ(mallocs_in([&] {
              void* block = nullptr;
              EXPECT_EQ(posix_memalign(&block, 64, 100), 0);
              return escape(block);
            }),
            1u);
  EXPECT_EQ(mallocs_in([&] { return escape(valloc(100)); }), 1u);
  void* refused = nullptr;
  EXPECT_EQ(posix_memalign(&refused, 3, 100), EINVAL);  // not a power of two: nothing taken
#endif
}

class AdaptiveLimitAllocationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    limit_.execute([] {});
  }  // this thread's stripe is set up
  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit_{"alloc", r4c::AdaptiveLimitConfig().window(1ms).min_window_samples(1),
                            clock_};
};

TEST_F(AdaptiveLimitAllocationTest, PermitsAllocateNothingWindowEndsIncluded) {
  const std::uint64_t windows_before = limit_.snapshot().windows;
  const auto count = allocations_during([&] {
    for (int i = 0; i < kCalls; ++i) {
      r4c::Permit permit = limit_.try_acquire();
      clock_->advance(100us);
      permit.on_success();
    }
  });
  EXPECT_EQ(count, 0u);
  EXPECT_GE(limit_.snapshot().windows - windows_before, 9000u);
}

TEST_F(AdaptiveLimitAllocationTest, RejectionsAllocateNothing) {
  r4c::AdaptiveLimit full("full", r4c::AdaptiveLimitConfig().initial_limit(1), clock_);
  r4c::Permit held = full.try_acquire();
  ASSERT_TRUE(held);
  std::uint64_t admitted = 0;
  const auto count = allocations_during([&] {
    for (int i = 0; i < kCalls; ++i) {
      if (full.try_acquire()) ++admitted;  // an EXPECT here would allocate its message
    }
  });
  EXPECT_EQ(count, 0u);
  EXPECT_EQ(admitted, 0u);
  EXPECT_EQ(full.snapshot().rejected, static_cast<std::uint64_t>(kCalls));
}

TEST_F(AdaptiveLimitAllocationTest, ExecuteRethrowsThePreallocatedRejectionWithoutOperatorNew) {
  r4c::AdaptiveLimit full("full", r4c::AdaptiveLimitConfig().initial_limit(1), clock_);
  r4c::Permit held = full.try_acquire();
  std::uint64_t caught = 0;
  const auto count = allocations_during([&] {
    for (int i = 0; i < kCalls; ++i) {
      try {
        full.execute([] {});
      } catch (const r4c::LimitExceededException&) {
        ++caught;
      }
    }
  });
  EXPECT_EQ(count, 0u);
  EXPECT_EQ(caught, static_cast<std::uint64_t>(kCalls));
}

TEST(AdaptiveLimitDefaultClockAllocationTest, TheDefaultClockPathAllocatesNothing) {
  r4c::AdaptiveLimit limit("system");
  limit.execute([] {});
  std::uint64_t admitted = 0;
  const auto count = allocations_during([&] {
    for (int i = 0; i < kCalls; ++i) {
      r4c::Permit permit = limit.try_acquire();
      if (permit) ++admitted;
      permit.on_success();
    }
  });
  EXPECT_EQ(count, 0u);
  EXPECT_EQ(admitted, static_cast<std::uint64_t>(kCalls));
}

// A callable with a token reuses its thread's stop_source while no deadline has stopped it, and
// the clock's timer queue keeps its capacity.
TEST(PipelineAllocationTest, ACallWithATokenAllocatesNothingOnceWarm) {
  PipelineCase c;
  c.pipeline.execute([](std::stop_token) { return 1; });
  std::int64_t sum = 0;
  const auto count = allocations_during([&] {
    for (int i = 0; i < kCalls; ++i) {
      sum += c.pipeline.execute([&](std::stop_token) {
        c.clock->advance(100us);
        return i;
      });
    }
  });
  EXPECT_EQ(count, 0u);
  EXPECT_EQ(sum, kSumOfCalls);
  EXPECT_EQ(c.clock->pending_tasks(), 0u);
}

}  // namespace
