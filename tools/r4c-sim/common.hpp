// SPDX-License-Identifier: Apache-2.0
// What every r4c-sim subcommand shares: exit codes, the adaptive limit's settings as typed on the
// command line, and strict parsing of numbers.
//
// Settings stay text until make_config() so that a bad value is reported the same way by every
// subcommand: text that is no number here, a number the library rejects with its own R4C code.
#pragma once

#include <charconv>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

#include "r4c/adaptive_limit_config.hpp"

namespace r4c::sim {

/// The process exit codes, the same for every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitOutputFailed =
    1;                                   // standard output or an output file could not be written
inline constexpr int kExitBadInput = 2;  // bad arguments, settings or input data

/// A mistake in the arguments or the input. The message names the culprit, its value and what
/// would be valid; the caller prefixes it with the command's name.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Outputs that could not be written (a file, the output folder, gnuplot failing).
class OutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// How parsing a number went.
enum class NumberStatus { kOk, kInvalid, kOutOfRange };

/// Parses all of `text` as a T with std::from_chars: no spaces, no '+', nothing after the
/// number, and an empty text is invalid. Writes `value` only when it returns kOk.
template <class T>
NumberStatus parse_number(std::string_view text, T& value) noexcept {
  T parsed{};
  const char* const end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, parsed);
  if (stop != end || error == std::errc::invalid_argument) return NumberStatus::kInvalid;
  if (error == std::errc::result_out_of_range) return NumberStatus::kOutOfRange;
  value = parsed;
  return NumberStatus::kOk;
}

/// The shortest text that reads back as `value` ("0.2", not std::to_string's "0.200000").
std::string shortest(double value);

/// The adaptive limit's settings as given on the command line, defaults filled in from
/// AdaptiveLimitConfig's constants.
struct LimitSettings {
  LimitSettings();

  std::string algorithm;
  std::string initial_limit;
  std::string min_limit;
  std::string max_limit;
  std::string smoothing;
  std::string rtt_tolerance;
  std::string long_window;
  std::string queue_size;
  std::string backoff_ratio;
  std::string probe_multiplier;
  std::string alpha;
  std::string beta;
};

/// Empty text (smoothing's default) leaves the setting to the algorithm's own default.
/// Builds a config through AdaptiveLimitConfig's setters and validate(), so invalid settings get
/// the library's R4C codes. Throws InputError for text that is not a value of the option's type
/// (naming the option, e.g. "--smoothing"), ConfigException for a value the library rejects.
AdaptiveLimitConfig make_config(const LimitSettings& settings);

}  // namespace r4c::sim
