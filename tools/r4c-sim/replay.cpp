// SPDX-License-Identifier: Apache-2.0
#include "replay.hpp"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string_view>

#include "r4c/errors.hpp"

namespace r4c::sim {
namespace {

constexpr std::string_view kCommand = "r4c-sim replay: ";
constexpr std::string_view kLatencyColumn = "avg_rtt_ns";
constexpr std::string_view kInFlightColumn = "max_in_flight";
constexpr std::string_view kDroppedColumn = "dropped";
constexpr std::string_view kJitterColumn = "jitter_after";
constexpr std::string_view kInitialJitterKey = "initialJitter=";
constexpr std::string_view kRequiredColumns = "avg_rtt_ns,max_in_flight,dropped";

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = line.find(',', start);
    if (comma == std::string_view::npos) {
      fields.push_back(line.substr(start));
      return fields;
    }
    fields.push_back(line.substr(start, comma - start));
    start = comma + 1;
  }
}

std::string_view trim(std::string_view text) {
  const std::size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

// Where the columns the replay needs sit in a row, and how many fields every row must have.
struct Columns {
  std::size_t latency;
  std::size_t in_flight;
  std::size_t dropped;
  std::optional<std::size_t> jitter;
  std::size_t count;
};

std::size_t find_column(const std::vector<std::string_view>& header, std::string_view name,
                        const std::string& where) {
  std::optional<std::size_t> found;
  std::optional<std::size_t> padded;  // the name with spaces around it: worth a hint
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) {
      if (found) {
        throw InputError(where + "the header names " + std::string(name) +
                         " twice; expected each column once");
      }
      found = i;
    } else if (trim(header[i]) == name) {
      padded = i;
    }
  }
  if (found) return *found;
  std::string message = where + "the header has no " + std::string(name) +
                        " column; expected at least " + std::string(kRequiredColumns) +
                        " (any order, other columns ignored)";
  if (padded) {
    message += "; found \"" + std::string(header[*padded]) +
               "\", but fields must not have spaces around them";
  }
  throw InputError(message);
}

Columns parse_header(std::string_view line, const std::string& where) {
  const std::vector<std::string_view> header = split_fields(line);
  std::optional<std::size_t> jitter;
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (header[i] == kJitterColumn) jitter = i;
  }
  return Columns{find_column(header, kLatencyColumn, where),
                 find_column(header, kInFlightColumn, where),
                 find_column(header, kDroppedColumn, where), jitter, header.size()};
}

[[noreturn]] void reject(const std::string& where, std::string_view column, std::string_view text,
                         std::string_view valid) {
  std::string message = where + std::string(column);
  if (text.empty()) {
    message += " is empty";
  } else {
    message += " is \"" + std::string(text) + "\"";
  }
  throw InputError(message + "; expected " + std::string(valid));
}

// A non-negative integer of type T; `what` says what it counts, e.g. "(nanoseconds)".
template <class T>
T parse_count(const std::string& where, std::string_view column, std::string_view text,
              std::string_view what) {
  T value = 0;
  const NumberStatus status = parse_number(text, value);
  if (status == NumberStatus::kOk && value >= 0) return value;
  std::string valid = "a non-negative integer " + std::string(what);
  if (status == NumberStatus::kOutOfRange) {
    valid += " no greater than " + std::to_string(std::numeric_limits<T>::max());
  }
  reject(where, column, text, valid);
}

bool parse_dropped(const std::string& where, std::string_view text) {
  if (text == "0" || text == "false") return false;
  if (text == "1" || text == "true") return true;
  reject(where, kDroppedColumn, text, "0, 1, false or true");
}

double parse_jitter(const std::string& where, std::string_view column, std::string_view text) {
  double value = 0.0;
  if (parse_number(text, value) == NumberStatus::kOk && value >= 0.0 && value <= 1.0) return value;
  reject(where, column, text, "a number in [0, 1] (a probe jitter, Java's Double.toString)");
}

void parse_row(std::string_view line, const Columns& columns, const std::string& where,
               Recording& recording) {
  const std::vector<std::string_view> fields = split_fields(line);
  if (fields.size() != columns.count) {
    throw InputError(where + "the row has " + std::to_string(fields.size()) + " fields; expected " +
                     std::to_string(columns.count) + ", one per header column");
  }
  if (columns.jitter) {
    recording.jitter_after.push_back(parse_jitter(where, kJitterColumn, fields[*columns.jitter]));
  }
  recording.windows.push_back(detail::WindowAggregate{
      parse_count<std::int64_t>(where, kLatencyColumn, fields[columns.latency], "(nanoseconds)"),
      parse_count<int>(where, kInFlightColumn, fields[columns.in_flight], "(calls in flight)"),
      parse_dropped(where, fields[columns.dropped])});
}

// "# ... initialJitter=0.89 ...": the jitter VegasLimit drew at construction.
void parse_comment(std::string_view content, const std::string& where, Recording& recording) {
  const std::size_t at = content.find(kInitialJitterKey);
  if (at == std::string_view::npos) return;
  std::string_view value = content.substr(at + kInitialJitterKey.size());
  value = value.substr(0, value.find_first_of(" \t"));
  recording.initial_jitter = parse_jitter(where, "initialJitter", value);
}

void replay(AdaptiveLimitConfig config, const Recording& recording, std::ostream& out) {
  const std::vector<detail::WindowAggregate>& windows = recording.windows;
  // VEGAS draws its probe jitters from the recording when it has them: the first at
  // construction, then the jitter_after of the row being replayed. Without them the limit's own
  // source, seeded with 1 so that a replay is reproducible.
  std::size_t row = 0;
  bool constructed = false;
  if (config.algorithm() == LimitAlgorithm::vegas && config.random_seed() == 0) {
    config.random_seed(1);
  }
  if (recording.initial_jitter && !recording.jitter_after.empty()) {
    config.probe_jitter([&]() {
      if (!constructed) {
        constructed = true;
        return *recording.initial_jitter;
      }
      return recording.jitter_after[std::min(row, recording.jitter_after.size() - 1)];
    });
  }
  // Built whole first, so a failed write is noticed once and no partial table looks complete.
  std::string table = "window,limit\n";
  detail::LimitEstimator estimator(config);
  for (std::size_t i = 0; i < windows.size(); ++i) {
    row = i;
    table += std::to_string(i + 1);
    table += ',';
    table += std::to_string(estimator.update(windows[i]));
    table += '\n';
  }
  out << table << std::flush;
}

}  // namespace

std::vector<detail::WindowAggregate> parse_windows(std::istream& in) {
  return parse_recording(in).windows;
}

Recording parse_recording(std::istream& in) {
  Recording recording;
  std::optional<Columns> columns;
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    std::string_view text = line;
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);  // CRLF files
    const std::string_view content = trim(text);
    if (content.empty()) continue;
    const std::string where = "line " + std::to_string(number) + ": ";
    if (content.front() == '#') {
      parse_comment(content, where, recording);
    } else if (!columns) {
      columns = parse_header(text, where);
    } else {
      parse_row(text, *columns, where, recording);
    }
  }
  if (in.bad()) throw InputError("could not read the input");
  if (!columns) {
    throw InputError("the input has no header row; expected a line naming at least " +
                     std::string(kRequiredColumns));
  }
  return recording;
}

int run_replay(const ReplayOptions& options, std::istream& in, std::ostream& out,
               std::ostream& err) {
  try {
    // Settings first: a bad option fails at once, before the input is read.
    const AdaptiveLimitConfig config = make_config(options.settings);
    Recording recording;
    if (options.input.empty() || options.input == "-") {
      recording = parse_recording(in);
    } else {
      std::error_code ignored;
      if (std::filesystem::is_directory(options.input, ignored)) {
        throw InputError("cannot read --input \"" + options.input + "\": it is a directory");
      }
      std::ifstream file(options.input);
      if (!file) {
        throw InputError("cannot open --input \"" + options.input + "\": " + std::strerror(errno));
      }
      recording = parse_recording(file);
    }
    replay(config, recording, out);
  } catch (const InputError& error) {
    err << kCommand << error.what() << '\n';
    return kExitBadInput;
  } catch (const ConfigException& error) {
    err << kCommand << error.what() << '\n';
    return kExitBadInput;
  }
  if (!out) {
    err << kCommand << "could not write the output\n";
    return kExitOutputFailed;
  }
  return kExitOk;
}

}  // namespace r4c::sim
