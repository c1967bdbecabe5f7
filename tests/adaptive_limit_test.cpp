// SPDX-License-Identifier: Apache-2.0
// The adaptive limit's documented behaviour, one test per point (docs/adaptive-limit.md).
#include "r4c/adaptive_limit.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;

struct SlowReply : r4c::CallTimeoutException {
  using CallTimeoutException::CallTimeoutException;
};
struct SocketTimeout : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A permit ends only as an lvalue: `limit.try_acquire().on_success()` must not compile.
template <class P>
concept EndsAsRvalue = requires(P p) {
  std::move(p).on_success();
}
|| requires(P p) { std::move(p).on_drop(); }
|| requires(P p) { std::move(p).on_ignore(); };

// A clock that counts its reads.
class CountingClock final : public r4c::Clock {
 public:
  std::chrono::nanoseconds now() const noexcept override {
    reads.fetch_add(1, std::memory_order_relaxed);
    return manual.now();
  }
  mutable std::atomic<int> reads{0};
  r4c::ManualClock manual;
};

class AdaptiveLimitTest : public ::testing::Test {
 protected:
  std::unique_ptr<r4c::AdaptiveLimit> make(r4c::AdaptiveLimitConfig config = {}) {
    return std::make_unique<r4c::AdaptiveLimit>("orders", std::move(config), clock_);
  }
  // Completes `count` calls of `latency` each, one after the other.
  void calls(r4c::AdaptiveLimit& limit, int count, std::chrono::nanoseconds latency) {
    for (int i = 0; i < count; ++i) {
      r4c::Permit permit = limit.try_acquire();
      ASSERT_TRUE(permit);
      clock_->advance(latency);
      permit.on_success();
    }
  }
  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
};

// 1. Slots.
TEST_F(AdaptiveLimitTest, StartsAtTheInitialLimit) {
  EXPECT_EQ(make()->limit(), 20);
  EXPECT_EQ(make(r4c::AdaptiveLimitConfig().initial_limit(7))->limit(), 7);
}

TEST_F(AdaptiveLimitTest, AtMostTheLimitOfCallsHoldSlots) {
  auto limit = make(r4c::AdaptiveLimitConfig().initial_limit(3));
  std::vector<r4c::Permit> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(limit->try_acquire());
    EXPECT_TRUE(held.back());
  }
  EXPECT_EQ(limit->in_flight(), 3);
  EXPECT_FALSE(limit->try_acquire());
  held.pop_back();  // destroyed untouched: the slot returns
  EXPECT_EQ(limit->in_flight(), 2);
  EXPECT_TRUE(limit->try_acquire());
}

TEST_F(AdaptiveLimitTest, ExecuteReturnsTheSlotWhenTheCallReturnsOrThrows) {
  auto limit = make(r4c::AdaptiveLimitConfig().initial_limit(1));
  EXPECT_EQ(limit->execute([&] {
    EXPECT_EQ(limit->in_flight(), 1);
    return 5;
  }),
            5);
  EXPECT_EQ(limit->in_flight(), 0);
  EXPECT_THROW(limit->execute([]() -> int { throw std::logic_error("bad request"); }),
               std::logic_error);
  EXPECT_EQ(limit->in_flight(), 0);
  EXPECT_THROW(limit->execute([] { throw SlowReply("late"); }), SlowReply);
  EXPECT_EQ(limit->in_flight(), 0);
}

TEST_F(AdaptiveLimitTest, ExecutePassesResultsThroughByValueReferenceAndVoid) {
  auto limit = make();
  int value = 1;
  int& ref = limit->execute([&]() -> int& { return value; });
  EXPECT_EQ(&ref, &value);
  auto moved = limit->execute([] { return std::make_unique<int>(3); });
  EXPECT_EQ(*moved, 3);
  bool ran = false;
  limit->execute([&] { ran = true; });
  EXPECT_TRUE(ran);
}

// 2. Rejection.
TEST_F(AdaptiveLimitTest, AFullLimitRejectsAtOnceWithoutCallingTheMethod) {
  auto limit = make(r4c::AdaptiveLimitConfig().initial_limit(1));
  r4c::Permit held = limit->try_acquire();
  ASSERT_NO_FATAL_FAILURE(r4c::test::expect_refused<r4c::LimitExceededException>(
      [&](auto method) { limit->execute(method); }, "orders", "'orders' is full"));
  EXPECT_EQ(limit->snapshot().rejected, 1u);
}

TEST_F(AdaptiveLimitTest, RethrowsOnePreallocatedExceptionPerInstance) {
  auto limit = make(r4c::AdaptiveLimitConfig().initial_limit(1));
  auto other = std::make_unique<r4c::AdaptiveLimit>(
      "search", r4c::AdaptiveLimitConfig().initial_limit(1), clock_);
  r4c::Permit held = limit->try_acquire();
  r4c::Permit held_other = other->try_acquire();
  auto rejection = [](r4c::AdaptiveLimit& l) -> const void* {
    try {
      l.execute([] {});
    } catch (const r4c::LimitExceededException& e) {
      return &e;
    }
    return nullptr;
  };
  const void* first = rejection(*limit);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(rejection(*limit), first);
  EXPECT_NE(rejection(*other), first);
}

TEST_F(AdaptiveLimitTest, TryAcquireRejectsWithoutAnException) {
  auto limit = make(r4c::AdaptiveLimitConfig().initial_limit(1));
  r4c::Permit held = limit->try_acquire();
  r4c::Permit rejected = limit->try_acquire();
  EXPECT_FALSE(rejected);
  rejected.on_success();  // an empty permit does nothing
  EXPECT_EQ(limit->in_flight(), 1);
  EXPECT_EQ(limit->snapshot().rejected, 1u);
  EXPECT_EQ(limit->snapshot().samples, 0u);
}

// 3. Samples.
TEST_F(AdaptiveLimitTest, ALatencyRunsFromTakingTheSlotToFinishing) {
  auto limit = make(r4c::AdaptiveLimitConfig().min_window_samples(1));
  r4c::Permit permit = limit->try_acquire();
  clock_->advance(1s + 7ms);
  permit.on_success();
  EXPECT_EQ(limit->snapshot().windows, 1u);
  EXPECT_EQ(limit->snapshot().window_latency, 1s + 7ms);
  EXPECT_FALSE(limit->snapshot().window_dropped);
}

TEST_F(AdaptiveLimitTest, ADropOnFailureMatchedByDynamicTypeIsADropSample) {
  auto limit = make(r4c::AdaptiveLimitConfig().min_window_samples(1));
  clock_->advance(1s);
  EXPECT_THROW(limit->execute([&] {
    clock_->advance(3ms);
    throw SlowReply("derived from CallTimeoutException");
  }),
               SlowReply);
  const auto snap = limit->snapshot();
  EXPECT_EQ(snap.windows, 1u);
  EXPECT_TRUE(snap.window_dropped);
  EXPECT_EQ(snap.window_latency, 3ms);
  EXPECT_EQ(snap.samples, 1u);
}

TEST_F(AdaptiveLimitTest, BulkheadFullIsADropByDefault) {
  auto limit = make(r4c::AdaptiveLimitConfig().min_window_samples(1));
  clock_->advance(1s);
  EXPECT_THROW(limit->execute([] { throw r4c::BulkheadFullException("full"); }),
               r4c::BulkheadFullException);
  EXPECT_TRUE(limit->snapshot().window_dropped);
}

TEST_F(AdaptiveLimitTest, DropOnNamesTheDropTypes) {
  auto limit = make(r4c::AdaptiveLimitConfig().min_window_samples(1).drop_on<SocketTimeout>());
  clock_->advance(1s);
  EXPECT_THROW(limit->execute([] { throw r4c::CallTimeoutException("not a drop here"); }),
               r4c::CallTimeoutException);
  EXPECT_EQ(limit->snapshot().samples, 0u);
  EXPECT_THROW(limit->execute([] { throw SocketTimeout("a drop"); }), SocketTimeout);
  EXPECT_TRUE(limit->snapshot().window_dropped);
  EXPECT_EQ(limit->snapshot().samples, 1u);
}

TEST_F(AdaptiveLimitTest, AThrownErrorCodeIsClassifiedByDropOnErrorAsAnAsyncOneIs) {
  auto limit = make(r4c::AdaptiveLimitConfig().min_window_samples(1));
  clock_->advance(1s);
  EXPECT_THROW(limit->execute([] {
    throw std::system_error(std::make_error_code(std::errc::connection_refused));
  }),
               std::system_error);
  EXPECT_EQ(limit->snapshot().samples, 0u);  // not a drop by default: only frees the slot
  EXPECT_THROW(limit->execute([] {
    throw std::system_error(std::make_error_code(std::errc::timed_out), "read");
  }),
               std::system_error);
  EXPECT_TRUE(limit->snapshot().window_dropped);  // timed_out is, as for an async code
  EXPECT_EQ(limit->snapshot().samples, 1u);
}

TEST_F(AdaptiveLimitTest, AnEmptyDropOnErrorMakesNoThrownCodeADrop) {
  auto limit = make(r4c::AdaptiveLimitConfig().min_window_samples(1).drop_on_error({}));
  clock_->advance(1s);
  EXPECT_THROW(
      limit->execute([] { throw std::system_error(std::make_error_code(std::errc::timed_out)); }),
      std::system_error);
  EXPECT_EQ(limit->snapshot().samples, 0u);
}

TEST_F(AdaptiveLimitTest, AnyOtherFailureOnlyFreesTheSlot) {
  auto limit = make(r4c::AdaptiveLimitConfig().min_window_samples(1));
  clock_->advance(1s);
  EXPECT_THROW(limit->execute([] { throw std::runtime_error("404"); }), std::runtime_error);
  EXPECT_THROW(limit->execute([] { throw 42; }), int);  // not even a std::exception
  const auto snap = limit->snapshot();
  EXPECT_EQ(snap.samples, 0u);
  EXPECT_EQ(snap.windows, 0u);
  EXPECT_EQ(snap.in_flight, 0);
}

TEST_F(AdaptiveLimitTest, TheCallersExceptionIsRethrownUnchanged) {
  auto limit = make();
  const std::exception_ptr original = std::make_exception_ptr(SlowReply("late"));
  // The same object, not a copy.
  ASSERT_TRUE(r4c::test::throws_the_original<SlowReply>(
      original, [&] { limit->execute([&] { std::rethrow_exception(original); }); }));
}

TEST_F(AdaptiveLimitTest, APermitEndsOnceAndOnlyOnAnLvalue) {
  static_assert(!std::is_copy_constructible_v<r4c::Permit>);
  static_assert(!std::is_copy_assignable_v<r4c::Permit>);
  static_assert(std::is_nothrow_move_constructible_v<r4c::Permit>);
  static_assert(!EndsAsRvalue<r4c::Permit>);
  static_assert(!std::is_convertible_v<r4c::Permit, bool>);  // explicit operator bool

  auto limit = make(r4c::AdaptiveLimitConfig().min_window_samples(1));
  r4c::Permit permit = limit->try_acquire();
  clock_->advance(1s);
  permit.on_success();
  EXPECT_FALSE(permit);
  permit.on_drop();  // does nothing: the permit already ended
  permit.on_success();
  EXPECT_EQ(limit->snapshot().samples, 1u);
  EXPECT_FALSE(limit->snapshot().window_dropped);
  EXPECT_EQ(limit->in_flight(), 0);
}

TEST_F(AdaptiveLimitTest, MovingAPermitMovesItsSlot) {
  auto limit = make(r4c::AdaptiveLimitConfig().initial_limit(2));
  r4c::Permit a = limit->try_acquire();
  r4c::Permit b = std::move(a);
  EXPECT_FALSE(a);
  EXPECT_TRUE(b);
  EXPECT_EQ(limit->in_flight(), 1);
  r4c::Permit c = limit->try_acquire();
  c = std::move(b);  // c's own slot is released first
  EXPECT_EQ(limit->in_flight(), 1);
  c.on_ignore();
  EXPECT_EQ(limit->in_flight(), 0);
}

// 4. Windows.
TEST_F(AdaptiveLimitTest, TheFirstCallToEndAfterTheWindowRecomputesTheLimit) {
  auto limit = make();      // 1 s windows, 10 samples
  calls(*limit, 10, 10ms);  // 100 ms: the window is not over
  EXPECT_EQ(limit->snapshot().windows, 0u);
  clock_->advance(900ms);
  calls(*limit, 1, 10ms);  // ends after the window
  const auto snap = limit->snapshot();
  EXPECT_EQ(snap.windows, 1u);
  EXPECT_EQ(snap.window_samples, 11u);
  EXPECT_EQ(snap.window_latency, 10ms);
  EXPECT_EQ(snap.window_max_in_flight, 1);
  // Under half the limit in use: gradient2 keeps it.
  EXPECT_EQ(snap.limit, 20);
  EXPECT_EQ(snap.limit_changes, 0u);
}

TEST_F(AdaptiveLimitTest, AShortWindowKeepsItsSamplesAndExtendsByWholeWindows) {
  auto limit = make();
  calls(*limit, 5, 1ms);
  clock_->advance(1500ms);  // now 1.505 s: the window ended with 5 samples
  calls(*limit, 1, 1ms);    // too few: the end moves to 2 s, samples kept
  EXPECT_EQ(limit->snapshot().windows, 0u);
  calls(*limit, 4, 1ms);  // 10 samples, but the window now ends at 2 s
  EXPECT_EQ(limit->snapshot().windows, 0u);
  clock_->advance(2s - clock_->now());
  calls(*limit, 1, 0ms);  // ends exactly at 2 s
  const auto snap = limit->snapshot();
  EXPECT_EQ(snap.windows, 1u);
  EXPECT_EQ(snap.window_samples, 11u);
}

TEST_F(AdaptiveLimitTest, AnExtendedWindowEndsAtTheFirstWholeWindowAfterNow) {
  auto limit = make();
  calls(*limit, 3, 1ms);
  clock_->advance(3700ms);  // now 3.703 s
  calls(*limit, 1, 0ms);    // too few: the end moves to 4 s
  calls(*limit, 6, 0ms);
  clock_->advance(4s - 1ns - clock_->now());
  calls(*limit, 1, 0ms);  // 11 samples, but 1 ns before the end
  EXPECT_EQ(limit->snapshot().windows, 0u);
  clock_->advance(1ns);
  calls(*limit, 1, 0ms);
  EXPECT_EQ(limit->snapshot().windows, 1u);
  EXPECT_EQ(limit->snapshot().window_samples, 12u);
}

TEST_F(AdaptiveLimitTest, TheNextWindowStartsWhenTheLimitIsRecomputed) {
  auto limit = make(r4c::AdaptiveLimitConfig().min_window_samples(1));
  clock_->advance(1500ms);
  calls(*limit, 1, 0ms);  // closes the first window at 1.5 s
  EXPECT_EQ(limit->snapshot().windows, 1u);
  clock_->advance(999ms);
  calls(*limit, 1, 0ms);  // 2.499 s: not yet
  EXPECT_EQ(limit->snapshot().windows, 1u);
  clock_->advance(1ms);
  calls(*limit, 1, 0ms);  // 2.5 s
  EXPECT_EQ(limit->snapshot().windows, 2u);
}

TEST_F(AdaptiveLimitTest, WithoutTrafficNothingChanges) {
  auto limit = make(r4c::AdaptiveLimitConfig().min_window_samples(1));
  clock_->advance(10min);
  const auto snap = limit->snapshot();
  EXPECT_EQ(snap.windows, 0u);
  EXPECT_EQ(snap.limit, 20);
}

TEST_F(AdaptiveLimitTest, TheMostCallsInFlightCountsTheCallItself) {
  auto limit = make(r4c::AdaptiveLimitConfig().min_window_samples(1));
  r4c::Permit a = limit->try_acquire();
  r4c::Permit b = limit->try_acquire();
  r4c::Permit c = limit->try_acquire();
  c.on_ignore();
  b.on_ignore();
  clock_->advance(1s);
  a.on_success();
  EXPECT_EQ(limit->snapshot().window_max_in_flight, 3);
}

// 5. A lower limit interrupts nothing.
TEST_F(AdaptiveLimitTest, ALimitLoweredBelowTheCallsInFlightRejectsNewCallsUntilEnoughEnd) {
  auto limit = make(r4c::AdaptiveLimitConfig()
                        .algorithm(r4c::LimitAlgorithm::aimd)
                        .initial_limit(10)
                        .min_window_samples(1));
  std::vector<r4c::Permit> held;
  for (int i = 0; i < 10; ++i) held.push_back(limit->try_acquire());
  clock_->advance(1s);
  held.back().on_drop();  // AIMD: 10 * 0.9 = 9
  held.pop_back();
  EXPECT_EQ(limit->limit(), 9);
  EXPECT_EQ(limit->in_flight(), 9);
  for (auto& permit : held) EXPECT_TRUE(permit);  // nothing interrupted
  clock_->advance(1s);
  held.back().on_drop();  // 9 * 0.9 = 8.1 -> 8
  held.pop_back();
  EXPECT_EQ(limit->limit(), 8);
  EXPECT_EQ(limit->in_flight(), 8);
  EXPECT_FALSE(limit->try_acquire());
  held.back().on_ignore();
  held.pop_back();
  EXPECT_TRUE(limit->try_acquire());
}

// 6. Disabled.
TEST_F(AdaptiveLimitTest, WhenDisabledEveryCallPassesAndNothingIsMeasured) {
  auto clock = std::make_shared<CountingClock>();
  r4c::AdaptiveLimit limit(
      "orders", r4c::AdaptiveLimitConfig().enabled(false).initial_limit(1).min_window_samples(1),
      clock);
  const int reads_at_start = clock->reads.load();
  std::vector<r4c::Permit> held;
  for (int i = 0; i < 100; ++i) {
    held.push_back(limit.try_acquire());
    EXPECT_TRUE(held.back());
  }
  clock->manual.advance(1h);
  for (auto& permit : held) permit.on_drop();
  EXPECT_EQ(limit.execute([] { return 1; }), 1);
  const auto snap = limit.snapshot();
  EXPECT_FALSE(snap.enabled);
  EXPECT_EQ(snap.in_flight, 0);
  EXPECT_EQ(snap.windows, 0u);
  EXPECT_EQ(snap.samples, 0u);
  EXPECT_EQ(snap.rejected, 0u);
  EXPECT_EQ(snap.limit, 1);
  EXPECT_EQ(clock->reads.load(), reads_at_start);
}

// 7. Algorithms, through the limit.
TEST_F(AdaptiveLimitTest, Gradient2IsTheDefaultAndGrowsWhileLatencyHolds) {
  auto limit = make(r4c::AdaptiveLimitConfig().min_window_samples(1).initial_limit(2));
  EXPECT_EQ(limit->snapshot().algorithm, r4c::LimitAlgorithm::gradient2);
  for (int w = 0; w < 5; ++w) {
    r4c::Permit a = limit->try_acquire();
    r4c::Permit b = limit->try_acquire();
    clock_->advance(1s);
    b.on_success();
    a.on_ignore();
  }
  // 2 -> 2.8 -> 3.6 -> 4.4, then 2 in flight is under half of 4.4 and the limit holds
  EXPECT_EQ(limit->limit(), 4);
  EXPECT_EQ(limit->snapshot().long_latency, 1s);
}

TEST_F(AdaptiveLimitTest, AimdBacksOffAfterAWindowWithADrop) {
  auto limit = make(r4c::AdaptiveLimitConfig()
                        .algorithm(r4c::LimitAlgorithm::aimd)
                        .backoff_ratio(0.5)
                        .min_window_samples(2));
  calls(*limit, 1, 1ms);
  clock_->advance(1s);
  EXPECT_THROW(limit->execute([] { throw r4c::CallTimeoutException("2 s"); }),
               r4c::CallTimeoutException);
  const auto snap = limit->snapshot();
  EXPECT_EQ(snap.limit, 10);
  EXPECT_EQ(snap.limit_changes, 1u);
  EXPECT_TRUE(snap.window_dropped);
  EXPECT_EQ(snap.long_latency, 0ns);
}

// 8. Time.
TEST_F(AdaptiveLimitTest, ReadsTheClockTwicePerAdmittedCallAndNeverOnARejection) {
  auto clock = std::make_shared<CountingClock>();
  r4c::AdaptiveLimit limit("orders", r4c::AdaptiveLimitConfig().initial_limit(1), clock);
  const int start = clock->reads.load();
  {
    r4c::Permit permit = limit.try_acquire();
    EXPECT_EQ(clock->reads.load() - start, 1);
    EXPECT_FALSE(limit.try_acquire());
    EXPECT_EQ(clock->reads.load() - start, 1);
    permit.on_success();
  }
  EXPECT_EQ(clock->reads.load() - start, 2);
  limit.execute([] {});
  EXPECT_EQ(clock->reads.load() - start, 4);
}

// "Probarlo con ManualClock" of resilience4cata 0.6.0's Adaptive limit page, synchronous form.
TEST_F(AdaptiveLimitTest, TheAdaptiveLimitPagesManualClockScenario) {
  auto limit = make(r4c::AdaptiveLimitConfig().initial_limit(2).min_window_samples(1));
  r4c::AdaptiveLimitHandle handle = limit->handle();

  r4c::Permit a = limit->try_acquire();  // pending: holds a slot
  r4c::Permit b = limit->try_acquire();  // pending: holds the other
  ASSERT_TRUE(a);
  ASSERT_TRUE(b);
  EXPECT_THROW(limit->execute([] { return std::string("c"); }), r4c::LimitExceededException);

  clock_->advance(1s);  // the calls took 1 s; the window is over
  a.on_success();       // ends the window
  b.on_success();
  EXPECT_EQ(handle.snapshot().windows, 1u);
  EXPECT_EQ(handle.snapshot().window_latency, 1s);
  EXPECT_EQ(handle.snapshot().window_max_in_flight, 2);
  EXPECT_EQ(handle.snapshot().rejected, 1u);
}

TEST_F(AdaptiveLimitTest, TheHandleShowsTheLimit) {
  auto limit = make(r4c::AdaptiveLimitConfig().min_limit(2).max_limit(50).initial_limit(5));
  const r4c::AdaptiveLimitHandle handle = limit->handle();
  r4c::Permit permit = limit->try_acquire();
  EXPECT_EQ(handle.limit(), 5);
  EXPECT_EQ(handle.in_flight(), 1);
  EXPECT_EQ(handle.instance_id(), "orders");
  const r4c::AdaptiveLimitSnapshot snap = handle.snapshot();
  EXPECT_EQ(snap.limit, 5);
  EXPECT_EQ(snap.in_flight, 1);
  EXPECT_EQ(snap.min_limit, 2);
  EXPECT_EQ(snap.max_limit, 50);
  EXPECT_TRUE(snap.enabled);
  EXPECT_EQ(snap.windows, 0u);
}

TEST_F(AdaptiveLimitTest, WorksWithTheDefaultSystemClock) {
  r4c::AdaptiveLimit limit("orders");
  EXPECT_EQ(limit.execute([] { return 3; }), 3);
  EXPECT_EQ(limit.in_flight(), 0);
}

// delay_target below one call at a time: the limit paces. Drops cut the estimate below 1; then
// after a call of latency L the limit stays closed for L × (1 / share − 1).
TEST(AdaptiveLimitPacingTest, ASubOneDelayTargetLimitAdmitsOneCallForItsShareOfTheTime) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimitConfig config;
  config.algorithm(r4c::LimitAlgorithm::delay_target)
      .initial_limit(1)
      .window(1ms)
      .min_window_samples(1);
  r4c::AdaptiveLimit limit("paced", config, clock);
  for (int w = 0; w < 12; ++w) {
    r4c::Permit permit = limit.try_acquire();
    while (!permit) {
      clock->advance(1ms);
      permit = limit.try_acquire();
    }
    clock->advance(2ms);
    permit.on_drop();
  }
  const double share = limit.snapshot().fractional_limit;
  ASSERT_LT(share, 1.0);
  ASSERT_GT(share, 0.0);
  // Wait out any pause, then time one call of 10 ms.
  clock->advance(1s);
  // The pause after a call uses the share it ran under (the window it closes sets the next).
  const double running_share = limit.snapshot().fractional_limit;
  r4c::Permit call = limit.try_acquire();
  ASSERT_TRUE(call);
  EXPECT_FALSE(limit.try_acquire());  // one call at a time
  clock->advance(10ms);
  call.on_drop();  // a drop: the window it closes cuts again, so the limit stays below 1
  const double paused_ms = 10.0 * (1.0 / running_share - 1.0);
  EXPECT_EQ(limit.limit(), 0);
  clock->advance(std::chrono::microseconds(static_cast<long long>(paused_ms * 1000 * 0.9)));
  EXPECT_FALSE(limit.try_acquire()) << "still paused";
  clock->advance(std::chrono::microseconds(static_cast<long long>(paused_ms * 1000 * 0.2) + 1));
  r4c::Permit next = limit.try_acquire();
  EXPECT_TRUE(next) << "the pause is over";
}

TEST(AdaptiveLimitPacingTest, IntegerAlgorithmsNeverPace) {
  r4c::AdaptiveLimit limit(
      "aimd", r4c::AdaptiveLimitConfig().algorithm(r4c::LimitAlgorithm::aimd).initial_limit(1));
  EXPECT_EQ(limit.snapshot().fractional_limit, 1.0);
}

}  // namespace
