// SPDX-License-Identifier: Apache-2.0
#include "r4c/clock.hpp"

#include <gtest/gtest.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <chrono>
#include <cmath>
#include <fstream>
#include <string>
#include <thread>

namespace {

using namespace std::chrono_literals;

TEST(ManualClockTest, StartsAtZeroOrAtTheGivenTime) {
  EXPECT_EQ(r4c::ManualClock().now(), 0ns);
  EXPECT_EQ(r4c::ManualClock(5s).now(), 5s);
}

TEST(ManualClockTest, MovesOnlyWhenAdvanced) {
  r4c::ManualClock clock;
  EXPECT_EQ(clock.now(), clock.now());
  clock.advance(1500ms);
  EXPECT_EQ(clock.now(), 1500ms);
  clock.advance(0ns);
  EXPECT_EQ(clock.now(), 1500ms);
}

TEST(ManualClockTest, RefusesToGoBackAndKeepsItsTime) {
  r4c::ManualClock clock(1s);
  EXPECT_THROW(clock.advance(-1ns), std::invalid_argument);
  EXPECT_EQ(clock.now(), 1s);
}

TEST(ClockReaderTest, ReadsAManualClockThroughItsInterface) {
  r4c::ManualClock clock;
  const r4c::detail::ClockReader reader(&clock);
  clock.advance(42ns);
  EXPECT_EQ(reader.ticks(), 42);  // a manual clock's ticks are nanoseconds
  EXPECT_EQ(reader.to_ns(1000), 1000);
  EXPECT_EQ(reader.to_ticks(1000), 1000);
}

TEST(TscConversionTest, ConvertsTicksOnEitherSideOfTheCalibrationPoint) {
  // 0.5 ns per tick.
  const r4c::detail::TscConversion conversion{1'000'000, 5'000'000'000, 1ull << 31};
  EXPECT_EQ(conversion.to_ns(1'000'000), 5'000'000'000);
  EXPECT_EQ(conversion.to_ns(1'000'100), 5'000'000'050);
  EXPECT_EQ(conversion.to_ns(999'900), 4'999'999'950);  // a lagging core reads a bit earlier
}

TEST(SystemClockTest, NeverGoesBack) {
  const r4c::SystemClock clock;
  auto previous = clock.now();
  for (int i = 0; i < 200000; ++i) {
    const auto now = clock.now();
    ASSERT_GE(now, previous);
    previous = now;
  }
}

TEST(SystemClockTest, SharesSteadyClocksEpoch) {
  const r4c::SystemClock clock;
  const auto steady = std::chrono::steady_clock::now().time_since_epoch();
  EXPECT_LT(std::chrono::abs(clock.now() - steady), 1ms);
}

// Real time on purpose: spans of raw ticks must measure what the clock measures.
TEST(SystemClockTest, TheLimitsReaderMeasuresSpansAsTheClockDoes) {
  const r4c::SystemClock clock;
  const r4c::detail::ClockReader reader(&clock);
  const auto before = clock.now();
  const std::int64_t first = reader.ticks();
  std::this_thread::sleep_for(20ms);
  const std::int64_t second = reader.ticks();
  const auto after = clock.now();
  const std::int64_t span = reader.to_ns(second - first);
  EXPECT_LE(span, (after - before).count());
  EXPECT_GE(span, (20ms).count());
  // The conversions are inverse up to rounding: a few ticks of a nanosecond or less each.
  EXPECT_NEAR(static_cast<double>(reader.to_ticks(span)), static_cast<double>(second - first), 4.0);
}

TEST(SystemClockTest, TheLimitsReadingsConvertToTheClocksOwnTime) {
  const r4c::SystemClock clock;
  const r4c::detail::ClockReader reader(&clock);
  const auto before = clock.now().count();
  const std::int64_t reading = reader.to_clock_ns(reader.ticks());
  const auto after = clock.now().count();
  EXPECT_LE(before, reading + 2);  // conversions round down by a nanosecond or so
  EXPECT_LE(reading, after);
}

// Real time on purpose: the property is agreement with steady_clock over a real second.
TEST(SystemClockTest, AgreesWithSteadyClockWithinATenthOfAPercentOverASecond) {
  const r4c::SystemClock clock;
  const auto steady_start = std::chrono::steady_clock::now();
  const auto start = clock.now();
  std::this_thread::sleep_for(1s);
  const auto elapsed = clock.now() - start;
  const auto steady_elapsed = std::chrono::steady_clock::now() - steady_start;
  const double error = std::abs(static_cast<double>(elapsed.count() - steady_elapsed.count())) /
                       static_cast<double>(steady_elapsed.count());
  EXPECT_LT(error, 0.001) << "uses_tsc=" << clock.uses_tsc() << " elapsed=" << elapsed.count()
                          << " steady=" << steady_elapsed.count();
}

// Asks the machine itself, not r4c: the kernel's clocksource and the CPU's invariant-TSC bit.
bool kernel_and_cpu_trust_the_tsc() {
#if defined(__x86_64__)
  std::ifstream source("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string name;
  if (!(source >> name) || name != "tsc") return false;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0x80000000u, &eax, &ebx, &ecx, &edx) == 0 || eax < 0x80000007u) return false;
  __get_cpuid(0x80000007u, &eax, &ebx, &ecx, &edx);
  return (edx & (1u << 8)) != 0;
#else
  return false;
#endif
}

TEST(SystemClockTest, UsesTheTimeStampCounterWhereTheKernelDoes) {
  const r4c::SystemClock clock;
  EXPECT_EQ(clock.uses_tsc(), kernel_and_cpu_trust_the_tsc());
  if (!clock.uses_tsc())
    GTEST_SKIP() << "the TSC is not usable here; SystemClock reads steady_clock";
  // The rate itself is checked against steady_clock over a second, above.
  EXPECT_GT(r4c::detail::tsc_conversion()->mult, 0u);
}

}  // namespace
