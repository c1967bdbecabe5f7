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
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "r4c/adaptive_limit_config.hpp"
#include "r4c/detail/kinds.hpp"
#include "r4c/text.hpp"
#include "r4c/throttle.hpp"

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
  /// A heavy tail: this share of calls takes tail_factor times the draw (0: none).
  double tail_share = 0.0;
  double tail_factor = 10.0;
  /// The mean of a call's standardized time, the tail included: 1 without one.
  double tail_mean() const noexcept { return 1.0 + tail_share * (tail_factor - 1.0); }
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
  /// Lock contention: past `knee` calls in service (0: no knee), each call's service time is
  /// multiplied by 1 + contention × (calls in service − knee) when it starts, so throughput
  /// falls past the knee (when contention × knee > 1).
  int knee = 0;
  double contention = 0.1;
  std::vector<ServerChange> changes;  // sorted by `at`, no two at the same time

  ServerState state_at(Nanos t) const;
  /// The slowdown of a call that starts with `busy` calls in service (itself included).
  double contention_at(int busy) const noexcept;
  /// Calls per second the server completes at best: the most, over the calls in service up to
  /// its workers, of calls in service / their mean service time (workers / mean without a knee).
  double capacity_at(Nanos t) const;
  /// The concurrency the server serves without queueing at t: the number in service that gives
  /// the capacity (its workers, or the knee).
  int right_concurrency_at(Nanos t) const;
};

/// The policy a group calls through: the position of its kind in the library's list of kinds
/// (<r4c/detail/kinds.hpp>, whose names the scenario uses), or kNoPolicy. The adaptive limit is
/// named by its algorithm (kept in GroupSpec::limit).
using PolicyKind = std::size_t;
inline constexpr PolicyKind kAdaptiveLimit = detail::kKindIndex<AdaptiveLimitKind>;
inline constexpr PolicyKind kBulkhead = detail::kKindIndex<BulkheadKind>;
inline constexpr PolicyKind kThrottle = detail::kKindIndex<ThrottleKind>;
inline constexpr PolicyKind kNoPolicy = detail::kKindCount;
/// The kinds a group's `policy` may be, in the order messages list them.
inline constexpr PolicyKind kSimulatedKinds[] = {kAdaptiveLimit, kBulkhead, kThrottle};

/// A change of a group's offered load at time `at`.
struct RateChange {
  Nanos at{0};
  double rate = 0.0;
};

struct GroupSpec {
  std::string name;
  double rate = 0.0;  // offered calls per second, Poisson arrivals (open loop)
  PolicyKind policy = kAdaptiveLimit;
  std::optional<Nanos> timeout;         // a timeout inside the policy; required for aimd
  int max_concurrent = 0;               // bulkhead only
  AdaptiveLimitConfig limit;            // adaptive_limit; its algorithm is the one the policy names
  CallClass cls = CallClass::critical;  // the class its calls say to the limit (`class`)
  /// The partition of its limit its calls name (`partition`, one of the limit table's
  /// `partitions`); empty: none.
  std::string partition;
  /// `partition` as the limit's calls name it.
  LimitPartition limit_partition() const {
    return LimitPartition::at(partition.empty() ? -1
                                                : limit.partition_index(partition).value_or(-1));
  }
  /// Groups giving the same name call through one pipeline (one limit), named so; their
  /// policy, timeout and limit table must agree. Empty: the group's own, named as the group.
  std::string shared_limit;
  ThrottleConfig throttle;          // throttle: its `throttle` table
  std::vector<RateChange> changes;  // sorted by `at`
  /// A fleet of identical clients: the file's group with `clients = N` is read as N groups, each
  /// with its own limit and rate / N, named "<fleet>.<i>" (i from 1); empty for a single client.
  std::string fleet;
  int clients = 1;  // how many clients the fleet has
  int client = 0;   // this client's number in its fleet, from 1; 0 outside a fleet
  int origin = 0;   // the index of the file's group it comes from (a fleet's clients share it)

  double rate_at(Nanos t) const;
  /// The policy as a scenario names it: the limit's algorithm ("gradient2", "aimd", in the
  /// library's words), "bulkhead" or "none".
  std::string_view policy_name() const noexcept;
  bool has_limit() const noexcept { return policy != kNoPolicy; }
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
  /// The server `group` calls: its own copy when isolated (one per group of the file: a fleet's
  /// clients share theirs), else the shared one (index 0).
  int server_of(int group) const noexcept {
    return isolated ? groups[static_cast<std::size_t>(group)].origin : 0;
  }
  int server_count() const noexcept {
    return isolated && !groups.empty() ? groups.back().origin + 1 : 1;
  }
  /// The arrival stream of a group: isolated groups of the file share one (a like-for-like
  /// comparison), and so do the same-numbered clients of isolated fleets; otherwise each its own.
  std::uint64_t stream_of(int group) const noexcept {
    const GroupSpec& spec = groups[static_cast<std::size_t>(group)];
    if (isolated) return static_cast<std::uint64_t>(spec.client);
    return static_cast<std::uint64_t>(group);
  }
  /// The load offered to the server `group` calls at time t (calls per second).
  double load_on_server_of(int group, Nanos t) const;
};

/// Reads and checks a scenario file. Throws InputError listing every mistake, one per line, each
/// "FILE:LINE: ..." naming the key, the bad value and what is valid.
Scenario load_scenario(const std::filesystem::path& file);

/// The same, from TOML text; `source` names it in messages (as the file would).
Scenario parse_scenario(std::string_view text, std::string_view source);

}  // namespace r4c::sim
