// SPDX-License-Identifier: Apache-2.0
// The algorithms' update rules (docs/spec/algorithms.md), and every conformance trace in
// tests/conformance replayed exactly: straight into the algorithm, and through a real
// AdaptiveLimit driven by a ManualClock so that the windows it forms feed the same aggregates.
#include "r4c/detail/limit_algorithms.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "r4c/adaptive_limit.hpp"

namespace {

using namespace std::chrono_literals;
using r4c::detail::WindowAggregate;

struct TraceRow {
  WindowAggregate window;
  int limit_after;
  std::int64_t rtt_noload_after = 0;  // vegas only
  double jitter_after = 0.0;          // vegas only
};

struct Trace {
  std::string name;
  r4c::AdaptiveLimitConfig config;
  std::vector<TraceRow> rows;
  bool vegas = false;
  double initial_jitter = 0.0;
};

// VEGAS's jitter, fed in as the traces recorded it (tests/conformance/README.md): the draw at
// construction is initialJitter, a draw while row k is replayed is row k's jitter_after.
struct RecordedJitter {
  const Trace* trace = nullptr;
  std::size_t row = 0;
  bool constructed = false;
  int draws = 0;
  double operator()() {
    ++draws;
    if (!constructed) {
      constructed = true;
      return trace->initial_jitter;
    }
    return trace->rows.at(row).jitter_after;
  }
};

// The first line holds the settings as key=value pairs after '#'.
r4c::AdaptiveLimitConfig config_from_comment(const std::string& line) {
  std::map<std::string, std::string> settings;
  std::istringstream words(line.substr(1));
  std::string word;
  while (words >> word) {
    const auto eq = word.find('=');
    if (eq != std::string::npos) settings[word.substr(0, eq)] = word.substr(eq + 1);
  }
  r4c::AdaptiveLimitConfig config;
  config.algorithm(*r4c::from_string<r4c::LimitAlgorithm>(settings.at("algorithm")));
  // VegasLimit has no minLimit: it clamps at 1, r4c's default.
  config.max_limit(std::stoi(settings.at("maxLimit")))
      .min_limit(settings.count("minLimit") ? std::stoi(settings["minLimit"]) : 1)
      .initial_limit(std::stoi(settings.at("initialLimit")));
  if (settings.count("probeMultiplier")) {
    config.probe_multiplier(std::stoi(settings["probeMultiplier"]));
  }
  if (settings.count("alpha")) config.alpha(std::stoi(settings["alpha"]));
  if (settings.count("beta")) config.beta(std::stoi(settings["beta"]));
  if (settings.count("smoothing")) config.smoothing(std::stod(settings["smoothing"]));
  if (settings.count("rttTolerance")) config.rtt_tolerance(std::stod(settings["rttTolerance"]));
  if (settings.count("longWindow")) config.long_window(std::stoi(settings["longWindow"]));
  if (settings.count("queueSize")) config.queue_size(std::stoi(settings["queueSize"]));
  if (settings.count("backoffRatio")) config.backoff_ratio(std::stod(settings["backoffRatio"]));
  return config;
}

Trace load_trace(const std::filesystem::path& path) {
  Trace trace;
  trace.name = path.filename().string();
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  trace.config = config_from_comment(line);
  trace.vegas = trace.config.algorithm() == r4c::LimitAlgorithm::vegas;
  if (trace.vegas) {
    const auto at = line.find("initialJitter=");
    trace.initial_jitter = std::stod(line.substr(at + std::string("initialJitter=").size()));
  }
  // header: window,avg_rtt_ns,max_in_flight,dropped,limit_after[,rtt_noload_after,jitter_after]
  std::getline(in, line);
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string window, rtt, in_flight, dropped, limit;
    std::getline(fields, window, ',');
    std::getline(fields, rtt, ',');
    std::getline(fields, in_flight, ',');
    std::getline(fields, dropped, ',');
    std::getline(fields, limit, ',');
    TraceRow row{{std::stoll(rtt), std::stoi(in_flight), dropped == "1"}, std::stoi(limit)};
    if (trace.vegas) {
      std::string noload, jitter;
      std::getline(fields, noload, ',');
      std::getline(fields, jitter, ',');
      row.rtt_noload_after = std::stoll(noload);
      row.jitter_after = std::stod(jitter);
    }
    trace.rows.push_back(row);
  }
  return trace;
}

std::vector<Trace> load_traces() {
  std::vector<Trace> traces;
  const std::filesystem::path dir = R4C_CONFORMANCE_DIR;
  if (!std::filesystem::is_directory(dir)) return traces;  // the tests fail, saying why
  std::vector<std::filesystem::path> files;
  // vegas/ holds VegasLimit's traces, with two more columns.
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.path().extension() == ".csv") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& file : files) traces.push_back(load_trace(file));
  return traces;
}

// The traces are part of the repository (tests/conformance): without them the conformance tests
// would pass having checked nothing, so their absence is a failure.
constexpr const char* kNoTraces =
    "no conformance traces: the folder " R4C_CONFORMANCE_DIR
    " is missing or holds no *.csv (the repository's tests/conformance)";

// Gives the trace's config its recorded jitters (for a vegas trace); `jitter` must outlive the
// limit.
r4c::AdaptiveLimitConfig replay_config(const Trace& trace,
                                       const std::shared_ptr<RecordedJitter>& jitter) {
  r4c::AdaptiveLimitConfig config = trace.config;
  jitter->trace = &trace;
  if (trace.vegas) config.probe_jitter([jitter] { return (*jitter)(); });
  return config;
}

// Row k probed exactly when its jitter differs from the one before (the README's rule), which
// the replay checks by counting draws.
bool probed(const Trace& trace, std::size_t row) {
  const double before = row == 0 ? trace.initial_jitter : trace.rows[row - 1].jitter_after;
  return trace.rows[row].jitter_after != before;
}

TEST(ConformanceTest, EveryTraceReplaysExactlyThroughTheAlgorithm) {
  const std::vector<Trace> traces = load_traces();
  ASSERT_FALSE(traces.empty()) << kNoTraces;
  int vegas_rows = 0;
  for (const Trace& trace : traces) {
    auto jitter = std::make_shared<RecordedJitter>();
    r4c::detail::LimitEstimator estimator(replay_config(trace, jitter));
    for (std::size_t i = 0; i < trace.rows.size(); ++i) {
      jitter->row = i;
      const int draws = jitter->draws;
      ASSERT_EQ(estimator.update(trace.rows[i].window), trace.rows[i].limit_after)
          << trace.name << ", window " << i;
      if (!trace.vegas) continue;
      ++vegas_rows;
      ASSERT_EQ(estimator.long_latency_ns(), trace.rows[i].rtt_noload_after)
          << trace.name << ", window " << i;
      ASSERT_EQ(jitter->draws - draws, probed(trace, i) ? 1 : 0) << trace.name << ", window " << i;
    }
  }
  EXPECT_EQ(vegas_rows, 4900);  // the six VEGAS traces, every row
}

// Each window's aggregate is recreated with real permits: all of its max_in_flight calls take
// their slots at the window's start; all but the last end at once (latency 0, before the 1 ms
// window ends) and the last ends after the window, carrying the rest of the latency so that the
// average is exactly the trace's. That call closes the window and recomputes the limit.
TEST(ConformanceTest, EveryTraceReplaysExactlyThroughARealLimitAndManualClock) {
  const std::vector<Trace> traces = load_traces();
  ASSERT_FALSE(traces.empty()) << kNoTraces;
  for (const Trace& trace : traces) {
    auto clock = std::make_shared<r4c::ManualClock>();
    auto jitter = std::make_shared<RecordedJitter>();
    r4c::AdaptiveLimitConfig config = replay_config(trace, jitter);
    config.window(1ms).min_window_samples(1).drop_on<r4c::CallTimeoutException>();
    r4c::AdaptiveLimit limit(trace.name, config, clock);
    for (std::size_t w = 0; w < trace.rows.size(); ++w) {
      jitter->row = w;
      const WindowAggregate& window = trace.rows[w].window;
      const int calls = window.max_in_flight;
      const std::int64_t total = window.avg_latency_ns * calls;
      ASSERT_LE(calls, limit.limit()) << trace.name << ", window " << w
                                      << ": the trace has more calls in flight than the limit";
      ASSERT_GE(total, 1000000) << trace.name << ", window " << w << ": too short to replay";
      std::vector<r4c::Permit> permits;
      for (int c = 0; c < calls; ++c) permits.push_back(limit.try_acquire());
      for (int c = 0; c + 1 < calls; ++c) permits[c].on_success();
      clock->advance(std::chrono::nanoseconds(total));
      if (window.dropped) {
        permits.back().on_drop();
      } else {
        permits.back().on_success();
      }
      ASSERT_EQ(limit.snapshot().windows, w + 1) << trace.name;
      ASSERT_EQ(limit.limit(), trace.rows[w].limit_after) << trace.name << ", window " << w;
      ASSERT_EQ(limit.snapshot().window_latency.count(), window.avg_latency_ns);
      ASSERT_EQ(limit.snapshot().window_max_in_flight, calls);
      if (trace.vegas) {
        ASSERT_EQ(limit.snapshot().long_latency.count(), trace.rows[w].rtt_noload_after)
            << trace.name << ", window " << w;
      }
    }
  }
}

r4c::AdaptiveLimitConfig gradient2(int initial = 20) {
  return r4c::AdaptiveLimitConfig().initial_limit(initial);
}

TEST(Gradient2Test, GrowsBySmoothingTimesQueueSizeWhileLatencyHolds) {
  r4c::detail::Gradient2 algorithm(gradient2());
  algorithm.update({10'000'000, 20, false});
  EXPECT_DOUBLE_EQ(algorithm.estimate(), 20.8);
  algorithm.update({10'000'000, 20, false});
  EXPECT_DOUBLE_EQ(algorithm.estimate(), 21.6);
  EXPECT_EQ(algorithm.limit(), 21);
}

TEST(Gradient2Test, KeepsTheLimitWhenUnderHalfOfItIsInUse) {
  r4c::detail::Gradient2 algorithm(gradient2());
  EXPECT_EQ(algorithm.update({10'000'000, 9, false}), 20);
  EXPECT_EQ(algorithm.estimate(), 20.0);
  // Half exactly is enough to judge.
  algorithm.update({10'000'000, 10, false});
  EXPECT_DOUBLE_EQ(algorithm.estimate(), 20.8);
}

TEST(Gradient2Test, CutsInProportionButAtMostToHalfAWindow) {
  r4c::detail::Gradient2 algorithm(gradient2(100));
  for (int i = 0; i < 10; ++i) algorithm.update({10'000'000, 100, false});
  const double before = algorithm.estimate();
  // A latency far above tolerance: the gradient is floored at 0.5.
  algorithm.update({1'000'000'000, 100, false});
  EXPECT_DOUBLE_EQ(algorithm.estimate(), before * 0.8 + (before * 0.5 + 4) * 0.2);
}

TEST(Gradient2Test, RepeatedCutsSettleNearTwiceTheQueueSize) {
  r4c::detail::Gradient2 algorithm(gradient2(200).max_limit(200));
  std::int64_t latency = 1'000'000;
  for (int i = 0; i < 100; ++i) {
    latency += latency / 5;  // always far above the long average: the gradient floors at 0.5
    algorithm.update({latency, 200, false});
  }
  EXPECT_NEAR(algorithm.estimate(), 2.0 * 4, 1.0);
}

TEST(Gradient2Test, TreatsAZeroLatencyWindowAsOneNanosecond) {
  r4c::detail::Gradient2 algorithm(gradient2());
  algorithm.update({0, 20, false});
  EXPECT_FALSE(std::isnan(algorithm.estimate()));
  EXPECT_DOUBLE_EQ(algorithm.long_latency_ns(), 1.0);
  EXPECT_DOUBLE_EQ(algorithm.estimate(), 20.8);
}

TEST(Gradient2Test, StaysWithinItsBounds) {
  r4c::detail::Gradient2 up(gradient2(20).max_limit(21));
  for (int i = 0; i < 10; ++i) up.update({1'000'000, 200, false});
  EXPECT_EQ(up.limit(), 21);
  r4c::detail::Gradient2 down(gradient2(20).min_limit(15).queue_size(0));
  std::int64_t latency = 1'000'000;
  for (int i = 0; i < 40; ++i) down.update({latency *= 2, 20, false});
  EXPECT_EQ(down.limit(), 15);
}

TEST(Gradient2Test, IgnoresDrops) {
  r4c::detail::Gradient2 with_drops(gradient2());
  r4c::detail::Gradient2 without(gradient2());
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(with_drops.update({10'000'000, 20, true}), without.update({10'000'000, 20, false}));
  }
}

r4c::AdaptiveLimitConfig aimd(int initial = 20) {
  return r4c::AdaptiveLimitConfig().algorithm(r4c::LimitAlgorithm::aimd).initial_limit(initial);
}

TEST(AimdTest, BacksOffByTheRatioAfterADrop) {
  r4c::detail::Aimd algorithm(aimd());
  EXPECT_EQ(algorithm.update({1, 20, true}), 18);
  EXPECT_EQ(algorithm.update({1, 20, true}), 16);  // trunc(16.2)
}

TEST(AimdTest, GrowsByOneWhenHalfTheLimitWasInUse) {
  r4c::detail::Aimd algorithm(aimd());
  EXPECT_EQ(algorithm.update({1, 10, false}), 21);
  EXPECT_EQ(algorithm.update({1, 10, false}), 21);  // 2 * 10 < 21
}

TEST(AimdTest, IgnoresLatency) {
  r4c::detail::Aimd algorithm(aimd());
  EXPECT_EQ(algorithm.update({1'000'000'000'000, 20, false}), 21);
}

TEST(AimdTest, GoesDownToMinLimitAndNoFurther) {
  r4c::detail::Aimd algorithm(aimd(2));
  EXPECT_EQ(algorithm.update({1, 2, true}), 1);  // trunc(1.8)
  EXPECT_EQ(algorithm.update({1, 1, true}), 1);  // trunc(0.9) = 0, clamped to 1
  r4c::detail::Aimd capped(aimd(20).max_limit(20));
  EXPECT_EQ(capped.update({1, 20, false}), 20);
}

r4c::AdaptiveLimitConfig vegas(int initial = 20) {
  return r4c::AdaptiveLimitConfig()
      .algorithm(r4c::LimitAlgorithm::vegas)
      .initial_limit(initial)
      .random_seed(42);
}

TEST(VegasTest, TheFirstWindowOnlyMeasuresTheNoLoadLatency) {
  r4c::detail::Vegas algorithm(vegas());
  EXPECT_EQ(algorithm.update({10'000'000, 20, false}), 20);
  EXPECT_EQ(algorithm.rtt_noload_ns(), 10'000'000);
}

TEST(VegasTest, GrowsByBetaWithNoQueueAndShrinksByLog10WithALargeOne) {
  r4c::detail::Vegas algorithm(vegas());
  (void)algorithm.update({10'000'000, 20, false});
  // queue = ceil(20 × (1 − 10/10)) = 0 <= threshold 1: + beta 6 (smoothing 1.0).
  EXPECT_EQ(algorithm.update({10'000'000, 20, false}), 26);
  // queue = ceil(26 × (1 − 10/20)) = 13 > beta 6: − log10root(26) = 1.
  EXPECT_EQ(algorithm.update({20'000'000, 26, false}), 25);
  // A drop: − 1 whatever the latency.
  EXPECT_EQ(algorithm.update({10'000'000, 25, true}), 24);
  // Under half the limit in use and no drop: nothing moves.
  EXPECT_EQ(algorithm.update({20'000'000, 3, false}), 24);
}

TEST(VegasTest, ConstantAlphaAndBetaReplaceTheFunctions) {
  r4c::detail::Vegas algorithm(vegas().alpha(2).beta(3));
  (void)algorithm.update({10'000'000, 20, false});
  EXPECT_EQ(algorithm.update({10'000'000, 20, false}), 23);  // + beta 3
  // queue = ceil(23 × 0.5) = 12 > beta 3: − 1.
  EXPECT_EQ(algorithm.update({20'000'000, 23, false}), 22);
}

TEST(VegasTest, StaysWithinTheBoundsAndDoesNotClampTheInitialLimitBeforeAChange) {
  r4c::detail::Vegas capped(vegas(20).max_limit(22));
  (void)capped.update({10'000'000, 20, false});
  EXPECT_EQ(capped.update({10'000'000, 20, false}), 22);
  r4c::detail::Vegas floor(vegas(1).min_limit(1));
  (void)floor.update({10'000'000, 1, false});
  EXPECT_EQ(floor.update({10'000'000, 1, true}), 1);  // 1 − 1 = 0, clamped to 1
}

TEST(VegasTest, ASeedMakesTheProbeJitterReproducibleAndASourceReplacesIt) {
  r4c::detail::Vegas first(vegas());
  r4c::detail::Vegas second(vegas());
  EXPECT_EQ(first.probe_jitter(), second.probe_jitter());
  EXPECT_GE(first.probe_jitter(), 0.5);
  EXPECT_LT(first.probe_jitter(), 1.0);
  r4c::detail::Vegas other(vegas().random_seed(43));
  EXPECT_NE(first.probe_jitter(), other.probe_jitter());
  int draws = 0;
  r4c::detail::Vegas fed(vegas(2).probe_multiplier(1).probe_jitter([&draws] {
    ++draws;
    return 0.5;
  }));
  EXPECT_EQ(draws, 1);  // at construction
  // Probes when 0.5 × 1 × 2 <= windows since the last probe: every window.
  (void)fed.update({10'000'000, 2, false});
  EXPECT_EQ(draws, 2);
  (void)fed.update({30'000'000, 2, false});
  EXPECT_EQ(draws, 3);
  EXPECT_EQ(fed.rtt_noload_ns(), 30'000'000);  // a probe takes the window's latency as is
}

r4c::AdaptiveLimitConfig delay_target(int initial) {
  return r4c::AdaptiveLimitConfig()
      .algorithm(r4c::LimitAlgorithm::delay_target)
      .initial_limit(initial);
}

// The first window takes the baseline and starts a probe at 0.8 of the limit; a probe window
// that found the same latency gives the limit back.
void start(r4c::detail::DelayTarget& algorithm, std::int64_t latency_ns, int in_flight) {
  const double initial = algorithm.estimate();
  (void)algorithm.update({latency_ns, in_flight, false, 100, 1'000'000'000});
  EXPECT_DOUBLE_EQ(algorithm.estimate(), 0.8 * initial);
  (void)algorithm.update({latency_ns, in_flight, false, 100, 2'000'000'000});
  EXPECT_DOUBLE_EQ(algorithm.estimate(), initial);
  EXPECT_EQ(algorithm.baseline_ns(), latency_ns);
}

TEST(DelayTargetTest, GrowsWithoutAQueueAndCutsTowardsTheTargetWithOne) {
  r4c::detail::DelayTarget algorithm(delay_target(10));
  start(algorithm, 10'000'000, 10);
  (void)algorithm.update({10'000'000, 10, false, 100, 3'000'000'000});
  EXPECT_GT(algorithm.estimate(), 10.0);
  const double grown = algorithm.estimate();
  // The limit held calls back (12 in flight) and latency tripled: a queue, cut at once in
  // proportion to the excess delay (smoothed: 20 ms, for a target of 11 ms).
  (void)algorithm.update({30'000'000, 12, false, 100, 4'000'000'000});
  EXPECT_LT(algorithm.estimate(), grown * 0.6);
  // It drained: this window's latency is back at the baseline, so the limit grows again at once
  // (the smoothed latency would still say queue), and the baseline stayed.
  const double cut = algorithm.estimate();
  (void)algorithm.update({10'000'000, static_cast<int>(cut), false, 100, 5'000'000'000});
  EXPECT_GT(algorithm.estimate(), cut);
  EXPECT_EQ(algorithm.baseline_ns(), 10'000'000);
}

TEST(DelayTargetTest, HoldsWhenCutsDoNotLowerLatencyAndTheAlignedProbeLearnsTheSlowerWorkload) {
  r4c::detail::DelayTarget algorithm(delay_target(12));
  start(algorithm, 10'000'000, 12);
  // Twice the latency while the limit holds calls back: cut, and cut again, until the cuts add
  // up to 40%; the latency never came down, so the limit holds there (a slower workload, or a
  // queue other clients keep up: one client cannot tell).
  std::int64_t now = 3'000'000'000;
  for (int w = 0; w < 5; ++w, now += 1'000'000'000) {
    (void)algorithm.update({20'000'000, static_cast<int>(algorithm.estimate()), false, 100, now});
  }
  const double held = algorithm.estimate();
  EXPECT_LT(held, 12 * 0.6);
  EXPECT_EQ(algorithm.baseline_ns(), 10'000'000);
  // The window that ends past 30 s starts the aligned probe; the probe sees 20 ms still: the
  // new no-load latency. The limit returns to where it held, then grows back.
  (void)algorithm.update({20'000'000, static_cast<int>(held), false, 100, 30'500'000'000});
  EXPECT_DOUBLE_EQ(algorithm.estimate(), 0.8 * held);
  (void)algorithm.update({20'000'000, static_cast<int>(held), false, 100, 31'500'000'000});
  EXPECT_DOUBLE_EQ(algorithm.estimate(), held);
  EXPECT_GT(algorithm.baseline_ns(), 19'000'000);
  now = 32'500'000'000;
  for (int w = 0; w < 4; ++w, now += 1'000'000'000) {
    (void)algorithm.update({20'000'000, static_cast<int>(algorithm.estimate()), false, 100, now});
  }
  EXPECT_GE(algorithm.estimate(), 12.0);
}

TEST(DelayTargetTest, ALatencyRiseWhileTheLimitHoldsNothingBackHoldsUntilTheProbe) {
  r4c::detail::DelayTarget algorithm(delay_target(40));
  start(algorithm, 10'000'000, 12);
  for (int w = 0; w < 5; ++w) (void)algorithm.update({20'000'000, 24, false, 100, 3'000'000'000});
  EXPECT_EQ(algorithm.estimate(), 40.0);
  EXPECT_EQ(algorithm.baseline_ns(), 10'000'000);
  (void)algorithm.update({20'000'000, 24, false, 100, 30'000'000'000});
  (void)algorithm.update({20'000'000, 24, false, 100, 31'000'000'000});
  EXPECT_EQ(algorithm.estimate(), 40.0);
  EXPECT_GT(algorithm.baseline_ns(), 15'000'000);
}

TEST(DelayTargetTest, AProbeThatFindsAMuchLowerLatencyProbesAgain) {
  // A fleet that started with a queue: the first window's latency had the queue in it.
  r4c::detail::DelayTarget algorithm(delay_target(20));
  (void)algorithm.update({60'000'000, 20, false, 100, 1'000'000'000});
  EXPECT_DOUBLE_EQ(algorithm.estimate(), 16.0);
  (void)algorithm.update({30'000'000, 16, false, 100, 2'000'000'000});
  EXPECT_DOUBLE_EQ(algorithm.estimate(), 0.8 * 16.0);  // probing on
  EXPECT_EQ(algorithm.baseline_ns(), 30'000'000);
  (void)algorithm.update({29'000'000, 12, false, 100, 3'000'000'000});
  EXPECT_EQ(algorithm.baseline_ns(), 29'000'000);
  // No lower by 10%: the probes end, and the limit returns to before them.
  EXPECT_DOUBLE_EQ(algorithm.estimate(), 20.0);
}

TEST(DelayTargetTest, ADropCutsByTheBackoffRatio) {
  r4c::detail::DelayTarget algorithm(delay_target(10));
  start(algorithm, 10'000'000, 10);
  (void)algorithm.update({10'000'000, 10, true, 100, 3'000'000'000});
  EXPECT_DOUBLE_EQ(algorithm.estimate(), 9.0);
}

TEST(DelayTargetTest, MayGoBelowOneCallWhenMinLimitIsOne) {
  r4c::detail::LimitEstimator estimator(
      r4c::AdaptiveLimitConfig().algorithm(r4c::LimitAlgorithm::delay_target).initial_limit(1));
  (void)estimator.update({10'000'000, 1, false, 100, 1'000'000'000});
  for (int w = 0; w < 20; ++w) (void)estimator.update({10'000'000, 1, true, 100, 2'000'000'000});
  EXPECT_LT(estimator.fractional_limit(), 1.0);
  EXPECT_GE(estimator.fractional_limit(), r4c::detail::DelayTarget::kPacedFloor);
  EXPECT_EQ(estimator.limit(), 1);
}

TEST(LimitEstimatorTest, ChoosesTheConfiguredAlgorithm) {
  r4c::detail::LimitEstimator g2(gradient2());
  r4c::detail::LimitEstimator additive(aimd());
  EXPECT_EQ(g2.update({10'000'000, 20, true}), 20);  // gradient2 ignores the drop
  EXPECT_EQ(additive.update({10'000'000, 20, true}), 18);
  EXPECT_EQ(g2.long_latency_ns(), 10'000'000);
  EXPECT_EQ(additive.long_latency_ns(), 0);
}

}  // namespace
