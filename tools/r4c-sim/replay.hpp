// SPDX-License-Identifier: Apache-2.0
// r4c-sim replay: feeds recorded windows, one CSV row each, to the library's own limit algorithm
// (detail::LimitEstimator) and prints the limit after each window. For tuning settings against
// recorded traffic and for checking the rules against the reference traces (docs/r4c-sim.md).
//
// The work lives here rather than in main.cpp so that tests can call it without a process.
#pragma once

#include <istream>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "common.hpp"
#include "r4c/detail/limit_algorithms.hpp"

namespace r4c::sim {

/// The replay subcommand's arguments.
struct ReplayOptions {
  LimitSettings settings;
  std::string input;  // the CSV file to read; empty or "-" reads the stream given to run_replay
};

/// Reads a replay CSV: `#` comment lines and blank lines are skipped, the first other line is the
/// header (it must name avg_rtt_ns, max_in_flight and dropped, in any order, among any other
/// columns), then one row per window. Throws InputError whose message starts with
/// "line N: " (N counts every physical line from 1) and names the column, the bad value and
/// what is valid.
std::vector<detail::WindowAggregate> parse_windows(std::istream& in);

/// What a recording holds: its windows and, for VEGAS, the probe jitters Netflix drew
/// (tests/conformance/README.md): `initialJitter=` on a `#` line, a `jitter_after` column.
struct Recording {
  std::vector<detail::WindowAggregate> windows;
  std::optional<double> initial_jitter;
  std::vector<double> jitter_after;  // one per window, or empty when the column is absent
};

/// parse_windows, keeping the jitters too. A bad jitter is an InputError like a bad row.
Recording parse_recording(std::istream& in);

/// Replays the CSV in `options.input` (or `in`) with `options.settings` and writes
/// "window,limit" rows to `out`. On a mistake writes one "r4c-sim replay: ..." line to `err`,
/// nothing to `out`, and returns kExitBadInput; kExitOk on success.
int run_replay(const ReplayOptions& options, std::istream& in, std::ostream& out,
               std::ostream& err);

}  // namespace r4c::sim
