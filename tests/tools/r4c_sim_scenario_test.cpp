// SPDX-License-Identifier: Apache-2.0
// r4c-sim's scenario files: every key read, the defaults, and every kind of mistake reported
// with the file, the line, the key, the bad value and what is valid.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "common.hpp"
#include "r4c/detail/config_file.hpp"
#include "scenario.hpp"
#include "sim_test_support.hpp"

namespace r4c::sim {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

// A scenario up to its group's policy, for the tests of what each policy takes.
const std::string kGroupWithoutPolicy =
    "duration = \"10s\"\n[server]\nworkers = 4\n[[groups]]\nname = \"g\"\nrate = 1\n";

// The message parse_scenario throws for `text`, or "" when it parses.
std::string error_of(const std::string& text) {
  try {
    parse_scenario(text, "test.toml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// Each of `cases` is the rest of a group after kGroupWithoutPolicy, and the message
// parse_scenario throws for it.
void expect_group_errors(const std::vector<std::pair<std::string, std::string>>& cases) {
  for (const auto& [rest, message] : cases) {
    EXPECT_EQ(error_of(kGroupWithoutPolicy + rest), message) << rest;
  }
}

// What the library says of a malformed duration, after "<key> is '<value>'; ".
const std::string kLibraryDuration =
    "expected a duration: a non-negative integer followed by ns, us, ms, s, m or h, e.g. 500ms "
    "or 2s";

constexpr const char* kMinimal = R"(duration = "10s"
[server]
workers = 4
[[groups]]
name = "g"
rate = 100
policy = "gradient2"
)";

TEST(ScenarioTest, ReadsEveryKey) {
  const Scenario s = parse_scenario(R"(name = "every-key"
description = "all of them"
duration = "2m"
seed = 42
isolated = true

[server]
workers = 16
queue_limit = 100
abandoned = "drop"
service = { distribution = "lognormal", mean = "12500us", sigma = 0.7 }

[[server.changes]]
at = "60s"
workers = 4
service_scale = 2.5
extra_latency = "30ms"

[[groups]]
name = "g2"
rate = 1500.5
policy = "gradient2"
timeout = "1s"
limit = { initial_limit = 5, min_limit = 2, max_limit = 50, window = "100ms", min_window_samples = 20, smoothing = 0.3, rtt_tolerance = 1.2, long_window = 6000, queue_size = 2 }

[[groups.changes]]
at = "30s"
rate = 10

[[groups]]
name = "aimd"
rate = 100
policy = "aimd"
timeout = "50ms"
limit = { backoff_ratio = 0.8 }

[[groups]]
name = "pool"
rate = 100
policy = "bulkhead"
max_concurrent = 8

[[groups]]
name = "bare"
rate = 0
policy = "none"

[live]
clients = 32
max_calls = 5000
drain = "3s"
)",
                                    "every.toml");
  EXPECT_EQ(s.name, "every-key");
  EXPECT_EQ(s.description, "all of them");
  EXPECT_EQ(s.duration, seconds(120));
  EXPECT_EQ(s.seed, 42u);
  EXPECT_TRUE(s.isolated);
  EXPECT_EQ(s.server.workers, 16);
  EXPECT_EQ(s.server.queue_limit, 100);
  EXPECT_EQ(s.server.abandoned, Abandoned::drop);
  EXPECT_EQ(s.server.service.distribution, Distribution::lognormal);
  EXPECT_EQ(s.server.service.mean, std::chrono::microseconds(12500));
  EXPECT_DOUBLE_EQ(s.server.service.sigma, 0.7);
  ASSERT_EQ(s.server.changes.size(), 1u);
  EXPECT_EQ(s.server.changes[0].at, seconds(60));
  EXPECT_EQ(s.server.changes[0].workers, 4);
  EXPECT_EQ(s.server.changes[0].service_scale, 2.5);
  EXPECT_EQ(s.server.changes[0].extra_latency, milliseconds(30));

  ASSERT_EQ(s.groups.size(), 4u);
  const GroupSpec& g2 = s.groups[0];
  EXPECT_EQ(g2.name, "g2");
  EXPECT_DOUBLE_EQ(g2.rate, 1500.5);
  EXPECT_EQ(g2.policy, r4c::sim::kAdaptiveLimit);
  EXPECT_EQ(g2.policy_name(), "gradient2");
  EXPECT_EQ(g2.timeout, seconds(1));
  EXPECT_EQ(g2.limit.algorithm(), LimitAlgorithm::gradient2);
  EXPECT_EQ(g2.limit.initial_limit(), 5);
  EXPECT_EQ(g2.limit.min_limit(), 2);
  EXPECT_EQ(g2.limit.max_limit(), 50);
  EXPECT_EQ(g2.limit.window(), milliseconds(100));
  EXPECT_EQ(g2.limit.min_window_samples(), 20);
  EXPECT_DOUBLE_EQ(g2.limit.smoothing(), 0.3);
  EXPECT_DOUBLE_EQ(g2.limit.rtt_tolerance(), 1.2);
  EXPECT_EQ(g2.limit.long_window(), 6000);
  EXPECT_EQ(g2.limit.queue_size(), 2);
  ASSERT_EQ(g2.changes.size(), 1u);
  EXPECT_EQ(g2.changes[0].at, seconds(30));
  EXPECT_DOUBLE_EQ(g2.changes[0].rate, 10.0);

  EXPECT_EQ(s.groups[1].policy, r4c::sim::kAdaptiveLimit);
  EXPECT_EQ(s.groups[1].limit.algorithm(), LimitAlgorithm::aimd);
  EXPECT_EQ(s.groups[1].policy_name(), "aimd");
  EXPECT_DOUBLE_EQ(s.groups[1].limit.backoff_ratio(), 0.8);
  EXPECT_EQ(s.groups[1].timeout, milliseconds(50));
  EXPECT_EQ(s.groups[2].policy, r4c::sim::kBulkhead);
  EXPECT_EQ(s.groups[2].policy_name(), "bulkhead");
  EXPECT_EQ(s.groups[2].max_concurrent, 8);
  EXPECT_FALSE(s.groups[2].timeout);
  EXPECT_EQ(s.groups[3].policy, r4c::sim::kNoPolicy);
  EXPECT_EQ(s.groups[3].policy_name(), "none");
  EXPECT_DOUBLE_EQ(s.groups[3].rate, 0.0);

  EXPECT_EQ(s.live.clients, 32);
  EXPECT_EQ(s.live.max_calls, 5000);
  EXPECT_EQ(s.live.drain, seconds(3));
}

TEST(ScenarioTest, FillsTheDefaults) {
  const Scenario s = parse_scenario(kMinimal, "dir/my-scenario.toml");
  EXPECT_EQ(s.name, "my-scenario");  // the file's stem
  EXPECT_EQ(parse_scenario(kMinimal, "my \"odd\" one.toml").name, "my__odd__one");
  EXPECT_EQ(s.seed, 1u);
  EXPECT_FALSE(s.isolated);
  EXPECT_EQ(s.interval, milliseconds(100));
  EXPECT_EQ(s.server.queue_limit, 0);
  EXPECT_EQ(s.server.abandoned, Abandoned::serve);
  EXPECT_EQ(s.server.service.distribution, Distribution::exponential);
  EXPECT_EQ(s.server.service.mean, milliseconds(10));
  EXPECT_TRUE(s.server.changes.empty());
  const AdaptiveLimitConfig defaults;
  const GroupSpec& g = s.groups.at(0);
  EXPECT_FALSE(g.timeout);
  EXPECT_EQ(g.limit.initial_limit(), defaults.initial_limit());
  EXPECT_EQ(g.limit.window(), defaults.window());
  EXPECT_EQ(g.limit.queue_size(), defaults.queue_size());
  EXPECT_EQ(s.live.clients, 64);
  EXPECT_EQ(s.live.max_calls, 1000000);
  EXPECT_EQ(s.live.drain, seconds(5));
}

TEST(ScenarioTest, NamesAnUnknownKeyAndTheClosestValidOne) {
  EXPECT_EQ(error_of("duraton = \"5s\"\n" + std::string(kMinimal)),
            "test.toml:1: unknown key \"duraton\" at the top level; did you mean \"duration\"? "
            "(valid: name, description, duration, seed, isolated, server, groups, live)");
  EXPECT_EQ(error_of(R"(duration = "10s"
[server]
workers = 4
wrokers = 5
[[groups]]
name = "g"
rate = 100
policy = "gradient2"
)"),
            "test.toml:4: unknown key \"wrokers\" in server; did you mean \"workers\"? (valid: "
            "workers, queue_limit, abandoned, knee, contention, service, changes)");
  EXPECT_THAT(error_of(std::string(kMinimal) + "polcy = \"aimd\"\n"),
              HasSubstr("test.toml:8: unknown key \"polcy\" in groups[1]; did you mean "
                        "\"policy\"?"));
  EXPECT_THAT(error_of(std::string(kMinimal) + "limit = { queuesize = 2 }\n"),
              HasSubstr("test.toml:8: unknown key \"queuesize\" in groups[1].limit; did you mean "
                        "\"queue_size\"?"));
  EXPECT_THAT(error_of(R"(duration = "10s"
[server]
workers = 4
service = { distribution = "fixed", mena = "5ms" }
[[groups]]
name = "g"
rate = 100
policy = "none"
)"),
              HasSubstr("test.toml:4: unknown key \"mena\" in server.service; did you mean "
                        "\"mean\"?"));
  EXPECT_THAT(error_of(std::string(kMinimal) + "[live]\nclient = 3\n"),
              HasSubstr("test.toml:9: unknown key \"client\" in live; did you mean \"clients\"?"));
}

TEST(ScenarioTest, NamesABadValueAndWhatIsValid) {
  const std::string head = "duration = \"10s\"\n[server]\n";
  const std::string group = "[[groups]]\nname = \"g\"\nrate = 100\npolicy = \"gradient2\"\n";
  EXPECT_EQ(error_of(head + "workers = 0\n" + group),
            "test.toml:3: server.workers is 0; expected an integer from 1 to 100000");
  EXPECT_EQ(error_of(head + "workers = \"many\"\n" + group),
            "test.toml:3: server.workers is \"many\"; expected an integer from 1 to 100000");
  EXPECT_EQ(error_of(head + "workers = 4\nabandoned = \"keep\"\n" + group),
            "test.toml:4: server.abandoned is \"keep\"; expected one of serve, drop");
  EXPECT_EQ(error_of(head + "workers = 4\nservice = { distribution = \"normal\" }\n" + group),
            "test.toml:4: server.service.distribution is \"normal\"; expected one of fixed, "
            "exponential, lognormal");
  EXPECT_EQ(error_of(head + "workers = 4\nservice = { mean = \"10\" }\n" + group),
            "test.toml:4: R4C-ATR-001: server.service.mean is '10'; " + kLibraryDuration);
  EXPECT_EQ(error_of(head + "workers = 4\nservice = { mean = \"2m\" }\n" + group),
            "test.toml:4: server.service.mean is \"2m\"; expected a duration from 1us to 1m");
  EXPECT_EQ(error_of("duration = 10\n[server]\nworkers = 4\n" + group),
            "test.toml:1: R4C-ATR-001: duration is '10'; " + kLibraryDuration);
  EXPECT_EQ(error_of(head + "workers = 4\n[[groups]]\nname = \"g\"\nrate = -5\npolicy = "
                            "\"none\"\n"),
            "test.toml:6: groups[1].rate is -5; expected calls per second, a number from 0 to "
            "1000000");
  EXPECT_EQ(error_of(head + "workers = 4\n[[groups]]\nname = \"g\"\nrate = 5\npolicy = "
                            "\"bbr\"\n"),
            "test.toml:7: groups[1].policy is \"bbr\"; expected one of gradient2, aimd, "
            "vegas, delay_target, bulkhead, throttle, none");
  EXPECT_EQ(error_of(head + "workers = 4\n[[groups]]\nname = \"a b\"\nrate = 5\npolicy = "
                            "\"none\"\n"),
            "test.toml:5: groups[1].name is \"a b\"; expected 1 to 64 letters, digits, '-', '_' "
            "or '.' (it names CSV rows)");
  EXPECT_EQ(error_of("name = \"my \\\"scenario\\\"\"\nduration = \"10s\"\n[server]\nworkers = 4\n" +
                     group),
            "test.toml:1: name is \"my \"scenario\"\"; expected 1 to 64 letters, digits, '-', "
            "'_' or '.' (it names the output folder)");
  EXPECT_EQ(error_of("duration = \"10s\"\nseed = -1\n[server]\nworkers = 4\n" + group),
            "test.toml:2: seed is -1; expected an integer from 0 to 9223372036854775807");
  EXPECT_EQ(error_of("duration = \"10s\"\nisolated = 1\n[server]\nworkers = 4\n" + group),
            "test.toml:2: isolated is 1; expected true or false");
}

TEST(ScenarioTest, ReportsTheLibrarysOwnCodeForLimitSettings) {
  const std::string head = std::string(kMinimal);
  EXPECT_EQ(error_of(head + "limit = { smoothing = 1.5 }\n"),
            "test.toml:8: groups[1].limit.smoothing: R4C-REG-001: smoothing is 1.5; valid: (0, "
            "1]");
  EXPECT_THAT(error_of(head + "limit = { initial_limit = 0 }\n"),
              HasSubstr("test.toml:8: groups[1].limit.initial_limit: R4C-ATR-003"));
  EXPECT_THAT(error_of(head + "limit = { window = \"2h\" }\n"),
              HasSubstr("test.toml:8: groups[1].limit.window: R4C-ATR-009"));
  // Valid one by one, out of order together: validate() on the limit table's line.
  EXPECT_THAT(error_of(head + "\n[groups.limit]\nmin_limit = 30\n"),
              HasSubstr("test.toml:9: groups[1].limit: R4C-ATR-009: min_limit (30) is greater "
                        "than initial_limit (20)"));
}

TEST(ScenarioTest, ReadsPoliciesAndLimitSettingsInTheLibrarysWords) {
  // An algorithm's name means what it means in a config file, case ignored.
  const Scenario s = parse_scenario(
      "duration = \"10s\"\n[server]\nworkers = 4\n[[groups]]\nname = "
      "\"g\"\nrate = 1\npolicy = \"AIMD\"\ntimeout = \"1s\"\n",
      "test.toml");
  EXPECT_EQ(s.groups[0].policy, r4c::sim::kAdaptiveLimit);
  EXPECT_EQ(s.groups[0].limit.algorithm(), LimitAlgorithm::aimd);
  // r4c-sim's own enums join the vocabulary too, and read the same way.
  const Scenario fixed = parse_scenario(
      "duration = \"10s\"\n[server]\nworkers = 4\nservice = { distribution = \"Fixed\" }\n"
      "abandoned = \"DROP\"\n[[groups]]\nname = \"g\"\nrate = 1\npolicy = \"none\"\n",
      "test.toml");
  EXPECT_EQ(fixed.server.service.distribution, Distribution::fixed);
  EXPECT_EQ(fixed.server.abandoned, Abandoned::drop);
  const std::string head = std::string(kMinimal);
  EXPECT_EQ(error_of(head + "limit = { window = \"1.5s\" }\n"),
            "test.toml:8: R4C-ATR-001: groups[1].limit.window is '1.5s'; " + kLibraryDuration);
  EXPECT_EQ(error_of(head + "limit = { long_window = 1.5 }\n"),
            "test.toml:8: groups[1].limit.long_window is 1.5; expected an integer");
  EXPECT_EQ(
      error_of(head + "limit = { algorithm = \"aimd\" }\n"),
      "test.toml:8: unknown key \"algorithm\" in groups[1].limit; did you mean "
      "\"alpha\"? (valid: mode, latency_histogram, sample_percentile, initial_limit, min_limit, "
      "max_limit, window, min_window_samples, smoothing, rtt_tolerance, long_window, queue_size, "
      "backoff_ratio, probe_multiplier, alpha, beta, max_wait, max_queue, "
      "max_queue_factor, queue_order, codel_target, codel_interval, critical_share, "
      "degraded_share, best_effort_share, bulk_share, partitions, partition_borrow)");
}

// A group names a partition of its limit table's partitions.
TEST(ScenarioTest, ReadsAPartitionOfTheLimitsPartitions) {
  const std::string head = std::string(kMinimal);
  const Scenario s = parse_scenario(
      head + "partition = \"user\"\nlimit = { partitions = \"user:0.7, prefetch:0.3\" }\n",
      "test.toml");
  ASSERT_EQ(s.groups.size(), 1u);
  EXPECT_EQ(s.groups[0].partition, "user");
  EXPECT_EQ(s.groups[0].limit_partition().index(), 0);
  ASSERT_EQ(s.groups[0].limit.partitions().size(), 2u);
  EXPECT_EQ(s.groups[0].limit.partitions()[1].name, "prefetch");
  EXPECT_THAT(error_of(head + "partition = \"users\"\nlimit = { partitions = \"user:0.7\" }\n"),
              HasSubstr("R4C-REG-012: groups[1].partition is \"users\", none of its limit's "
                        "partitions; valid: user"));
  EXPECT_THAT(error_of(head + "partition = \"user\"\n"), HasSubstr("R4C-REG-012"));
  EXPECT_THAT(error_of(head + "limit = { partitions = \"user:0.7, prefetch:0.4\" }\n"),
              HasSubstr("R4C-REG-001"));
  EXPECT_THAT(error_of(head + "limit = { partitions = \"user=0.7\" }\n"),
              HasSubstr("groups[1].limit.partitions"));
}

// Issue 17's keys: a group's class, a limit shared by name, and the limit's wait settings.
TEST(ScenarioTest, ReadsClassesSharedLimitsAndWaits) {
  const std::string two = R"(duration = "10s"
[server]
workers = 4
[[groups]]
name = "users"
rate = 10
policy = "gradient2"
shared_limit = "api"
limit = { max_wait = "20ms", max_queue_factor = 0.5, queue_order = "lifo", bulk_share = 0.4 }
[[groups]]
name = "prefetch"
rate = 100
policy = "gradient2"
shared_limit = "api"
class = "BULK"
limit = { max_wait = "20ms", max_queue_factor = 0.5, queue_order = "lifo", bulk_share = 0.4 }
)";
  const Scenario s = parse_scenario(two, "test.toml");
  ASSERT_EQ(s.groups.size(), 2u);
  EXPECT_EQ(s.groups[0].cls, CallClass::critical);
  EXPECT_EQ(s.groups[1].cls, CallClass::bulk);
  EXPECT_EQ(s.groups[1].shared_limit, "api");
  EXPECT_EQ(s.groups[0].limit.max_wait(), std::chrono::milliseconds(20));
  EXPECT_EQ(s.groups[0].limit.queue_order(), QueueOrder::lifo);
  EXPECT_EQ(s.groups[1].limit.class_share(CallClass::bulk), 0.4);

  std::string differing = two;
  differing.replace(differing.rfind("max_wait = \"20ms\""), 17, "max_wait = \"30ms\"");
  EXPECT_THAT(error_of(differing),
              HasSubstr("groups[2].shared_limit is \"api\", shared with group \"users\", whose "
                        "limit.max_wait differs"));
  EXPECT_THAT(error_of(kGroupWithoutPolicy + "policy = \"bulkhead\"\nmax_concurrent = 2\n"
                                             "class = \"bulk\"\n"),
              HasSubstr("groups[1].class applies to the adaptive limit's policies only"));
  EXPECT_THAT(error_of(std::string(kMinimal) + "class = \"urgent\"\n"),
              HasSubstr("groups[1].class"));
  EXPECT_THAT(error_of(std::string(kMinimal) + "limit = { max_wait = \"2h\" }\n"),
              HasSubstr("R4C-REG-001"));
}

// A throttle group's table: the throttle's settings by the library's ThrottleKind descriptor
// (its grammar, its setters' codes), refused_on naming the scenario's outcomes.
TEST(ScenarioTest, ReadsAThrottleGroupsSettingsInTheLibrarysWords) {
  const std::string head = kGroupWithoutPolicy;
  const Scenario s = parse_scenario(
      head +
          "policy = \"throttle\"\nthrottle = { k = 3, window = \"10s\", refused_on = "
          "\"refused, timeout\", seed = 7 }\n",
      "test.toml");
  EXPECT_EQ(s.groups[0].policy, r4c::sim::kThrottle);
  EXPECT_EQ(s.groups[0].policy_name(), "throttle");
  EXPECT_DOUBLE_EQ(s.groups[0].throttle.k(), 3.0);
  EXPECT_EQ(s.groups[0].throttle.window(), seconds(10));
  EXPECT_EQ(s.groups[0].throttle.seed(), 7);
  ASSERT_EQ(s.groups[0].throttle.refused_on_types().size(), 2u);
  EXPECT_TRUE(s.groups[0].throttle.refused_on_types()[0] == ExceptionType::of<std::system_error>());
  EXPECT_TRUE(s.groups[0].throttle.refused_on_types()[1] ==
              ExceptionType::of<CallTimeoutException>());
  EXPECT_EQ(parse_scenario(head + "policy = \"throttle\"\n", "test.toml").groups[0].throttle.k(),
            ThrottleConfig::kDefaultK);

  // Each mistake in the table, and the line reporting it (line 8: the table's).
  const std::pair<std::string, std::string> mistakes[] = {
      {"throttle = { k = 0.5 }", "groups[1].throttle.k: R4C-REG-001: k is 0.5; valid: 1 .. 100"},
      {"throttle = { window = \"1.5s\" }",
       "R4C-ATR-001: groups[1].throttle.window is '1.5s'; " + kLibraryDuration},
      {"throttle = { refused_on = \"refusd\" }",
       "groups[1].throttle.refused_on names \"refusd\"; expected outcomes among refused, "
       "timeout (did you mean \"refused\"?)"},
      {"throttle = { kk = 2 }",
       "unknown key \"kk\" in groups[1].throttle; did you mean \"k\"? (valid: k, window, "
       "refused_on, seed)"}};
  for (const auto& [table, message] : mistakes) {
    EXPECT_EQ(error_of(head + "policy = \"throttle\"\n" + table + "\n"), "test.toml:8: " + message);
  }
  EXPECT_EQ(error_of(head + "policy = \"none\"\nthrottle = { k = 2 }\n"),
            "test.toml:8: groups[1].throttle applies to policy throttle only (this group's policy "
            "is none)");
}

TEST(ScenarioTest, ReportsMissingKeys) {
  EXPECT_EQ(error_of("seed = 3\n"),
            "test.toml:1: the file has no duration; expected a duration such as \"250ms\" or "
            "\"2m\", from 1s to 24h\n"
            "test.toml:1: the file has no server; expected a [server] table\n"
            "test.toml:1: the file has no groups; expected at least one [[groups]] table");
  EXPECT_EQ(error_of("duration = \"10s\"\n[server]\nservice = { mean = \"1ms\" }\n[[groups]]\n"),
            "test.toml:2: server has no workers; expected an integer from 1 to 100000\n"
            "test.toml:4: groups[1] has no name; expected a name such as \"gradient2\"\n"
            "test.toml:4: groups[1] has no rate; expected calls per second\n"
            "test.toml:4: groups[1] has no policy; expected one of gradient2, aimd, vegas, "
            "delay_target, bulkhead, throttle, none");
  expect_group_errors(
      {{"policy = \"bulkhead\"\n",
        "test.toml:4: groups[1] has no max_concurrent; expected the bulkhead's size for "
        "policy bulkhead"},
       {"policy = \"aimd\"\n",
        "test.toml:4: groups[1] has no timeout; expected a duration such as \"250ms\" or "
        "\"2m\": policy aimd needs a timeout inside the limit as its drop signal"}});
}

TEST(ScenarioTest, RejectsSettingsThatDoNotApplyToThePolicy) {
  expect_group_errors(
      {{"policy = \"gradient2\"\nmax_concurrent = 3\n",
        "test.toml:8: groups[1].max_concurrent applies to policy bulkhead only (this "
        "group's policy is gradient2)"},
       {"policy = \"bulkhead\"\nmax_concurrent = 3\nlimit = { max_limit = 9 }\n",
        "test.toml:9: groups[1].limit applies to the adaptive limit's policies only "
        "(gradient2, aimd, vegas, delay_target; this group's policy is bulkhead)"},
       {"policy = \"aimd\"\ntimeout = \"1s\"\nlimit = { smoothing = 0.5 }\n",
        "test.toml:9: groups[1].limit.smoothing applies to gradient2 and vegas only (this "
        "group's policy is aimd)"},
       {"policy = \"gradient2\"\nlimit = { backoff_ratio = 0.5 }\n",
        "test.toml:8: groups[1].limit.backoff_ratio applies to aimd and delay_target only "
        "(this group's policy is gradient2)"}});
  EXPECT_EQ(error_of("duration = \"10s\"\n[server]\nworkers = 4\nservice = { sigma = 0.5 }\n"
                     "[[groups]]\nname = \"g\"\nrate = 1\npolicy = \"none\"\n"),
            "test.toml:4: server.service.sigma applies to distribution lognormal only");
}

TEST(ScenarioTest, ChecksTheSchedule) {
  const std::string group = "[[groups]]\nname = \"g\"\nrate = 1\npolicy = \"none\"\n";
  EXPECT_EQ(error_of("duration = \"10s\"\n[server]\nworkers = 4\n[[server.changes]]\nat = "
                     "\"20s\"\nworkers = 2\n" +
                     group),
            "test.toml:5: server.changes[1].at is \"20s\"; expected a duration from 1ns to 10s");
  EXPECT_EQ(error_of("duration = \"10s\"\n[server]\nworkers = 4\n[[server.changes]]\nat = "
                     "\"2s\"\n" +
                     group),
            "test.toml:4: server.changes[1] changes nothing; expected at least one of workers, "
            "service_scale, extra_latency");
  EXPECT_EQ(error_of("duration = \"10s\"\n[server]\nworkers = 4\n[[server.changes]]\nworkers = "
                     "2\n" +
                     group),
            "test.toml:4: server.changes[1] has no at; expected a duration such as \"250ms\" or "
            "\"2m\" within the scenario's duration");
  EXPECT_EQ(error_of("duration = \"10s\"\n[server]\nworkers = 4\n[[server.changes]]\nat = "
                     "\"2s\"\nworkers = 2\n[[server.changes]]\nat = \"2000ms\"\nworkers = 3\n" +
                     group),
            "test.toml:7: server.changes[2].at is \"2s\", the time of another server change; "
            "expected one change per time");
  EXPECT_EQ(error_of("duration = \"10s\"\n[server]\nworkers = 4\n[[server.changes]]\nat = "
                     "\"2s\"\nservice_scale = 0\n" +
                     group),
            "test.toml:6: server.changes[1].service_scale is 0; expected a number in (0, 1000]");
  EXPECT_EQ(error_of("duration = \"10s\"\n[server]\nworkers = 4\n" + group +
                     "[[groups.changes]]\nat = \"1s\"\n"),
            "test.toml:8: groups[1].changes[1] has no rate; expected calls per second");
}

TEST(ScenarioTest, RejectsTwoGroupsWithOneName) {
  EXPECT_EQ(error_of(std::string(kMinimal) + "[[groups]]\nname = \"g\"\nrate = 1\npolicy = "
                                             "\"none\"\n"),
            "test.toml:8: groups[2].name is \"g\", the name of another group; expected a name "
            "of its own");
}

TEST(ScenarioTest, ReportsEveryMistakeNotJustTheFirst) {
  const std::string message = error_of(R"(duration = "10s"
[server]
workers = -1
queue_limit = "x"
[[groups]]
name = "g"
rate = 100
policy = "gradient2"
timeout = "soon"
)");
  EXPECT_EQ(message,
            "test.toml:3: server.workers is -1; expected an integer from 1 to 100000\n"
            "test.toml:4: server.queue_limit is \"x\"; expected an integer from 0 to 100000000\n"
            "test.toml:9: R4C-ATR-001: groups[1].timeout is 'soon'; " +
                kLibraryDuration);
}

TEST(ScenarioTest, ReportsTomlSyntaxErrorsWithTheirLine) {
  EXPECT_THAT(error_of("duration = \"10s\"\n[server\nworkers = 4\n"),
              ::testing::StartsWith("test.toml:2: not valid TOML: "));
}

TEST(ScenarioTest, ReportsAFileThatCannotBeOpened) {
  try {
    load_scenario("/nonexistent/scenario.toml");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "cannot open scenario \"/nonexistent/scenario.toml\"");
  }
}

TEST(ScenarioTest, LoadsAFileAndNamesItInMessages) {
  const testing::ScratchDir scratch;
  const auto file = scratch.write("bad.toml", "duration = \"1x\"\n");
  try {
    load_scenario(file);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr(file.string() + ":1: R4C-ATR-001: duration is '1x'"));
  }
  const auto good = scratch.write("good.toml", kMinimal);
  EXPECT_EQ(load_scenario(good).name, "good");
}

TEST(DurationTest, ReadsTheLibrarysGrammarAndNothingElse) {
  // The same text means the same in a scenario as in a config file: integers with a unit.
  const std::string group = "[[groups]]\nname = \"g\"\nrate = 1\npolicy = \"none\"\n";
  const Scenario s = parse_scenario(
      "duration = \"2m\"\n[server]\nworkers = 4\nservice = { mean = "
      "\"1500us\" }\n" +
          group,
      "test.toml");
  EXPECT_EQ(s.duration, seconds(120));
  EXPECT_EQ(s.server.service.mean, std::chrono::microseconds(1500));
  for (const char* text : {"1.5s", "10", "ms", "-1s", "+1s", "1 s", "1sec", "1e3ms", "1s "}) {
    EXPECT_EQ(
        error_of("duration = \"" + std::string(text) + "\"\n[server]\nworkers = 4\n" + group),
        "test.toml:1: R4C-ATR-001: duration is '" + std::string(text) + "'; " + kLibraryDuration)
        << text;
  }
}

TEST(ScheduleTest, TheServerStateFollowsItsChanges) {
  const Scenario s =
      parse_scenario(testing::server_text("300s", 16, "10ms") +
                         testing::server_change_text("180s", "workers = 12\n") +
                         testing::server_change_text("60s", "workers = 4\nservice_scale = 2\n") +
                         testing::server_change_text("100s", "extra_latency = \"5ms\"\n") +
                         testing::group_text("g", 1000, "none") + R"([[groups.changes]]
at = "100s"
rate = 3000
)",
                     "t.toml");
  // Sorted by time whatever the file's order.
  ASSERT_EQ(s.server.changes.size(), 3u);
  EXPECT_EQ(s.server.changes[0].at, seconds(60));
  EXPECT_EQ(s.server.state_at(seconds(59)).workers, 16);
  EXPECT_EQ(s.server.state_at(seconds(60)).workers, 4);  // a change applies from its time
  EXPECT_EQ(s.server.state_at(seconds(60)).service_scale, 2.0);
  EXPECT_EQ(s.server.state_at(seconds(120)).workers, 4);  // what a change does not name stays
  EXPECT_EQ(s.server.state_at(seconds(120)).extra_latency, milliseconds(5));
  EXPECT_EQ(s.server.state_at(seconds(200)).workers, 12);
  EXPECT_EQ(s.server.state_at(seconds(200)).service_scale, 2.0);
  EXPECT_DOUBLE_EQ(s.server.capacity_at(seconds(0)), 1600.0);
  EXPECT_DOUBLE_EQ(s.server.capacity_at(seconds(60)), 200.0);  // 4 workers of 20 ms
  EXPECT_DOUBLE_EQ(s.server.capacity_at(seconds(200)), 600.0);
  EXPECT_DOUBLE_EQ(s.groups[0].rate_at(seconds(99)), 1000.0);
  EXPECT_DOUBLE_EQ(s.groups[0].rate_at(seconds(100)), 3000.0);
  EXPECT_EQ(s.change_times(),
            (std::vector<Nanos>{seconds(60), seconds(100), seconds(180)}));  // one 100 s
  EXPECT_DOUBLE_EQ(s.load_on_server_of(0, seconds(150)), 3000.0);
}

TEST(ScheduleTest, IsolatedGroupsHaveAServerEachSharedOnesOne) {
  Scenario s = parse_scenario(std::string(kMinimal) +
                                  "[[groups]]\nname = \"h\"\nrate = 50\n"
                                  "policy = \"none\"\n",
                              "t.toml");
  EXPECT_EQ(s.server_count(), 1);
  EXPECT_EQ(s.server_of(1), 0);
  EXPECT_DOUBLE_EQ(s.load_on_server_of(0, Nanos(0)), 150.0);
  s.isolated = true;
  EXPECT_EQ(s.server_count(), 2);
  EXPECT_EQ(s.server_of(1), 1);
  EXPECT_DOUBLE_EQ(s.load_on_server_of(0, Nanos(0)), 100.0);
}

TEST(ScenarioTest, TheTomlBlocksOfTheDocsAreValidScenarios) {
  const std::string page =
      testing::read_text(std::string(R4C_SCENARIOS_DIR) + "/../docs/simulator.md");
  int blocks = 0;
  for (std::size_t at = page.find("```toml\n"); at != std::string::npos;
       at = page.find("```toml\n", at + 1)) {
    const std::size_t from = at + 8;
    const std::string block = page.substr(from, page.find("```", from) - from);
    EXPECT_NO_THROW(parse_scenario(block, "simulator.md")) << block;
    ++blocks;
  }
  EXPECT_GE(blocks, 1);
}

}  // namespace
}  // namespace r4c::sim
