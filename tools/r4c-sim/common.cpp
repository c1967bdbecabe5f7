// SPDX-License-Identifier: Apache-2.0
#include "common.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <utility>

#include "r4c/adaptive_limit.hpp"

namespace r4c::sim {

std::string shortest(double value) {
  std::array<char, 32> buffer{};
  const auto result = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  return std::string(buffer.data(), result.ptr);
}

LimitSettings::LimitSettings()
    : algorithm(to_string(AdaptiveLimitConfig::kDefaultAlgorithm)),
      initial_limit(std::to_string(AdaptiveLimitConfig::kDefaultInitialLimit)),
      min_limit(std::to_string(AdaptiveLimitConfig::kDefaultMinLimit)),
      max_limit(std::to_string(AdaptiveLimitConfig::kDefaultMaxLimit)),
      // Empty: the algorithm's own (gradient2 0.2, vegas 1.0).
      rtt_tolerance(shortest(AdaptiveLimitConfig::kDefaultRttTolerance)),
      long_window(std::to_string(AdaptiveLimitConfig::kDefaultLongWindow)),
      queue_size(std::to_string(AdaptiveLimitConfig::kDefaultQueueSize)),
      backoff_ratio(shortest(AdaptiveLimitConfig::kDefaultBackoffRatio)),
      probe_multiplier(std::to_string(AdaptiveLimitConfig::kDefaultProbeMultiplier)),
      alpha("0"),
      beta("0") {}

AdaptiveLimitConfig make_config(const LimitSettings& settings) {
  // Each option sets the adaptive limit's setting of the same name, dashed (--initial-limit is
  // initial_limit): the library's vocabulary parses it and the setting's own setter applies it.
  const std::pair<std::string_view, const std::string*> options[] = {
      {"algorithm", &settings.algorithm},
      {"initial_limit", &settings.initial_limit},
      {"min_limit", &settings.min_limit},
      {"max_limit", &settings.max_limit},
      {"smoothing", &settings.smoothing},
      {"rtt_tolerance", &settings.rtt_tolerance},
      {"long_window", &settings.long_window},
      {"queue_size", &settings.queue_size},
      {"backoff_ratio", &settings.backoff_ratio},
      {"probe_multiplier", &settings.probe_multiplier},
      {"alpha", &settings.alpha},
      {"beta", &settings.beta}};
  AdaptiveLimitConfig config;
  for (const auto& [name, text] : options) {
    if (name == "smoothing" && text->empty()) continue;
    const auto* setting = detail::find_setting(AdaptiveLimitKind::settings(), name);
    std::string option = "--" + std::string(name);
    std::replace(option.begin(), option.end(), '_', '-');
    const std::optional<detail::SettingValue> value =
        setting != nullptr ? detail::parse(*setting, *text) : std::nullopt;
    if (!value) {
      throw InputError(option + " is \"" + *text + "\"; expected " +
                       (setting != nullptr ? detail::expected(*setting) : "no value"));
    }
    setting->apply(config, *value);
  }
  config.validate();
  return config;
}

}  // namespace r4c::sim
