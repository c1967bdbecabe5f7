// SPDX-License-Identifier: Apache-2.0
// The recorder: turns what happened to each call (offered, rejected, answered with its latency,
// timed out) and periodic samples of each group's limit, calls in flight and server queue into
// the timeline (one row per group per 100 ms), the summary metrics, and the output folder
// (timeline.csv, summary.csv, settle.csv, windows-<group>.csv, plots.gp and, when gnuplot is
// found, the plots).
//
// Both engines feed it the same events: the simulated one in time order on one thread, the live
// one from many threads under its own lock (events may then arrive slightly out of order; each is
// filed by its own time stamp). Times are since the scenario's start.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "scenario.hpp"

namespace r4c::sim {

/// How an admitted call ended, as its client saw it.
enum class Outcome {
  success,  // the server answered in time: goodput
  timeout,  // the policy's timeout answered first (CallTimeoutException)
  error,    // any other failure (the server refused it: its queue was full; a broken connection)
};

/// The settle time after one change (or after the start, when the scenario has no change).
struct SettleRow {
  std::string group;
  Nanos change_at{0};
  int final_limit = 0;
  std::optional<double> settle_s;  // empty: the limit never stayed in the band for 10 s
};

/// One row of the summary: one group over the whole run.
struct GroupSummary {
  std::string group;
  std::string policy;    // as the scenario names it: GroupSpec::policy_name()
  double goodput = 0.0;  // successes / what the server could have completed (its capacity)
  std::optional<double> p50_ms;
  std::optional<double> p99_ms;
  double rejected = 0.0;  // share of offered calls the policy rejected
  bool has_limit = false;
  std::optional<double> settle_s;     // the longest settle time over the changes; empty: never
  std::optional<double> limit_error;  // empty: no limit, or the load never exceeded capacity
  std::int64_t offered = 0;
  std::int64_t succeeded = 0;
  std::int64_t rejected_calls = 0;
  std::int64_t timeouts = 0;
  std::int64_t errors = 0;
  std::int64_t unfinished = 0;  // admitted, still unanswered at the end
  std::optional<int> final_limit;
};

/// A fleet (a group with `clients = N`) over the whole run, all its clients together. "Settled"
/// is the second half of the run.
struct FleetSummary {
  std::string fleet;
  std::string policy;
  int clients = 0;
  double goodput = 0.0;  // the clients' successes / the server's capacity
  std::optional<double> p99_ms;
  double jain = 0.0;                // Jain's fairness index of the clients' successes, in (0, 1]
  double in_flight = 0.0;           // settled: mean of the clients' calls in flight, summed
  double above_workers = 0.0;       // settled: mean of max(0, aggregate in flight - workers)
  double queue = 0.0;               // settled: mean of the server's queue
  double in_flight_cv = 0.0;        // settled: coefficient of variation of the aggregate in flight
  double in_flight_cv_floor = 0.0;  // settled: the least cv clients that do not coordinate
                                    // could show with these means (in_flight_cv_floor())
};

/// One row of the timeline: one group during one interval (times are its end).
struct TimelineRow {
  Nanos end{0};
  int group = 0;
  int workers = 0;
  double capacity_per_s = 0.0;
  double offered_per_s = 0.0;
  std::optional<int> limit;
  int in_flight = 0;
  int queue = 0;
  std::optional<double> p50_ms;
  std::optional<double> p99_ms;
  double goodput_per_s = 0.0;
  double rejected_per_s = 0.0;
  double timeouts_per_s = 0.0;
  double errors_per_s = 0.0;
};

/// One window an adaptive limit recomputed: what it saw and where it put the limit. The same
/// columns as the replay input and the conformance traces, so `r4c-sim replay` can replay it.
struct WindowRow {
  Nanos at{0};  // when it closed
  std::int64_t avg_rtt_ns = 0;
  int max_in_flight = 0;
  bool dropped = false;
  int limit_after = 0;
};

/// One value of one r4c metric (r4c::metrics::collect) of a group's policies at the end of an
/// interval: the live mode's metrics timeline.
struct MetricRow {
  Nanos end{0};
  int group = 0;
  std::string name;    // the Prometheus name, e.g. r4c_adaptivelimit_limit
  std::string kind;    // the policy's kind label
  std::string labels;  // labels besides kind and name, as k=v joined by ';' (usually empty)
  double value = 0.0;
};

struct Results {
  std::vector<TimelineRow> timeline;            // by time, then by group
  std::vector<GroupSummary> summary;            // by group, in the scenario's order
  std::vector<SettleRow> settle;                // by group, then by change
  std::vector<std::vector<WindowRow>> windows;  // per group, in order; empty without a limit
  std::vector<std::int64_t> missed_windows;     // per group: windows closed unseen (live only)
  std::vector<MetricRow> metrics;               // by time, then by group (live only)
  std::vector<FleetSummary> fleets;             // in the scenario's order (fleet.csv)
};

/// The band and the hold of settle_s: within 25% of the final value for 10 s.
inline constexpr double kSettleBand = 0.25;
inline constexpr Nanos kSettleHold = std::chrono::seconds(10);

class Recorder {
 public:
  explicit Recorder(const Scenario& scenario);

  void offered(int group, Nanos at);
  void rejected(int group, Nanos at);
  /// An admitted call answered at `end`; its latency is end - start.
  void answered(int group, Nanos start, Nanos end, Outcome outcome);
  /// An admitted call still unanswered when the run ended at `end`: it counts in the summary's
  /// latency percentiles with the time it had waited (a lower bound), in no timeline row.
  void unfinished(int group, Nanos start, Nanos end);
  /// The group's state at `at`; `limit` empty for a group without one. The interval ending at or
  /// after `at` keeps the last sample given for it; an interval without one repeats the previous.
  void sample(int group, Nanos at, std::optional<int> limit, int in_flight, int queue);
  /// The group's policies' metrics at `at` (live mode), kept for the interval ending at or
  /// after `at` (the last given wins).
  void metrics(int group, Nanos at, std::vector<MetricRow> values);
  /// A window the group's adaptive limit recomputed; `missed` windows closed before it unseen.
  void window(int group, const WindowRow& row, std::int64_t missed = 0);

  Results finish() const;

 private:
  struct Bin {
    std::int64_t offered = 0;
    std::int64_t rejected = 0;
    std::int64_t succeeded = 0;
    std::int64_t timeouts = 0;
    std::int64_t errors = 0;
    std::vector<std::int64_t> latencies;  // ns, of calls answered in this interval
    bool sampled = false;
    std::optional<int> limit;
    int in_flight = 0;
    int queue = 0;
    std::vector<MetricRow> metrics;
  };
  struct Group {
    std::vector<Bin> bins;
    std::vector<std::int64_t> unfinished;  // ns waited by the end
    std::vector<WindowRow> windows;
    std::int64_t missed_windows = 0;
  };

  std::vector<FleetSummary> fleet_summaries(const Scenario& scenario,
                                            const std::vector<std::vector<TimelineRow>>& rows,
                                            const std::vector<GroupSummary>& summaries,
                                            double capacity_calls) const;
  std::size_t bin_of(Nanos at) const noexcept;      // the interval containing `at`
  std::size_t bin_ending(Nanos at) const noexcept;  // the interval ending at or after `at`

  const Scenario* scenario_;
  std::size_t bins_ = 0;
  std::vector<Group> groups_;
};

/// The nearest-rank percentile (p in (0, 1]) of `values`, which it reorders; empty for none.
std::optional<std::int64_t> percentile(std::vector<std::int64_t>& values, double p);

/// The least coefficient of variation of the summed in-flight counts of clients that do not
/// coordinate, whose means are `client_means`: a count is a whole number, so one of mean m
/// varies by at least f(1 - f), f the fraction of m (it takes only the two whole numbers beside
/// m), and the variances of independent clients add. 0 when the means sum to 0.
double in_flight_cv_floor(const std::vector<double>& client_means);

/// Writes timeline.csv, summary.csv, settle.csv, plots.gp and, for each group with an adaptive
/// limit, windows-<group>.csv into `folder` (created if needed).
/// Throws OutputError when a file cannot be written.
void write_outputs(const Scenario& scenario, const Results& results,
                   const std::filesystem::path& folder);

/// Runs gnuplot on plots.gp in `folder` when it is on PATH. Returns false when gnuplot is not
/// found (the CSV files are the outputs then); throws OutputError when gnuplot fails.
bool render_plots(const std::filesystem::path& folder);

/// The summary as an aligned text table, for the terminal.
void print_summary(const Results& results, std::ostream& out);

}  // namespace r4c::sim
