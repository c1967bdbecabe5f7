// SPDX-License-Identifier: Apache-2.0
#include "recorder.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common.hpp"

namespace r4c::sim {
namespace {

double to_ms(std::int64_t ns) { return static_cast<double>(ns) / 1e6; }
double to_s(Nanos t) { return std::chrono::duration<double>(t).count(); }

// Fixed decimals: the same text on every run and every machine.
std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}
template <class T>
std::string fixed(const std::optional<T>& value, int decimals) {
  return value ? fixed(static_cast<double>(*value), decimals) : std::string();
}
std::string integer(const std::optional<int>& value) {
  return value ? std::to_string(*value) : std::string();
}
}  // namespace

std::optional<std::int64_t> percentile(std::vector<std::int64_t>& values, double p) {
  if (values.empty()) return std::nullopt;
  const auto n = static_cast<double>(values.size());
  auto rank = static_cast<std::size_t>(std::ceil(p * n));
  rank = std::clamp<std::size_t>(rank, 1, values.size());
  auto nth = values.begin() + static_cast<std::ptrdiff_t>(rank - 1);
  std::nth_element(values.begin(), nth, values.end());
  return *nth;
}

Recorder::Recorder(const Scenario& scenario) : scenario_(&scenario) {
  const std::int64_t interval = scenario.interval.count();
  bins_ = static_cast<std::size_t>(
      std::max<std::int64_t>(1, (scenario.duration.count() + interval - 1) / interval));
  groups_.resize(scenario.groups.size());
  for (Group& group : groups_) group.bins.resize(bins_);
}

std::size_t Recorder::bin_of(Nanos at) const noexcept {
  if (at <= Nanos(0)) return 0;
  const auto index = static_cast<std::size_t>(at.count() / scenario_->interval.count());
  return std::min(index, bins_ - 1);
}

std::size_t Recorder::bin_ending(Nanos at) const noexcept {
  const std::int64_t interval = scenario_->interval.count();
  if (at.count() <= interval) return 0;
  const auto index = static_cast<std::size_t>((at.count() + interval - 1) / interval - 1);
  return std::min(index, bins_ - 1);
}

void Recorder::offered(int group, Nanos at) {
  ++groups_[static_cast<std::size_t>(group)].bins[bin_of(at)].offered;
}

void Recorder::rejected(int group, Nanos at) {
  ++groups_[static_cast<std::size_t>(group)].bins[bin_of(at)].rejected;
}

void Recorder::answered(int group, Nanos start, Nanos end, Outcome outcome) {
  Bin& bin = groups_[static_cast<std::size_t>(group)].bins[bin_of(end)];
  switch (outcome) {
    case Outcome::success:
      ++bin.succeeded;
      break;
    case Outcome::timeout:
      ++bin.timeouts;
      break;
    case Outcome::error:
      ++bin.errors;
      break;
  }
  bin.latencies.push_back((end - start).count());
}

void Recorder::unfinished(int group, Nanos start, Nanos end) {
  groups_[static_cast<std::size_t>(group)].unfinished.push_back((end - start).count());
}

void Recorder::sample(int group, Nanos at, std::optional<int> limit, int in_flight, int queue) {
  Bin& bin = groups_[static_cast<std::size_t>(group)].bins[bin_ending(at)];
  bin.sampled = true;
  bin.limit = limit;
  bin.in_flight = in_flight;
  bin.queue = queue;
}

void Recorder::metrics(int group, Nanos at, std::vector<MetricRow> values) {
  groups_[static_cast<std::size_t>(group)].bins[bin_ending(at)].metrics = std::move(values);
}

void Recorder::window(int group, const WindowRow& row, std::int64_t missed) {
  Group& g = groups_[static_cast<std::size_t>(group)];
  g.windows.push_back(row);
  g.missed_windows += missed;
}

Results Recorder::finish() const {
  const Scenario& scenario = *scenario_;
  const ServerSpec& server = scenario.server;
  const double interval_s = to_s(scenario.interval);
  Results results;

  auto bin_end = [&](std::size_t k) {
    return std::min(scenario.interval * static_cast<std::int64_t>(k + 1), scenario.duration);
  };

  // What the server could complete over the run: its capacity, integrated between changes.
  double capacity_calls = 0.0;
  {
    Nanos from{0};
    for (const ServerChange& change : server.changes) {
      if (change.at >= scenario.duration) break;
      capacity_calls += server.capacity_at(from) * to_s(change.at - from);
      from = change.at;
    }
    capacity_calls += server.capacity_at(from) * to_s(scenario.duration - from);
  }

  // Each group's rows with the carried-forward samples, kept for the summary.
  std::vector<std::vector<TimelineRow>> rows(groups_.size());
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const Group& group = groups_[g];
    Bin state;  // the last sample, carried into intervals without one
    for (std::size_t k = 0; k < bins_; ++k) {
      const Bin& bin = group.bins[k];
      if (bin.sampled) state = bin;
      TimelineRow row;
      row.end = bin_end(k);
      row.group = static_cast<int>(g);
      const ServerState server_state = server.state_at(row.end);
      row.workers = server_state.workers;
      row.capacity_per_s = server.capacity_at(row.end);
      row.offered_per_s = static_cast<double>(bin.offered) / interval_s;
      row.limit = state.limit;
      row.in_flight = state.in_flight;
      row.queue = state.queue;
      std::vector<std::int64_t> latencies = bin.latencies;
      if (auto p50 = percentile(latencies, 0.50)) row.p50_ms = to_ms(*p50);
      if (auto p99 = percentile(latencies, 0.99)) row.p99_ms = to_ms(*p99);
      row.goodput_per_s = static_cast<double>(bin.succeeded) / interval_s;
      row.rejected_per_s = static_cast<double>(bin.rejected) / interval_s;
      row.timeouts_per_s = static_cast<double>(bin.timeouts) / interval_s;
      row.errors_per_s = static_cast<double>(bin.errors) / interval_s;
      rows[g].push_back(row);
    }
  }
  for (std::size_t k = 0; k < bins_; ++k) {
    for (std::size_t g = 0; g < groups_.size(); ++g) results.timeline.push_back(rows[g][k]);
  }

  // The segments settle_s looks at: from each change to the next (from the start when there
  // is none).
  std::vector<Nanos> starts = scenario.change_times();
  starts.erase(
      std::remove_if(starts.begin(), starts.end(), [&](Nanos t) { return t >= scenario.duration; }),
      starts.end());
  if (starts.empty()) starts.push_back(Nanos(0));
  const auto hold_rows = static_cast<std::size_t>(kSettleHold / scenario.interval);

  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const GroupSpec& spec = scenario.groups[g];
    const Group& group = groups_[g];
    GroupSummary summary;
    summary.group = spec.name;
    summary.policy = spec.policy_name();
    summary.has_limit = spec.has_limit();
    std::vector<std::int64_t> latencies;
    for (const Bin& bin : group.bins) {
      summary.offered += bin.offered;
      summary.rejected_calls += bin.rejected;
      summary.succeeded += bin.succeeded;
      summary.timeouts += bin.timeouts;
      summary.errors += bin.errors;
      latencies.insert(latencies.end(), bin.latencies.begin(), bin.latencies.end());
    }
    latencies.insert(latencies.end(), group.unfinished.begin(), group.unfinished.end());
    summary.unfinished = static_cast<std::int64_t>(group.unfinished.size());
    summary.goodput =
        capacity_calls > 0.0 ? static_cast<double>(summary.succeeded) / capacity_calls : 0.0;
    if (auto p50 = percentile(latencies, 0.50)) summary.p50_ms = to_ms(*p50);
    if (auto p99 = percentile(latencies, 0.99)) summary.p99_ms = to_ms(*p99);
    summary.rejected = summary.offered > 0 ? static_cast<double>(summary.rejected_calls) /
                                                 static_cast<double>(summary.offered)
                                           : 0.0;
    const std::vector<TimelineRow>& own = rows[g];
    if (!own.empty()) summary.final_limit = own.back().limit;

    if (summary.has_limit) {
      // limit_error: while the load on the server exceeds its capacity, how far the limit is
      // from the workers (a shared server: from the group's share of them, by offered load).
      double error_sum = 0.0;
      std::int64_t error_rows = 0;
      for (const TimelineRow& row : own) {
        if (!row.limit) continue;
        const double load = scenario.load_on_server_of(static_cast<int>(g), row.end);
        if (!(load > row.capacity_per_s)) continue;
        const double share = load <= 0.0 ? 1.0 : spec.rate_at(row.end) / load;
        error_sum += std::abs(static_cast<double>(*row.limit) - row.workers * share);
        ++error_rows;
      }
      if (error_rows > 0) summary.limit_error = error_sum / static_cast<double>(error_rows);

      bool every_settled = true;
      double longest = 0.0;
      for (std::size_t s = 0; s < starts.size(); ++s) {
        const Nanos from = starts[s];
        const bool last = s + 1 == starts.size();
        const Nanos to = last ? scenario.duration : starts[s + 1];
        std::vector<const TimelineRow*> segment;
        for (const TimelineRow& row : own) {
          if (row.end >= from && (row.end < to || (last && row.end == to)) && row.limit) {
            segment.push_back(&row);
          }
        }
        if (segment.empty()) continue;
        SettleRow settle;
        settle.group = spec.name;
        settle.change_at = from;
        settle.final_limit = *segment.back()->limit;
        const double final_value = settle.final_limit;
        // run[i]: how many rows from i on stay within the band.
        std::vector<std::size_t> run(segment.size() + 1, 0);
        for (std::size_t i = segment.size(); i-- > 0;) {
          const bool inside =
              std::abs(*segment[i]->limit - final_value) <= kSettleBand * final_value;
          run[i] = inside ? run[i + 1] + 1 : 0;
        }
        for (std::size_t i = 0; i < segment.size(); ++i) {
          if (run[i] >= hold_rows + 1) {
            settle.settle_s = to_s(segment[i]->end - from);
            break;
          }
        }
        if (settle.settle_s) {
          longest = std::max(longest, *settle.settle_s);
        } else {
          every_settled = false;
        }
        results.settle.push_back(settle);
      }
      if (every_settled) summary.settle_s = longest;
    }
    results.summary.push_back(summary);
    results.windows.push_back(group.windows);
    results.missed_windows.push_back(group.missed_windows);
  }
  for (std::size_t k = 0; k < bins_; ++k) {
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      for (MetricRow row : groups_[g].bins[k].metrics) {
        row.end = bin_end(k);
        row.group = static_cast<int>(g);
        results.metrics.push_back(std::move(row));
      }
    }
  }
  results.fleets = fleet_summaries(scenario, rows, results.summary, capacity_calls);
  return results;
}

double in_flight_cv_floor(const std::vector<double>& client_means) {
  double mean = 0.0;
  double variance = 0.0;
  for (double m : client_means) {
    const double fraction = m - std::floor(m);
    mean += m;
    variance += fraction * (1.0 - fraction);
  }
  return mean > 0.0 ? std::sqrt(variance) / mean : 0.0;
}

std::vector<FleetSummary> Recorder::fleet_summaries(
    const Scenario& scenario, const std::vector<std::vector<TimelineRow>>& rows,
    const std::vector<GroupSummary>& summaries, double capacity_calls) const {
  std::vector<FleetSummary> fleets;
  for (std::size_t first = 0; first < scenario.groups.size();) {
    const std::string& name = scenario.groups[first].fleet;
    std::size_t end = first + 1;
    while (end < scenario.groups.size() && !name.empty() && scenario.groups[end].fleet == name) {
      ++end;
    }
    if (name.empty()) {
      first = end;
      continue;
    }
    FleetSummary fleet;
    fleet.fleet = name;
    fleet.policy = scenario.groups[first].policy_name();
    fleet.clients = static_cast<int>(end - first);
    double sum = 0.0;
    double squares = 0.0;
    std::int64_t succeeded = 0;
    std::vector<std::int64_t> latencies;
    for (std::size_t g = first; g < end; ++g) {
      const auto x = static_cast<double>(summaries[g].succeeded);
      sum += x;
      squares += x * x;
      succeeded += summaries[g].succeeded;
      for (const Bin& bin : groups_[g].bins) {
        latencies.insert(latencies.end(), bin.latencies.begin(), bin.latencies.end());
      }
    }
    fleet.goodput = capacity_calls > 0.0 ? static_cast<double>(succeeded) / capacity_calls : 0.0;
    fleet.jain = squares > 0.0 ? sum * sum / (static_cast<double>(fleet.clients) * squares) : 0.0;
    if (auto p99 = percentile(latencies, 0.99)) fleet.p99_ms = to_ms(*p99);
    double in_flight_sum = 0.0;
    double in_flight_squares = 0.0;
    double above = 0.0;
    double queue = 0.0;
    std::size_t count = 0;
    std::vector<double> client_means(end - first, 0.0);
    for (std::size_t k = bins_ / 2; k < bins_; ++k) {
      double total = 0.0;
      for (std::size_t g = first; g < end; ++g) {
        total += rows[g][k].in_flight;
        client_means[g - first] += rows[g][k].in_flight;
      }
      in_flight_sum += total;
      in_flight_squares += total * total;
      above += std::max(0.0, total - rows[first][k].workers);
      queue += rows[first][k].queue;
      ++count;
    }
    if (count > 0) {
      const auto n = static_cast<double>(count);
      fleet.in_flight = in_flight_sum / n;
      fleet.above_workers = above / n;
      fleet.queue = queue / n;
      const double variance =
          std::max(0.0, in_flight_squares / n - fleet.in_flight * fleet.in_flight);
      fleet.in_flight_cv = fleet.in_flight > 0.0 ? std::sqrt(variance) / fleet.in_flight : 0.0;
      for (double& mean : client_means) mean /= n;
      fleet.in_flight_cv_floor = in_flight_cv_floor(client_means);
    }
    fleets.push_back(fleet);
    first = end;
  }
  return fleets;
}

// ---- the output folder ---------------------------------------------------------------------

namespace {

void write_file(const std::filesystem::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw OutputError("cannot write \"" + file.string() + "\"");
}

std::string gnuplot_script(const Scenario& scenario) {
  std::ostringstream gp;
  gp << "# Written by r4c-sim for scenario " << scenario.name
     << ". Redraw the plots with: gnuplot plots.gp (in this folder)\n"
     << "set datafile separator \",\"\n"
     << "set terminal svg size 1000,520 dynamic noenhanced font \"sans,13\" background "
        "\"white\"\n"
     << "set key outside right top\n"
     << "set grid\n"
     << "set xlabel \"time (s)\"\n"
     << "set xrange [0:" << fixed(to_s(scenario.duration), 3) << "]\n";
  for (Nanos at : scenario.change_times()) {
    gp << "set arrow from " << fixed(to_s(at), 3) << ", graph 0 to " << fixed(to_s(at), 3)
       << ", graph 1 nohead dashtype 3 linecolor \"gray40\"\n";
  }
  // Columns of timeline.csv, from 1: t_s group workers capacity_per_s offered_per_s limit
  // in_flight queue p50_ms p99_ms goodput_per_s rejected_per_s timeouts_per_s errors_per_s
  // Rows come by time, then by group: every G-th row from the group's own is its series.
  const std::size_t count = scenario.groups.size();
  auto rows_of = [&](std::size_t g) {
    return "\"timeline.csv\" skip 1 every " + std::to_string(count) + "::" + std::to_string(g);
  };
  auto series = [&](std::size_t g, int column, const std::string& style) {
    return rows_of(g) + " using 1:" + std::to_string(column) + " " + style + " title \"" +
           scenario.groups[g].name + "\"";
  };
  const std::string server_title =
      scenario.isolated ? "server workers (each copy)" : "server workers";

  gp << "\nset output \"limit.svg\"\n"
     << "set title \"" << scenario.name << ": each group's limit and the server's workers\"\n"
     << "set ylabel \"limit (calls at once)\"\n"
     << "set yrange [0:*]\n"
     << "plot ";
  for (std::size_t g = 0; g < count; ++g) {
    if (!scenario.groups[g].has_limit()) continue;
    gp << series(g, 6, "with lines linewidth 2") << ", \\\n     ";
  }
  gp << rows_of(0) << " using 1:3 with steps linewidth 2 dashtype 2 linecolor \"black\" title \""
     << server_title << "\"\n";

  gp << "\nset output \"latency.svg\"\n"
     << "set title \"" << scenario.name << ": p99 latency of the calls answered in each 100 ms\"\n"
     << "set ylabel \"p99 latency (ms, log scale)\"\n"
     << "set logscale y\n"
     << "set yrange [*:*]\n"
     << "plot ";
  for (std::size_t g = 0; g < count; ++g) {
    if (g > 0) gp << ", \\\n     ";
    gp << series(g, 10, "with lines linewidth 2");
  }
  gp << "\nunset logscale y\n";

  gp << "\nset output \"goodput.svg\"\n"
     << "set title \"" << scenario.name
     << ": calls answered in time per second, and the server's capacity\"\n"
     << "set ylabel \"calls per second\"\n"
     << "set yrange [0:*]\n"
     << "plot ";
  for (std::size_t g = 0; g < count; ++g) {
    gp << series(g, 11, "with lines linewidth 1.5") << ", \\\n     ";
  }
  gp << rows_of(0)
     << " using 1:4 with steps linewidth 2 dashtype 2 linecolor \"black\" title \"server "
        "capacity\"\n";
  return gp.str();
}

// The windows an adaptive limit recomputed, as a replay input (docs/r4c-sim.md): comment lines
// with the command that replays it, then window,end_s,avg_rtt_ns,max_in_flight,dropped,
// limit_after (the conformance traces' columns, plus when each window closed).
std::string windows_csv(const Scenario& scenario, const GroupSpec& group,
                        const std::vector<WindowRow>& windows, std::int64_t missed) {
  const AdaptiveLimitConfig& c = group.limit;
  std::string text = "# r4c-sim: the windows of group " + group.name + " in scenario " +
                     scenario.name + "; limit_after is the limit after each window.\n";
  text += "# Replay them (with these settings, or others to compare):\n";
  text += "#   r4c-sim replay --input windows-" + group.name + ".csv --algorithm " +
          std::string(to_string(c.algorithm())) + " --initial-limit " +
          std::to_string(c.initial_limit()) + " --min-limit " + std::to_string(c.min_limit()) +
          " --max-limit " + std::to_string(c.max_limit());
  if (c.algorithm() == LimitAlgorithm::gradient2) {
    text += " --smoothing " + shortest(c.smoothing()) + " --rtt-tolerance " +
            shortest(c.rtt_tolerance()) + " --long-window " + std::to_string(c.long_window()) +
            " --queue-size " + std::to_string(c.queue_size());
  } else {
    text += " --backoff-ratio " + shortest(c.backoff_ratio());
  }
  text += "\nwindow,end_s,avg_rtt_ns,max_in_flight,dropped,limit_after\n";
  std::size_t index = 0;
  for (const WindowRow& row : windows) {
    text += std::to_string(++index) + "," + fixed(to_s(row.at), 3) + "," +
            std::to_string(row.avg_rtt_ns) + "," + std::to_string(row.max_in_flight) + "," +
            (row.dropped ? "1" : "0") + "," + std::to_string(row.limit_after) + "\n";
  }
  if (missed > 0) {
    text += "# " + std::to_string(missed) +
            " more windows closed while another call was being recorded (live mode) and are "
            "not listed\n";
  }
  return text;
}

}  // namespace

void write_outputs(const Scenario& scenario, const Results& results,
                   const std::filesystem::path& folder) {
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (error) {
    throw OutputError("cannot create the output folder \"" + folder.string() +
                      "\": " + error.message());
  }

  std::string timeline =
      "t_s,group,workers,capacity_per_s,offered_per_s,limit,in_flight,queue,p50_ms,p99_ms,"
      "goodput_per_s,rejected_per_s,timeouts_per_s,errors_per_s\n";
  for (const TimelineRow& row : results.timeline) {
    timeline += fixed(to_s(row.end), 3) + "," +
                scenario.groups[static_cast<std::size_t>(row.group)].name + "," +
                std::to_string(row.workers) + "," + fixed(row.capacity_per_s, 1) + "," +
                fixed(row.offered_per_s, 1) + "," + integer(row.limit) + "," +
                std::to_string(row.in_flight) + "," + std::to_string(row.queue) + "," +
                fixed(row.p50_ms, 3) + "," + fixed(row.p99_ms, 3) + "," +
                fixed(row.goodput_per_s, 1) + "," + fixed(row.rejected_per_s, 1) + "," +
                fixed(row.timeouts_per_s, 1) + "," + fixed(row.errors_per_s, 1) + "\n";
  }
  write_file(folder / "timeline.csv", timeline);

  std::string summary =
      "group,goodput,p50_ms,p99_ms,rejected,settle_s,limit_error,policy,offered,succeeded,"
      "timeouts,errors,unfinished,final_limit\n";
  for (const GroupSummary& row : results.summary) {
    summary += row.group + "," + fixed(row.goodput, 4) + "," + fixed(row.p50_ms, 3) + "," +
               fixed(row.p99_ms, 3) + "," + fixed(row.rejected, 4) + "," + fixed(row.settle_s, 1) +
               "," + fixed(row.limit_error, 2) + "," + row.policy + "," +
               std::to_string(row.offered) + "," + std::to_string(row.succeeded) + "," +
               std::to_string(row.timeouts) + "," + std::to_string(row.errors) + "," +
               std::to_string(row.unfinished) + "," + integer(row.final_limit) + "\n";
  }
  write_file(folder / "summary.csv", summary);

  if (!results.metrics.empty()) {
    // The metrics a Prometheus scrape of the run would have seen, every interval.
    std::string metrics = "t_s,group,metric,kind,labels,value\n";
    for (const MetricRow& row : results.metrics) {
      char value[32];
      const auto [end, error] = std::to_chars(value, value + sizeof value, row.value);
      metrics += fixed(to_s(row.end), 3) + "," +
                 scenario.groups[static_cast<std::size_t>(row.group)].name + "," + row.name + "," +
                 row.kind + "," + row.labels + "," +
                 std::string(value, error == std::errc() ? end : value) + "\n";
    }
    write_file(folder / "metrics.csv", metrics);
  }

  if (!results.fleets.empty()) {
    std::string fleets =
        "fleet,policy,clients,goodput,p99_ms,jain,in_flight,above_workers,queue,in_flight_cv,"
        "in_flight_cv_floor\n";
    for (const FleetSummary& row : results.fleets) {
      fleets += row.fleet + "," + row.policy + "," + std::to_string(row.clients) + "," +
                fixed(row.goodput, 4) + "," + fixed(row.p99_ms, 3) + "," + fixed(row.jain, 4) +
                "," + fixed(row.in_flight, 2) + "," + fixed(row.above_workers, 2) + "," +
                fixed(row.queue, 2) + "," + fixed(row.in_flight_cv, 4) + "," +
                fixed(row.in_flight_cv_floor, 4) + "\n";
    }
    write_file(folder / "fleet.csv", fleets);
  }

  std::string settle = "group,change_at_s,final_limit,settle_s\n";
  for (const SettleRow& row : results.settle) {
    settle += row.group + "," + fixed(to_s(row.change_at), 3) + "," +
              std::to_string(row.final_limit) + "," + fixed(row.settle_s, 1) + "\n";
  }
  write_file(folder / "settle.csv", settle);

  for (std::size_t g = 0; g < scenario.groups.size(); ++g) {
    const GroupSpec& spec = scenario.groups[g];
    if (spec.policy != kAdaptiveLimit) continue;
    const bool recorded = g < results.windows.size();
    write_file(folder / ("windows-" + spec.name + ".csv"),
               windows_csv(scenario, spec, recorded ? results.windows[g] : std::vector<WindowRow>{},
                           recorded ? results.missed_windows[g] : 0));
  }

  write_file(folder / "plots.gp", gnuplot_script(scenario));
}

bool render_plots(const std::filesystem::path& folder) {
  const char* path = std::getenv("PATH");
  std::string found;
  if (path != nullptr) {
    std::string_view rest(path);
    while (found.empty()) {
      const std::size_t colon = rest.find(':');
      std::string dir(rest.substr(0, colon));
      if (dir.empty()) dir = ".";
      const std::string candidate = dir + "/gnuplot";
      if (::access(candidate.c_str(), X_OK) == 0) found = candidate;
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  if (found.empty()) return false;

  const std::string dir = folder.string();
  const pid_t child = ::fork();
  if (child < 0) throw OutputError(std::string("cannot start gnuplot: ") + std::strerror(errno));
  if (child == 0) {
    // Only async-signal-safe calls between fork and exec.
    if (::chdir(dir.c_str()) != 0) ::_exit(126);
    const char* argv[] = {found.c_str(), "plots.gp", nullptr};
    ::execv(found.c_str(), const_cast<char* const*>(argv));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) throw OutputError("cannot wait for gnuplot");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw OutputError("gnuplot failed on \"" + (folder / "plots.gp").string() + "\" (status " +
                      std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")");
  }
  return true;
}

void print_summary(const Results& results, std::ostream& out) {
  const std::vector<std::string> header = {"group",  "policy",   "goodput",  "p50 ms",
                                           "p99 ms", "rejected", "settle s", "limit error"};
  std::vector<std::vector<std::string>> table;
  table.push_back(header);
  for (const GroupSummary& row : results.summary) {
    std::string settle = "-";
    if (row.has_limit) settle = row.settle_s ? fixed(*row.settle_s, 1) : "never";
    std::string error = "-";
    if (row.limit_error) error = fixed(*row.limit_error, 2);
    table.push_back(
        {row.group, row.policy, fixed(row.goodput, 3), row.p50_ms ? fixed(*row.p50_ms, 1) : "-",
         row.p99_ms ? fixed(*row.p99_ms, 1) : "-", fixed(row.rejected, 3), settle, error});
  }
  std::vector<std::size_t> width(header.size(), 0);
  for (const auto& line : table) {
    for (std::size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], line[c].size());
  }
  for (const auto& line : table) {
    std::string text;
    for (std::size_t c = 0; c < line.size(); ++c) {
      const std::size_t pad = width[c] - line[c].size();
      if (c < 2) {  // names to the left, numbers to the right
        text += line[c] + std::string(pad, ' ');
      } else {
        text += std::string(pad, ' ') + line[c];
      }
      if (c + 1 < line.size()) text += "  ";
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out << text << "\n";
  }
  for (const FleetSummary& fleet : results.fleets) {
    out << "fleet " << fleet.fleet << " (" << fleet.policy << ", " << fleet.clients
        << " clients): goodput " << fixed(fleet.goodput, 3) << ", p99 "
        << (fleet.p99_ms ? fixed(*fleet.p99_ms, 1) : "-") << " ms, Jain " << fixed(fleet.jain, 3)
        << ", in flight " << fixed(fleet.in_flight, 1) << " (cv " << fixed(fleet.in_flight_cv, 3)
        << ", least for clients that do not coordinate " << fixed(fleet.in_flight_cv_floor, 3)
        << "), above workers " << fixed(fleet.above_workers, 1) << ", queue "
        << fixed(fleet.queue, 1) << "\n";
  }
}

}  // namespace r4c::sim
