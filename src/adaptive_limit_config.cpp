// SPDX-License-Identifier: Apache-2.0
#include "r4c/adaptive_limit_config.hpp"

#include "config_check.hpp"

#include <charconv>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

namespace r4c {

// Found by DifferenceFinder through argument-dependent lookup (config_check.hpp knows only the
// kind-independent types).
static std::string show(LimitAlgorithm value) { return std::string(to_string(value)); }
static std::string show(QueueOrder value) { return std::string(to_string(value)); }
static std::string show(PolicyMode value) { return std::string(to_string(value)); }
// "user:0.6,prefetch:0.3", as the file writes them.
static std::string show(const std::vector<LimitPartitionShare>& partitions) {
  std::string text;
  for (const LimitPartitionShare& partition : partitions)
    text += (text.empty() ? "" : ",") + partition.name + ":" + detail::show(partition.share);
  return text.empty() ? "none" : text;
}

namespace {

// asio::error::timed_out: standalone Asio reports system errors in its own category
// ("asio.system"), whose codes have no generic equivalents, so std::errc alone misses them.
bool is_timed_out(const std::error_code& code) {
  if (code == std::errc::timed_out) return true;
  return code.value() == static_cast<int>(std::errc::timed_out) &&
         std::string_view(code.category().name()) == "asio.system";
}

using detail::fail;
using detail::kBoundsOrRange;
using detail::kInvalidValue;
using detail::kLimitBelowOne;
using detail::show;

void check_limit(std::string_view setting, int value) {
  if (value < 1) fail(kLimitBelowOne, setting, show(value), "an integer >= 1");
}

void check_window(std::chrono::nanoseconds value) {
  if (value < AdaptiveLimitConfig::kMinWindow || value > AdaptiveLimitConfig::kMaxWindow) {
    fail(kBoundsOrRange, "window", show(value), "1 ms .. 1 h (1000000 .. 3600000000000 ns)");
  }
}

void check_algorithm(LimitAlgorithm value) {
  if (value != LimitAlgorithm::gradient2 && value != LimitAlgorithm::aimd &&
      value != LimitAlgorithm::vegas && value != LimitAlgorithm::delay_target) {
    fail(kInvalidValue, "algorithm", show(static_cast<int>(value)),
         "gradient2, aimd, vegas, delay_target");
  }
}

void check_min_window_samples(int value) {
  if (value < 1) fail(kInvalidValue, "min_window_samples", show(value), "an integer >= 1");
}

void check_smoothing(double value) {
  // Written so that NaN fails too.
  if (!(value > 0.0 && value <= 1.0)) fail(kInvalidValue, "smoothing", show(value), "(0, 1]");
}

void check_long_window(int value) {
  if (value < 1) fail(kInvalidValue, "long_window", show(value), "an integer >= 1");
}

void check_queue_size(int value) {
  if (value < 0) fail(kInvalidValue, "queue_size", show(value), "an integer >= 0");
}

void check_backoff_ratio(double value) {
  if (!(value > 0.0 && value < 1.0)) fail(kInvalidValue, "backoff_ratio", show(value), "(0, 1)");
}

void check_probe_multiplier(int value) {
  if (value < 1) fail(kInvalidValue, "probe_multiplier", show(value), "an integer >= 1");
}

void check_queue_bound(std::string_view setting, int value) {
  if (value < 0) {
    fail(kInvalidValue, setting, show(value), "an integer >= 0 (0: Netflix's log10 function)");
  }
}

void check_max_wait(std::chrono::nanoseconds value) {
  if (value < std::chrono::nanoseconds(0) || value > AdaptiveLimitConfig::kMaxMaxWait) {
    fail(kInvalidValue, "max_wait", show(value), "0 .. 1 h (0: a full limit rejects at once)");
  }
}

void check_max_queue(int value) {
  if (value < 0 || value > AdaptiveLimitConfig::kMaxMaxQueue) {
    fail(kInvalidValue, "max_queue", show(value), "an integer in 0 .. 1048576");
  }
}

void check_max_queue_factor(double value) {
  if (!(value >= 0.0 && value <= 1000.0)) {
    fail(kInvalidValue, "max_queue_factor", show(value), "0 .. 1000 (0: max_queue applies)");
  }
}

void check_queue_order(QueueOrder value) {
  if (value != QueueOrder::fifo && value != QueueOrder::lifo &&
      value != QueueOrder::adaptive_lifo) {
    fail(kInvalidValue, "queue_order", show(static_cast<int>(value)), "fifo, lifo, adaptive_lifo");
  }
}

void check_codel(std::string_view setting, std::chrono::nanoseconds value) {
  if (value < std::chrono::microseconds(1) || value > std::chrono::hours(1)) {
    fail(kInvalidValue, setting, show(value), "1 us .. 1 h");
  }
}

constexpr std::string_view kShareNames[kLimitedClasses] = {"critical_share", "degraded_share",
                                                           "best_effort_share", "bulk_share"};

void check_share(CallClass cls, double value) {
  const auto index = static_cast<int>(cls);
  if (index < 0 || index >= kLimitedClasses) {
    fail(kInvalidValue, "class_share", show(index),
         "a class with a share: critical, degraded, best_effort, bulk");
  }
  if (!(value > 0.0 && value <= 1.0))
    fail(kInvalidValue, kShareNames[index], show(value), "(0, 1]");
}

void check_partition(const LimitPartitionShare& partition) {
  const bool named =
      !partition.name.empty() &&
      std::all_of(partition.name.begin(), partition.name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.';
      });
  // "none" labels the calls that name no partition in the metrics.
  if (!named || partition.name == "none" || partition.name.front() == '-' ||
      partition.name.front() == '.') {
    fail(kInvalidValue, "partition", "'" + partition.name + "'",
         "a name of letters, digits, '_', '-' and '.', not starting with '-' or '.', not 'none'");
  }
  if (!(partition.share > 0.0 && partition.share <= 1.0))
    fail(kInvalidValue, "partition " + partition.name + " share", show(partition.share), "(0, 1]");
}

void check_partition_count(std::size_t count) {
  if (count > static_cast<std::size_t>(kMaxPartitions)) {
    fail(kInvalidValue, "partitions", show(static_cast<int>(count)),
         "at most " + show(kMaxPartitions) + " partitions");
  }
}

}  // namespace

// The name in the enum's table of names, as every other enum of the vocabulary.
std::string_view to_string(QueueOrder order) noexcept { return to_string<QueueOrder>(order); }

// The name in the enum's table of names, as every other enum of the vocabulary.
std::string_view to_string(LimitAlgorithm algorithm) noexcept {
  return to_string<LimitAlgorithm>(algorithm);
}

AdaptiveLimitConfig::AdaptiveLimitConfig()
    : drop_on_{ExceptionType::of<CallTimeoutException>(),
               ExceptionType::of<BulkheadFullException>()},
      drop_on_error_(is_timed_out) {}

AdaptiveLimitConfig& AdaptiveLimitConfig::algorithm(LimitAlgorithm value) {
  return detail::store_checked(*this, algorithm_, value, check_algorithm);
}

AdaptiveLimitConfig& AdaptiveLimitConfig::initial_limit(int value) {
  return detail::store_checked(*this, initial_limit_, value, check_limit, "initial_limit");
}

AdaptiveLimitConfig& AdaptiveLimitConfig::min_limit(int value) {
  return detail::store_checked(*this, min_limit_, value, check_limit, "min_limit");
}

AdaptiveLimitConfig& AdaptiveLimitConfig::max_limit(int value) {
  return detail::store_checked(*this, max_limit_, value, check_limit, "max_limit");
}

AdaptiveLimitConfig& AdaptiveLimitConfig::window(std::chrono::nanoseconds value) {
  return detail::store_checked(*this, window_, value, check_window);
}

AdaptiveLimitConfig& AdaptiveLimitConfig::min_window_samples(int value) {
  return detail::store_checked(*this, min_window_samples_, value, check_min_window_samples);
}

AdaptiveLimitConfig& AdaptiveLimitConfig::smoothing(double value) {
  return detail::store_checked(*this, smoothing_, value, check_smoothing);
}

AdaptiveLimitConfig& AdaptiveLimitConfig::rtt_tolerance(double value) {
  return detail::store_checked(*this, rtt_tolerance_, value, detail::check_factor, "rtt_tolerance");
}

AdaptiveLimitConfig& AdaptiveLimitConfig::long_window(int value) {
  return detail::store_checked(*this, long_window_, value, check_long_window);
}

AdaptiveLimitConfig& AdaptiveLimitConfig::queue_size(int value) {
  return detail::store_checked(*this, queue_size_, value, check_queue_size);
}

AdaptiveLimitConfig& AdaptiveLimitConfig::backoff_ratio(double value) {
  return detail::store_checked(*this, backoff_ratio_, value, check_backoff_ratio);
}

AdaptiveLimitConfig& AdaptiveLimitConfig::probe_multiplier(int value) {
  return detail::store_checked(*this, probe_multiplier_, value, check_probe_multiplier);
}

AdaptiveLimitConfig& AdaptiveLimitConfig::alpha(int value) {
  return detail::store_checked(*this, alpha_, value, check_queue_bound, "alpha");
}

AdaptiveLimitConfig& AdaptiveLimitConfig::beta(int value) {
  return detail::store_checked(*this, beta_, value, check_queue_bound, "beta");
}

AdaptiveLimitConfig& AdaptiveLimitConfig::random_seed(std::uint64_t value) noexcept {
  return detail::store(*this, random_seed_, value);
}

AdaptiveLimitConfig& AdaptiveLimitConfig::probe_jitter(JitterSource source) {
  return detail::store(*this, probe_jitter_, std::move(source));
}

AdaptiveLimitConfig& AdaptiveLimitConfig::enabled(bool value) noexcept {
  return detail::store(*this, enabled_, value);
}

AdaptiveLimitConfig& AdaptiveLimitConfig::mode(PolicyMode value) noexcept {
  return detail::store(*this, mode_, value);
}

AdaptiveLimitConfig& AdaptiveLimitConfig::latency_histogram(bool value) noexcept {
  return detail::store(*this, latency_histogram_, value);
}

AdaptiveLimitConfig& AdaptiveLimitConfig::sample_percentile(double value) {
  if (!(value >= 0.0 && value < 1.0)) {
    fail(kInvalidValue, "sample_percentile", show(value),
         "0 (the window's average) or a percentile in (0, 1), e.g. 0.99");
  }
  return detail::store(*this, sample_percentile_, value);
}

AdaptiveLimitConfig& AdaptiveLimitConfig::max_wait(std::chrono::nanoseconds value) {
  return detail::store_checked(*this, max_wait_, value, check_max_wait);
}

AdaptiveLimitConfig& AdaptiveLimitConfig::max_queue(int value) {
  return detail::store_checked(*this, max_queue_, value, check_max_queue);
}

AdaptiveLimitConfig& AdaptiveLimitConfig::max_queue_factor(double value) {
  return detail::store_checked(*this, max_queue_factor_, value, check_max_queue_factor);
}

AdaptiveLimitConfig& AdaptiveLimitConfig::queue_order(QueueOrder value) {
  return detail::store_checked(*this, queue_order_, value, check_queue_order);
}

AdaptiveLimitConfig& AdaptiveLimitConfig::codel_target(std::chrono::nanoseconds value) {
  return detail::store_checked(*this, codel_target_, value, check_codel, "codel_target");
}

AdaptiveLimitConfig& AdaptiveLimitConfig::codel_interval(std::chrono::nanoseconds value) {
  return detail::store_checked(*this, codel_interval_, value, check_codel, "codel_interval");
}

AdaptiveLimitConfig& AdaptiveLimitConfig::class_share(CallClass cls, double value) {
  check_share(cls, value);
  shares_[static_cast<int>(cls)] = value;
  return *this;
}

AdaptiveLimitConfig& AdaptiveLimitConfig::partition(std::string name, double share) {
  LimitPartitionShare next{std::move(name), share};
  check_partition(next);
  if (const std::optional<int> index = partition_index(next.name)) {
    partitions_[static_cast<std::size_t>(*index)].share = next.share;
    return *this;
  }
  check_partition_count(partitions_.size() + 1);
  partitions_.push_back(std::move(next));
  return *this;
}

AdaptiveLimitConfig& AdaptiveLimitConfig::partitions(std::vector<LimitPartitionShare> value) {
  check_partition_count(value.size());
  for (std::size_t i = 0; i < value.size(); ++i) {
    check_partition(value[i]);
    for (std::size_t j = 0; j < i; ++j) {
      if (value[j].name == value[i].name)
        fail(kInvalidValue, "partitions", "'" + value[i].name + "' twice", "each name once");
    }
  }
  partitions_ = std::move(value);
  return *this;
}

AdaptiveLimitConfig& AdaptiveLimitConfig::partition_borrow(bool value) noexcept {
  return detail::store(*this, partition_borrow_, value);
}

std::optional<int> AdaptiveLimitConfig::partition_index(std::string_view name) const noexcept {
  for (std::size_t i = 0; i < partitions_.size(); ++i) {
    if (partitions_[i].name == name) return static_cast<int>(i);
  }
  return std::nullopt;
}

AdaptiveLimitConfig& AdaptiveLimitConfig::drop_on(std::vector<ExceptionType> types) {
  return detail::store(*this, drop_on_, std::move(types));
}

AdaptiveLimitConfig& AdaptiveLimitConfig::drop_on_error(
    std::function<bool(const std::error_code&)> predicate) {
  return detail::store(*this, drop_on_error_, std::move(predicate));
}

std::optional<SettingDifference> first_difference(const AdaptiveLimitConfig& first,
                                                  const AdaptiveLimitConfig& second) {
  return detail::DifferenceFinder()
      .compare("algorithm", first.algorithm(), second.algorithm())
      .compare("initial_limit", first.initial_limit(), second.initial_limit())
      .compare("min_limit", first.min_limit(), second.min_limit())
      .compare("max_limit", first.max_limit(), second.max_limit())
      .compare("window", first.window(), second.window())
      .compare("min_window_samples", first.min_window_samples(), second.min_window_samples())
      .compare("smoothing", first.smoothing(), second.smoothing())
      .compare("rtt_tolerance", first.rtt_tolerance(), second.rtt_tolerance())
      .compare("long_window", first.long_window(), second.long_window())
      .compare("queue_size", first.queue_size(), second.queue_size())
      .compare("backoff_ratio", first.backoff_ratio(), second.backoff_ratio())
      .compare("probe_multiplier", first.probe_multiplier(), second.probe_multiplier())
      .compare("alpha", first.alpha(), second.alpha())
      .compare("beta", first.beta(), second.beta())
      .compare("random_seed", static_cast<std::int64_t>(first.random_seed()),
               static_cast<std::int64_t>(second.random_seed()))
      .compare("enabled", first.enabled(), second.enabled())
      .compare("mode", first.mode(), second.mode())
      .compare("latency_histogram", first.latency_histogram(), second.latency_histogram())
      .compare("sample_percentile", first.sample_percentile(), second.sample_percentile())
      .compare("max_wait", first.max_wait(), second.max_wait())
      .compare("max_queue", first.max_queue(), second.max_queue())
      .compare("max_queue_factor", first.max_queue_factor(), second.max_queue_factor())
      .compare("queue_order", first.queue_order(), second.queue_order())
      .compare("codel_target", first.codel_target(), second.codel_target())
      .compare("codel_interval", first.codel_interval(), second.codel_interval())
      .compare("critical_share", first.class_share(CallClass::critical),
               second.class_share(CallClass::critical))
      .compare("degraded_share", first.class_share(CallClass::degraded),
               second.class_share(CallClass::degraded))
      .compare("best_effort_share", first.class_share(CallClass::best_effort),
               second.class_share(CallClass::best_effort))
      .compare("bulk_share", first.class_share(CallClass::bulk),
               second.class_share(CallClass::bulk))
      .compare("partitions", first.partitions(), second.partitions())
      .compare("partition_borrow", first.partition_borrow(), second.partition_borrow())
      .compare("drop_on", first.drop_on_types(), second.drop_on_types())
      .result();
}

void AdaptiveLimitConfig::validate() const {
  check_algorithm(algorithm_);
  check_limit("initial_limit", initial_limit_);
  check_limit("min_limit", min_limit_);
  check_limit("max_limit", max_limit_);
  check_window(window_);
  check_min_window_samples(min_window_samples_);
  check_smoothing(smoothing());
  detail::check_factor("rtt_tolerance", rtt_tolerance_);
  check_long_window(long_window_);
  check_queue_size(queue_size_);
  check_backoff_ratio(backoff_ratio_);
  check_probe_multiplier(probe_multiplier_);
  check_queue_bound("alpha", alpha_);
  check_queue_bound("beta", beta_);
  check_max_wait(max_wait_);
  check_max_queue(max_queue_);
  check_max_queue_factor(max_queue_factor_);
  check_queue_order(queue_order_);
  check_codel("codel_target", codel_target_);
  check_codel("codel_interval", codel_interval_);
  for (int i = 0; i < kLimitedClasses; ++i) check_share(static_cast<CallClass>(i), shares_[i]);
  for (int i = 1; i < kLimitedClasses; ++i) {
    if (shares_[i] > shares_[i - 1]) {
      throw ConfigException(kBoundsOrRange, std::string(kShareNames[i]) + " (" + show(shares_[i]) +
                                                ") is greater than " +
                                                std::string(kShareNames[i - 1]) + " (" +
                                                show(shares_[i - 1]) +
                                                "); valid: critical >= degraded >= best_effort >= "
                                                "bulk");
    }
  }

  check_partition_count(partitions_.size());
  double partitioned = 0.0;
  for (const LimitPartitionShare& partition : partitions_) {
    check_partition(partition);
    partitioned += partition.share;
  }
  // A little slack for shares written in decimal (0.7 + 0.2 + 0.1 is 1.0000000000000002).
  if (partitioned > 1.0 + 1e-9) {
    std::string shares;
    for (const LimitPartitionShare& partition : partitions_)
      shares += (shares.empty() ? "" : " + ") + partition.name + " " + show(partition.share);
    fail(kInvalidValue, "partitions", shares + " = " + show(partitioned),
         "shares that sum to at most 1");
  }

  AdaptiveLimitConfig().sample_percentile(sample_percentile_);
  if (sample_percentile_ > 0.0 && !latency_histogram_) {
    throw ConfigException(kBoundsOrRange,
                          "sample_percentile is " + show(sample_percentile_) +
                              " and latency_histogram is false; valid: latency_histogram true "
                              "with a sample_percentile (the percentile is read from it), or "
                              "sample_percentile 0");
  }
  detail::check_no_wait_when_observing(mode_ == PolicyMode::observe, "max_wait", max_wait_,
                                       "an observed limit admits every call at once, so nobody "
                                       "waits");
  if (min_limit_ > max_limit_) {
    throw ConfigException(kBoundsOrRange, "min_limit (" + show(min_limit_) +
                                              ") is greater than max_limit (" + show(max_limit_) +
                                              "); valid: min_limit <= initial_limit <= max_limit");
  }
  if (min_limit_ > initial_limit_) {
    throw ConfigException(kBoundsOrRange, "min_limit (" + show(min_limit_) +
                                              ") is greater than initial_limit (" +
                                              show(initial_limit_) +
                                              "); valid: min_limit <= initial_limit <= max_limit");
  }
  if (initial_limit_ > max_limit_) {
    throw ConfigException(kBoundsOrRange, "initial_limit (" + show(initial_limit_) +
                                              ") is greater than max_limit (" + show(max_limit_) +
                                              "); valid: min_limit <= initial_limit <= max_limit");
  }
}

}  // namespace r4c
