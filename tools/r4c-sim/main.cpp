// SPDX-License-Identifier: Apache-2.0
// r4c-sim: runs r4c's adaptive limit outside a service. This file only declares the command line
// with CLI11; each subcommand's work lives in its own file (replay.cpp, run.cpp), where tests
// reach it.
//
// To add a subcommand: write add_<name>(app, action) beside add_replay and call it from main.
#include <CLI/CLI.hpp>

#include <functional>
#include <iostream>
#include <map>
#include <memory>

#include "common.hpp"
#include "replay.hpp"
#include "run.hpp"

namespace {

// The chosen subcommand's work. Its CLI11 callback sets it once the whole command line has
// parsed, so main runs nothing for a command line that turns out to be wrong.
using Action = std::function<int()>;

// Options are kept as text; make_config() checks them, so every subcommand reports a bad value
// the same way and invalid settings get the library's R4C codes.
void add_limit_options(CLI::App& command, r4c::sim::LimitSettings& settings) {
  using r4c::sim::LimitSettings;
  struct LimitOption {
    const char* name;
    std::string LimitSettings::*value;
    const char* type;
    const char* help;
  };
  static constexpr LimitOption kOptions[] = {
      {"--algorithm", &LimitSettings::algorithm, "NAME", "gradient2, aimd, vegas or delay_target"},
      {"--initial-limit", &LimitSettings::initial_limit, "INT", "Where the limit starts"},
      {"--min-limit", &LimitSettings::min_limit, "INT", "The limit never goes below this"},
      {"--max-limit", &LimitSettings::max_limit, "INT", "The limit never goes above this"},
      {"--smoothing", &LimitSettings::smoothing, "REAL",
       "gradient2, vegas: share of the new estimate taken per window, in (0, 1] "
       "(default: the algorithm's, 0.2 or 1.0)"},
      {"--rtt-tolerance", &LimitSettings::rtt_tolerance, "REAL",
       "gradient2: how many times the long-term latency a window may take and still "
       "grow, >= 1"},
      {"--long-window", &LimitSettings::long_window, "INT",
       "gradient2: windows in the long-term latency average, >= 1"},
      {"--queue-size", &LimitSettings::queue_size, "INT",
       "gradient2: headroom added per window, >= 0"},
      {"--backoff-ratio", &LimitSettings::backoff_ratio, "REAL",
       "aimd: factor applied to the limit after a window with a drop, in (0, 1)"},
      {"--probe-multiplier", &LimitSettings::probe_multiplier, "INT",
       "vegas: probe for the no-load latency every jitter x this x limit windows, >= 1"},
      {"--alpha", &LimitSettings::alpha, "INT",
       "vegas: a constant alpha; 0 keeps Netflix's 3 x log10root(limit)"},
      {"--beta", &LimitSettings::beta, "INT",
       "vegas: a constant beta; 0 keeps Netflix's 6 x log10root(limit)"},
  };
  for (const LimitOption& option : kOptions) {
    command.add_option(option.name, settings.*option.value, option.help)
        ->type_name(option.type)
        ->capture_default_str();
  }
}

void add_replay(CLI::App& app, Action& action) {
  // Shared with the callback, which outlives this function.
  auto options = std::make_shared<r4c::sim::ReplayOptions>();
  CLI::App* replay = app.add_subcommand(
      "replay",
      "Replay recorded windows (CSV with avg_rtt_ns,max_in_flight,dropped) through the limit "
      "algorithm and print window,limit");
  replay->add_option("--input", options->input, "CSV file to read; stdin when absent or -")
      ->type_name("FILE");
  add_limit_options(*replay, options->settings);
  replay->callback([options, &action] {
    action = [options] { return r4c::sim::run_replay(*options, std::cin, std::cout, std::cerr); };
  });
}

// run and live share their arguments: the scenario file, the output folder, plots or not.
void add_scenario_command(CLI::App& app, Action& action, const std::string& name,
                          const std::string& description,
                          int (*work)(const r4c::sim::RunOptions&, std::ostream&, std::ostream&)) {
  auto options = std::make_shared<r4c::sim::RunOptions>();
  CLI::App* command = app.add_subcommand(name, description);
  command->add_option("scenario", options->scenario, "The scenario file (TOML)")
      ->type_name("SCENARIO.toml")
      ->required();
  command
      ->add_option("--out", options->out,
                   "Folder for timeline.csv, summary.csv, settle.csv, plots.gp and the plots "
                   "(default r4c-sim-out/<scenario name>)")
      ->type_name("DIR");
  command->add_option("--seed", options->seed, "Replaces the scenario's seed")->type_name("INT");
  command->add_flag("!--no-plots", options->plots,
                    "Write the CSV files and plots.gp only; do not run gnuplot");
  if (name == "live") {
    const std::map<std::string, r4c::sim::LiveTransport> transports{
        {"http", r4c::sim::LiveTransport::http}, {"grpc", r4c::sim::LiveTransport::grpc}};
    command
        ->add_option("--transport", options->transport,
                     "How the calls travel: http (cpp-httplib) or grpc (r4c's echo service)")
        ->transform(CLI::CheckedTransformer(transports))
        ->type_name("http|grpc")
        ->default_str("http");
    command
        ->add_option("--watch", options->watch,
                     "An r4c configuration file (e.g. instances.<group>.adaptiveLimit.maxLimit = "
                     "5) applied at the start and again whenever it changes during the run: the "
                     "limit goes on from where it was")
        ->type_name("FILE");
  }
  command->callback([options, &action, work] {
    action = [options, work] { return work(*options, std::cout, std::cerr); };
  });
}

}  // namespace

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  CLI::App app("Runs r4c's adaptive limit outside a service.", "r4c-sim");
  app.require_subcommand(1);
  Action action;
  add_replay(app, action);
  add_scenario_command(app, action, "run",
                       "Simulate a scenario (deterministic, on a manual clock): clients calling a "
                       "server through r4c; writes the timeline, the summary and plots",
                       r4c::sim::run_simulated);
  add_scenario_command(
      app, action, "live",
      "Run a scenario for real: an HTTP (or gRPC) server on 127.0.0.1 and client threads "
      "calling it through r4c in real time; same outputs as run",
      r4c::sim::run_live);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // CLI11 gives each kind of mistake its own code (100 and up); r4c-sim uses 2 for all of them.
    return app.exit(error) == 0 ? r4c::sim::kExitOk : r4c::sim::kExitBadInput;
  }
  return action();
}
