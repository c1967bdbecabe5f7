// SPDX-License-Identifier: Apache-2.0
// What r4c-sim's scenario tests share: scratch folders, running the binary, reading CSV, and
// simulating a scenario given as TOML text.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "recorder.hpp"
#include "scenario.hpp"
#include "sim.hpp"

namespace r4c::sim::testing {

namespace fs = std::filesystem;

/// A folder of its own for each test, removed when the test ends.
class ScratchDir {
 public:
  /// `suffix` tells apart several folders of one test.
  explicit ScratchDir(const std::string& suffix = "") {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() / ("r4c_sim_test_" + std::to_string(::getpid()) + "_" +
                                         test->test_suite_name() + "_" + test->name() + suffix);
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }

  const fs::path& path() const { return path_; }

  fs::path write(const std::string& name, const std::string& content) const {
    const fs::path file = path_ / name;
    std::ofstream(file) << content;
    return file;
  }

 private:
  fs::path path_;
};

inline std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Single quotes for sh: nothing inside is special except the quote itself.
inline std::string shell_quote(std::string_view text) {
  std::string quoted = "'";
  for (const char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

struct ToolRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

/// Runs `r4c-sim <args>`, with `env` (e.g. "PATH=/nonexistent") before the command and
/// `stdin_file` (or /dev/null) as its standard input.
inline ToolRun run_binary(const std::vector<std::string>& args, const std::string& env = {},
                          const fs::path& stdin_file = {}) {
  const ScratchDir scratch("_run");
  const fs::path out = scratch.path() / "stdout";
  const fs::path err = scratch.path() / "stderr";
  std::string command = env.empty() ? "" : "env " + env + " ";
  command += shell_quote(R4C_SIM_PATH);
  // append: GCC 12 at -O3 warns falsely on "literal" + std::string&& (-Wstringop-overflow).
  for (const std::string& arg : args) command.append(" ").append(shell_quote(arg));
  command.append(" < ").append(shell_quote(stdin_file.empty() ? "/dev/null" : stdin_file.string()));
  command.append(" > ").append(shell_quote(out.string()));
  command.append(" 2> ").append(shell_quote(err.string()));
  const int status = std::system(command.c_str());
  ToolRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = read_text(out);
  run.err = read_text(err);
  return run;
}

inline std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t end; (end = text.find(separator, start)) != std::string_view::npos;
       start = end + 1) {
    parts.emplace_back(text.substr(start, end - start));
  }
  parts.emplace_back(text.substr(start));
  return parts;
}

/// A CSV file as rows of named fields; lines starting with '#' are skipped.
inline std::vector<std::map<std::string, std::string>> read_csv(const fs::path& file) {
  std::vector<std::map<std::string, std::string>> rows;
  std::istringstream lines(read_text(file));
  std::string line;
  std::vector<std::string> header;
  while (std::getline(lines, line)) {
    if (!line.empty() && line[0] == '#') continue;  // comments (windows-<group>.csv)
    const std::vector<std::string> fields = split(line, ',');
    if (header.empty()) {
      header = fields;
      continue;
    }
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < header.size() && i < fields.size(); ++i) row[header[i]] = fields[i];
    rows.push_back(std::move(row));
  }
  return rows;
}

/// Simulates a scenario given as TOML text; the scenario stays alive in `scenario`.
struct Simulated {
  Scenario scenario;
  Results results;
  SimStats stats;

  const GroupSummary& summary(std::string_view group) const {
    for (const GroupSummary& row : results.summary) {
      if (row.group == group) return row;
    }
    throw std::out_of_range("no group " + std::string(group));
  }
  /// The timeline rows of one group, in time order.
  std::vector<TimelineRow> rows(int group) const {
    std::vector<TimelineRow> own;
    for (const TimelineRow& row : results.timeline) {
      if (row.group == group) own.push_back(row);
    }
    return own;
  }
};

/// The start of a scenario's text: its duration, `isolated = true` when asked, and a server of
/// `workers` workers whose calls take `mean` drawn from `distribution`. Server keys and changes,
/// then groups (group_text), follow.
inline std::string server_text(std::string_view duration, int workers, std::string_view mean,
                               std::string_view distribution = "fixed", bool isolated = false) {
  std::string text = "duration = \"" + std::string(duration) + "\"\n";
  if (isolated) text += "isolated = true\n";
  text += "[server]\nworkers = " + std::to_string(workers) + "\n";
  return text + "service = { distribution = \"" + std::string(distribution) + "\", mean = \"" +
         std::string(mean) + "\" }\n";
}

/// A `[[groups]]` entry of a scenario's text; the group's other keys follow it.
inline std::string group_text(std::string_view name, int rate, std::string_view policy) {
  return "[[groups]]\nname = \"" + std::string(name) + "\"\nrate = " + std::to_string(rate) +
         "\npolicy = \"" + std::string(policy) + "\"\n";
}

/// A `[[server.changes]]` entry at `at`, with the keys it changes.
inline std::string server_change_text(std::string_view at, std::string_view keys) {
  return "[[server.changes]]\nat = \"" + std::string(at) + "\"\n" + std::string(keys);
}

inline Simulated simulate_text(const std::string& toml) {
  Simulated run;
  run.scenario = parse_scenario(toml, "test.toml");
  Recorder recorder(run.scenario);
  run.stats = simulate(run.scenario, recorder);
  run.results = recorder.finish();
  return run;
}

inline Simulated simulate_scenario(Scenario scenario) {
  Simulated run;
  run.scenario = std::move(scenario);
  Recorder recorder(run.scenario);
  run.stats = simulate(run.scenario, recorder);
  run.results = recorder.finish();
  return run;
}

}  // namespace r4c::sim::testing
