// Zero heap allocations per call, on both APIs, window ends included: counts operator new
// over 10^5 calls. (The C++ runtime's throw machinery allocates its small exception header
// with malloc, not operator new; see docs/performance.md.)
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "r4c/adaptive_limit.hpp"
#include "r4c/pipeline.hpp"
#include "r4c/retry.hpp"

namespace {
std::atomic<bool> counting{false};
std::atomic<std::uint64_t> allocations{0};
}  // namespace

void* operator new(std::size_t size) {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

using namespace std::chrono_literals;
constexpr int kCalls = 100000;

template <class F>
std::uint64_t allocations_during(F&& f) {
  allocations.store(0);
  counting.store(true);
  f();
  counting.store(false);
  return allocations.load();
}

class AllocationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    limit_.execute([] {});
  }  // this thread's stripe is set up
  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit_{"alloc", r4c::AdaptiveLimitConfig().window(1ms).min_window_samples(1),
                            clock_};
};

TEST_F(AllocationTest, AdmittedCallsAllocateNothingWindowEndsIncluded) {
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

TEST_F(AllocationTest, RejectionsAllocateNothing) {
  r4c::AdaptiveLimit full("full", r4c::AdaptiveLimitConfig().initial_limit(1), clock_);
  r4c::Permit held = full.try_acquire();
  const auto count = allocations_during([&] {
    for (int i = 0; i < kCalls; ++i) EXPECT_FALSE(full.try_acquire());
  });
  EXPECT_EQ(count, 0u);
  EXPECT_EQ(full.snapshot().rejected, static_cast<std::uint64_t>(kCalls));
}

TEST_F(AllocationTest, ExecuteAllocatesNothingWhenAdmitted) {
  const auto count = allocations_during([&] {
    for (int i = 0; i < kCalls; ++i) {
      limit_.execute([&] { clock_->advance(100us); });
    }
  });
  EXPECT_EQ(count, 0u);
}

TEST_F(AllocationTest, ExecuteRethrowsThePreallocatedRejectionWithoutOperatorNew) {
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

TEST_F(AllocationTest, TheDefaultClockPathAllocatesNothing) {
  r4c::AdaptiveLimit limit("system");
  limit.execute([] {});
  const auto count = allocations_during([&] {
    for (int i = 0; i < kCalls; ++i) {
      r4c::Permit permit = limit.try_acquire();
      permit.on_success();
    }
  });
  EXPECT_EQ(count, 0u);
}

// Nothing on the pipeline's call path allocates when the callable does not: a callable without a
// token needs no timer; one with a token reuses its thread's stop_source while no deadline has
// stopped it, and the clock's timer queue keeps its capacity.
class PipelineAllocationTest : public ::testing::Test {
 protected:
  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
  r4c::ResilienceRegistry registry_ = r4c::testing::registry(clock_).build();
  r4c::Pipeline<int> pipeline_ =
      r4c::Pipeline<int>::builder(registry_, "alloc")
          .adaptive_limit([](r4c::AdaptiveLimitConfig& a) { a.window(1ms).min_window_samples(1); })
          .timeout([](r4c::TimeoutConfig& t) { t.timeout(1s); })
          .bulkhead()
          .rate_limiter(
              [](r4c::RateLimiterConfig& r) { r.limit_for_period(1000).refresh_period(1ms); })
          .build();
};

TEST_F(PipelineAllocationTest, ACallWithoutATokenAllocatesNothing) {
  pipeline_.execute([] { return 1; });
  const auto count = allocations_during([&] {
    for (int i = 0; i < kCalls; ++i) {
      pipeline_.execute([&] {
        clock_->advance(100us);
        return i;
      });
    }
  });
  EXPECT_EQ(count, 0u);
  EXPECT_GT(pipeline_.adaptive_limit()->snapshot().windows, 1000u);
}

TEST_F(PipelineAllocationTest, ACallWithATokenAllocatesNothingOnceWarm) {
  pipeline_.execute([](std::stop_token) { return 1; });
  const auto count = allocations_during([&] {
    for (int i = 0; i < kCalls; ++i) {
      pipeline_.execute([&](std::stop_token) {
        clock_->advance(100us);
        return i;
      });
    }
  });
  EXPECT_EQ(count, 0u);
  EXPECT_EQ(clock_->pending_tasks(), 0u);
}

TEST(RetryAllocationTest, ASuccessAtTheFirstAttemptAllocatesNothing) {
  struct NotFound : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  r4c::Retry retry("orders",
                   r4c::RetryConfig().abort_on<NotFound>().retry_on_result<int>(
                       [](const int&) { return false; }),
                   std::make_shared<r4c::ManualClock>());
  retry.execute([] { return 0; });  // this thread's counter stripes are set up
  int sum = 0;
  const auto count = allocations_during([&] {
    for (int i = 0; i < kCalls; ++i) sum += retry.execute([i] { return i & 1; });
  });
  EXPECT_EQ(count, 0u);
  EXPECT_EQ(sum, kCalls / 2);
}

}  // namespace
