// SPDX-License-Identifier: Apache-2.0
// A scenario: a dependency (a server with workers, a queue and a service time), the schedule of
// changes it goes through, and the client groups calling it, each with its own offered load and
// policy. Read from a TOML file (docs/simulator.md lists every key); both engines (`run`,
// simulated, and `live`, real sockets) and the recorder work from the same model.
//
// Reading checks everything before anything runs: every mistake is reported with the file, the
// line, the key, the bad value and what is valid, and an unknown key names the closest valid one.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "r4c/adaptive_limit_config.hpp"
#include "r4c/text.hpp"

namespace r4c::sim {

using Nanos = std::chrono::nanoseconds;

/// How the server's service time is distributed.
enum class Distribution { fixed, exponential, lognormal };
/// Its names in a scenario file: the enum joins the library's text vocabulary (r4c/text.hpp), so
/// r4c::from_string reads it as it reads the library's enums.
inline constexpr EnumName<Distribution> kDistributionNames[] = {
    {"fixed", Distribution::fixed},
    {"exponential", Distribution::exponential},
    {"lognormal", Distribution::lognormal}};
constexpr std::span<const EnumName<Distribution>> enum_names(Distribution) noexcept {
  return kDistributionNames;
}

/// What the server does with a queued call whose client gave up (its timeout passed).
enum class Abandoned {
  serve,  // it is served anyway, as a real server that cannot tell does
  drop,   // it leaves the queue (a server that checks the connection before starting)
};
inline constexpr EnumName<Abandoned> kAbandonedNames[] = {{"serve", Abandoned::serve},
                                                          {"drop", Abandoned::drop}};
constexpr std::span<const EnumName<Abandoned>> enum_names(Abandoned) noexcept {
  return kAbandonedNames;
}

/// The service time of one call: `mean` times a standardized draw of mean 1 (see
/// standard_draw), times the schedule's service_scale when the call starts.
struct ServiceTime {
  Distribution distribution = Distribution::exponential;
  Nanos mean = std::chrono::milliseconds(10);
  double sigma = 0.5;  // lognormal: the standard deviation of the logarithm
};

/// One change of the server at time `at`; what is not given keeps its value.
struct ServerChange {
  Nanos at{0};
  std::optional<int> workers;
  std::optional<double> service_scale;
  std::optional<Nanos> extra_latency;
};

/// The server's state at one time, after the changes up to then.
struct ServerState {
  int workers = 0;
  double service_scale = 1.0;
  Nanos extra_latency{0};
};

struct ServerSpec {
  int workers = 16;
  int queue_limit = 0;  // calls waiting beyond the busy workers; 0: unbounded
  Abandoned abandoned = Abandoned::serve;
  ServiceTime service;
  std::vector<ServerChange> changes;  // sorted by `at`, no two at the same time

  ServerState state_at(Nanos t) const;
  /// Calls per second the server completes with every worker busy: workers / mean service time.
  double capacity_at(Nanos t) const;
};

/// The policy a group calls through: r4c's adaptive limit (with the algorithm the scenario
/// names, kept in GroupSpec::limit), a fixed bulkhead, or nothing.
enum class PolicyKind { adaptive_limit, bulkhead, throttle, none };

/// A change of a group's offered load at time `at`.
struct RateChange {
  Nanos at{0};
  double rate = 0.0;
};

struct GroupSpec {
  std::string name;
  double rate = 0.0;  // offered calls per second, Poisson arrivals (open loop)
  PolicyKind policy = PolicyKind::adaptive_limit;
  std::optional<Nanos> timeout;     // a timeout inside the policy; required for aimd
  int max_concurrent = 0;           // bulkhead only
  AdaptiveLimitConfig limit;        // adaptive_limit; its algorithm is the one the policy names
  std::vector<RateChange> changes;  // sorted by `at`

  double rate_at(Nanos t) const;
  /// The policy as a scenario names it: the limit's algorithm ("gradient2", "aimd", in the
  /// library's words), "bulkhead" or "none".
  std::string_view policy_name() const noexcept;
  bool has_limit() const noexcept { return policy != PolicyKind::none; }
};

/// Settings of live mode only: the client threads and the bounds that make it stop by itself.
struct LiveSpec {
  int clients = 64;  // client threads (each with one keep-alive connection) per group
  std::int64_t max_calls = 1000000;       // offered calls in all, over all groups
  Nanos drain = std::chrono::seconds(5);  // after the duration, how long calls may still finish
};

struct Scenario {
  std::string name;
  std::string description;
  Nanos duration{0};
  std::uint64_t seed = 1;
  bool isolated = false;                            // each group against its own copy of the server
  Nanos interval = std::chrono::milliseconds(100);  // the timeline's resolution
  ServerSpec server;
  std::vector<GroupSpec> groups;
  LiveSpec live;

  /// The times at which the server or a group's load changes, after 0, sorted, without repeats.
  std::vector<Nanos> change_times() const;
  /// The server `group` calls: its own copy when isolated, else the shared one (index 0).
  int server_of(int group) const noexcept { return isolated ? group : 0; }
  int server_count() const noexcept { return isolated ? static_cast<int>(groups.size()) : 1; }
  /// The load offered to the server `group` calls at time t (calls per second).
  double load_on_server_of(int group, Nanos t) const;
};

/// Reads and checks a scenario file. Throws InputError listing every mistake, one per line, each
/// "FILE:LINE: ..." naming the key, the bad value and what is valid.
Scenario load_scenario(const std::filesystem::path& file);

/// The same, from TOML text; `source` names it in messages (as the file would).
Scenario parse_scenario(std::string_view text, std::string_view source);

}  // namespace r4c::sim
