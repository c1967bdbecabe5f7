// SPDX-License-Identifier: Apache-2.0
// The adaptive limit's targets (issue 8, reported in docs/simulator.md), each a comparison inside
// one run of a shipped scenario, simulated whole:
//
//   capacity-drop: gradient2's p99 latency at most 2x that of bulkhead-right-sized and at most
//                  1/3 of the no-limit p99; its goodput at least 90% of the capacity.
//   capacity-rise: the limit follows the new capacity within 30 s (it reaches the new workers,
//                  and settles, within 30 s of the change).
//
// and issue 16's, for delay_target with the library's defaults (docs/simulator.md has every
// algorithm's figures, the targets it misses among them):
//
//   capacity-drop:  p99 at most 1.3x that of bulkhead-right-sized, goodput at least 95%.
//   knee:           the limit's mean once settled (after 10 windows) within 25% of the knee.
//   capacity-drop,
//   capacity-rise:  the same in every phase, within 25% of the workers.
//   heavy-tail,
//   workload-shift: once settled, the limit never below 0.8x the 32 workers.
//   no-traffic:     no algorithm's limit moves while no call comes (31 s to 90 s).
//   fleet-10/-100/-500 (delay_target's fleets): Jain's index at least 0.95 at 100 and 500
//                   clients, goodput at least 95% at 500, the settled queue at 100 within 2x of
//                   10's, and at 500 within 3x (the target is 2x: not met yet, this holds what is).
//
// and issue 20's throttle on throttle-overload: half the backend load, the same goodput;
// and issue 17's:
//
//   priority-spike: a 12x spike of bulk calls beside critical ones on one limit: critical keeps
//                   at least 99% success while bulk is shed (and, without classes,
//                   priority-spike-no-classes, critical loses more than 5%).
//   wait-bursts:    a 20 ms wait takes bursts with fewer rejections than no wait, its p99 at
//                   most 1.2x.
//   partition-spike: the same spike with partitions (user 70%, prefetch 30%, borrowing on):
//                   user keeps at least 99.5% success while prefetch is shed.
//
// capacity-drop is 300 s of 5 groups at 2000 calls/s (3 million calls): a few seconds in an
// optimised build (scripts/test), minutes without optimisation. Unoptimised builds (Debug, and
// the sanitizer builds of .ci/run) skip these two tests; every other r4c-sim test runs there.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "scenario.hpp"
#include "sim_test_support.hpp"

namespace r4c::sim {
namespace {

using testing::Simulated;

#if defined(__OPTIMIZE__)
constexpr bool kOptimised = true;
#else
constexpr bool kOptimised = false;
#endif

constexpr const char* kWhySkipped =
    "simulates a whole shipped scenario (millions of calls): runs in optimised builds "
    "(scripts/test)";

const Simulated& run_of(const std::string& name) {
  static std::map<std::string, Simulated> runs;
  auto found = runs.find(name);
  if (found == runs.end()) {
    found =
        runs.emplace(name,
                     testing::simulate_scenario(load_scenario(
                         (std::filesystem::path(R4C_SCENARIOS_DIR) / (name + ".toml")).string())))
            .first;
  }
  return found->second;
}

TEST(TargetsTest, CapacityDrop) {
  if (!kOptimised) GTEST_SKIP() << kWhySkipped;
  const Simulated& run = run_of("capacity-drop");
  const GroupSummary& gradient2 = run.summary("gradient2");
  const GroupSummary& right_sized = run.summary("bulkhead-right-sized");
  const GroupSummary& none = run.summary("none");
  ASSERT_TRUE(gradient2.p99_ms && right_sized.p99_ms && none.p99_ms);
  RecordProperty("gradient2_p99_ms", std::to_string(*gradient2.p99_ms));
  RecordProperty("right_sized_p99_ms", std::to_string(*right_sized.p99_ms));
  RecordProperty("none_p99_ms", std::to_string(*none.p99_ms));
  RecordProperty("gradient2_goodput", std::to_string(gradient2.goodput));
  EXPECT_LE(*gradient2.p99_ms, 2.0 * *right_sized.p99_ms);
  EXPECT_LE(*gradient2.p99_ms, *none.p99_ms / 3.0);
  EXPECT_GE(gradient2.goodput, 0.9);
}

TEST(TargetsTest, CapacityRise) {
  if (!kOptimised) GTEST_SKIP() << kWhySkipped;
  const Simulated& run = run_of("capacity-rise");
  const Nanos change = run.scenario.server.changes.at(0).at;
  const int workers = *run.scenario.server.changes.at(0).workers;
  int g = 0;
  while (run.scenario.groups[static_cast<std::size_t>(g)].name != "gradient2") ++g;
  std::optional<double> reached_s;
  for (const TimelineRow& row : run.rows(g)) {
    if (row.end >= change && row.limit && *row.limit >= workers) {
      reached_s = std::chrono::duration<double>(row.end - change).count();
      break;
    }
  }
  ASSERT_TRUE(reached_s) << "the limit never reached the new " << workers << " workers";
  EXPECT_LE(*reached_s, 30.0);
  std::optional<double> settle_s;
  for (const SettleRow& row : run.results.settle) {
    if (row.group == "gradient2" && row.change_at == change) settle_s = row.settle_s;
  }
  ASSERT_TRUE(settle_s) << "the limit never settled after the change";
  EXPECT_LE(*settle_s, 30.0);
  RecordProperty("reached_s", std::to_string(*reached_s));
  RecordProperty("settle_s", std::to_string(*settle_s));
}

int group_index(const Simulated& run, std::string_view name) {
  for (std::size_t g = 0; g < run.scenario.groups.size(); ++g) {
    if (run.scenario.groups[g].name == name) return static_cast<int>(g);
  }
  ADD_FAILURE() << "no group " << name;
  return 0;
}

// The settled part of a run: after 10 windows of the default 1 s.
constexpr Nanos kSettled = std::chrono::seconds(10);

TEST(TargetsTest, DelayTargetCapacityDrop) {
  if (!kOptimised) GTEST_SKIP() << kWhySkipped;
  const Simulated& run = run_of("capacity-drop");
  const GroupSummary& delay = run.summary("delay_target");
  const GroupSummary& right_sized = run.summary("bulkhead-right-sized");
  ASSERT_TRUE(delay.p99_ms && right_sized.p99_ms);
  RecordProperty("delay_target_p99_ms", std::to_string(*delay.p99_ms));
  RecordProperty("delay_target_goodput", std::to_string(delay.goodput));
  EXPECT_LE(*delay.p99_ms, 1.3 * *right_sized.p99_ms);
  EXPECT_GE(delay.goodput, 0.95);
}

TEST(TargetsTest, DelayTargetFindsTheKnee) {
  if (!kOptimised) GTEST_SKIP() << kWhySkipped;
  const Simulated& run = run_of("knee");
  const double knee = run.scenario.server.right_concurrency_at(Nanos(0));
  ASSERT_EQ(knee, 16.0);
  double sum = 0.0;
  int count = 0;
  for (const TimelineRow& row : run.rows(group_index(run, "delay_target"))) {
    if (row.end < kSettled || !row.limit) continue;
    sum += *row.limit;
    ++count;
  }
  ASSERT_GT(count, 0);
  RecordProperty("delay_target_mean_limit", std::to_string(sum / count));
  EXPECT_NEAR(sum / count, knee, 0.25 * knee);
}

// Issue 16's target 2 where the load is above the capacity in every phase: once settled (10
// windows after a change), the limit's mean within 25% of the workers. Not checked: the same in
// the scenarios below capacity (workload-shift, low-traffic: the limit has no evidence there) and
// in latency-spike, nor the settle time (docs/simulator.md has the figures).
TEST(TargetsTest, DelayTargetSettlesNearTheWorkersInEveryPhaseOfACapacityChange) {
  if (!kOptimised) GTEST_SKIP() << kWhySkipped;
  for (const char* name : {"capacity-drop", "capacity-rise"}) {
    const Simulated& run = run_of(name);
    std::vector<Nanos> starts{Nanos(0)};
    for (const ServerChange& change : run.scenario.server.changes) starts.push_back(change.at);
    for (std::size_t p = 0; p < starts.size(); ++p) {
      const Nanos from = starts[p] + kSettled;
      const Nanos to = p + 1 < starts.size() ? starts[p + 1] : run.scenario.duration;
      double sum = 0.0;
      int count = 0;
      for (const TimelineRow& row : run.rows(group_index(run, "delay_target"))) {
        if (row.end <= from || row.end > to || !row.limit) continue;
        sum += *row.limit;
        ++count;
      }
      ASSERT_GT(count, 0);
      const double right = run.scenario.server.right_concurrency_at(from);
      RecordProperty(std::string(name) + "_phase" + std::to_string(p) + "_mean_limit",
                     std::to_string(sum / count));
      EXPECT_NEAR(sum / count, right, 0.25 * right) << name << ", phase " << p;
    }
  }
}

TEST(TargetsTest, DelayTargetKeepsTheLimitThroughAHeavyTailAndAWorkloadShift) {
  if (!kOptimised) GTEST_SKIP() << kWhySkipped;
  for (const char* name : {"heavy-tail", "workload-shift"}) {
    const Simulated& run = run_of(name);
    const int right = run.scenario.server.workers;
    for (const TimelineRow& row : run.rows(group_index(run, "delay_target"))) {
      if (row.end < kSettled) continue;
      ASSERT_TRUE(row.limit);
      EXPECT_GE(*row.limit, 0.8 * right) << name << " at " << row.end.count() << " ns";
    }
  }
}

// delay_target's fleet of `clients` clients, as in the shipped fleet-N scenarios (the other
// algorithms' fleets left out: each fleet has its own copy of the server, so they do not change
// delay_target's figures).
FleetSummary delay_target_fleet(int clients) {
  const std::string toml =
      "duration = \"120s\"\nseed = 1\nisolated = true\n"
      "[server]\nworkers = 32\n"
      "service = { distribution = \"lognormal\", mean = \"10ms\", sigma = 0.5 }\n"
      "[[groups]]\nname = \"delay_target\"\nrate = 4000\npolicy = \"delay_target\"\n"
      "timeout = \"1s\"\nclients = " +
      std::to_string(clients) + "\n";
  const testing::Simulated run = testing::simulate_text(toml);
  EXPECT_EQ(run.results.fleets.size(), 1U);
  return run.results.fleets.at(0);
}

TEST(TargetsTest, DelayTargetSharesOneServerAcrossAFleet) {
  if (!kOptimised) GTEST_SKIP() << kWhySkipped;
  const FleetSummary ten = delay_target_fleet(10);
  const FleetSummary hundred = delay_target_fleet(100);
  const FleetSummary five_hundred = delay_target_fleet(500);
  for (const FleetSummary* fleet : {&ten, &hundred, &five_hundred}) {
    const std::string prefix = "fleet_" + std::to_string(fleet->clients) + "_";
    RecordProperty(prefix + "queue", std::to_string(fleet->above_workers));
    RecordProperty(prefix + "jain", std::to_string(fleet->jain));
    RecordProperty(prefix + "goodput", std::to_string(fleet->goodput));
    RecordProperty(prefix + "cv", std::to_string(fleet->in_flight_cv));
    RecordProperty(prefix + "cv_floor", std::to_string(fleet->in_flight_cv_floor));
  }
  EXPECT_GE(hundred.jain, 0.95);
  EXPECT_GE(five_hundred.jain, 0.95);
  EXPECT_GE(five_hundred.goodput, 0.95);
  EXPECT_LE(hundred.above_workers, 2.0 * ten.above_workers);
  EXPECT_LE(five_hundred.above_workers, 3.0 * ten.above_workers);
  // Target 3's cv of 10 % is below what clients that do not coordinate can reach at these
  // queues (docs/simulator.md, "Fleets: the least swing without coordination"), and no fleet
  // swings less than its floor.
  EXPECT_GT(hundred.in_flight_cv_floor, 0.10);
  EXPECT_GT(five_hundred.in_flight_cv_floor, 0.10);
  for (const FleetSummary* fleet : {&ten, &hundred, &five_hundred}) {
    EXPECT_GE(fleet->in_flight_cv, fleet->in_flight_cv_floor) << fleet->clients << " clients";
  }
}

TEST(TargetsTest, NoLimitMovesWithoutTraffic) {
  if (!kOptimised) GTEST_SKIP() << kWhySkipped;
  const Simulated& run = run_of("no-traffic");
  for (const char* name : {"gradient2", "aimd", "vegas", "delay_target"}) {
    std::optional<int> held;
    for (const TimelineRow& row : run.rows(group_index(run, name))) {
      if (row.end < std::chrono::seconds(31) || row.end > std::chrono::seconds(90)) continue;
      ASSERT_TRUE(row.limit);
      if (!held) held = row.limit;
      EXPECT_EQ(*row.limit, *held) << name << " at " << row.end.count() << " ns";
    }
    EXPECT_TRUE(held) << name;
  }
}

// Issue 20's throttle (docs/simulator.md, "Client-side throttling"): offered 4x its capacity, the
// throttled group sends the server about k = 2 calls per accept, half the unprotected group's
// load, for the same goodput, and the server refuses a third as many of its calls.
TEST(TargetsTest, TheThrottleHalvesTheBackendLoadForTheSameGoodput) {
  if (!kOptimised) GTEST_SKIP() << kWhySkipped;
  const Simulated& run = run_of("throttle-overload");
  const GroupSummary& throttled = run.summary("throttled");
  const GroupSummary& unprotected = run.summary("unprotected");
  const auto sent = [](const GroupSummary& g) {
    return static_cast<double>(g.offered - g.rejected_calls);
  };
  RecordProperty("throttled_backend_load", std::to_string(sent(throttled)));
  RecordProperty("unprotected_backend_load", std::to_string(sent(unprotected)));
  RecordProperty("throttled_rejected", std::to_string(throttled.rejected));
  EXPECT_EQ(unprotected.rejected_calls, 0);
  EXPECT_LE(sent(throttled), 0.55 * sent(unprotected));
  EXPECT_GE(throttled.rejected, 0.45);  // shed locally, never sent
  EXPECT_GE(throttled.goodput, 0.95 * unprotected.goodput);
  EXPECT_LE(static_cast<double>(throttled.errors), 0.4 * static_cast<double>(unprotected.errors));
}

// The share of a group's offered calls that succeeded.
double success(const GroupSummary& g) {
  return static_cast<double>(g.succeeded) / static_cast<double>(g.offered);
}

// Issue 17 (docs/simulator.md, "Priority classes and a bounded wait").
TEST(TargetsTest, ClassesKeepCriticalCallsThroughABulkSpikeOnOneLimit) {
  if (!kOptimised) GTEST_SKIP() << kWhySkipped;
  const GroupSummary& critical = run_of("priority-spike").summary("critical");
  const GroupSummary& bulk = run_of("priority-spike").summary("bulk");
  const GroupSummary& critical_alone = run_of("priority-spike-no-classes").summary("critical");
  RecordProperty("critical_success", std::to_string(success(critical)));
  RecordProperty("bulk_rejected", std::to_string(bulk.rejected));
  RecordProperty("critical_success_without_classes", std::to_string(success(critical_alone)));
  EXPECT_GE(success(critical), 0.99);
  EXPECT_GE(bulk.rejected, 0.2);  // shed
  EXPECT_LE(success(critical_alone), 0.95);
}

TEST(TargetsTest, APartitionKeepsItsGuaranteeThroughAnotherPartitionsSpike) {
  if (!kOptimised) GTEST_SKIP() << kWhySkipped;
  const GroupSummary& user = run_of("partition-spike").summary("user");
  const GroupSummary& prefetch = run_of("partition-spike").summary("prefetch");
  const GroupSummary& alone = run_of("priority-spike-no-classes").summary("critical");
  RecordProperty("user_success", std::to_string(success(user)));
  RecordProperty("prefetch_rejected", std::to_string(prefetch.rejected));
  // Measured at seed 1: user 99.95% (96,073 of 96,125; the 7 unfinished at the end count as
  // failures; 0.02% rejected during the spike), prefetch 31.3% rejected (34% during the
  // spike); the same traffic without partitions or classes keeps 89.9%.
  EXPECT_GE(success(user), 0.995);
  EXPECT_LE(user.rejected, 0.002);
  EXPECT_GE(prefetch.rejected, 0.2);  // shed
  EXPECT_LE(success(alone), 0.95);
}

TEST(TargetsTest, AShortWaitTakesBurstsWithFewerRejectionsAndALikeP99) {
  if (!kOptimised) GTEST_SKIP() << kWhySkipped;
  const Simulated& run = run_of("wait-bursts");
  const GroupSummary& wait = run.summary("wait");
  const GroupSummary& no_wait = run.summary("no-wait");
  ASSERT_TRUE(wait.p99_ms && no_wait.p99_ms);
  RecordProperty("wait_rejected", std::to_string(wait.rejected));
  RecordProperty("no_wait_rejected", std::to_string(no_wait.rejected));
  RecordProperty("wait_p99_ms", std::to_string(*wait.p99_ms));
  RecordProperty("no_wait_p99_ms", std::to_string(*no_wait.p99_ms));
  EXPECT_GT(no_wait.rejected_calls, 0);
  EXPECT_LE(wait.rejected, 0.5 * no_wait.rejected);
  EXPECT_LE(*wait.p99_ms, 1.2 * *no_wait.p99_ms);
  EXPECT_GE(wait.goodput, no_wait.goodput);
}

}  // namespace
}  // namespace r4c::sim
