// SPDX-License-Identifier: Apache-2.0
// The limit algorithms, applied once per window. gradient2, aimd and vegas follow
// docs/spec/algorithms.md (Netflix concurrency-limits 0.5.4) to the last bit: the source file is
// compiled with -ffp-contract=off and keeps the specification's operation order. delay_target is
// r4c's own (docs/spec/algorithms.md states its rules too).
#pragma once

#include <cstdint>
#include <variant>

#include "r4c/adaptive_limit_config.hpp"

namespace r4c::detail {

/// One window's aggregate, the input of an update.
struct WindowAggregate {
  std::int64_t avg_latency_ns = 0;  // trunc(sum / count)
  int max_in_flight = 0;
  bool dropped = false;
  std::uint64_t samples = 0;  // how many samples the window took (0: not known, as in replay)
  std::int64_t end_ns = 0;    // the clock when it closed (delay_target's aligned probes)
};

/// The limit's own random numbers: SplitMix64, seeded. Cheap and reproducible; only ever used
/// when a window closes.
class SplitMix {
 public:
  explicit SplitMix(std::uint64_t seed) noexcept : state_(seed) {}
  std::uint64_t next() noexcept;
  /// Uniform in [low, high), from the top 53 bits.
  double uniform(double low, double high) noexcept;

 private:
  std::uint64_t state_;
};

/// The random seed a config asks for: its random_seed, or one from std::random_device for 0.
std::uint64_t seed_of(const AdaptiveLimitConfig& config) noexcept;

/// GRADIENT2: grows while the window's latency stays within rtt_tolerance of the long-term
/// average, shrinks in proportion when it does not.
class Gradient2 {
 public:
  explicit Gradient2(const AdaptiveLimitConfig& config) noexcept;
  /// Applies one window; returns the new limit.
  int update(const WindowAggregate& window) noexcept;
  /// A live reconfiguration (same algorithm): the new config's parameters, the learnt state
  /// kept, the estimate clamped into the new bounds.
  void retune(const AdaptiveLimitConfig& config);
  int limit() const noexcept { return static_cast<int>(estimate_); }
  double estimate() const noexcept { return estimate_; }
  double long_latency_ns() const noexcept { return long_value_; }

 private:
  double add_to_long_average(double sample) noexcept;

  double estimate_;
  double min_limit_;
  double max_limit_;
  double smoothing_;
  double rtt_tolerance_;
  double queue_size_;
  double long_alpha_;
  double long_value_ = 0.0;
  double long_sum_ = 0.0;
  int long_count_ = 0;
};

/// AIMD: multiplies the limit by backoff_ratio after a window with a drop, adds one after a
/// window without drops in which at least half the limit was in use.
class Aimd {
 public:
  explicit Aimd(const AdaptiveLimitConfig& config) noexcept;
  int update(const WindowAggregate& window) noexcept;
  /// A live reconfiguration (same algorithm): the new config's parameters, the learnt state
  /// kept, the estimate clamped into the new bounds.
  void retune(const AdaptiveLimitConfig& config);
  int limit() const noexcept { return limit_; }

 private:
  int limit_;
  int min_limit_;
  int max_limit_;
  double backoff_ratio_;
};

/// VEGAS: estimates the queue as limit × (1 − no-load latency / latency) and grows while it is
/// small, shrinks when it is large; re-measures the no-load latency at jittered probe times.
class Vegas {
 public:
  explicit Vegas(const AdaptiveLimitConfig& config);
  int update(const WindowAggregate& window) noexcept;
  /// A live reconfiguration (same algorithm): the new config's parameters, the learnt state
  /// kept, the estimate clamped into the new bounds.
  void retune(const AdaptiveLimitConfig& config);
  int limit() const noexcept { return limit_; }
  double estimate() const noexcept { return estimate_; }
  std::int64_t rtt_noload_ns() const noexcept { return rtt_noload_; }
  double probe_jitter() const noexcept { return jitter_; }

 private:
  double draw_jitter() noexcept;
  int update_estimate(std::int64_t rtt, std::int64_t rtt_noload, int in_flight,
                      bool dropped) noexcept;

  double estimate_;
  int limit_;
  double min_limit_;
  double max_limit_;
  double smoothing_;
  int probe_multiplier_;
  int alpha_;  // 0: 3 × log10root(limit)
  int beta_;   // 0: 6 × log10root(limit)
  std::int64_t rtt_noload_ = 0;
  int probe_count_ = 0;
  AdaptiveLimitConfig::JitterSource source_;
  SplitMix random_;
  double jitter_;
};

/// DELAY_TARGET (r4c's own, docs/adaptive-limit.md): keeps the standing queueing delay, the
/// window's latency above a baseline no-load latency, near a target shared by every client of
/// the dependency. The estimate is a double and may go below 1 (the limit then paces calls).
class DelayTarget {
 public:
  explicit DelayTarget(const AdaptiveLimitConfig& config) noexcept;
  int update(const WindowAggregate& window) noexcept;
  /// A live reconfiguration (same algorithm): the new config's parameters, the learnt state
  /// kept, the estimate clamped into the new bounds.
  void retune(const AdaptiveLimitConfig& config);
  int limit() const noexcept;
  double estimate() const noexcept { return estimate_; }
  double baseline_ns() const noexcept { return baseline_; }

  /// The lowest estimate: 1/64 of a call at a time, unless min_limit is above 1.
  static constexpr double kPacedFloor = 1.0 / 64.0;

 private:
  /// Starts a probe window at a share of `next`; returns the probe's estimate.
  double start_probe(double next) noexcept;

  double estimate_;
  double min_estimate_;
  double max_estimate_;
  double backoff_ratio_;
  double baseline_ = 0.0;  // ns; 0 until the first window
  double smoothed_ = 0.0;  // ns: the window latency, averaged over a few windows
  int streak_ = 0;         // windows in a row that grew with room to spare
  std::int64_t probe_epoch_ = -1;
  bool probing_ = false;
  double before_probe_ = 0.0;  // the estimate a probe window returns to
  double cut_estimate_ = 0.0;  // the estimate before a run of cuts; 0: no run under way
  double cut_latency_ = 0.0;   // the latency that started it
};

/// The algorithm a config selects. The config must have passed AdaptiveLimitConfig::validate()
/// (AdaptiveLimit and r4c-sim validate before they build one).
class LimitEstimator {
 public:
  explicit LimitEstimator(const AdaptiveLimitConfig& config);
  int update(const WindowAggregate& window) noexcept;
  int limit() const noexcept;
  /// The limit as a real number: the integer limit, except for delay_target below 1.
  double fractional_limit() const noexcept;
  /// Gradient2's long-term latency average, VEGAS's no-load latency, delay_target's baseline,
  /// in ns; 0 for AIMD.
  std::int64_t long_latency_ns() const noexcept;
  /// A live reconfiguration to `config` (validated): the same algorithm keeps what it learnt
  /// (long-term latency, no-load latency, baseline) with its estimate clamped into the new
  /// bounds; another algorithm starts afresh from `current`, clamped.
  void retune(const AdaptiveLimitConfig& config, int current);

 private:
  std::variant<Gradient2, Aimd, Vegas, DelayTarget> algorithm_;
};

}  // namespace r4c::detail
