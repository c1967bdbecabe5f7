// SPDX-License-Identifier: Apache-2.0
// r4c-sim replay: the reference traces and the mistakes run through the real binary, as a user
// runs it; the CSV parsing is also tested directly.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "r4c/adaptive_limit.hpp"
#include "replay.hpp"
#include "sim_test_support.hpp"

namespace {

namespace testing_support = r4c::sim::testing;

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// ---- running the binary --------------------------------------------------------------------

using testing_support::read_text;
using testing_support::ScratchDir;
using testing_support::split;
using testing_support::ToolRun;

// Runs `r4c-sim replay <args>` with `stdin_file` (or /dev/null) as standard input.
ToolRun run_replay_binary(const std::vector<std::string>& args, const fs::path& stdin_file = {}) {
  std::vector<std::string> command{"replay"};
  command.insert(command.end(), args.begin(), args.end());
  return testing_support::run_binary(command, "", stdin_file);
}

// Runs `r4c-sim replay <args> --input <a file holding csv>`.
ToolRun replay_csv(const std::string& csv, std::vector<std::string> args = {}) {
  const ScratchDir scratch("_csv");
  args.push_back("--input");
  args.push_back(scratch.write("in.csv", csv).string());
  return run_replay_binary(args);
}

// ---- the conformance traces ----------------------------------------------------------------

// A reference trace: the r4c-sim options its comment line names, and its limit_after column.
struct Trace {
  std::vector<std::string> options;
  std::vector<int> limits;
};

Trace read_trace(const fs::path& file) {
  // A trace names settings by their file key; the option is the setting's name, dashed.
  auto option_of_key = [](const std::string& key) -> std::optional<std::string> {
    const auto* setting = r4c::detail::find_setting(r4c::AdaptiveLimitKind::settings(), key);
    if (setting == nullptr || setting->key != key) return std::nullopt;  // name, seed, windows
    std::string option = "--" + std::string(setting->name);
    std::replace(option.begin(), option.end(), '_', '-');
    return option;
  };
  Trace trace;
  std::ifstream in(file);
  std::string line;
  std::size_t limit_column = std::string::npos;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.front() == '#') {
      std::istringstream words(line.substr(1));
      for (std::string word; words >> word;) {
        const std::size_t equals = word.find('=');
        if (equals == std::string::npos) continue;
        const std::optional<std::string> option = option_of_key(word.substr(0, equals));
        if (!option) continue;
        trace.options.push_back(*option);
        trace.options.push_back(word.substr(equals + 1));
      }
    } else if (limit_column == std::string::npos) {
      const std::vector<std::string> header = split(line, ',');
      limit_column = static_cast<std::size_t>(
          std::find(header.begin(), header.end(), "limit_after") - header.begin());
    } else {
      trace.limits.push_back(std::stoi(split(line, ',').at(limit_column)));
    }
  }
  return trace;
}

std::vector<fs::path> conformance_traces() {
  std::vector<fs::path> traces;
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(R4C_CONFORMANCE_DIR)) {
    if (entry.path().extension() == ".csv") traces.push_back(entry.path());
  }
  std::sort(traces.begin(), traces.end());
  return traces;
}

// Checks that `out` is the header, then rows numbered from 1 with the reference limits.
void expect_limits(const std::string& out, const std::vector<int>& reference) {
  std::vector<std::string> lines = split(out, '\n');
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back(), "") << "the output should end with a newline";
  lines.pop_back();
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.front(), "window,limit");
  ASSERT_EQ(lines.size() - 1, reference.size()) << "one row per window";
  for (std::size_t i = 0; i < reference.size(); ++i) {
    const std::string expected = std::to_string(i + 1) + "," + std::to_string(reference[i]);
    if (lines[i + 1] != expected) {
      ADD_FAILURE() << "row " << i + 1 << " is \"" << lines[i + 1] << "\"; the reference is \""
                    << expected << "\" (later rows not compared)";
      return;
    }
  }
}

TEST(ReplayConformanceTest, ReproducesTheReferenceLimitsOfEveryTrace) {
  // The traces are part of the repository: their absence fails rather than passes unchecked.
  ASSERT_TRUE(fs::is_directory(R4C_CONFORMANCE_DIR))
      << "the conformance folder " << R4C_CONFORMANCE_DIR << " is missing";
  const std::vector<fs::path> traces = conformance_traces();
  ASSERT_FALSE(traces.empty()) << "no *.csv traces in " << R4C_CONFORMANCE_DIR;
  for (const fs::path& file : traces) {
    SCOPED_TRACE(file.string());
    const Trace trace = read_trace(file);
    ASSERT_FALSE(trace.limits.empty());
    std::vector<std::string> args = {"--input", file.string()};
    args.insert(args.end(), trace.options.begin(), trace.options.end());
    const ToolRun run = run_replay_binary(args);
    EXPECT_EQ(run.exit_code, 0);
    EXPECT_EQ(run.err, "");
    expect_limits(run.out, trace.limits);
  }
}

TEST(ReplayConformanceTest, ReadsATraceFromStandardInput) {
  // The traces are part of the repository: their absence fails rather than passes unchecked.
  ASSERT_TRUE(fs::is_directory(R4C_CONFORMANCE_DIR))
      << "the conformance folder " << R4C_CONFORMANCE_DIR << " is missing";
  const std::vector<fs::path> traces = conformance_traces();
  ASSERT_FALSE(traces.empty()) << "no *.csv traces in " << R4C_CONFORMANCE_DIR;
  const fs::path& file = traces.back();
  SCOPED_TRACE(file.string());
  const Trace trace = read_trace(file);
  const ToolRun run = run_replay_binary(trace.options, file);
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.err, "");
  expect_limits(run.out, trace.limits);
}

// ---- mistakes, through the binary ----------------------------------------------------------

constexpr std::string_view kHeader = "avg_rtt_ns,max_in_flight,dropped\n";

TEST(ReplayErrorTest, RejectsAHeaderWithoutTheDroppedColumn) {
  const ToolRun run = replay_csv("avg_rtt_ns,max_in_flight\n1000,5\n");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.out, "");
  EXPECT_THAT(run.err, StartsWith("r4c-sim replay: line 1: the header has no dropped column; "
                                  "expected at least avg_rtt_ns,max_in_flight,dropped"));
}

TEST(ReplayErrorTest, RejectsALatencyThatIsNotANumberNamingLineColumnValueAndWhatIsValid) {
  std::string csv(kHeader);
  for (int i = 0; i < 5; ++i) csv += "1000,5,0\n";
  csv += "12x,5,0\n";  // line 7
  const ToolRun run = replay_csv(csv);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err,
            "r4c-sim replay: line 7: avg_rtt_ns is \"12x\"; expected a non-negative integer "
            "(nanoseconds)\n");
}

TEST(ReplayErrorTest, RejectsANegativeLatency) {
  const ToolRun run = replay_csv(std::string(kHeader) + "-5,5,0\n");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err,
            "r4c-sim replay: line 2: avg_rtt_ns is \"-5\"; expected a non-negative integer "
            "(nanoseconds)\n");
}

TEST(ReplayErrorTest, CountsCommentAndBlankLinesInTheLineNumberOfABadRow) {
  const std::string csv = "# recorded on host a\n\n# settings: defaults\n" + std::string(kHeader) +
                          "1000,5,0\n\n1000,five,0\n";  // the bad row is line 7
  const ToolRun run = replay_csv(csv);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err,
            "r4c-sim replay: line 7: max_in_flight is \"five\"; expected a non-negative integer "
            "(calls in flight)\n");
}

TEST(ReplayErrorTest, RejectsSmoothingZeroWithTheLibrarysCode) {
  const ToolRun run = run_replay_binary({"--smoothing", "0"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.out, "");
  EXPECT_THAT(run.err, StartsWith("r4c-sim replay: R4C-REG-001: smoothing"));
}

TEST(ReplayErrorTest, RejectsAnInitialLimitOfZeroWithTheLibrarysCode) {
  const ToolRun run = run_replay_binary({"--initial-limit", "0"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, StartsWith("r4c-sim replay: R4C-ATR-003: initial_limit"));
}

TEST(ReplayErrorTest, RejectsAMinimumLimitAboveTheInitialLimitWithTheLibrarysCode) {
  const ToolRun run = run_replay_binary({"--min-limit", "30"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, StartsWith("r4c-sim replay: R4C-ATR-009: min_limit"));
  EXPECT_THAT(run.err, HasSubstr("initial_limit"));
}

TEST(ReplayErrorTest, RejectsAnUnknownAlgorithm) {
  const ToolRun run = run_replay_binary({"--algorithm", "bbr"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err,
            "r4c-sim replay: --algorithm is \"bbr\"; expected gradient2, aimd, vegas or "
            "delay_target\n");
}

TEST(ReplayErrorTest, RejectsAJitterOutsideZeroToOne) {
  const ToolRun run = replay_csv("avg_rtt_ns,max_in_flight,dropped,jitter_after\n1000,5,0,1.5\n",
                                 {"--algorithm", "vegas"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("line 2: jitter_after is \"1.5\"; expected a number in [0, 1]"));
}

TEST(ReplayErrorTest, RejectsAnOptionValueThatIsNotANumber) {
  const ToolRun run = run_replay_binary({"--queue-size", "4x"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err, "r4c-sim replay: --queue-size is \"4x\"; expected an integer\n");
}

TEST(ReplayErrorTest, RejectsANegativeQueueSizeWithTheLibrarysCode) {
  const ToolRun run = run_replay_binary({"--queue-size", "-1"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, StartsWith("r4c-sim replay: R4C-REG-001: queue_size"));
}

TEST(ReplayErrorTest, ReportsAMissingInputFileWithItsPath) {
  const ScratchDir scratch;
  const fs::path missing = scratch.path() / "no-such-trace.csv";
  const ToolRun run = run_replay_binary({"--input", missing.string()});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err, "r4c-sim replay: cannot open --input \"" + missing.string() +
                         "\": No such file or directory\n");
}

TEST(ReplayErrorTest, RejectsAnUnknownOptionWithExitCodeTwo) {
  const ToolRun run = run_replay_binary({"--speed", "3"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--speed"));
}

// ---- the parsing, directly -----------------------------------------------------------------

std::vector<r4c::detail::WindowAggregate> parse(const std::string& csv) {
  std::istringstream in(csv);
  return r4c::sim::parse_windows(in);
}

// The message of the InputError that parsing `csv` throws, or "" when it throws none.
std::string parse_error(const std::string& csv) {
  try {
    parse(csv);
  } catch (const r4c::sim::InputError& error) {
    return error.what();
  }
  return "";
}

void expect_window(const r4c::detail::WindowAggregate& window, std::int64_t latency_ns,
                   int in_flight, bool dropped) {
  EXPECT_EQ(window.avg_latency_ns, latency_ns);
  EXPECT_EQ(window.max_in_flight, in_flight);
  EXPECT_EQ(window.dropped, dropped);
}

TEST(ParseWindowsTest, FindsTheColumnsInAnyOrder) {
  const auto windows = parse("dropped,max_in_flight,avg_rtt_ns\n1,7,1500\n0,9,2500\n");
  ASSERT_EQ(windows.size(), 2u);
  expect_window(windows[0], 1500, 7, true);
  expect_window(windows[1], 2500, 9, false);
}

TEST(ParseWindowsTest, IgnoresExtraColumnsWhateverTheyHold) {
  const auto windows =
      parse("window,avg_rtt_ns,note,max_in_flight,dropped,limit_after\n0,1500,slow?,7,0,x\n");
  ASSERT_EQ(windows.size(), 1u);
  expect_window(windows[0], 1500, 7, false);
}

TEST(ParseWindowsTest, SkipsCommentAndBlankLinesBeforeAndAfterTheHeader) {
  const auto windows = parse(
      "# algorithm=aimd\n\n   \n# more\navg_rtt_ns,max_in_flight,dropped\n# mid\n\n"
      "1500,7,0\n  # indented comment\n\t\n2500,9,1\n\n");
  ASSERT_EQ(windows.size(), 2u);
  expect_window(windows[0], 1500, 7, false);
  expect_window(windows[1], 2500, 9, true);
}

TEST(ParseWindowsTest, AcceptsTrueAndFalseForDropped) {
  const auto windows = parse(std::string(kHeader) + "1500,7,true\n1500,7,false\n");
  ASSERT_EQ(windows.size(), 2u);
  EXPECT_TRUE(windows[0].dropped);
  EXPECT_FALSE(windows[1].dropped);
}

TEST(ParseWindowsTest, AcceptsCarriageReturnLineEndings) {
  const auto windows = parse("avg_rtt_ns,max_in_flight,dropped\r\n1500,7,1\r\n");
  ASSERT_EQ(windows.size(), 1u);
  expect_window(windows[0], 1500, 7, true);
}

TEST(ParseWindowsTest, AcceptsAZeroLatency) {
  const auto windows = parse(std::string(kHeader) + "0,7,0\n");
  ASSERT_EQ(windows.size(), 1u);
  expect_window(windows[0], 0, 7, false);
}

TEST(ParseWindowsTest, ReadsAHeaderWithoutRowsAsNoWindows) {
  EXPECT_TRUE(parse(std::string(kHeader)).empty());
}

// A bad row after kHeader: each case its rows and the message each gets.
struct BadRows {
  const char* name;
  std::vector<std::pair<std::string, std::string>> rows;
};

class ParseWindowsRowTest : public ::testing::TestWithParam<BadRows> {};

TEST_P(ParseWindowsRowTest, RejectsTheRowNamingItsLineFieldAndWhatIsValid) {
  for (const auto& [row, message] : GetParam().rows) {
    EXPECT_EQ(parse_error(std::string(kHeader) + row), message) << row;
  }
}

const std::string kNanoseconds = "; expected a non-negative integer (nanoseconds)";
const std::string kCallsInFlight = "; expected a non-negative integer (calls in flight)";
const std::string kDropped = "; expected 0, 1, false or true";

INSTANTIATE_TEST_SUITE_P(
    Rejects, ParseWindowsRowTest,
    ::testing::Values(
        BadRows{"AnEmptyField", {{",7,0\n", "line 2: avg_rtt_ns is empty" + kNanoseconds}}},
        BadRows{"AnythingAfterTheNumber",
                {{"1500 ,7,0\n", "line 2: avg_rtt_ns is \"1500 \"" + kNanoseconds},
                 {"1500.5,7,0\n", "line 2: avg_rtt_ns is \"1500.5\"" + kNanoseconds},
                 {"1500,7e1,0\n", "line 2: max_in_flight is \"7e1\"" + kCallsInFlight}}},
        BadRows{"ANegativeMaxInFlight",
                {{"1500,-1,0\n", "line 2: max_in_flight is \"-1\"" + kCallsInFlight}}},
        BadRows{"ALatencyBeyondSixtyFourBits",
                {{"9223372036854775808,7,0\n", "line 2: avg_rtt_ns is \"9223372036854775808\"" +
                                                   kNanoseconds +
                                                   " no greater than 9223372036854775807"}}},
        BadRows{"ADroppedValueOtherThanZeroOneFalseOrTrue",
                {{"1500,7,2\n", "line 2: dropped is \"2\"" + kDropped},
                 {"1500,7,yes\n", "line 2: dropped is \"yes\"" + kDropped}}},
        BadRows{"ARowWithTooFewFields",
                {{"1500,7\n", "line 2: the row has 2 fields; expected 3, one per header column"}}}),
    [](const ::testing::TestParamInfo<BadRows>& info) { return std::string(info.param.name); });

TEST(ParseWindowsTest, RejectsAnInputWithoutAHeader) {
  EXPECT_EQ(parse_error("# only a comment\n\n"),
            "the input has no header row; expected a line naming at least "
            "avg_rtt_ns,max_in_flight,dropped");
}

TEST(ParseWindowsTest, RejectsAColumnNamedTwice) {
  EXPECT_EQ(parse_error("avg_rtt_ns,max_in_flight,dropped,avg_rtt_ns\n"),
            "line 1: the header names avg_rtt_ns twice; expected each column once");
}

TEST(ParseWindowsTest, HintsAtSpacesAroundAHeaderName) {
  EXPECT_THAT(parse_error("avg_rtt_ns, max_in_flight,dropped\n"),
              HasSubstr("found \" max_in_flight\", but fields must not have spaces around them"));
}

// ---- the whole replay, directly ------------------------------------------------------------

// What run_replay did with an input: its exit code, both outputs, how far it read the input.
struct DirectRun : ToolRun {
  std::streamoff read = 0;
};

// Runs r4c::sim::run_replay on `input`, in this process.
DirectRun replay_directly(const r4c::sim::ReplayOptions& options, const std::string& input) {
  std::istringstream in(input);
  std::ostringstream out;
  std::ostringstream err;
  DirectRun run;
  run.exit_code = r4c::sim::run_replay(options, in, out, err);
  run.out = out.str();
  run.err = err.str();
  run.read = in.tellg();
  return run;
}

TEST(RunReplayTest, NumbersWindowsFromOneAndPrintsTheLimitAfterEach) {
  r4c::sim::ReplayOptions options;
  options.settings.algorithm = "aimd";
  // AIMD from 20: busy window +1 -> 21; drop -> trunc(21 * 0.9) = 18; idle window -> 18.
  const DirectRun run =
      replay_directly(options, std::string(kHeader) + "1000,20,0\n1000,21,1\n1000,1,0\n");
  EXPECT_EQ(run.exit_code, r4c::sim::kExitOk);
  EXPECT_EQ(run.out, "window,limit\n1,21\n2,18\n3,18\n");
  EXPECT_EQ(run.err, "");
}

TEST(RunReplayTest, WritesNothingToStandardOutputWhenALaterRowIsBad) {
  r4c::sim::ReplayOptions options;
  const DirectRun run =
      replay_directly(options, std::string(kHeader) + "1000,20,0\n1000,20,0\n1000,20,maybe\n");
  EXPECT_EQ(run.exit_code, r4c::sim::kExitBadInput);
  EXPECT_EQ(run.out, "");
  EXPECT_THAT(run.err, StartsWith("r4c-sim replay: line 4: dropped is \"maybe\""));
}

TEST(RunReplayTest, RejectsInvalidSettingsBeforeReadingTheInput) {
  r4c::sim::ReplayOptions options;
  options.settings.backoff_ratio = "1";
  const DirectRun run = replay_directly(options, std::string(kHeader) + "1000,20,0\n");
  EXPECT_EQ(run.exit_code, r4c::sim::kExitBadInput);
  EXPECT_THAT(run.err, StartsWith("r4c-sim replay: R4C-REG-001: backoff_ratio"));
  EXPECT_EQ(run.read, 0) << "the input should not have been read";
}

TEST(RunReplayTest, PrintsOnlyTheHeaderForAnInputWithoutWindows) {
  r4c::sim::ReplayOptions options;
  const DirectRun run = replay_directly(options, std::string(kHeader));
  EXPECT_EQ(run.exit_code, r4c::sim::kExitOk);
  EXPECT_EQ(run.out, "window,limit\n");
}

TEST(LimitSettingsTest, DefaultsToTheLibrarysDefaults) {
  const r4c::sim::LimitSettings settings;
  EXPECT_EQ(settings.algorithm, "gradient2");
  EXPECT_EQ(settings.initial_limit, "20");
  EXPECT_EQ(settings.min_limit, "1");
  EXPECT_EQ(settings.max_limit, "200");
  EXPECT_EQ(settings.smoothing, "");  // the algorithm's own: 0.2 for gradient2, 1.0 for vegas
  EXPECT_EQ(settings.probe_multiplier, "30");
  EXPECT_EQ(settings.alpha, "0");
  EXPECT_EQ(settings.beta, "0");
  EXPECT_EQ(settings.rtt_tolerance, "1.5");
  EXPECT_EQ(settings.long_window, "600");
  EXPECT_EQ(settings.queue_size, "4");
  EXPECT_EQ(settings.backoff_ratio, "0.9");
}

}  // namespace
