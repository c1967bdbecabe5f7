// SPDX-License-Identifier: Apache-2.0
// The throttle's window: kBuckets slots, each holding one bucket's requests and accepts in one
// word, reused round the ring. The sum of the window's earlier buckets is kept beside them and
// recomputed when a call first sees a new bucket (once per window / kBuckets), so an admission
// reads two words instead of summing the ring. A slot is handed to its new bucket by taking
// away the counts it held, not by zeroing it, so that an outcome recorded in the new bucket
// while the slot changes hands is kept. Counts are exact when no call races a bucket boundary;
// a race there can misplace a call by one bucket, never lose the window.
#include "r4c/throttle.hpp"

#include <algorithm>
#include <limits>

#include "config_check.hpp"
#include "kind_settings.hpp"
#include "r4c/metrics.hpp"

namespace r4c {
namespace {

constexpr std::uint64_t kHalf = std::numeric_limits<std::uint32_t>::max();

std::uint64_t requests_of(std::uint64_t counts) { return counts >> 32; }
std::uint64_t accepts_of(std::uint64_t counts) { return counts & kHalf; }

}  // namespace

ThrottledException::ThrottledException(const std::string& message)
    : ThrottledException("", message) {}

ThrottledException::ThrottledException(std::string instance_id, const std::string& message)
    : RejectedException(std::move(instance_id), ThrottleKind::kNames.metrics, message) {}

ThrottleConfig& ThrottleConfig::k(double value) {
  if (!(value >= 1.0 && value <= 100.0)) {
    detail::fail(detail::kInvalidValue, "k", detail::show(value), "1 .. 100");
  }
  return detail::store(*this, k_, value);
}

ThrottleConfig& ThrottleConfig::window(std::chrono::nanoseconds value) {
  if (value < std::chrono::milliseconds(10) || value > std::chrono::hours(1)) {
    detail::fail(detail::kInvalidValue, "window", detail::show(value), "10 ms .. 1 h");
  }
  return detail::store(*this, window_, value);
}

ThrottleConfig& ThrottleConfig::refused_on(std::vector<ExceptionType> types) {
  return detail::store(*this, refused_on_, std::move(types));
}

ThrottleConfig& ThrottleConfig::refused_on(
    std::function<bool(const std::exception_ptr&)> predicate) {
  return detail::store_checked(*this, refused_if_, std::move(predicate), detail::check_callable,
                               "refused_on");
}

ThrottleConfig& ThrottleConfig::seed(std::int64_t value) {
  return detail::store(*this, seed_, value);
}

void ThrottleConfig::check_predicate(const char* setting, bool present) {
  detail::check_present(setting, present);
}

void ThrottleConfig::validate() const { ThrottleConfig().k(k_).window(window_); }

std::optional<SettingDifference> first_difference(const ThrottleConfig& first,
                                                  const ThrottleConfig& second) {
  if (auto difference =
          detail::settings_difference<ThrottleKind>(first, second, {"k", "window", "refused_on"})) {
    return difference;
  }
  // Not in the table: whether each predicate is set, and the whole seed (the table's is an int).
  return detail::DifferenceFinder()
      .compare("refused_on_predicate", static_cast<bool>(first.refused_on_predicate()),
               static_cast<bool>(second.refused_on_predicate()))
      .compare("refused_result", first.refused_result_predicate().type().has_value(),
               second.refused_result_predicate().type().has_value())
      .compare("seed", first.seed(), second.seed())
      .result();
}

Throttle::Throttle(std::string instance_id, ThrottleConfig config, std::shared_ptr<Clock> clock,
                   RandomSource random)
    : random_state_(static_cast<std::uint64_t>(detail::validated(config).seed())),
      clock_(detail::or_system_clock(clock)),
      start_(clock_.ticks()),
      bucket_ticks_(std::max<std::int64_t>(1, clock_.to_ticks(config.window().count() / kBuckets))),
      k_(config.k()),
      instance_id_(std::move(instance_id)),
      config_(std::move(config)),
      clock_owner_(std::move(clock)),
      random_(std::move(random)),
      throttled_exception_(std::make_exception_ptr(ThrottledException(
          instance_id_, "throttle '" + instance_id_ +
                            "' rejected the call locally: its backend has been refusing calls "
                            "(k " +
                            detail::show(config_->k()) + " over " +
                            detail::show(config_->window()) + ")"))) {}

ThrottlePermit Throttle::try_acquire() noexcept {
  const std::int64_t now = bucket_at(clock_.ticks());
  const double p = probability(totals(now));
  if (p <= 0.0 || draw() >= p) [[likely]]
    return ThrottlePermit(this, now);
  // A request the application made, and neither an accept nor the backend's refusal.
  record(now, kRequest);
  throttled_.increment();
  return ThrottlePermit();
}

Throttle::Totals Throttle::totals(std::int64_t now) noexcept {
  const Slot& current = slots_[now % kBuckets];
  // acquire: pairs with roll()'s release, so the closed counts read below are the bucket's.
  if (closed_bucket_.load(std::memory_order_acquire) != now ||
      current.bucket.load(std::memory_order_relaxed) != now) [[unlikely]] {
    roll(now);
  }
  const std::uint64_t closed = closed_counts_.load(std::memory_order_relaxed);
  const std::uint64_t counts = current.bucket.load(std::memory_order_relaxed) == now
                                   ? current.counts.load(std::memory_order_relaxed)
                                   : 0;
  return {requests_of(closed) + requests_of(counts), accepts_of(closed) + accepts_of(counts)};
}

void Throttle::roll(std::int64_t now) noexcept {
  Slot& current = slots_[now % kBuckets];
  std::int64_t held = current.bucket.load(std::memory_order_acquire);
  while (held < now) {
    const std::uint64_t stale = current.counts.load(std::memory_order_relaxed);
    // acq_rel: whoever sees the slot's new bucket sees it emptied of the old one's counts
    // only after the subtraction below; a count added in between is the new bucket's.
    if (current.bucket.compare_exchange_weak(held, now, std::memory_order_acq_rel,
                                             std::memory_order_acquire)) {
      current.counts.fetch_sub(stale, std::memory_order_relaxed);
      break;
    }
  }
  std::int64_t closed = closed_bucket_.load(std::memory_order_acquire);
  if (closed >= now) return;
  const Totals earlier = totals_without_rolling(now - 1);
  const std::uint64_t packed =
      (std::min(earlier.requests, kHalf) << 32) | std::min(earlier.accepts, kHalf);
  while (closed < now) {
    // release: a reader that sees the bucket number sees the counts stored before it.
    closed_counts_.store(packed, std::memory_order_relaxed);
    if (closed_bucket_.compare_exchange_weak(closed, now, std::memory_order_release,
                                             std::memory_order_acquire)) {
      break;
    }
  }
}

Throttle::Totals Throttle::totals_without_rolling(std::int64_t last) const noexcept {
  Totals sum{0, 0};
  for (std::int64_t bucket = std::max<std::int64_t>(0, last - kBuckets + 1); bucket <= last;
       ++bucket) {
    const Slot& slot = slots_[bucket % kBuckets];
    if (slot.bucket.load(std::memory_order_acquire) != bucket) continue;  // none, or aged out
    const std::uint64_t counts = slot.counts.load(std::memory_order_relaxed);
    sum.requests += requests_of(counts);
    sum.accepts += accepts_of(counts);
  }
  return sum;
}

// The SRE book's formula.
double Throttle::probability(Totals totals) const noexcept {
  const double requests = static_cast<double>(totals.requests);
  const double excess =
      requests - k_.load(std::memory_order_relaxed) * static_cast<double>(totals.accepts);
  if (excess <= 0.0) return 0.0;
  return excess / (requests + 1.0);
}

double Throttle::draw() noexcept {
  if (random_) return random_();
  // SplitMix64 over a shared counter: lock-free, and the same sequence for the same seed.
  constexpr std::uint64_t kGamma = 0x9e3779b97f4a7c15;
  std::uint64_t z = random_state_.fetch_add(kGamma, std::memory_order_relaxed) + kGamma;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
  z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

void Throttle::record(std::int64_t bucket, std::uint64_t counts) noexcept {
  Slot& slot = slots_[bucket % kBuckets];
  // A call that outlived the window (its slot holds a later bucket) counts as nothing.
  if (slot.bucket.load(std::memory_order_relaxed) != bucket) return;
  slot.counts.fetch_add(counts, std::memory_order_relaxed);
  // Already summed into the closed counts: add it there too, while it is in the window.
  const std::int64_t closed = closed_bucket_.load(std::memory_order_acquire);
  if (bucket < closed && bucket > closed - kBuckets) {
    closed_counts_.fetch_add(counts, std::memory_order_relaxed);
  }
}

// The order of the overview: refused_on (type or predicate), an inner policy's refusal,
// then an accept when refused_on says which failures are refusals, else a refusal.
void Throttle::record_failure(std::int64_t bucket) noexcept {
  // One read of the live config: the types and the predicate of one refused_on.
  const ThrottleConfig& config = config_.get();
  const std::vector<ExceptionType>& refused = config.refused_on_types();
  const detail::ExceptionPredicate& refused_if = config.refused_on_predicate();
  if (!detail::matches_current(refused, refused_if)) {
    // An inner policy's refusal never reached the backend.
    if (ExceptionType::of<RejectedException>().matches_current()) return;
    if (!refused.empty() || refused_if) return record(bucket, kRequest | 1);  // it answered
  }
  record(bucket, kRequest);
  refused_.increment();
}

void ThrottlePermit::on_current_exception() noexcept {
  if (Throttle* throttle = std::exchange(throttle_, nullptr)) throttle->record_failure(bucket_);
}

void ThrottlePermit::on_failure(const std::exception_ptr& failure) noexcept {
  if (!failure) return on_accepted();
  try {
    std::rethrow_exception(failure);
  } catch (...) {
    on_current_exception();
  }
}

void Throttle::throw_throttled() const { std::rethrow_exception(throttled_exception_); }

double Throttle::rejection_probability() const noexcept {
  return probability(totals_without_rolling(bucket_at(clock_.ticks())));
}

bool Throttle::live_setting(std::string_view key) noexcept { return key != "window"; }

void Throttle::reconfigure(const ThrottleConfig& next) {
  next.validate();
  detail::check_fixed_settings<ThrottleKind>(config_.get(), next, instance_id_);
  const bool new_seed = next.seed() != config_->seed();
  config_.replace(next);
  k_.store(next.k(), std::memory_order_relaxed);
  // relaxed: the generator's state is its whole data; the draws after this one start the new
  // seed's sequence (a draw racing with the store may take one more step of the old one).
  if (new_seed)
    random_state_.store(static_cast<std::uint64_t>(next.seed()), std::memory_order_relaxed);
}

ThrottleSnapshot Throttle::snapshot() const {
  ThrottleSnapshot snap;
  snap.k = k_.load(std::memory_order_relaxed);
  snap.window = config_->window();
  const Totals totals = totals_without_rolling(bucket_at(clock_.ticks()));
  snap.requests = totals.requests;
  snap.accepts = totals.accepts;
  snap.rejection_probability = probability(totals);
  snap.throttled = throttled_.total();
  snap.refused = refused_.total();
  return snap;
}

// The file keys in the documented order (R4C-CFG-003 lists them so).
std::span<const detail::Setting<ThrottleKind::Config>> ThrottleKind::settings() noexcept {
  using R = detail::SettingRows<Config>;  // Config: the kind's
  using enum detail::SettingType;
  static constexpr detail::Setting<Config> kSettings[] = {
      R::field<double, &Config::k, &Config::k>("k", "k"),
      R::field<std::chrono::nanoseconds, &Config::window, &Config::window>("window", "window"),
      R::field<std::vector<ExceptionType>, &Config::refused_on, &Config::refused_on_types>(
          "refusedOn", "refused_on"),
      R::row(
          "seed", "seed", integer, [](auto& c, auto& v) { c.seed(v.integer); },
          [](const auto& c) { return detail::value_of(static_cast<int>(c.seed())); })};
  return kSettings;
}

void ThrottleKind::metrics(const Snapshot& s, metrics::Emitter& out) {
  out.rejected(s.throttled);
  out.gauge("r4c.throttle.requests",
            "Requests in the throttle's window, the calls it rejected locally included.",
            metrics::count(s.requests));
  out.gauge("r4c.throttle.accepts", "Calls the backend accepted in the throttle's window.",
            metrics::count(s.accepts));
  out.gauge("r4c.throttle.rejection.probability",
            "The probability that the throttle rejects the next call locally.",
            s.rejection_probability);
  out.counter("r4c.throttle.backend.refused",
              "Calls the backend refused, as the throttle's refused_on classifies them (its own "
              "rejections never count).",
              metrics::count(s.refused));
}

}  // namespace r4c
