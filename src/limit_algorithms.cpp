// SPDX-License-Identifier: Apache-2.0
// Compiled with -ffp-contract=off (see CMakeLists.txt): a fused multiply-add changes the last bit
// of the estimate, and truncation turns that bit into a whole unit of limit.
#include "r4c/detail/limit_algorithms.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>

namespace r4c::detail {

Gradient2::Gradient2(const AdaptiveLimitConfig& config) noexcept
    : estimate_(config.initial_limit()),
      min_limit_(config.min_limit()),
      max_limit_(config.max_limit()),
      smoothing_(config.smoothing()),
      rtt_tolerance_(config.rtt_tolerance()),
      queue_size_(config.queue_size()),
      long_alpha_(2.0 / (static_cast<double>(config.long_window()) + 1.0)) {}

// A plain mean of the first ten windows, then an exponential average.
double Gradient2::add_to_long_average(double sample) noexcept {
  constexpr int kWarmUpWindows = 10;
  if (long_count_ < kWarmUpWindows) {
    long_count_ += 1;
    long_sum_ += sample;
    long_value_ = long_sum_ / long_count_;
  } else {
    long_value_ = long_value_ * (1.0 - long_alpha_) + sample * long_alpha_;
  }
  return long_value_;
}

int Gradient2::update(const WindowAggregate& window) noexcept {
  const double previous = estimate_;
  // A manual clock can produce 0 ns windows; 0 would make the gradient NaN.
  const double latency = static_cast<double>(std::max<std::int64_t>(window.avg_latency_ns, 1));
  const double long_latency = add_to_long_average(latency);

  // After a long overload the long average decays faster once latency is normal again.
  if (long_latency / latency > 2.0) long_value_ = long_value_ * 0.95;

  // Under half the slots in use, latency says nothing about the limit.
  if (static_cast<double>(window.max_in_flight) < previous / 2.0) return limit();

  const double gradient = std::max(0.5, std::min(1.0, (rtt_tolerance_ * long_latency) / latency));
  const double target = previous * gradient + queue_size_;
  const double smoothed = previous * (1.0 - smoothing_) + target * smoothing_;
  estimate_ = std::max(min_limit_, std::min(max_limit_, smoothed));
  return limit();
}

Aimd::Aimd(const AdaptiveLimitConfig& config) noexcept
    : limit_(config.initial_limit()),
      min_limit_(config.min_limit()),
      max_limit_(config.max_limit()),
      backoff_ratio_(config.backoff_ratio()) {}

int Aimd::update(const WindowAggregate& window) noexcept {
  int next = limit_;
  if (window.dropped) {
    next = static_cast<int>(static_cast<double>(next) * backoff_ratio_);
  } else if (2 * static_cast<std::int64_t>(window.max_in_flight) >= next) {
    next = next + 1;
  }
  limit_ = std::min(max_limit_, std::max(min_limit_, next));
  return limit_;
}

std::uint64_t SplitMix::next() noexcept {
  std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double SplitMix::uniform(double low, double high) noexcept {
  const double unit = static_cast<double>(next() >> 11) * 0x1.0p-53;
  return low + unit * (high - low);
}

std::uint64_t seed_of(const AdaptiveLimitConfig& config) noexcept {
  if (config.random_seed() != 0) return config.random_seed();
  try {
    std::random_device device;
    return (static_cast<std::uint64_t>(device()) << 32) ^ device();
  } catch (...) {
    // No entropy source: the address of the config still differs between limits.
    return reinterpret_cast<std::uintptr_t>(&config) ^ 0x5851f42d4c957f2dULL;
  }
}

namespace {

// Netflix's Log10RootIntFunction: max(1, (int) log10(x)) from a table below 1000, (int) log10(x)
// above (the table's entry 0 is 1, as Java's (int) of -infinity is clamped by the max).
int log10_root(int x) noexcept {
  static const std::array<int, 1000> kTable = [] {
    std::array<int, 1000> table{};
    table[0] = 1;
    for (int i = 1; i < 1000; ++i) {
      table[static_cast<std::size_t>(i)] = std::max(1, static_cast<int>(std::log10(i)));
    }
    return table;
  }();
  if (x < 1000) return x < 0 ? 1 : kTable[static_cast<std::size_t>(x)];
  return static_cast<int>(std::log10(static_cast<double>(x)));
}

// Java's (int) of a double: truncation toward zero, saturating, NaN to 0.
int java_int(double value) noexcept {
  if (std::isnan(value)) return 0;
  if (value >= 2147483647.0) return 2147483647;
  if (value <= -2147483648.0) return -2147483647 - 1;
  return static_cast<int>(value);
}

}  // namespace

Vegas::Vegas(const AdaptiveLimitConfig& config)
    : estimate_(config.initial_limit()),
      limit_(config.initial_limit()),
      min_limit_(config.min_limit()),
      max_limit_(config.max_limit()),
      smoothing_(config.smoothing()),
      probe_multiplier_(config.probe_multiplier()),
      alpha_(config.alpha()),
      beta_(config.beta()),
      source_(config.probe_jitter()),
      random_(seed_of(config)),
      jitter_(0.0) {
  jitter_ = draw_jitter();
}

double Vegas::draw_jitter() noexcept {
  if (source_) {
    try {
      return source_();
    } catch (...) {
      // A source that throws draws nothing; the limit's own does.
    }
  }
  return random_.uniform(0.5, 1.0);
}

int Vegas::update(const WindowAggregate& window) noexcept {
  // Netflix throws on rtt <= 0; a manual clock can make a 0 ns window, read as 1 ns.
  const std::int64_t rtt = std::max<std::int64_t>(window.avg_latency_ns, 1);
  probe_count_ += 1;
  const double probe_at = jitter_ * static_cast<double>(probe_multiplier_) * estimate_;
  if (probe_at <= static_cast<double>(probe_count_)) {
    jitter_ = draw_jitter();
    probe_count_ = 0;
    rtt_noload_ = rtt;
    limit_ = java_int(estimate_);
    return limit_;
  }
  if (rtt_noload_ == 0 || rtt < rtt_noload_) {
    rtt_noload_ = rtt;
    limit_ = java_int(estimate_);
    return limit_;
  }
  limit_ = update_estimate(rtt, rtt_noload_, window.max_in_flight, window.dropped);
  return limit_;
}

int Vegas::update_estimate(std::int64_t rtt, std::int64_t rtt_noload, int in_flight,
                           bool dropped) noexcept {
  const double estimate = estimate_;
  const int queue = java_int(
      std::ceil(estimate * (1.0 - static_cast<double>(rtt_noload) / static_cast<double>(rtt))));
  const int whole = java_int(estimate);
  double next = 0.0;
  if (dropped) {
    next = estimate - log10_root(whole);
  } else if (static_cast<double>(in_flight * 2) < estimate) {
    return whole;  // not close to the limit: latency says nothing
  } else {
    const int log10 = log10_root(whole);
    const int alpha = alpha_ > 0 ? alpha_ : 3 * log10;
    const int beta = beta_ > 0 ? beta_ : 6 * log10;
    const int threshold = log10;
    if (queue <= threshold) {
      next = estimate + beta;
    } else if (queue < alpha) {
      next = estimate + log10;
    } else if (queue > beta) {
      next = estimate - log10;
    } else {
      return whole;
    }
  }
  next = std::max(min_limit_, std::min(max_limit_, next));
  next = (1.0 - smoothing_) * estimate + smoothing_ * next;
  estimate_ = next;
  return java_int(next);
}

namespace {

// delay_target's constants, justified by the measurements in docs/simulator.md.
constexpr double kTargetRatio = 0.10;    // the shared target: 10% of the no-load latency
constexpr double kGrowth = 0.2;          // growth per window with no queue at all
constexpr double kFairnessStep = 0.002;  // additive part: equal shares (Chiu-Jain)
constexpr double kSmoothing = 0.5;       // of the window latency
constexpr double kBaselineFall = 0.25;   // towards a lower window latency
constexpr double kProbeCut = 0.8;        // the limit during a probe window
constexpr double kProbeAgain = 0.9;      // a probe that lowered the baseline below this probes on
constexpr std::int64_t kProbePeriodNs = 30'000'000'000;  // probes start on multiples of 30 s
constexpr double kMaxCut = 0.5;                          // at most halved per window
constexpr int kMaxStreak = 4;       // growth 0.2, 0.4, 0.8, then 1.0 per window
constexpr double kJudgedCut = 0.6;  // a run of cuts to 60% or less: judged by its latency
// A window of fewer samples is a client of a fleet (or of little traffic): its limit rarely binds,
// so it probes and comes down from what it uses rather than from its limit.
constexpr std::uint64_t kFewSamples = 100;

// Whether the window took a few samples (0: not known, as in replay).
bool few_samples(const WindowAggregate& window) noexcept {
  return window.samples > 0 && window.samples < kFewSamples;
}

}  // namespace

DelayTarget::DelayTarget(const AdaptiveLimitConfig& config) noexcept
    : estimate_(config.initial_limit()),
      min_estimate_(config.min_limit() > 1 ? static_cast<double>(config.min_limit()) : kPacedFloor),
      max_estimate_(config.max_limit()),
      backoff_ratio_(config.backoff_ratio()) {}

int DelayTarget::limit() const noexcept {
  return estimate_ < 1.0 ? 1 : static_cast<int>(estimate_);
}

double DelayTarget::start_probe(double next) noexcept {
  probing_ = true;
  before_probe_ = next;
  return std::max(min_estimate_, next * kProbeCut);
}

int DelayTarget::update(const WindowAggregate& window) noexcept {
  const double latency = static_cast<double>(std::max<std::int64_t>(window.avg_latency_ns, 1));
  const std::int64_t epoch = window.end_ns / kProbePeriodNs;
  // What this client uses: a few-sample client's limit rarely binds, and a probe or a cut from a
  // limit it does not use would not lower the load (its calls in flight, at least 1).
  const bool few = few_samples(window);
  const double used =
      few ? std::max(1.0, static_cast<double>(window.max_in_flight)) : max_estimate_;
  const double probe_of_used = std::max(min_estimate_, used * kProbeCut);
  if (baseline_ == 0.0) {
    // The first window ran at the initial limit, queue or not: probe at once.
    baseline_ = latency;
    smoothed_ = latency;
    probe_epoch_ = epoch;
    estimate_ = std::min(start_probe(estimate_), probe_of_used);
    return limit();
  }

  if (probing_) {
    // The probe window ran at 0.8 of a limit that sits about 10% above the concurrency served
    // without queueing (every client of a fleet at once, on the aligned period), so the queue
    // drained: its latency is the no-load latency, higher or lower than the baseline (a slower
    // workload raises it). A probe that still found a much lower latency may not have drained
    // everything (a fleet that started with a queue): probe again, at 0.8 of this probe.
    probing_ = false;
    cut_estimate_ = 0.0;
    const double previous = baseline_;
    // Higher than the baseline: a slower workload, or a queue the probe did not drain (the
    // capacity fell during it). The latency before the probe bounds what a workload can be.
    baseline_ = latency <= baseline_ ? latency : std::min(latency, smoothed_);
    smoothed_ = baseline_;
    if (latency < kProbeAgain * previous && estimate_ > min_estimate_) {
      probing_ = true;
      estimate_ = std::min(std::max(min_estimate_, estimate_ * kProbeCut), probe_of_used);
      return limit();
    }
    // A probe that still queued (the capacity fell) keeps its lower limit.
    if (latency <= baseline_ * (1.0 + kTargetRatio)) estimate_ = std::max(estimate_, before_probe_);
    return limit();
  }
  smoothed_ += (latency - smoothed_) * kSmoothing;
  // A run of cuts for a queue. A queue drains when fewer calls are let in, and latency falls
  // about as much as the limit did; once the cuts add up to 40%, a latency that has not come
  // down by a quarter of that is a slower workload, or a queue other clients keep up: one client
  // cannot tell which, so it holds (no more cuts) until the aligned probe tells.
  const bool held = cut_estimate_ > 0.0 && estimate_ <= kJudgedCut * cut_estimate_ &&
                    latency >= cut_latency_ * (1.0 - (1.0 - estimate_ / cut_estimate_) / 4.0);
  if (latency < baseline_) baseline_ += (latency - baseline_) * kBaselineFall;

  const double target = kTargetRatio * baseline_;
  // The smoothed latency, unless this window's is lower: a queue that drained is over at once
  // (no cuts for the past, which undershoot), while one slow window alone does not cut.
  const double seen = std::min(latency, smoothed_);
  const double queue = seen - baseline_;
  // Whether the limit held calls back in this window: only then is a queue the limit's to drain.
  const bool binding =
      static_cast<double>(window.max_in_flight) >= std::max(1.0, std::floor(estimate_));
  double next = estimate_;
  if (window.dropped) {
    streak_ = 0;
    next = estimate_ * backoff_ratio_;
    // A few-sample client's drops are timeouts of a fleet's queue: cut at least as deep as the
    // queue calls for, or a fleet of them takes a window per 10% while every call times out.
    if (few && queue > target) {
      next = std::min(next, estimate_ * std::max(kMaxCut, (baseline_ + target) / seen));
    }
  } else if (queue > target && binding && !held) {
    streak_ = 0;
    if (cut_estimate_ == 0.0) {
      cut_estimate_ = estimate_;
      cut_latency_ = latency;
    }
    // Proportional to the excess delay: every client of a fleet cuts by the same ratio, so
    // their cuts add up to the cut one client alone would make.
    next = estimate_ * std::max(kMaxCut, (baseline_ + target) / seen) + kFairnessStep;
  } else if (queue > target) {
    // Latency rose while the limit held nothing back (or cuts did not lower it): not this
    // limit's queue (a slower workload, or other clients'); hold, and let the next probe tell.
    // A few-sample client comes down to what it uses: its unused limit would let a burst of its
    // calls into the standing queue.
    streak_ = 0;
    if (few) next = std::min(estimate_, used);
  } else if (2.0 * static_cast<double>(window.max_in_flight) >= estimate_) {
    cut_estimate_ = 0.0;
    const double room = 1.0 - std::max(0.0, queue) / target;
    // Windows in a row with room to spare double the growth, up to doubling the limit: after a
    // capacity rise the limit finds the new capacity in a few windows, while near the target
    // (a streak of one) it creeps by kGrowth at most.
    streak_ = room > 0.5 ? std::min(streak_ + 1, kMaxStreak) : 0;
    const double growth = kGrowth * static_cast<double>(1 << std::max(0, streak_ - 1));
    next = estimate_ * (1.0 + std::min(1.0, growth) * room) + kFairnessStep;
  }
  next = std::max(min_estimate_, std::min(max_estimate_, next));

  // A probe on every multiple of the period, the same instant for every client on one clock.
  if (epoch != probe_epoch_) {
    probe_epoch_ = epoch;
    next = std::min(start_probe(next), probe_of_used);
  }
  estimate_ = next;
  return limit();
}

namespace {
std::variant<Gradient2, Aimd, Vegas, DelayTarget> make_algorithm(
    const AdaptiveLimitConfig& config) {
  switch (config.algorithm()) {
    case LimitAlgorithm::aimd:
      return Aimd(config);
    case LimitAlgorithm::vegas:
      return Vegas(config);
    case LimitAlgorithm::delay_target:
      return DelayTarget(config);
    case LimitAlgorithm::gradient2:
      break;
  }
  return Gradient2(config);
}
}  // namespace

LimitEstimator::LimitEstimator(const AdaptiveLimitConfig& config)
    : algorithm_(make_algorithm(config)) {}

int LimitEstimator::update(const WindowAggregate& window) noexcept {
  return std::visit([&](auto& algorithm) { return algorithm.update(window); }, algorithm_);
}

int LimitEstimator::limit() const noexcept {
  return std::visit([](const auto& algorithm) { return algorithm.limit(); }, algorithm_);
}

double LimitEstimator::fractional_limit() const noexcept {
  if (const auto* delay = std::get_if<DelayTarget>(&algorithm_)) {
    if (delay->estimate() < 1.0) return delay->estimate();
  }
  return limit();
}

std::int64_t LimitEstimator::long_latency_ns() const noexcept {
  if (const auto* gradient2 = std::get_if<Gradient2>(&algorithm_)) {
    return static_cast<std::int64_t>(gradient2->long_latency_ns());
  }
  if (const auto* vegas = std::get_if<Vegas>(&algorithm_)) return vegas->rtt_noload_ns();
  if (const auto* delay = std::get_if<DelayTarget>(&algorithm_)) {
    return static_cast<std::int64_t>(delay->baseline_ns());
  }
  return 0;
}

// ---- live reconfiguration ----------------------------------------------------------------
// Each algorithm takes a fresh instance's parameters from the new config and carries over what
// it learnt; the estimate stays where it was, clamped into the new bounds.

namespace {

// What a retuned algorithm keeps: the `learnt` members of `from`, copied into `to`, the fresh
// instance built from the new config.
template <class Algorithm, class... Member>
void carry_over(Algorithm& to, const Algorithm& from, Member Algorithm::*... learnt) {
  ((to.*learnt = from.*learnt), ...);
}

// An estimate carried into the new bounds [low, high].
double within(double low, double high, double estimate) {
  return std::max(low, std::min(high, estimate));
}

}  // namespace

void Gradient2::retune(const AdaptiveLimitConfig& config) {
  Gradient2 next(config);
  next.estimate_ = within(next.min_limit_, next.max_limit_, estimate_);
  carry_over(next, *this, &Gradient2::long_value_, &Gradient2::long_sum_, &Gradient2::long_count_);
  *this = next;
}

void Aimd::retune(const AdaptiveLimitConfig& config) {
  Aimd next(config);
  next.limit_ = std::min(next.max_limit_, std::max(next.min_limit_, limit_));
  *this = next;
}

void Vegas::retune(const AdaptiveLimitConfig& config) {
  Vegas next(config);
  next.estimate_ = within(next.min_limit_, next.max_limit_, estimate_);
  next.limit_ = static_cast<int>(next.estimate_);
  // The random stream and the pending probe's jitter go on too, so that a seeded run stays
  // reproducible.
  carry_over(next, *this, &Vegas::rtt_noload_, &Vegas::probe_count_, &Vegas::random_,
             &Vegas::jitter_);
  *this = std::move(next);
}

void DelayTarget::retune(const AdaptiveLimitConfig& config) {
  DelayTarget next(config);
  next.estimate_ = within(next.min_estimate_, next.max_estimate_, estimate_);
  next.before_probe_ = within(next.min_estimate_, next.max_estimate_, before_probe_);
  carry_over(next, *this, &DelayTarget::baseline_, &DelayTarget::smoothed_, &DelayTarget::streak_,
             &DelayTarget::probe_epoch_, &DelayTarget::probing_, &DelayTarget::cut_estimate_,
             &DelayTarget::cut_latency_);
  *this = next;
}

void LimitEstimator::retune(const AdaptiveLimitConfig& config, int current) {
  // The variant's alternatives are in LimitAlgorithm's order.
  if (algorithm_.index() == static_cast<std::size_t>(config.algorithm())) {
    std::visit([&](auto& algorithm) { algorithm.retune(config); }, algorithm_);
    return;
  }
  AdaptiveLimitConfig fresh = config;
  fresh.initial_limit(std::max(config.min_limit(), std::min(config.max_limit(), current)));
  algorithm_ = make_algorithm(fresh);
}

}  // namespace r4c::detail
