// SPDX-License-Identifier: Apache-2.0
#include "run.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <sstream>

#include "live.hpp"
#include "live_grpc.hpp"
#include "r4c/errors.hpp"
#include "recorder.hpp"
#include "scenario.hpp"
#include "sim.hpp"

namespace r4c::sim {
namespace {

// Prefixes every line of a (possibly multi-line) message with the command's name.
void report(std::ostream& err, std::string_view command, const std::string& message) {
  std::istringstream lines(message);
  std::string line;
  while (std::getline(lines, line)) err << "r4c-sim " << command << ": " << line << "\n";
}

std::string seconds(double s) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f s", s);
  return buffer;
}

// Runs `engine` on the scenario and writes everything; `engine` returns what to say about the
// run after the scenario's name.
int run_scenario(std::string_view command, const RunOptions& options, std::ostream& out,
                 std::ostream& err,
                 const std::function<std::string(const Scenario&, Recorder&)>& engine) {
  try {
    Scenario scenario = load_scenario(options.scenario);
    if (!options.seed.empty()) {
      std::uint64_t seed = 0;
      if (parse_number(options.seed, seed) != NumberStatus::kOk) {
        throw InputError("--seed is \"" + options.seed +
                         "\"; expected an integer from 0 to 18446744073709551615");
      }
      scenario.seed = seed;
    }
    const std::filesystem::path folder = options.out.empty()
                                             ? std::filesystem::path("r4c-sim-out") / scenario.name
                                             : std::filesystem::path(options.out);
    Recorder recorder(scenario);
    const std::string what = engine(scenario, recorder);
    const Results results = recorder.finish();
    write_outputs(scenario, results, folder);
    const bool plotted = options.plots && render_plots(folder);

    out << scenario.name << ": " << what << "\n\n";
    print_summary(results, out);
    out << "\nOutputs in " << folder.string() << "/: timeline.csv, summary.csv, settle.csv, ";
    bool any_windows = false;
    for (const GroupSpec& group : scenario.groups) {
      any_windows = any_windows || group.policy == kAdaptiveLimit;
    }
    if (any_windows) out << "windows-<group>.csv, ";
    out << "plots.gp";
    if (plotted) {
      out << ", limit.svg, latency.svg, goodput.svg\n";
    } else if (options.plots) {
      out << "\n(gnuplot was not found on PATH: no plots; install gnuplot-nox, then run "
             "`gnuplot plots.gp` in that folder)\n";
    } else {
      out << "\n";
    }
    out.flush();
    if (!out) {
      err << "r4c-sim " << command << ": cannot write to standard output\n";
      return kExitOutputFailed;
    }
    return kExitOk;
  } catch (const InputError& e) {
    report(err, command, e.what());
    return kExitBadInput;
  } catch (const ConfigException& e) {
    report(err, command, e.what());
    return kExitBadInput;
  } catch (const OutputError& e) {
    report(err, command, e.what());
    return kExitOutputFailed;
  }
}

}  // namespace

int run_simulated(const RunOptions& options, std::ostream& out, std::ostream& err) {
  return run_scenario("run", options, out, err, [](const Scenario& scenario, Recorder& recorder) {
    const auto started = std::chrono::steady_clock::now();
    const SimStats stats = simulate(scenario, recorder);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return seconds(std::chrono::duration<double>(scenario.duration).count()) + " simulated in " +
           seconds(wall) + " (" + std::to_string(stats.calls) + " calls offered, " +
           std::to_string(stats.events) + " events)";
  });
}

int run_live(const RunOptions& options, std::ostream& out, std::ostream& err) {
  return run_scenario(
      "live", options, out, err, [&options, &out](const Scenario& scenario, Recorder& recorder) {
        if (options.transport == LiveTransport::grpc && !live_grpc_available())
          throw InputError(
              "--transport grpc: this r4c-sim was built without gRPC (Debian: "
              "libgrpc++-dev protobuf-compiler-grpc)");
        const LiveStats stats =
            run_live_scenario(scenario, recorder, options.transport, options.watch);
        for (const std::string& line : stats.reconfigurations) {
          out << "r4c-sim live: reconfigured " << line << '\n';
        }
        const char* over = options.transport == LiveTransport::grpc ? " (gRPC)" : " (HTTP)";
        return seconds(stats.wall_s) + " live against 127.0.0.1:" + std::to_string(stats.port) +
               over + " (" + std::to_string(stats.calls) + " calls offered, " +
               std::to_string(stats.client_overflow) + " found no free client thread)";
      });
}

}  // namespace r4c::sim
