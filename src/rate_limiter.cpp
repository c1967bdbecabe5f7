// SPDX-License-Identifier: Apache-2.0
#include "r4c/rate_limiter.hpp"

#include <algorithm>
#include <thread>
#include <type_traits>

#include "config_check.hpp"
#include "kind_settings.hpp"
#include "observe_metrics.hpp"
#include "r4c/metrics.hpp"

namespace r4c {

namespace {

// The state word: the period number in the upper 40 bits, the permits left (signed, biased)
// in the lower 24. 2^40 periods of at least 1 ms last 34 years.
constexpr int kPermitBits = 24;
constexpr std::int64_t kPermitBias = std::int64_t{1} << (kPermitBits - 1);
constexpr std::uint64_t kPermitMask = (std::uint64_t{1} << kPermitBits) - 1;
constexpr std::int64_t kMinPermits = -kPermitBias;

// A weight no period can grant (docs/configuration.md lists the code).
constexpr std::string_view kWeightOutOfRange = "R4C-USE-001";

// A wait bound that never binds: the schedule's timeout is the bound.
constexpr std::int64_t kNoLimit = INT64_MAX;

// The weight of a weight-1 call, known at compile time.
using OnePermit = std::integral_constant<std::int64_t, 1>;

struct State {
  std::int64_t period;
  std::int64_t permits;
};

std::uint64_t pack(State state) {
  return (static_cast<std::uint64_t>(state.period) << kPermitBits) |
         static_cast<std::uint64_t>(state.permits + kPermitBias);
}

State unpack(std::uint64_t word) {
  return {static_cast<std::int64_t>(word >> kPermitBits),
          static_cast<std::int64_t>(word & kPermitMask) - kPermitBias};
}

// The state as of `period`: every period that began since adds a period's permits, up to a
// full period's worth.
State refilled(State state, std::int64_t period, std::int64_t limit) {
  if (period <= state.period) return state;
  const std::int64_t periods = std::min<std::int64_t>(period - state.period, kPermitBias);
  return {period, std::min<std::int64_t>(state.permits + periods * limit, limit)};
}

void check_period(const char* setting, std::chrono::nanoseconds value, std::chrono::nanoseconds min,
                  std::string_view valid) {
  if (value < min || value > std::chrono::hours(1)) {
    detail::fail(detail::kInvalidValue, setting, detail::show(value), valid);
  }
}

}  // namespace

RateLimiterConfig& RateLimiterConfig::limit_for_period(int value) {
  if (value < 1) {
    detail::fail(detail::kLimitBelowOne, "limit_for_period", detail::show(value),
                 "an integer >= 1");
  }
  if (value > kMaxLimitForPeriod) {
    detail::fail(detail::kInvalidValue, "limit_for_period", detail::show(value),
                 "an integer from 1 to 8388607");
  }
  return detail::store(*this, limit_for_period_, value);
}

RateLimiterConfig& RateLimiterConfig::refresh_period(std::chrono::nanoseconds value) {
  check_period("refresh_period", value, std::chrono::milliseconds(1), "1 ms .. 1 h");
  return detail::store(*this, refresh_period_, value);
}

RateLimiterConfig& RateLimiterConfig::timeout_duration(std::chrono::nanoseconds value) {
  check_period("timeout_duration", value, std::chrono::nanoseconds(0), "0 .. 1 h");
  return detail::store(*this, timeout_duration_, value);
}

RateLimiterConfig& RateLimiterConfig::mode(PolicyMode value) noexcept {
  return detail::store(*this, mode_, value);
}

void RateLimiterConfig::validate() const {
  RateLimiterConfig()
      .limit_for_period(limit_for_period_)
      .refresh_period(refresh_period_)
      .timeout_duration(timeout_duration_);
  detail::check_no_wait_when_observing(
      mode_ == PolicyMode::observe, "timeout_duration", timeout_duration_,
      "an observed limiter lets a call through instead of making it wait");
}

std::optional<SettingDifference> first_difference(const RateLimiterConfig& first,
                                                  const RateLimiterConfig& second) {
  return detail::settings_difference<RateLimiterKind>(first, second);
}

RateLimiter::RateLimiter(std::string instance_id, RateLimiterConfig config,
                         std::shared_ptr<Clock> clock)
    : state_(pack({0, detail::validated(config).limit_for_period()})),
      clock_(detail::or_system_clock(clock)),
      schedule_(
          Schedule{clock_.ticks(), 0,
                   std::max<std::int64_t>(1, clock_.to_ticks(config.refresh_period().count())),
                   clock_.to_ticks(config.timeout_duration().count()), config.limit_for_period()}),
      instance_id_(std::move(instance_id)),
      live_config_(config),
      clock_owner_(std::move(clock)),
      refused_(std::make_exception_ptr(RequestNotPermittedException(
          instance_id_, "rate limiter '" + instance_id_ + "' has no permit for the call (" +
                            std::to_string(config.limit_for_period()) + " per " +
                            detail::show(config.refresh_period()) + ")"))),
      observe_(config.mode() == PolicyMode::observe) {}

// always_inline: on every permit; out of line it cost a call and a frame (15 instructions).
[[gnu::always_inline]] inline std::uint64_t RateLimiter::load_state(
    const Schedule** schedule) const noexcept {
  for (;;) {
    // acquire: a word reconfigure() stored comes with the schedule it stored before it.
    const std::uint64_t word = state_.load(std::memory_order_acquire);
    if (word != kRebasing) [[likely]] {
      *schedule = &schedule_.get();
      return word;
    }
    std::this_thread::yield();  // a reconfiguration is re-basing the word; it is short
  }
}

template <class Permits>
std::int64_t RateLimiter::reserve(std::int64_t now, std::int64_t max_wait,
                                  Permits permits) noexcept {
  const Schedule* schedule = nullptr;
  std::uint64_t word = load_state(&schedule);
  for (;;) {
    const Schedule& s = *schedule;
    // The word's period ends at start + (period - offset + 1) * period_ticks: while `now` is
    // before that end, `now` is in that period (or, read before another thread moved the word
    // on, in an earlier one, which refilled() treats as that period), and no division is
    // needed. The product never overflows: the word's period was once an earlier
    // offset + (now - start) / period_ticks.
    const std::int64_t known = unpack(word).period;
    const std::int64_t period = now < s.start + (known - s.offset + 1) * s.period_ticks
                                    ? known
                                    : s.offset + (now - s.start) / s.period_ticks;
    const State state = refilled(unpack(word), period, s.limit);
    const std::int64_t left = state.permits - static_cast<std::int64_t>(permits);
    std::int64_t wait = 0;
    if (left < 0) {
      // The k-th reserved permit comes with the ceil(k / limit)-th period from now; a weighted
      // reservation waits for its last permit.
      const std::int64_t periods_ahead = (-left + s.limit - 1) / s.limit;
      wait = s.start + (state.period - s.offset + periods_ahead) * s.period_ticks - now;
      if (wait > std::min(max_wait, s.timeout_ticks) || left < kMinPermits) return -1;
    }
    // A word counted in another schedule than `s` fails the exchange: reconfigure() moves the
    // word to kRebasing and then to a period no earlier word had. acquire on failure: the word
    // read comes with its schedule, as in load_state(). On success relaxed would do (the word is
    // the whole state; a permit guards no other data), but a failure order may not be stronger
    // than the success order before C++17, and g++ 12 rejects it so in unoptimised builds (on
    // x86 both are the same instruction).
    if (state_.compare_exchange_weak(word, pack({state.period, left}), std::memory_order_acquire,
                                     std::memory_order_acquire)) {
      return wait;
    }
    if (word == kRebasing) word = load_state(&schedule);
    schedule = &schedule_.get();
  }
}

void RateLimiter::check_weight(int permits) const {
  const std::int32_t limit = schedule_.get().limit;
  if (permits >= 1 && permits <= limit) [[likely]]
    return;
  throw ConfigException(kWeightOutOfRange,
                        "rate limiter '" + instance_id_ + "' was asked for " +
                            std::to_string(permits) + " permits at once; valid: 1 .. " +
                            std::to_string(limit) + " (limit_for_period: no period holds more)");
}

bool RateLimiter::refuse() noexcept {
  if (observe_.load(std::memory_order_relaxed)) {
    would_reject_.increment();
    return true;
  }
  rejected_.increment();
  return false;
}

bool RateLimiter::try_acquire() noexcept {
  if (reserve(clock_.ticks(), 0, OnePermit{}) == 0) [[likely]]
    return true;
  return refuse();
}

bool RateLimiter::try_acquire(int permits) {
  check_weight(permits);
  if (reserve(clock_.ticks(), 0, std::int64_t{permits}) == 0) return true;
  return refuse();
}

RateLimiter::Reservation RateLimiter::reserve_permit() noexcept {
  return reserve_permit_at(clock_.ticks());
}

RateLimiter::Reservation RateLimiter::reserve_permit_at(std::int64_t now) noexcept {
  const std::int64_t wait = reserve(now, kNoLimit, OnePermit{});
  if (wait == 0) [[likely]]
    return {Reservation::Kind::now, std::chrono::nanoseconds(0)};
  return reserved_later(now, wait);
}

RateLimiter::Reservation RateLimiter::reserve_permit(int permits) {
  check_weight(permits);
  const std::int64_t now = clock_.ticks();
  const std::int64_t wait = reserve(now, kNoLimit, std::int64_t{permits});
  if (wait == 0) return {Reservation::Kind::now, std::chrono::nanoseconds(0)};
  return reserved_later(now, wait);
}

RateLimiter::Reservation RateLimiter::reserved_later(std::int64_t now, std::int64_t wait) noexcept {
  if (wait < 0) {
    if (refuse()) return {Reservation::Kind::now, std::chrono::nanoseconds(0)};
    return {};
  }
  waiting_.fetch_add(1, std::memory_order_relaxed);
  // From the reservation's own reading: the clock may have moved on since.
  return {Reservation::Kind::later, std::chrono::nanoseconds(clock_.to_clock_ns(now + wait))};
}

void RateLimiter::acquire() { wait_for(reserve_permit()); }

bool RateLimiter::try_acquire_waiting() { return wait_unless_refused(reserve_permit()); }

bool RateLimiter::try_acquire_waiting(detail::SharedReadings& readings) {
  const Reservation reservation = reserve_permit_at(readings.start(clock_));
  if (reservation.kind == Reservation::Kind::later) readings.waited();
  return wait_unless_refused(reservation);
}

bool RateLimiter::wait_unless_refused(const Reservation& reservation) {
  if (reservation.kind == Reservation::Kind::refused) [[unlikely]]
    return false;
  wait_for(reservation);
  return true;
}

void RateLimiter::acquire(int permits) { wait_for(reserve_permit(permits)); }

void RateLimiter::wait_for(const Reservation& reservation) {
  if (reservation.kind == Reservation::Kind::now) [[likely]]
    return;
  if (reservation.kind == Reservation::Kind::refused) std::rethrow_exception(refused_);
  // Ends the wait however it ends (sleep_until may throw std::bad_alloc).
  struct EndWait {
    RateLimiter& limiter;
    ~EndWait() { limiter.end_wait(); }
  } end_wait_on_exit{*this};
  clock_owner_->sleep_until(reservation.ready_at);
}

int RateLimiter::drain() noexcept {
  const std::int64_t now = clock_.ticks();
  const Schedule* schedule = nullptr;
  std::uint64_t word = load_state(&schedule);
  for (;;) {
    const Schedule& s = *schedule;
    const State state =
        refilled(unpack(word), s.offset + (now - s.start) / s.period_ticks, s.limit);
    if (state.permits <= 0) return 0;  // nothing left, or calls already wait for coming ones
    // As reserve().
    if (state_.compare_exchange_weak(word, pack({state.period, 0}), std::memory_order_acquire,
                                     std::memory_order_acquire)) {
      return static_cast<int>(state.permits);
    }
    if (word == kRebasing) word = load_state(&schedule);
    schedule = &schedule_.get();
  }
}

std::int64_t RateLimiter::permits_at(const Schedule& s, std::uint64_t word,
                                     std::int64_t now) const noexcept {
  return refilled(unpack(word), s.offset + (now - s.start) / s.period_ticks, s.limit).permits;
}

void RateLimiter::reconfigure(const RateLimiterConfig& next) {
  next.validate();
  std::lock_guard<std::mutex> lock(reconfigure_mutex_);
  const RateLimiterConfig& current = live_config_.get();
  const Schedule& old = schedule_.get();
  const bool rebase = next.limit_for_period() != current.limit_for_period() ||
                      next.refresh_period() != current.refresh_period();
  live_config_.replace(next);  // may throw (allocation): before anything changes
  Schedule fresh = old;
  fresh.timeout_ticks = clock_.to_ticks(next.timeout_duration().count());
  if (!rebase) {
    schedule_.replace(fresh);
  } else {
    // The word goes to kRebasing, so no call reserves while the schedule changes; then a new
    // period starts now, numbered after every period the word has counted.
    std::uint64_t word = state_.load(std::memory_order_relaxed);
    while (!state_.compare_exchange_weak(word, kRebasing, std::memory_order_relaxed,
                                         std::memory_order_relaxed)) {
    }
    const std::int64_t now = clock_.ticks();
    const std::int64_t left = permits_at(old, word, now);
    fresh.start = now;
    fresh.offset =
        std::max(unpack(word).period, old.offset + (now - old.start) / old.period_ticks) + 1;
    fresh.period_ticks = std::max<std::int64_t>(1, clock_.to_ticks(next.refresh_period().count()));
    fresh.limit = next.limit_for_period();
    // Permits reserved stay owed (negative); what is left carries over, at most a period's worth.
    const std::int64_t carried = std::min<std::int64_t>(left, fresh.limit);
    try {
      schedule_.replace(fresh);
    } catch (...) {
      state_.store(word, std::memory_order_release);  // nothing changed
      throw;
    }
    // release: the schedule above happens before any call that reads this word.
    state_.store(pack({fresh.offset, std::max(carried, kMinPermits)}), std::memory_order_release);
  }
  observe_.store(next.mode() == PolicyMode::observe, std::memory_order_relaxed);
}

RateLimiterSnapshot RateLimiter::snapshot() const {
  RateLimiterSnapshot snap;
  const RateLimiterConfig& config = live_config_.get();
  snap.limit_for_period = config.limit_for_period();
  snap.refresh_period = config.refresh_period();
  snap.timeout_duration = config.timeout_duration();
  snap.mode = config.mode();
  const Schedule* schedule = nullptr;
  const std::uint64_t word = load_state(&schedule);
  snap.available_permissions = static_cast<int>(permits_at(*schedule, word, clock_.ticks()));
  snap.waiting_calls = waiting_.load(std::memory_order_relaxed);
  snap.rejected = rejected_.total();
  snap.would_have_rejected = would_reject_.total();
  return snap;
}

// The file keys in the documented order (R4C-CFG-003 lists them so).
std::span<const detail::Setting<RateLimiterKind::Config>> RateLimiterKind::settings() noexcept {
  using R = detail::SettingRows<Config>;  // Config: the kind's
  static constexpr detail::Setting<Config> kSettings[] = {
      R::field<int, &Config::limit_for_period, &Config::limit_for_period>("limitForPeriod",
                                                                          "limit_for_period"),
      R::field<std::chrono::nanoseconds, &Config::refresh_period, &Config::refresh_period>(
          "refreshPeriod", "refresh_period"),
      R::field<std::chrono::nanoseconds, &Config::timeout_duration, &Config::timeout_duration>(
          "timeoutDuration", "timeout_duration"),
      R::file_field<PolicyMode, &Config::mode, &Config::mode>("mode", "mode")};
  return kSettings;
}

void RateLimiterKind::metrics(const Snapshot& s, metrics::Emitter& out) {
  out.rejected(s.rejected);
  out.gauge("r4c.ratelimiter.available.permissions",
            "Permits left in the rate limiter's period; negative while calls wait for reserved "
            "permits.",
            s.available_permissions);
  out.gauge("r4c.ratelimiter.waiting.calls", "Calls waiting for a permit of the rate limiter.",
            s.waiting_calls);
  detail::emit_would_reject(
      out, s, "r4c.ratelimiter.would.reject",
      "Calls the rate limiter in observe mode would have refused and let through.");
}

}  // namespace r4c
