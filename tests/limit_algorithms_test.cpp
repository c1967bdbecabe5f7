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
};

struct Trace {
  std::string name;
  r4c::AdaptiveLimitConfig config;
  std::vector<TraceRow> rows;
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
  config.algorithm(settings.at("algorithm") == "aimd" ? r4c::LimitAlgorithm::aimd
                                                      : r4c::LimitAlgorithm::gradient2);
  config.max_limit(std::stoi(settings.at("maxLimit")))
      .min_limit(std::stoi(settings.at("minLimit")))
      .initial_limit(std::stoi(settings.at("initialLimit")));
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
  std::getline(in, line);  // header: window,avg_rtt_ns,max_in_flight,dropped,limit_after
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string window, rtt, in_flight, dropped, limit;
    std::getline(fields, window, ',');
    std::getline(fields, rtt, ',');
    std::getline(fields, in_flight, ',');
    std::getline(fields, dropped, ',');
    std::getline(fields, limit, ',');
    trace.rows.push_back(
        {{std::stoll(rtt), std::stoi(in_flight), dropped == "1"}, std::stoi(limit)});
  }
  return trace;
}

std::vector<Trace> load_traces() {
  std::vector<Trace> traces;
  const std::filesystem::path dir = R4C_CONFORMANCE_DIR;
  if (!std::filesystem::is_directory(dir)) return traces;  // the tests fail, saying why
  std::vector<std::filesystem::path> files;
  // Not recursive: vegas/ holds VegasLimit's traces, in their own format, for when r4c has VEGAS.
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
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

TEST(ConformanceTest, EveryTraceReplaysExactlyThroughTheAlgorithm) {
  const std::vector<Trace> traces = load_traces();
  ASSERT_FALSE(traces.empty()) << kNoTraces;
  for (const Trace& trace : traces) {
    r4c::detail::LimitEstimator estimator(trace.config);
    for (std::size_t i = 0; i < trace.rows.size(); ++i) {
      ASSERT_EQ(estimator.update(trace.rows[i].window), trace.rows[i].limit_after)
          << trace.name << ", window " << i;
    }
  }
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
    r4c::AdaptiveLimitConfig config = trace.config;
    config.window(1ms).min_window_samples(1).drop_on<r4c::CallTimeoutException>();
    r4c::AdaptiveLimit limit(trace.name, config, clock);
    for (std::size_t w = 0; w < trace.rows.size(); ++w) {
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

TEST(LimitEstimatorTest, ChoosesTheConfiguredAlgorithm) {
  r4c::detail::LimitEstimator g2(gradient2());
  r4c::detail::LimitEstimator additive(aimd());
  EXPECT_EQ(g2.update({10'000'000, 20, true}), 20);  // gradient2 ignores the drop
  EXPECT_EQ(additive.update({10'000'000, 20, true}), 18);
  EXPECT_EQ(g2.long_latency_ns(), 10'000'000);
  EXPECT_EQ(additive.long_latency_ns(), 0);
}

}  // namespace
