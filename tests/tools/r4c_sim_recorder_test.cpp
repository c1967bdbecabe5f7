// SPDX-License-Identifier: Apache-2.0
// r4c-sim's recorder: the timeline and the summary from hand-built events, with exact numbers;
// the output files; plots only when gnuplot is found.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "common.hpp"
#include "recorder.hpp"
#include "scenario.hpp"
#include "sim_test_support.hpp"

namespace r4c::sim {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

Nanos ms(double value) { return Nanos(static_cast<std::int64_t>(value * 1e6)); }

// Two groups on one server of 2 workers of 10 ms (200 calls/s), offered 300 + 100 per second.
Scenario one_second() {
  return parse_scenario(testing::server_text("1s", 2, "10ms") +
                            testing::group_text("a", 300, "gradient2") +
                            testing::group_text("b", 100, "none"),
                        "one.toml");
}

// Group a of one_second(): 3 calls offered at 50 ms, 1 of them rejected, and 4 answered.
void record_group_a(Recorder& recorder) {
  for (int i = 0; i < 3; ++i) recorder.offered(0, ms(50));
  recorder.rejected(0, ms(50));
  recorder.answered(0, ms(10), ms(30), Outcome::success);   // 20 ms, interval 1
  recorder.answered(0, ms(20), ms(60), Outcome::success);   // 40 ms, interval 1
  recorder.answered(0, ms(50), ms(150), Outcome::timeout);  // 100 ms, interval 2
  recorder.answered(0, ms(100), ms(110), Outcome::error);   // 10 ms, interval 2
}

TEST(PercentileTest, IsTheNearestRank) {
  std::vector<std::int64_t> none;
  EXPECT_FALSE(percentile(none, 0.5));
  std::vector<std::int64_t> one = {7};
  EXPECT_EQ(percentile(one, 0.5), 7);
  EXPECT_EQ(percentile(one, 0.99), 7);
  std::vector<std::int64_t> values = {50, 10, 40, 30, 20};
  EXPECT_EQ(percentile(values, 0.5), 30);   // rank ceil(2.5) = 3
  EXPECT_EQ(percentile(values, 0.99), 50);  // rank ceil(4.95) = 5
  EXPECT_EQ(percentile(values, 0.2), 10);   // rank 1
  std::vector<std::int64_t> hundred;
  for (int i = 100; i >= 1; --i) hundred.push_back(i);
  EXPECT_EQ(percentile(hundred, 0.99), 99);
  EXPECT_EQ(percentile(hundred, 0.5), 50);
}

// The least cv of a fleet whose clients do not coordinate: whole means cost nothing, a share of
// one call varies as a coin does, and N shares of s give sqrt(N s (1 - s)) / (N s).
TEST(InFlightCvFloorTest, AddsTheLeastVarianceOfEachClientsWholeCount) {
  EXPECT_EQ(in_flight_cv_floor({}), 0.0);
  EXPECT_EQ(in_flight_cv_floor({0.0, 0.0}), 0.0);
  EXPECT_EQ(in_flight_cv_floor({3.0, 5.0}), 0.0);
  EXPECT_DOUBLE_EQ(in_flight_cv_floor({0.5, 0.5}), std::sqrt(0.5));        // 2 coins: sd 0.707 of 1
  EXPECT_DOUBLE_EQ(in_flight_cv_floor({3.25}), std::sqrt(0.1875) / 3.25);  // 3 or 4
  // 100 clients of 0.32 calls each, 32 in flight in all (fleet-100 at its workers): 0.146.
  EXPECT_NEAR(in_flight_cv_floor(std::vector<double>(100, 0.32)), std::sqrt(100 * 0.32 * 0.68) / 32,
              1e-12);
  EXPECT_NEAR(in_flight_cv_floor(std::vector<double>(100, 0.32)), 0.1458, 1e-4);
}

TEST(RecorderTest, FilesEachEventInItsInterval) {
  const Scenario scenario = one_second();
  Recorder recorder(scenario);
  record_group_a(recorder);
  recorder.offered(1, ms(999));
  recorder.offered(1, ms(1000));  // the end belongs to the last interval
  const Results results = recorder.finish();

  ASSERT_EQ(results.timeline.size(), 20u);  // 10 intervals x 2 groups, by time then group
  const TimelineRow& first = results.timeline[0];
  EXPECT_EQ(first.end, milliseconds(100));
  EXPECT_EQ(first.group, 0);
  EXPECT_EQ(first.workers, 2);
  EXPECT_DOUBLE_EQ(first.capacity_per_s, 200.0);
  EXPECT_DOUBLE_EQ(first.offered_per_s, 30.0);
  EXPECT_DOUBLE_EQ(first.rejected_per_s, 10.0);
  EXPECT_DOUBLE_EQ(first.goodput_per_s, 20.0);
  EXPECT_EQ(first.p50_ms, 20.0);  // rank ceil(1.0) of {20, 40}
  EXPECT_EQ(first.p99_ms, 40.0);
  const TimelineRow& second = results.timeline[2];
  EXPECT_EQ(second.end, milliseconds(200));
  EXPECT_DOUBLE_EQ(second.timeouts_per_s, 10.0);
  EXPECT_DOUBLE_EQ(second.errors_per_s, 10.0);
  EXPECT_DOUBLE_EQ(second.goodput_per_s, 0.0);
  EXPECT_EQ(second.p50_ms, 10.0);
  EXPECT_EQ(second.p99_ms, 100.0);
  const TimelineRow& empty = results.timeline[4];
  EXPECT_FALSE(empty.p50_ms);  // nothing answered: no latency
  EXPECT_FALSE(empty.p99_ms);
  EXPECT_DOUBLE_EQ(results.timeline[19].offered_per_s, 20.0);  // group b, last interval
}

TEST(RecorderTest, SummarisesAGroupOverTheRun) {
  const Scenario scenario = one_second();
  Recorder recorder(scenario);
  record_group_a(recorder);
  recorder.unfinished(0, ms(500), ms(1000));  // waited 500 ms by the end
  const Results results = recorder.finish();

  ASSERT_EQ(results.summary.size(), 2u);
  const GroupSummary& a = results.summary[0];
  EXPECT_EQ(a.group, "a");
  EXPECT_EQ(a.policy, "gradient2");
  EXPECT_EQ(a.offered, 3);
  EXPECT_EQ(a.rejected_calls, 1);
  EXPECT_DOUBLE_EQ(a.rejected, 1.0 / 3.0);
  EXPECT_EQ(a.succeeded, 2);
  EXPECT_EQ(a.timeouts, 1);
  EXPECT_EQ(a.errors, 1);
  EXPECT_EQ(a.unfinished, 1);
  EXPECT_DOUBLE_EQ(a.goodput, 2.0 / 200.0);  // 2 calls of the 200 the server could complete
  // {10, 20, 40, 100, 500}: the unfinished call counts with what it had waited.
  EXPECT_EQ(a.p50_ms, 40.0);
  EXPECT_EQ(a.p99_ms, 500.0);
  const GroupSummary& b = results.summary[1];
  EXPECT_EQ(b.offered, 0);
  EXPECT_DOUBLE_EQ(b.rejected, 0.0);
  EXPECT_FALSE(b.p50_ms);
  EXPECT_FALSE(b.has_limit);
  EXPECT_FALSE(b.limit_error);
  EXPECT_FALSE(b.settle_s);
}

TEST(RecorderTest, CarriesTheLastSampleIntoIntervalsWithout) {
  const Scenario scenario = one_second();
  Recorder recorder(scenario);
  recorder.sample(0, ms(100), 5, 2, 1);
  recorder.sample(0, ms(290), 6, 3, 0);  // files in the interval ending at 300 ms
  recorder.sample(0, ms(300), 7, 4, 9);  // the last sample of an interval wins
  const Results results = recorder.finish();
  EXPECT_EQ(results.timeline[0].limit, 5);
  EXPECT_EQ(results.timeline[0].in_flight, 2);
  EXPECT_EQ(results.timeline[0].queue, 1);
  EXPECT_EQ(results.timeline[2].limit, 5);  // 200 ms: carried
  EXPECT_EQ(results.timeline[2].queue, 1);
  EXPECT_EQ(results.timeline[4].limit, 7);
  EXPECT_EQ(results.timeline[4].in_flight, 4);
  EXPECT_EQ(results.timeline[18].limit, 7);
  EXPECT_FALSE(results.timeline[1].limit);  // group b was never sampled
  EXPECT_EQ(results.summary[0].final_limit, 7);
}

TEST(RecorderTest, LimitErrorIsTheDistanceFromTheGroupsShareOfTheWorkersUnderOverload) {
  const Scenario scenario = one_second();
  Recorder recorder(scenario);
  recorder.sample(0, ms(100), 5, 0, 0);
  for (int k = 3; k <= 10; ++k) recorder.sample(0, ms(100 * k), 6, 0, 0);
  const Results results = recorder.finish();
  // 400 calls/s offered to 200/s: overloaded throughout. Group a offers 3/4 of the load, so its
  // share of the 2 workers is 1.5: rows 1 and 2 at 5 (3.5 away), rows 3..10 at 6 (4.5 away).
  ASSERT_TRUE(results.summary[0].limit_error);
  EXPECT_DOUBLE_EQ(*results.summary[0].limit_error, (2 * 3.5 + 8 * 4.5) / 10.0);
}

TEST(RecorderTest, LimitErrorCountsOnlyIntervalsWhereTheLoadExceedsCapacity) {
  const Scenario scenario =
      parse_scenario(testing::server_text("1s", 4, "10ms", "fixed", true) +
                         testing::server_change_text("500ms", "workers = 1\n") +
                         testing::group_text("a", 150, "gradient2"),
                     "t.toml");
  Recorder recorder(scenario);
  for (int k = 1; k <= 10; ++k) recorder.sample(0, ms(100 * k), 3, 0, 0);
  const Results results = recorder.finish();
  // 150/s against 400/s, then against 100/s from 500 ms: rows 5..10 (their ends are at or after
  // the change) are overloaded, each 2 away from the 1 worker.
  ASSERT_TRUE(results.summary[0].limit_error);
  EXPECT_DOUBLE_EQ(*results.summary[0].limit_error, 2.0);
  // What the server could complete: 0.5 s x 400/s + 0.5 s x 100/s = 250 calls.
  recorder.answered(0, ms(0), ms(10), Outcome::success);
  EXPECT_DOUBLE_EQ(recorder.finish().summary[0].goodput, 1.0 / 250.0);
}

// A 30 s scenario with one change at 10 s, fed a limit that is 20 until the change, 10 until
// 12 s, 5 until 14 s and 4 afterwards.
Results settle_run(const std::function<int(double)>& limit_at) {
  static const Scenario scenario =
      parse_scenario("duration = \"30s\"\n[server]\nworkers = 4\n" +
                         testing::server_change_text("10s", "workers = 2\n") +
                         testing::group_text("a", 1000, "gradient2"),
                     "settle.toml");
  Recorder recorder(scenario);
  for (int k = 1; k <= 300; ++k) recorder.sample(0, ms(100.0 * k), limit_at(k / 10.0), 0, 0);
  return recorder.finish();
}

TEST(RecorderTest, SettleIsWhenTheLimitStaysWithinAQuarterOfItsFinalValueForTenSeconds) {
  const Results results = settle_run([](double t) {
    if (t < 10) return 20;
    if (t < 12) return 10;
    if (t < 14) return 5;
    return 4;
  });
  // Final value 4, band [3, 5]: from 12 s on the limit stays inside (5, then 4).
  ASSERT_EQ(results.settle.size(), 1u);
  EXPECT_EQ(results.settle[0].change_at, seconds(10));
  EXPECT_EQ(results.settle[0].final_limit, 4);
  ASSERT_TRUE(results.settle[0].settle_s);
  EXPECT_DOUBLE_EQ(*results.settle[0].settle_s, 2.0);
  EXPECT_EQ(results.summary[0].settle_s, 2.0);
}

TEST(RecorderTest, SettleNeedsTenSecondsInsideTheBand) {
  // Inside the band from 12 s, out again at 15 s: the 10 s hold starts after that.
  const Results results = settle_run([](double t) {
    if (t < 12) return 10;
    if (t > 14.95 && t < 15.05) return 8;
    return 4;
  });
  ASSERT_TRUE(results.settle[0].settle_s);
  EXPECT_NEAR(*results.settle[0].settle_s, 5.1, 1e-9);  // 15.1 s - 10 s
}

TEST(RecorderTest, ALimitThatNeverSettlesHasNoSettleTime) {
  // It swings between 2 and 8 every second until the end.
  const Results results = settle_run([](double t) { return static_cast<int>(t) % 2 ? 8 : 2; });
  EXPECT_FALSE(results.settle[0].settle_s);
  EXPECT_FALSE(results.summary[0].settle_s);
  EXPECT_TRUE(results.summary[0].has_limit);
}

TEST(RecorderTest, WritesTheCsvFiles) {
  const testing::ScratchDir scratch;
  const Scenario scenario = one_second();
  Recorder recorder(scenario);
  recorder.offered(0, ms(50));
  recorder.answered(0, ms(50), ms(62.5), Outcome::success);
  recorder.sample(0, ms(100), 5, 1, 0);
  recorder.window(0, WindowRow{ms(600), 12500000, 3, true, 4});
  const Results results = recorder.finish();
  write_outputs(scenario, results, scratch.path() / "out");

  const std::string timeline = testing::read_text(scratch.path() / "out" / "timeline.csv");
  EXPECT_THAT(timeline,
              ::testing::StartsWith(
                  "t_s,group,workers,capacity_per_s,offered_per_s,limit,in_flight,queue,p50_ms,"
                  "p99_ms,goodput_per_s,rejected_per_s,timeouts_per_s,errors_per_s\n"
                  "0.100,a,2,200.0,10.0,5,1,0,12.500,12.500,10.0,0.0,0.0,0.0\n"
                  "0.100,b,2,200.0,0.0,,0,0,,,0.0,0.0,0.0,0.0\n"
                  "0.200,a,2,200.0,0.0,5,1,0,,,0.0,0.0,0.0,0.0\n"));
  EXPECT_EQ(std::count(timeline.begin(), timeline.end(), '\n'), 21);

  EXPECT_EQ(testing::read_text(scratch.path() / "out" / "summary.csv"),
            "group,goodput,p50_ms,p99_ms,rejected,settle_s,limit_error,policy,offered,succeeded,"
            "timeouts,errors,unfinished,final_limit\n"
            "a,0.0050,12.500,12.500,0.0000,,3.50,gradient2,1,1,0,0,0,5\n"
            "b,0.0000,,,0.0000,,,none,0,0,0,0,0,\n");
  EXPECT_EQ(testing::read_text(scratch.path() / "out" / "settle.csv"),
            "group,change_at_s,final_limit,settle_s\n"
            "a,0.000,5,\n");  // a 1 s run cannot hold for 10 s
  // Group a's limit as a replay input (defaults: gradient2, 20 within [1, 200]); b has none.
  EXPECT_EQ(testing::read_text(scratch.path() / "out" / "windows-a.csv"),
            "# r4c-sim: the windows of group a in scenario one; limit_after is the limit after "
            "each window.\n"
            "# Replay them (with these settings, or others to compare):\n"
            "#   r4c-sim replay --input windows-a.csv --algorithm gradient2 --initial-limit 20 "
            "--min-limit 1 --max-limit 200 --smoothing 0.2 --rtt-tolerance 1.5 --long-window "
            "600 --queue-size 4\n"
            "window,end_s,avg_rtt_ns,max_in_flight,dropped,limit_after\n"
            "1,0.600,12500000,3,1,4\n");
  EXPECT_FALSE(testing::fs::exists(scratch.path() / "out" / "windows-b.csv"));
  const std::string script = testing::read_text(scratch.path() / "out" / "plots.gp");
  EXPECT_THAT(script, ::testing::HasSubstr("set output \"limit.svg\""));
  EXPECT_THAT(script, ::testing::HasSubstr("set output \"latency.svg\""));
  EXPECT_THAT(script, ::testing::HasSubstr("set output \"goodput.svg\""));
  // Group a's series is every 2nd row from the first; b has no limit, so no limit line.
  EXPECT_THAT(script, ::testing::HasSubstr("every 2::0 using 1:6 with lines"));
  EXPECT_THAT(script, ::testing::Not(::testing::HasSubstr("every 2::1 using 1:6")));
}

TEST(RecorderTest, ReportsAnOutputFolderThatCannotBeCreated) {
  const Scenario scenario = one_second();
  const Results results = Recorder(scenario).finish();
  EXPECT_THROW(write_outputs(scenario, results, "/proc/r4c-sim-cannot-write-here"), OutputError);
}

// Sets PATH for one test and puts it back.
class PathGuard {
 public:
  explicit PathGuard(const char* path) {
    if (const char* old = std::getenv("PATH")) old_ = old;
    ::setenv("PATH", path, 1);
  }
  ~PathGuard() { ::setenv("PATH", old_.c_str(), 1); }

 private:
  std::string old_;
};

TEST(RecorderTest, WithoutGnuplotOnPathThereAreNoPlotsAndNoError) {
  const testing::ScratchDir scratch;
  const Scenario scenario = one_second();
  write_outputs(scenario, Recorder(scenario).finish(), scratch.path());
  {
    const PathGuard path("/nonexistent");
    EXPECT_FALSE(render_plots(scratch.path()));
  }
  EXPECT_FALSE(testing::fs::exists(scratch.path() / "limit.svg"));
  EXPECT_TRUE(testing::fs::exists(scratch.path() / "timeline.csv"));
}

TEST(RecorderTest, WithGnuplotOnPathDrawsThePlots) {
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "gnuplot is not installed (Debian: gnuplot-nox)";
  }
  const testing::ScratchDir scratch;
  const Scenario scenario = one_second();
  Recorder recorder(scenario);
  for (int k = 1; k <= 10; ++k) {
    recorder.answered(0, ms(100.0 * k - 50), ms(100.0 * k - 40), Outcome::success);
    recorder.sample(0, ms(100.0 * k), k, 1, 0);
  }
  write_outputs(scenario, recorder.finish(), scratch.path());
  EXPECT_TRUE(render_plots(scratch.path()));
  for (const char* plot : {"limit.svg", "latency.svg", "goodput.svg"}) {
    const std::string svg = testing::read_text(scratch.path() / plot);
    EXPECT_THAT(svg, ::testing::HasSubstr("<svg")) << plot;
  }
}

TEST(RecorderTest, PrintsTheSummaryAsAnAlignedTable) {
  const Scenario scenario = one_second();
  Recorder recorder(scenario);
  recorder.offered(0, ms(50));
  recorder.answered(0, ms(50), ms(62.5), Outcome::success);
  recorder.sample(0, ms(100), 5, 1, 0);
  std::ostringstream out;
  print_summary(recorder.finish(), out);
  EXPECT_EQ(out.str(),
            "group  policy     goodput  p50 ms  p99 ms  rejected  settle s  limit error\n"
            "a      gradient2    0.005    12.5    12.5     0.000     never         3.50\n"
            "b      none         0.000       -       -     0.000         -            -\n");
}

}  // namespace
}  // namespace r4c::sim
