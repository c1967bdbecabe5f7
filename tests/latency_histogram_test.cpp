// SPDX-License-Identifier: Apache-2.0
// Latency histograms (<r4c/latency_histogram.hpp>): the buckets, the percentiles, the windows,
// and the adaptive limit's latencyHistogram setting with its snapshot and Prometheus histogram.
#include "r4c/latency_histogram.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "r4c/metrics.hpp"
#include "r4c/registry.hpp"
#include "test_seed.hpp"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;
using Histogram = r4c::detail::LatencyHistogram;

// What a percentile reports for a set of equal latencies: the upper bound of their bucket.
std::chrono::nanoseconds bound_of(std::chrono::nanoseconds latency) {
  return std::chrono::nanoseconds(static_cast<std::int64_t>(
      Histogram::bucket_bound(Histogram::bucket_of(static_cast<std::uint64_t>(latency.count())))));
}

constexpr std::int64_t kNever = std::int64_t{1} << 62;  // a window that does not end

TEST(LatencyHistogramTest, EveryLatencyLandsInABucketAtMostAnEighthAboveIt) {
  std::mt19937_64 random(r4c::test::test_seed(19));
  std::vector<std::uint64_t> values;
  for (std::uint64_t v = 0; v < 5000; ++v) values.push_back(v);
  for (int i = 0; i < 100000; ++i) values.push_back(random() >> (random() % 64));
  for (std::uint64_t v : values) {
    const int bucket = Histogram::bucket_of(v);
    ASSERT_GE(bucket, 0);
    ASSERT_LT(bucket, Histogram::kBuckets);
    const std::uint64_t bound = Histogram::bucket_bound(bucket);
    if (bucket == Histogram::kBuckets - 1 && v > bound) continue;  // beyond 2^41 ns: clamped
    ASSERT_GE(bound, v) << v;
    ASSERT_LE(bound - v, v / 8 + 1) << v;
    if (bucket > 0) {
      ASSERT_GT(v, Histogram::bucket_bound(bucket - 1)) << v;
    }
  }
  for (int b = 0; b + 1 < Histogram::kBuckets; ++b) {
    EXPECT_EQ(Histogram::bucket_of(Histogram::bucket_bound(b)), b);
    EXPECT_EQ(Histogram::bucket_of(Histogram::bucket_bound(b) + 1), b + 1);
  }
  // The Prometheus bounds are bucket edges, so their counts are exact.
  for (int i = 0; i < r4c::kLatencyBounds; ++i) {
    const auto bound = static_cast<std::uint64_t>(r4c::latency_bound(i).count());
    EXPECT_EQ(Histogram::bucket_bound(Histogram::bucket_of(bound)), bound);
  }
}

// Every latency recorded is counted once folded (the ring folds each 64) or still in the ring:
// edges of every bucket and random values, counted against the Prometheus bounds by hand.
TEST(LatencyHistogramTest, CountsEveryLatencyUnderEachPrometheusBoundFoldedOrNot) {
  std::mt19937_64 random(r4c::test::test_seed(23));
  std::vector<std::int64_t> values;
  for (int b = 0; b < Histogram::kBuckets; ++b) {
    const auto bound = static_cast<std::int64_t>(Histogram::bucket_bound(b));
    values.insert(values.end(), {bound - 1, bound, bound + 1});
  }
  for (int i = 0; i < 20000; ++i)
    values.push_back(static_cast<std::int64_t>(random() >> (1 + random() % 63)));
  values.push_back(0);
  values.push_back(-5);  // a latency below 0 counts as 0
  Histogram histogram(kNever, 0);
  for (std::int64_t v : values) histogram.record(v, 0);
  const r4c::LatencyDistribution d = histogram.distribution();
  ASSERT_GT(values.size() % 64, 0u);  // some still in the ring
  EXPECT_EQ(d.total.count, values.size());
  for (int i = 0; i < r4c::kLatencyBounds; ++i) {
    const std::int64_t bound = r4c::latency_bound(i).count();
    std::uint64_t expected = 0;
    for (std::int64_t v : values) expected += v <= bound ? 1 : 0;
    EXPECT_EQ(d.buckets[i], expected) << "le " << bound;
  }
}

// The sum (Prometheus `_sum`) is made as the counts are: folded with the ring, and read with
// what is still in it, on every thread's stripe.
TEST(LatencyHistogramTest, SumsEveryLatencyFoldedOrNotOnEveryThread) {
  Histogram histogram(kNever, 0);
  std::uint64_t expected = 0;
  for (int i = 0; i < 1000; ++i) {  // 15 folds, 40 latencies left in the ring
    const std::int64_t latency = (i * 7919) % 100'003;
    histogram.record(latency, 0);
    expected += static_cast<std::uint64_t>(latency);
  }
  histogram.record(-5, 0);  // counts as 0
  EXPECT_EQ(histogram.distribution().sum.count(), static_cast<std::int64_t>(expected));
  std::thread other([&] {
    for (int i = 1; i <= 100; ++i) histogram.record(i * 1000, 0);  // 1 fold, 36 in the ring
  });
  other.join();
  expected += 5050u * 1000u;
  const r4c::LatencyDistribution d = histogram.distribution();
  EXPECT_EQ(d.sum.count(), static_cast<std::int64_t>(expected));
  EXPECT_EQ(d.total.count, 1101u);
}

TEST(LatencyHistogramTest, ReportsPercentilesNeverBelowAndAtMostAnEighthAbove) {
  Histogram histogram(kNever, 0);
  for (int us = 1; us <= 1000; ++us) histogram.record(us * 1000, 0);
  const r4c::LatencyDistribution d = histogram.distribution();
  EXPECT_TRUE(d.enabled);
  EXPECT_EQ(d.total.count, 1000u);
  const auto near = [](std::chrono::nanoseconds got, std::chrono::nanoseconds exact) {
    EXPECT_GE(got, exact);
    EXPECT_LE(got, exact + exact / 8);
  };
  near(d.total.p50, 500us);
  near(d.total.p90, 900us);
  near(d.total.p99, 990us);
  near(d.total.p999, 999us);
  EXPECT_EQ(d.window.count, 0u);  // no window ended yet
  // Cumulative `le` counts: 1000 latencies of 1..1000 µs, the bound 2^20 ns is 1048.576 µs.
  EXPECT_EQ(d.buckets[0], 1u);  // 1.024 µs: only the 1 µs latency
  EXPECT_EQ(d.buckets[10], 1000u);
  EXPECT_EQ(d.buckets[9], 524u);  // 2^19 ns = 524.288 µs
}

TEST(LatencyHistogramTest, TheLastWindowHoldsOnlyItsOwnLatencies) {
  Histogram histogram(100, 0);                                    // windows of 100 ticks
  for (int i = 0; i < 100; ++i) histogram.record(1'000'000, 50);  // 1 ms, first window
  EXPECT_EQ(histogram.distribution().window.count, 0u);
  // The first record after the end closes the window before it counts in the next one.
  histogram.record(8'000'000, 120);
  r4c::LatencyDistribution d = histogram.distribution();
  EXPECT_EQ(d.window.count, 100u);
  EXPECT_EQ(d.window.p999, bound_of(1ms));
  EXPECT_EQ(d.total.count, 101u);
  EXPECT_EQ(d.total.p999, bound_of(8ms));
  for (int i = 0; i < 9; ++i) histogram.record(8'000'000, 150);
  histogram.record(1'000'000, 230);  // ends the second window, [120, 220)
  d = histogram.distribution();
  EXPECT_EQ(d.window.count, 10u);
  EXPECT_EQ(d.window.p50, bound_of(8ms));
  EXPECT_EQ(d.total.count, 111u);
  EXPECT_EQ(d.total.p50, bound_of(1ms));
}

TEST(LatencyHistogramTest, ThreadsWithTheirOwnStripesLoseNoSample) {
  Histogram histogram(kNever, 0);
  constexpr int kThreads = 4;
  constexpr int kEach = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&histogram, t] {
      for (int i = 0; i < kEach; ++i) histogram.record((t + 1) * 1000 + i % 7, 0);
    });
  }
  // A reader alongside sees counts that only grow.
  std::uint64_t last = 0;
  for (int i = 0; i < 50; ++i) {
    const std::uint64_t now = histogram.distribution().total.count;
    EXPECT_GE(now, last);
    last = now;
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(histogram.distribution().total.count, std::uint64_t{kThreads} * kEach);
}

struct LimitFixture {
  std::shared_ptr<r4c::ManualClock> clock = std::make_shared<r4c::ManualClock>();
  r4c::ResilienceRegistry registry;
  r4c::AdaptiveLimit& limit;

  explicit LimitFixture(const std::string& text)
      : registry(r4c::testing::registry(clock).config_text(text).build()),
        limit(registry.adaptive_limit_policy("shop::Orders#place", "orders")) {}

  void call(std::chrono::nanoseconds latency) {
    r4c::Permit permit = limit.try_acquire();
    ASSERT_TRUE(permit);
    clock->advance(latency);
    permit.on_success();
  }
};

constexpr const char* kOn =
    "instances.orders.adaptiveLimit.latencyHistogram = true\n"
    "instances.orders.adaptiveLimit.window = 1s\n";

TEST(AdaptiveLimitLatencyTest, IsOffByDefaultAndPublishesNothing) {
  LimitFixture f("instances.orders.adaptiveLimit.window = 1s\n");
  f.call(5ms);
  EXPECT_FALSE(f.limit.config().latency_histogram());
  EXPECT_FALSE(f.limit.snapshot().latency.enabled);
  EXPECT_EQ(f.limit.snapshot().latency.total.count, 0u);
  EXPECT_THAT(r4c::metrics::prometheus_text(f.registry), Not(HasSubstr("call_latency")));
}

TEST(AdaptiveLimitLatencyTest, RecordsEverySampledCallAndReportsTheLastWindow) {
  LimitFixture f(kOn);
  for (int i = 0; i < 10; ++i) f.call(2ms);  // 20 ms of the first 1 s window
  {
    r4c::Permit ignored = f.limit.try_acquire();
    ignored.on_ignore();  // no sample, no latency
  }
  f.clock->advance(1s);
  f.call(40ms);  // ends after the window did: closes it, counts in the next one
  const r4c::AdaptiveLimitSnapshot s = f.limit.snapshot();
  ASSERT_TRUE(s.latency.enabled);
  EXPECT_EQ(s.latency.total.count, 11u);
  EXPECT_EQ(s.latency.window.count, 10u);
  EXPECT_EQ(s.latency.window.p99, bound_of(2ms));
  EXPECT_GE(s.latency.total.p999, 40ms);
  EXPECT_LE(s.latency.total.p999, 45ms);
  EXPECT_EQ(s.latency.sum, 60ms);
}

TEST(AdaptiveLimitLatencyTest, IsAPrometheusHistogram) {
  LimitFixture f(kOn);
  f.call(3ms);
  f.call(3s);
  const std::string text = r4c::metrics::prometheus_text(f.registry);
  const std::string family = "r4c_adaptivelimit_call_latency_seconds";
  EXPECT_THAT(text, HasSubstr("# TYPE " + family + " histogram\n"));
  const std::string labels = "{kind=\"adaptivelimit\",name=\"orders\"";
  // 3 ms is at most 2^22 ns (4.194304 ms), 3 s at most 2^32 ns (4.294967296 s).
  EXPECT_THAT(text, HasSubstr(family + "_bucket" + labels + ",le=\"0.002097152\"} 0\n"));
  EXPECT_THAT(text, HasSubstr(family + "_bucket" + labels + ",le=\"0.004194304\"} 1\n"));
  EXPECT_THAT(text, HasSubstr(family + "_bucket" + labels + ",le=\"2.147483648\"} 1\n"));
  EXPECT_THAT(text, HasSubstr(family + "_bucket" + labels + ",le=\"4.294967296\"} 2\n"));
  EXPECT_THAT(text, HasSubstr(family + "_bucket" + labels + ",le=\"+Inf\"} 2\n"));
  EXPECT_THAT(text, HasSubstr(family + "_sum" + labels + "} 3.003\n"));
  EXPECT_THAT(text, HasSubstr(family + "_count" + labels + "} 2\n"));
}

// latencyHistogram changes on a live limit: switched on, the calls from then on are recorded and
// the Prometheus histogram appears; switched off, it disappears and nothing more is recorded.
TEST(AdaptiveLimitLatencyTest, SwitchesOnAndOffOnALiveLimit) {
  const std::string off = "instances.orders.adaptiveLimit.window = 1s\n";
  const std::string family = "r4c_adaptivelimit_call_latency_seconds";
  LimitFixture f(off);
  f.call(5ms);
  EXPECT_FALSE(f.limit.snapshot().latency.enabled);
  (void)f.registry.reconfigure(kOn);
  EXPECT_TRUE(f.limit.config().latency_histogram());
  r4c::LatencyDistribution on = f.limit.snapshot().latency;
  EXPECT_TRUE(on.enabled);
  EXPECT_EQ(on.total.count, 0u);  // the calls before are not in it
  f.call(5ms);
  f.call(5ms);
  on = f.limit.snapshot().latency;
  EXPECT_EQ(on.total.count, 2u);
  EXPECT_EQ(on.total.p50, bound_of(5ms));
  EXPECT_EQ(on.sum, 10ms);  // only the calls it recorded
  EXPECT_THAT(r4c::metrics::prometheus_text(f.registry), HasSubstr(family + "_count"));
  const std::uint64_t windows = f.limit.snapshot().windows;

  (void)f.registry.reconfigure(off);
  f.call(5ms);
  EXPECT_FALSE(f.limit.snapshot().latency.enabled);
  EXPECT_THAT(r4c::metrics::prometheus_text(f.registry), Not(HasSubstr(family)));
  EXPECT_EQ(f.limit.snapshot().windows, windows);  // the limit's own state went on untouched
  EXPECT_EQ(f.limit.in_flight(), 0);
}

// samplePercentile: the window's sample is a percentile of its latencies (Netflix
// concurrency-limits' PercentileSampleWindow), not their average.
TEST(AdaptiveLimitLatencyTest, ASamplePercentileIsTheWindowsSample) {
  const std::string settings =
      std::string(kOn) + "instances.orders.adaptiveLimit.minWindowSamples = 1\n";
  LimitFixture average(settings);
  LimitFixture p90(settings + "instances.orders.adaptiveLimit.samplePercentile = 0.9\n");
  for (LimitFixture* f : {&average, &p90}) {
    for (int i = 0; i < 9; ++i) f->call(1ms);
    f->call(100ms);
    f->clock->advance(1s);
    f->call(1ms);  // closes the window
  }
  // The average of 9 x 1 ms and 100 ms (and, maybe, the closing 1 ms) is about 10 ms; their
  // 90th percentile is 1 ms, reported as its bucket's bound.
  EXPECT_GE(average.limit.snapshot().window_latency, 10ms);
  EXPECT_EQ(p90.limit.snapshot().window_latency, bound_of(1ms));
  EXPECT_EQ(p90.limit.snapshot().windows, 1u);
  // Live: back to the average for the next window.
  (void)p90.registry.reconfigure(settings);
  EXPECT_EQ(p90.limit.config().sample_percentile(), 0.0);
  for (int i = 0; i < 9; ++i) p90.call(1ms);
  p90.call(100ms);
  p90.clock->advance(1s);
  p90.call(1ms);
  EXPECT_GE(p90.limit.snapshot().window_latency, 9ms);
}

TEST(AdaptiveLimitLatencyTest, ASamplePercentileNeedsTheHistogramAndAPercentile) {
  EXPECT_THROW(r4c::AdaptiveLimitConfig().sample_percentile(1.0), r4c::ConfigException);
  EXPECT_THROW(r4c::AdaptiveLimitConfig().sample_percentile(-0.5), r4c::ConfigException);
  try {
    r4c::AdaptiveLimitConfig().sample_percentile(0.99).validate();
    ADD_FAILURE() << "a sample percentile without a histogram was accepted";
  } catch (const r4c::ConfigException& e) {
    EXPECT_EQ(e.code(), "R4C-ATR-009");
    EXPECT_THAT(e.what(), HasSubstr("latency_histogram true"));
  }
  EXPECT_NO_THROW(
      r4c::AdaptiveLimitConfig().latency_histogram(true).sample_percentile(0.99).validate());
}

}  // namespace
