// SPDX-License-Identifier: Apache-2.0
// Settings of an adaptive limit: a value, built with fluent setters and validated.
//
//   r4c::AdaptiveLimitConfig config;
//   config.algorithm(r4c::LimitAlgorithm::aimd).initial_limit(10).max_limit(100)
//         .drop_on<SocketTimeout, r4c::CallTimeoutException>();
//
// A setter rejects a value that is invalid on its own at once (the config keeps its old value);
// `validate()` then checks the settings against each other. `AdaptiveLimit` validates its config
// when it is built, so an invalid combination never reaches a running limit.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "r4c/errors.hpp"
#include "r4c/exception_type.hpp"
#include "r4c/text.hpp"

namespace r4c {

/// How the limit moves once per window. gradient2, aimd and vegas are Netflix concurrency-limits
/// 0.5.4's Gradient2Limit, AIMDLimit and VegasLimit, exactly; delay_target is r4c's own (see
/// docs/adaptive-limit.md for when to choose which).
enum class LimitAlgorithm { gradient2, aimd, vegas, delay_target };

/// The algorithms' names in every text r4c reads (config file, attributes, scenarios).
inline constexpr EnumName<LimitAlgorithm> kLimitAlgorithmNames[] = {
    {"gradient2", LimitAlgorithm::gradient2},
    {"aimd", LimitAlgorithm::aimd},
    {"vegas", LimitAlgorithm::vegas},
    {"delay_target", LimitAlgorithm::delay_target}};
constexpr std::span<const EnumName<LimitAlgorithm>> enum_names(LimitAlgorithm) noexcept {
  return kLimitAlgorithmNames;
}

/// "gradient2", "aimd", "vegas" or "delay_target".
std::string_view to_string(LimitAlgorithm algorithm) noexcept;

/// Which waiter a freed slot goes to (see docs/adaptive-limit.md, "Waiting for a slot").
/// fifo: the oldest; lifo: the newest; adaptive_lifo: the oldest while the queue keeps
/// emptying, the newest once it has stood for a CoDel interval, waiters older than the CoDel
/// target then shed (Facebook's "Fail at Scale" controlled delay).
enum class QueueOrder { fifo, lifo, adaptive_lifo };

inline constexpr EnumName<QueueOrder> kQueueOrderNames[] = {
    {"fifo", QueueOrder::fifo},
    {"lifo", QueueOrder::lifo},
    {"adaptive_lifo", QueueOrder::adaptive_lifo}};
constexpr std::span<const EnumName<QueueOrder>> enum_names(QueueOrder) noexcept {
  return kQueueOrderNames;
}

/// "fifo", "lifo" or "adaptive_lifo".
std::string_view to_string(QueueOrder order) noexcept;

/// Whether a limiting policy refuses what it would refuse (enforce) or only counts it and lets
/// every call through (observe), to switch it on without risk (docs/operations.md).
enum class PolicyMode : std::uint8_t { enforce, observe };

inline constexpr EnumName<PolicyMode> kPolicyModeNames[] = {{"enforce", PolicyMode::enforce},
                                                            {"observe", PolicyMode::observe}};
constexpr std::span<const EnumName<PolicyMode>> enum_names(PolicyMode) noexcept {
  return kPolicyModeNames;
}

/// The priority class a call says at admission. A class is admitted while the calls in flight
/// are below its share of the current limit (1.0, 0.9, 0.75, 0.5 by default); bypass is neither
/// limited nor counted (health checks, admin calls).
enum class CallClass : std::uint8_t { critical, degraded, best_effort, bulk, bypass };

inline constexpr EnumName<CallClass> kCallClassNames[] = {{"critical", CallClass::critical},
                                                          {"degraded", CallClass::degraded},
                                                          {"best_effort", CallClass::best_effort},
                                                          {"bulk", CallClass::bulk},
                                                          {"bypass", CallClass::bypass}};
constexpr std::span<const EnumName<CallClass>> enum_names(CallClass) noexcept {
  return kCallClassNames;
}

/// The classes that have a share (all but bypass).
inline constexpr int kLimitedClasses = 4;

/// How many partitions one limit may have.
inline constexpr int kMaxPartitions = 8;

/// One named share of a limit (AdaptiveLimitConfig::partition): while the partition has
/// demand, floor(share × limit) slots are its own.
struct LimitPartitionShare {
  std::string name;
  double share = 0.0;
  friend bool operator==(const LimitPartitionShare&, const LimitPartitionShare&) = default;
};

/// A partition of one adaptive limit, as a call names it at admission
/// (AdaptiveLimit::partition("user"), or at(index) into the config's partitions()). The
/// default names none: on a partitioned limit such a call takes the share no partition
/// reserves (1 − the sum of the shares), and borrows like a partition when borrowing is on.
/// A plain value; an index past the limit's partitions names none.
class LimitPartition {
 public:
  constexpr LimitPartition() noexcept = default;
  /// The partition at `index` in AdaptiveLimitConfig::partitions() (a negative index: none).
  static constexpr LimitPartition at(int index) noexcept {
    LimitPartition partition;
    partition.slot_ =
        index < 0 || index >= kMaxPartitions ? 0 : static_cast<std::uint8_t>(index + 1);
    return partition;
  }
  /// The index in the config's partitions(); -1 when it names none.
  constexpr int index() const noexcept { return static_cast<int>(slot_) - 1; }
  friend constexpr bool operator==(LimitPartition, LimitPartition) noexcept = default;

 private:
  std::uint8_t slot_ = 0;  // 0: none; i + 1: partition i
};

/// The settings of one adaptive limit. Defaults are those of resilience4cata 0.6.0's "Adaptive
/// limit" page.
class AdaptiveLimitConfig {
 public:
  static constexpr LimitAlgorithm kDefaultAlgorithm = LimitAlgorithm::gradient2;
  static constexpr int kDefaultInitialLimit = 20;
  static constexpr int kDefaultMinLimit = 1;
  static constexpr int kDefaultMaxLimit = 200;
  static constexpr std::chrono::nanoseconds kDefaultWindow = std::chrono::seconds(1);
  static constexpr std::chrono::nanoseconds kMinWindow = std::chrono::milliseconds(1);
  static constexpr std::chrono::nanoseconds kMaxWindow = std::chrono::hours(1);
  static constexpr int kDefaultMinWindowSamples = 10;
  static constexpr double kDefaultSmoothing = 0.2;
  static constexpr double kDefaultRttTolerance = 1.5;
  static constexpr int kDefaultLongWindow = 600;
  static constexpr int kDefaultQueueSize = 4;
  static constexpr double kDefaultBackoffRatio = 0.9;
  static constexpr double kDefaultVegasSmoothing = 1.0;
  static constexpr int kDefaultProbeMultiplier = 30;
  static constexpr std::uint64_t kDefaultRandomSeed = 0;
  static constexpr std::chrono::nanoseconds kMaxMaxWait = std::chrono::hours(1);
  static constexpr int kDefaultMaxQueue = 1000;
  static constexpr int kMaxMaxQueue = 1 << 20;
  static constexpr std::chrono::nanoseconds kDefaultCodelTarget = std::chrono::milliseconds(5);
  static constexpr std::chrono::nanoseconds kDefaultCodelInterval = std::chrono::milliseconds(100);
  static constexpr double kDefaultShares[kLimitedClasses] = {1.0, 0.9, 0.75, 0.5};

  /// Draws one VEGAS probe jitter, a number in [0.5, 1). Called on the thread that closes a
  /// window, never concurrently for one limit; it must not throw.
  using JitterSource = std::function<double()>;

  /// Defaults everywhere; `drop_on` is {CallTimeoutException, BulkheadFullException}.
  AdaptiveLimitConfig();

  /// gradient2 (default), aimd, vegas or delay_target. Throws R4C-REG-001 for a value outside
  /// the enum.
  AdaptiveLimitConfig& algorithm(LimitAlgorithm value);
  /// Where the limit starts (20). Throws R4C-ATR-003 below 1.
  AdaptiveLimitConfig& initial_limit(int value);
  /// The limit never goes below this (1). Throws R4C-ATR-003 below 1.
  AdaptiveLimitConfig& min_limit(int value);
  /// The limit never goes above this (200). Throws R4C-ATR-003 below 1.
  AdaptiveLimitConfig& max_limit(int value);
  /// Shortest duration of a window (1 s). Throws R4C-ATR-009 outside 1 ms .. 1 h.
  AdaptiveLimitConfig& window(std::chrono::nanoseconds value);
  /// Fewest samples a window needs before it recomputes the limit (10). R4C-REG-001 below 1.
  AdaptiveLimitConfig& min_window_samples(int value);
  /// Gradient2 and VEGAS: share of the new estimate taken per window (gradient2 0.2, vegas 1.0,
  /// as in Netflix; the algorithm's own default until it is set). R4C-REG-001 outside (0, 1].
  AdaptiveLimitConfig& smoothing(double value);
  /// Gradient2: how many times the long-term latency a window may take and still grow (1.5).
  /// R4C-REG-001 below 1.
  AdaptiveLimitConfig& rtt_tolerance(double value);
  /// Gradient2: windows in the long-term latency average (600). R4C-REG-001 below 1.
  AdaptiveLimitConfig& long_window(int value);
  /// Gradient2: headroom added per window (4). R4C-REG-001 below 0.
  AdaptiveLimitConfig& queue_size(int value);
  /// AIMD: factor applied to the limit after a window with a drop (0.9). R4C-REG-001 outside
  /// (0, 1).
  AdaptiveLimitConfig& backoff_ratio(double value);
  /// VEGAS: it probes for a new no-load latency after about jitter × probe_multiplier × limit
  /// windows, jitter drawn in [0.5, 1) (30). R4C-REG-001 below 1.
  AdaptiveLimitConfig& probe_multiplier(int value);
  /// VEGAS: a constant alpha (the queue below which the limit grows by log10 of itself); 0, the
  /// default, keeps Netflix's function 3 × log10root(limit). R4C-REG-001 below 0.
  AdaptiveLimitConfig& alpha(int value);
  /// VEGAS: a constant beta (the queue above which the limit shrinks); 0, the default, keeps
  /// Netflix's function 6 × log10root(limit). R4C-REG-001 below 0.
  AdaptiveLimitConfig& beta(int value);
  /// Seeds the limit's own random source (VEGAS's probe jitter, delay_target's pacing phase).
  /// 0, the default, seeds it from std::random_device when the limit is built; any other value
  /// makes every draw reproducible, as a ManualClock test needs.
  AdaptiveLimitConfig& random_seed(std::uint64_t value) noexcept;
  /// Replaces the limit's VEGAS jitter draws with `source` (a test or a replay feeding recorded
  /// jitters); an empty function goes back to the seeded source. Not compared by
  /// first_difference. Values outside [0.5, 1) are used as given.
  AdaptiveLimitConfig& probe_jitter(JitterSource source);
  /// false: every call passes and nothing is measured (true).
  AdaptiveLimitConfig& enabled(bool value) noexcept;
  /// observe: the limit runs its whole decision (windows, limit) and counts in
  /// `would_have_rejected` the calls it would have rejected, but admits every call (enforce).
  /// validate() refuses observe with max_wait above 0 (R4C-ATR-009): a queue is not observed.
  AdaptiveLimitConfig& mode(PolicyMode value) noexcept;
  /// true: every call that ends with a sample records its latency into a histogram (about
  /// 200 KiB per limit, allocated when it is built), reported in the snapshot's `latency` and as
  /// the Prometheus histogram r4c_adaptivelimit_call_latency_seconds (false: nothing recorded).
  AdaptiveLimitConfig& latency_histogram(bool value) noexcept;
  /// Above 0 (e.g. 0.99): the window's latency sample is this percentile of the window's
  /// latencies, read from the latency histogram (Netflix concurrency-limits'
  /// PercentileSampleWindow), instead of their average; 0, the default: the average.
  /// R4C-REG-001 outside [0, 1); validate() refuses it above 0 without latency_histogram
  /// (R4C-ATR-009).
  AdaptiveLimitConfig& sample_percentile(double value);
  /// How long a call may wait for a slot when the limit is full (0, the default: it is rejected
  /// at once, as in resilience4cata). R4C-REG-001 outside 0 .. 1 h.
  AdaptiveLimitConfig& max_wait(std::chrono::nanoseconds value);
  /// How many calls may wait at once (1000), when max_queue_factor is 0. R4C-REG-001 outside
  /// 0 .. 1048576.
  AdaptiveLimitConfig& max_queue(int value);
  /// When above 0, how many calls may wait as a factor of the current limit (at least one):
  /// replaces max_queue (0). R4C-REG-001 below 0 or above 1000.
  AdaptiveLimitConfig& max_queue_factor(double value);
  /// Which waiter gets a freed slot (fifo). R4C-REG-001 for a value outside the enum.
  AdaptiveLimitConfig& queue_order(QueueOrder value);
  /// adaptive_lifo: the delay a standing queue is held to (5 ms). R4C-REG-001 outside
  /// 1 us .. 1 h.
  AdaptiveLimitConfig& codel_target(std::chrono::nanoseconds value);
  /// adaptive_lifo: how long the queue must stay non-empty to count as standing (100 ms).
  /// R4C-REG-001 outside 1 us .. 1 h.
  AdaptiveLimitConfig& codel_interval(std::chrono::nanoseconds value);
  /// A class's share of the limit (critical 1.0, degraded 0.9, best_effort 0.75, bulk 0.5).
  /// R4C-REG-001 outside (0, 1] or for bypass; validate() also wants the shares not to grow
  /// from a class to the next lower one (R4C-ATR-009).
  AdaptiveLimitConfig& class_share(CallClass cls, double value);
  /// Adds partition `name` with `share` of the limit (Netflix concurrency-limits' partitions):
  /// while it has calls to make, floor(share × limit) slots are its own. Unlike Netflix's, the
  /// global limit is never exceeded. A second call with the same name replaces its share.
  /// R4C-REG-001 for a share outside (0, 1], a name that is empty or not made of letters,
  /// digits, '_', '-' and '.', or a partition past kMaxPartitions (8); validate() also wants
  /// the shares to sum to at most 1 (R4C-REG-001).
  AdaptiveLimitConfig& partition(std::string name, double share);
  /// Replaces every partition (an empty list: none, the default); each as partition() checks.
  AdaptiveLimitConfig& partitions(std::vector<LimitPartitionShare> value);
  /// Whether a partition at its share may borrow slots that other partitions leave unused
  /// (true, as in Netflix): a borrowed slot is never one another partition's guarantee still
  /// needs. false: a partition never runs more than its share.
  AdaptiveLimitConfig& partition_borrow(bool value) noexcept;
  /// The failures that are drops (overload signals), matched by dynamic type, derived classes
  /// included. Replaces the list; `drop_on({})` makes no failure a drop.
  template <class Exception, class... More>
  AdaptiveLimitConfig& drop_on() {
    drop_on_ = {ExceptionType::of<Exception>(), ExceptionType::of<More>()...};
    return *this;
  }
  /// Same as `drop_on<...>()` with types known at run time (the registry uses it).
  AdaptiveLimitConfig& drop_on(std::vector<ExceptionType> types);
  /// Which error codes are drops: those asynchronous operations complete with (<r4c/asio.hpp>)
  /// and those of a std::system_error a call throws; default: `std::errc::timed_out`
  /// (asio::error::timed_out). An empty
  /// function makes no code a drop. Codes that are not drops (operation_aborted among them)
  /// free the slot only. Not compared by first_difference (a function has no value to compare).
  AdaptiveLimitConfig& drop_on_error(std::function<bool(const std::error_code&)> predicate);

  LimitAlgorithm algorithm() const noexcept { return algorithm_; }
  int initial_limit() const noexcept { return initial_limit_; }
  int min_limit() const noexcept { return min_limit_; }
  int max_limit() const noexcept { return max_limit_; }
  std::chrono::nanoseconds window() const noexcept { return window_; }
  int min_window_samples() const noexcept { return min_window_samples_; }
  /// The smoothing set, or the algorithm's default (vegas 1.0, otherwise 0.2).
  double smoothing() const noexcept {
    if (smoothing_) return *smoothing_;
    return algorithm_ == LimitAlgorithm::vegas ? kDefaultVegasSmoothing : kDefaultSmoothing;
  }
  double rtt_tolerance() const noexcept { return rtt_tolerance_; }
  int long_window() const noexcept { return long_window_; }
  int queue_size() const noexcept { return queue_size_; }
  double backoff_ratio() const noexcept { return backoff_ratio_; }
  int probe_multiplier() const noexcept { return probe_multiplier_; }
  /// 0: Netflix's default function.
  int alpha() const noexcept { return alpha_; }
  /// 0: Netflix's default function.
  int beta() const noexcept { return beta_; }
  std::uint64_t random_seed() const noexcept { return random_seed_; }
  const JitterSource& probe_jitter() const noexcept { return probe_jitter_; }
  bool enabled() const noexcept { return enabled_; }
  PolicyMode mode() const noexcept { return mode_; }
  bool latency_histogram() const noexcept { return latency_histogram_; }
  double sample_percentile() const noexcept { return sample_percentile_; }
  std::chrono::nanoseconds max_wait() const noexcept { return max_wait_; }
  int max_queue() const noexcept { return max_queue_; }
  double max_queue_factor() const noexcept { return max_queue_factor_; }
  QueueOrder queue_order() const noexcept { return queue_order_; }
  std::chrono::nanoseconds codel_target() const noexcept { return codel_target_; }
  std::chrono::nanoseconds codel_interval() const noexcept { return codel_interval_; }
  /// bypass: 0 (it takes no share).
  double class_share(CallClass cls) const noexcept {
    const auto index = static_cast<int>(cls);
    return index < kLimitedClasses ? shares_[index] : 0.0;
  }
  /// The partitions, in the order they were added (empty: the limit has none).
  const std::vector<LimitPartitionShare>& partitions() const noexcept { return partitions_; }
  bool partition_borrow() const noexcept { return partition_borrow_; }
  /// The index of partition `name` in partitions(), or nullopt.
  std::optional<int> partition_index(std::string_view name) const noexcept;
  /// The drop types.
  const std::vector<ExceptionType>& drop_on_types() const noexcept { return drop_on_; }
  /// The predicate drop_on_error set.
  const std::function<bool(const std::error_code&)>& drop_on_error() const noexcept {
    return drop_on_error_;
  }

  /// Checks every setting, each on its own first, then against each other: R4C-ATR-009 when
  /// min_limit > max_limit, min_limit > initial_limit or initial_limit > max_limit.
  /// Throws ConfigException; does nothing when the config is valid.
  void validate() const;

 private:
  LimitAlgorithm algorithm_ = kDefaultAlgorithm;
  int initial_limit_ = kDefaultInitialLimit;
  int min_limit_ = kDefaultMinLimit;
  int max_limit_ = kDefaultMaxLimit;
  std::chrono::nanoseconds window_ = kDefaultWindow;
  int min_window_samples_ = kDefaultMinWindowSamples;
  std::optional<double> smoothing_;  // unset: the algorithm's default
  double rtt_tolerance_ = kDefaultRttTolerance;
  int long_window_ = kDefaultLongWindow;
  int queue_size_ = kDefaultQueueSize;
  double backoff_ratio_ = kDefaultBackoffRatio;
  int probe_multiplier_ = kDefaultProbeMultiplier;
  int alpha_ = 0;
  int beta_ = 0;
  std::uint64_t random_seed_ = kDefaultRandomSeed;
  JitterSource probe_jitter_;
  bool enabled_ = true;
  PolicyMode mode_ = PolicyMode::enforce;
  bool latency_histogram_ = false;
  double sample_percentile_ = 0.0;
  std::chrono::nanoseconds max_wait_{0};
  int max_queue_ = kDefaultMaxQueue;
  double max_queue_factor_ = 0.0;
  QueueOrder queue_order_ = QueueOrder::fifo;
  std::chrono::nanoseconds codel_target_ = kDefaultCodelTarget;
  std::chrono::nanoseconds codel_interval_ = kDefaultCodelInterval;
  double shares_[kLimitedClasses] = {kDefaultShares[0], kDefaultShares[1], kDefaultShares[2],
                                     kDefaultShares[3]};
  std::vector<LimitPartitionShare> partitions_;
  bool partition_borrow_ = true;
  std::vector<ExceptionType> drop_on_;
  std::function<bool(const std::error_code&)> drop_on_error_;
};

/// Compares two configs setting by setting; nullopt when they are equal.
std::optional<SettingDifference> first_difference(const AdaptiveLimitConfig& first,
                                                  const AdaptiveLimitConfig& second);

}  // namespace r4c
