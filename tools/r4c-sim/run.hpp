// SPDX-License-Identifier: Apache-2.0
// r4c-sim run and r4c-sim live: read a scenario, run it (simulated, or for real over sockets),
// write the outputs and print the summary. The work lives here rather than in main.cpp so that
// tests can call it without a process.
#pragma once

#include <ostream>
#include <string>

#include "common.hpp"
#include "live.hpp"

namespace r4c::sim {

/// The run and live subcommands' arguments.
struct RunOptions {
  std::string scenario;  // the TOML file
  std::string out;       // the output folder; empty: r4c-sim-out/<scenario name>
  bool plots = true;     // run gnuplot when it is on PATH
  std::string seed;      // replaces the scenario's seed when not empty
  LiveTransport transport = LiveTransport::http;  // live only: how the calls travel
  std::string watch;  // live only: a configuration file applied, and reapplied when it changes
};

/// Simulates the scenario (`r4c-sim run`). Prints the summary table and where the outputs are
/// to `out`; on a mistake one or more "r4c-sim run: ..." lines to `err` and returns
/// kExitBadInput; kExitOutputFailed when the outputs cannot be written.
int run_simulated(const RunOptions& options, std::ostream& out, std::ostream& err);

/// Runs the scenario for real (`r4c-sim live`): an HTTP (or gRPC: options.transport) server on
/// 127.0.0.1 and client threads calling it through r4c with the SystemClock. Same outputs and exit
/// codes as run_simulated.
int run_live(const RunOptions& options, std::ostream& out, std::ostream& err);

}  // namespace r4c::sim
