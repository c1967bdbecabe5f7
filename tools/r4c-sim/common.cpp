#include "common.hpp"

#include <array>
#include <limits>

namespace r4c::sim {
namespace {

// The shortest text that reads back as `value` ("0.2", not std::to_string's "0.200000").
std::string shortest(double value) {
  std::array<char, 32> buffer{};
  const auto result = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  return std::string(buffer.data(), result.ptr);
}

[[noreturn]] void reject(std::string_view option, std::string_view text, std::string_view valid) {
  throw InputError(std::string(option) + " is \"" + std::string(text) + "\"; expected " +
                   std::string(valid));
}

// Any int passes here, negative ones too: the library's setters judge the range, with its codes.
int to_int(std::string_view option, std::string_view text) {
  int value = 0;
  switch (parse_number(text, value)) {
    case NumberStatus::kOk:
      return value;
    case NumberStatus::kOutOfRange:
      reject(option, text,
             "an integer from " + std::to_string(std::numeric_limits<int>::min()) + " to " +
                 std::to_string(std::numeric_limits<int>::max()));
    case NumberStatus::kInvalid:
      break;
  }
  reject(option, text, "an integer");
}

double to_double(std::string_view option, std::string_view text) {
  double value = 0.0;
  switch (parse_number(text, value)) {
    case NumberStatus::kOk:
      return value;
    case NumberStatus::kOutOfRange:
      reject(option, text, "a number within the range of a double");
    case NumberStatus::kInvalid:
      break;
  }
  reject(option, text, "a number such as 0.5");
}

LimitAlgorithm to_algorithm(std::string_view text) {
  if (text == to_string(LimitAlgorithm::gradient2)) return LimitAlgorithm::gradient2;
  if (text == to_string(LimitAlgorithm::aimd)) return LimitAlgorithm::aimd;
  reject("--algorithm", text, "gradient2 or aimd");
}

}  // namespace

LimitSettings::LimitSettings()
    : algorithm(to_string(AdaptiveLimitConfig::kDefaultAlgorithm)),
      initial_limit(std::to_string(AdaptiveLimitConfig::kDefaultInitialLimit)),
      min_limit(std::to_string(AdaptiveLimitConfig::kDefaultMinLimit)),
      max_limit(std::to_string(AdaptiveLimitConfig::kDefaultMaxLimit)),
      smoothing(shortest(AdaptiveLimitConfig::kDefaultSmoothing)),
      rtt_tolerance(shortest(AdaptiveLimitConfig::kDefaultRttTolerance)),
      long_window(std::to_string(AdaptiveLimitConfig::kDefaultLongWindow)),
      queue_size(std::to_string(AdaptiveLimitConfig::kDefaultQueueSize)),
      backoff_ratio(shortest(AdaptiveLimitConfig::kDefaultBackoffRatio)) {}

AdaptiveLimitConfig make_config(const LimitSettings& settings) {
  AdaptiveLimitConfig config;
  config.algorithm(to_algorithm(settings.algorithm))
      .initial_limit(to_int("--initial-limit", settings.initial_limit))
      .min_limit(to_int("--min-limit", settings.min_limit))
      .max_limit(to_int("--max-limit", settings.max_limit))
      .smoothing(to_double("--smoothing", settings.smoothing))
      .rtt_tolerance(to_double("--rtt-tolerance", settings.rtt_tolerance))
      .long_window(to_int("--long-window", settings.long_window))
      .queue_size(to_int("--queue-size", settings.queue_size))
      .backoff_ratio(to_double("--backoff-ratio", settings.backoff_ratio));
  config.validate();
  return config;
}

}  // namespace r4c::sim
