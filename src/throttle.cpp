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
                            detail::show(config_->window()) + ")"))) {
  all_buckets_.push_back(std::make_unique<Buckets>(bucket_ticks_of(config_->window()), 0));
  buckets_.store(all_buckets_.back().get(), std::memory_order_release);
}

std::int64_t Throttle::bucket_ticks_of(std::chrono::nanoseconds window) const noexcept {
  return std::max<std::int64_t>(1, clock_.to_ticks(window.count() / kBuckets));
}

ThrottlePermit Throttle::try_acquire() noexcept {
  // acquire: pairs with reconfigure()'s release, so new buckets are seen made.
  Buckets& buckets = *buckets_.load(std::memory_order_acquire);
  const std::int64_t now = bucket_at(buckets, clock_.ticks());
  const double p = probability(totals(buckets, now));
  if (p <= 0.0 || draw() >= p) [[likely]]
    return ThrottlePermit(this, buckets.tag | now);
  // A request the application made, and neither an accept nor the backend's refusal.
  record_in(buckets, now, kRequest);
  throttled_.increment();
  return ThrottlePermit();
}

Throttle::Totals Throttle::totals(Buckets& buckets, std::int64_t now) noexcept {
  const Slot& current = buckets.slots[now % kBuckets];
  // acquire: pairs with roll()'s release, so the closed counts read below are the bucket's.
  if (buckets.closed_bucket.load(std::memory_order_acquire) != now ||
      current.bucket.load(std::memory_order_relaxed) != now) [[unlikely]] {
    roll(buckets, now);
  }
  const std::uint64_t closed = buckets.closed_counts.load(std::memory_order_relaxed);
  const std::uint64_t counts = current.bucket.load(std::memory_order_relaxed) == now
                                   ? current.counts.load(std::memory_order_relaxed)
                                   : 0;
  return {requests_of(closed) + requests_of(counts), accepts_of(closed) + accepts_of(counts)};
}

void Throttle::roll(Buckets& buckets, std::int64_t now) noexcept {
  Slot& current = buckets.slots[now % kBuckets];
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
  std::int64_t closed = buckets.closed_bucket.load(std::memory_order_acquire);
  if (closed >= now) return;
  const Totals earlier = totals_without_rolling(buckets, now - 1);
  const std::uint64_t packed =
      (std::min(earlier.requests, kHalf) << 32) | std::min(earlier.accepts, kHalf);
  while (closed < now) {
    // release: a reader that sees the bucket number sees the counts stored before it.
    buckets.closed_counts.store(packed, std::memory_order_relaxed);
    if (buckets.closed_bucket.compare_exchange_weak(closed, now, std::memory_order_release,
                                                    std::memory_order_acquire)) {
      break;
    }
  }
}

Throttle::Totals Throttle::totals_without_rolling(const Buckets& buckets,
                                                  std::int64_t last) noexcept {
  Totals sum{0, 0};
  for (std::int64_t bucket = std::max<std::int64_t>(0, last - kBuckets + 1); bucket <= last;
       ++bucket) {
    const Slot& slot = buckets.slots[bucket % kBuckets];
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
  // acquire: pairs with reconfigure()'s release, so new buckets are seen made.
  Buckets& buckets = *buckets_.load(std::memory_order_acquire);
  if ((bucket & ~kNumberMask) != buckets.tag) [[unlikely]]
    return record_moved(buckets, counts);
  record_in(buckets, bucket & kNumberMask, counts);
}

void Throttle::record_moved(Buckets& buckets, std::uint64_t counts) noexcept {
  // Admitted into buckets the window replaced since: counted in the current bucket.
  const std::int64_t now = bucket_at(buckets, clock_.ticks());
  (void)totals(buckets, now);  // rolls the window to it
  record_in(buckets, now, counts);
}

void Throttle::carry_into(Buckets& next) const noexcept {
  const Buckets& old = *buckets_.load(std::memory_order_acquire);
  const std::int64_t bucket_ticks = next.bucket_ticks;
  const std::int64_t ticks = clock_.ticks();
  const std::int64_t old_now = bucket_at(old, ticks);
  const std::int64_t now = bucket_at(next, ticks);
  for (std::int64_t bucket = std::max<std::int64_t>(0, old_now - kBuckets + 1); bucket <= old_now;
       ++bucket) {
    const Slot& slot = old.slots[bucket % kBuckets];
    if (slot.bucket.load(std::memory_order_acquire) != bucket) continue;  // none, or aged out
    const std::uint64_t counts = slot.counts.load(std::memory_order_relaxed);
    // The new bucket of the old one's beginning (numbers grow with `bucket`: a slot the loop
    // finds with an earlier number holds a bucket out of the new window).
    const std::int64_t into = bucket * old.bucket_ticks / bucket_ticks;
    if (into <= now - kBuckets || counts == 0) continue;  // began before the new window
    Slot& target = next.slots[into % kBuckets];
    // relaxed: nobody reads the new buckets before their publication (a release).
    if (target.bucket.load(std::memory_order_relaxed) != into) {
      target.bucket.store(into, std::memory_order_relaxed);
      target.counts.store(0, std::memory_order_relaxed);
    }
    target.counts.fetch_add(counts, std::memory_order_relaxed);
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
  const Buckets& buckets = *buckets_.load(std::memory_order_acquire);
  return probability(totals_without_rolling(buckets, bucket_at(buckets, clock_.ticks())));
}

void Throttle::reconfigure(const ThrottleConfig& next) {
  next.validate();
  std::lock_guard<std::mutex> lock(buckets_mutex_);
  const bool new_seed = next.seed() != config_->seed();
  const std::int64_t bucket_ticks = bucket_ticks_of(next.window());
  // Everything that may throw (allocation) comes before the throttle changes.
  std::unique_ptr<Buckets> buckets;
  const Buckets& current = *buckets_.load(std::memory_order_relaxed);  // only here it changes
  if (bucket_ticks != current.bucket_ticks) {
    all_buckets_.reserve(all_buckets_.size() + 1);
    buckets = std::make_unique<Buckets>(
        bucket_ticks, ((current.tag >> kTagShift) + 1) % (std::int64_t{1} << 16) << kTagShift);
  }
  config_.replace(next);
  if (buckets) {
    // The copy just before the publication: what the old buckets count meanwhile is missed.
    carry_into(*buckets);
    all_buckets_.push_back(std::move(buckets));
    // release: a call that reads the pointer sees the buckets made and their carried counts.
    buckets_.store(all_buckets_.back().get(), std::memory_order_release);
  }
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
  const Buckets& buckets = *buckets_.load(std::memory_order_acquire);
  const Totals totals = totals_without_rolling(buckets, bucket_at(buckets, clock_.ticks()));
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
