// SPDX-License-Identifier: Apache-2.0
// A rate limiter: at most limit_for_period permits per refresh_period. A call without a permit
// may wait up to timeout_duration for one (0 by default: it fails at once with
// RequestNotPermittedException). Time comes from the clock, so a ManualClock makes it
// deterministic: a wait ends when another thread advances the clock, never by real sleeping.
//
//   r4c::RateLimiter limiter("search", r4c::RateLimiterConfig().limit_for_period(100)
//                                          .refresh_period(std::chrono::seconds(1)), clock);
//   auto hits = limiter.execute([&] { return backend.search(query); });
//
// A call may weigh more than one permit (`acquire(n)`, `try_acquire(n)`, `execute(n, f)`): a
// bulk request that costs five takes five. A weight the limiter can never grant (below 1, or
// above limit_for_period, since a period never holds more) is refused at once with
// ConfigException R4C-USE-001 instead of waiting forever. `drain()` gives up the permits left
// in the current period, e.g. when the backend answered "too many requests".
//
// In a pipeline it sits outside the adaptive limit: a call the limit rejects has already taken
// a permit.
//
// Operating it (docs/operations.md): `mode = observe` lets every call through and counts in
// `would_have_rejected` the calls it would have refused; registry.reconfigure() changes
// limitForPeriod, refreshPeriod, timeoutDuration and mode of a live limiter, the periods
// re-based from the change, reserved permits and their waiters kept.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>

#include "r4c/adaptive_limit_config.hpp"  // PolicyMode
#include "r4c/clock.hpp"
#include "r4c/detail/cache_line.hpp"
#include "r4c/detail/handle.hpp"
#include "r4c/detail/live_config.hpp"
#include "r4c/detail/setting.hpp"
#include "r4c/detail/striped_counter.hpp"
#include "r4c/errors.hpp"
#include "r4c/exception_type.hpp"

namespace r4c {

/// Settings of a rate limiter.
class RateLimiterConfig {
 public:
  static constexpr int kDefaultLimitForPeriod = 50;
  static constexpr int kMaxLimitForPeriod = (1 << 23) - 1;
  static constexpr std::chrono::nanoseconds kDefaultRefreshPeriod = std::chrono::seconds(1);
  static constexpr std::chrono::nanoseconds kDefaultTimeoutDuration{0};

  /// Permits per period (50). R4C-ATR-003 below 1; R4C-REG-001 above 8388607.
  RateLimiterConfig& limit_for_period(int value);
  /// How often the permits refill (1 s). R4C-REG-001 outside 1 ms .. 1 h.
  RateLimiterConfig& refresh_period(std::chrono::nanoseconds value);
  /// How long a call may wait for a permit (0). R4C-REG-001 outside 0 .. 1 h.
  RateLimiterConfig& timeout_duration(std::chrono::nanoseconds value);
  /// observe: a call without a permit is let through at once, counted in
  /// `would_have_rejected` and taking nothing; the permits run as in enforce (the default).
  /// validate() refuses observe with timeout_duration above 0 (R4C-ATR-009): a wait is not
  /// observed.
  RateLimiterConfig& mode(PolicyMode value) noexcept;

  int limit_for_period() const noexcept { return limit_for_period_; }
  std::chrono::nanoseconds refresh_period() const noexcept { return refresh_period_; }
  std::chrono::nanoseconds timeout_duration() const noexcept { return timeout_duration_; }
  PolicyMode mode() const noexcept { return mode_; }
  void validate() const;

 private:
  int limit_for_period_ = kDefaultLimitForPeriod;
  std::chrono::nanoseconds refresh_period_ = kDefaultRefreshPeriod;
  std::chrono::nanoseconds timeout_duration_ = kDefaultTimeoutDuration;
  PolicyMode mode_ = PolicyMode::enforce;
};

std::optional<SettingDifference> first_difference(const RateLimiterConfig& first,
                                                  const RateLimiterConfig& second);

struct RateLimiterSnapshot {
  int limit_for_period = 0;
  std::chrono::nanoseconds refresh_period{0};
  std::chrono::nanoseconds timeout_duration{0};
  /// Permits left in the current period; negative while calls wait for reserved permits.
  int available_permissions = 0;
  int waiting_calls = 0;
  std::uint64_t rejected = 0;  // exact
  /// observe mode: calls it would have refused and let through (never in `rejected`).
  std::uint64_t would_have_rejected = 0;
  PolicyMode mode = PolicyMode::enforce;
};

class RateLimiter;

/// A view of a rate limiter for operators and tests. Valid while the rate limiter lives.
class RateLimiterHandle : public detail::HandleBase<RateLimiter> {
 public:
  using HandleBase::HandleBase;
};

/// limit_for_period permits per refresh_period, lock-free: the period and the permits left in it
/// share one atomic word. Thread safety: every member may be called from any thread.
class RateLimiter {
 public:
  RateLimiter(std::string instance_id, RateLimiterConfig config = {},
              std::shared_ptr<Clock> clock = nullptr);
  RateLimiter(const RateLimiter&) = delete;
  RateLimiter& operator=(const RateLimiter&) = delete;

  /// Takes a permit if one is free now; never waits. A refusal counts in `rejected`.
  [[nodiscard]] bool try_acquire() noexcept;
  /// Takes `permits` permits at once if that many are free now; never waits. A refusal counts
  /// once in `rejected`. Throws ConfigException R4C-USE-001 when `permits` is below 1 or above
  /// limit_for_period (no period ever holds that many), taking nothing.
  ///
  ///   if (!limiter.try_acquire(batch.size())) return defer(batch);
  [[nodiscard]] bool try_acquire(int permits);
  /// Takes a permit, waiting on the clock up to timeout_duration for a reserved one; else
  /// throws this limiter's RequestNotPermittedException (one preallocated object).
  void acquire();
  /// Takes `permits` permits as acquire() takes one: all of them from one reservation, waiting
  /// up to timeout_duration for the period that completes them. R4C-USE-001 as try_acquire(n).
  void acquire(int permits);
  /// acquire(), then `f`.
  template <class F>
  decltype(auto) execute(F&& f) {
    acquire();
    return std::invoke(std::forward<F>(f));
  }
  /// acquire(permits), then `f`.
  template <class F>
  decltype(auto) execute(int permits, F&& f) {
    acquire(permits);
    return std::invoke(std::forward<F>(f));
  }
  /// acquire() without the throw: takes a permit, waiting on the clock up to timeout_duration
  /// for a reserved one; false (counted in `rejected`) when none comes within it.
  [[nodiscard]] bool try_acquire_waiting();
  /// try_acquire_waiting() reserving at the call's start as `readings` has it (a pipeline's
  /// stage); a wait for a reserved permit makes the policies inside read their own start.
  [[nodiscard]] bool try_acquire_waiting(detail::SharedReadings& readings);
  /// execute() without a throw to say no (<r4c/outcome.hpp>): no permit within
  /// timeout_duration returns a refusal; `f` (returning a value or an Outcome) ends as one.
  template <class F>
  detail::OutcomeOf<F> try_execute(F&& f) {
    if (!try_acquire_waiting()) [[unlikely]]
      return detail::OutcomeOf<F>::refused(refusal());
    return detail::invoke_outcome(f);
  }
  /// try_execute() with the call's clock readings shared with the policies around and inside
  /// it (a pipeline's stage).
  template <class F>
  detail::OutcomeOf<F> try_execute(detail::SharedReadings& readings, F&& f) {
    if (!try_acquire_waiting(readings)) [[unlikely]]
      return detail::OutcomeOf<F>::refused(refusal());
    return detail::invoke_outcome(f);
  }
  /// Runs the asynchronous operation `op` once a permit is had, waiting on a timer, never
  /// blocking a thread; completes `token` with `void(std::exception_ptr, T)`.
  /// Defined in <r4c/asio.hpp>; see docs/async.md.
  template <class T, class Op, class Token>
  auto async_execute(Op&& op, Token&& token);
  /// The same with `permits` permits; a weight out of range completes `token` at once with
  /// ConfigException R4C-USE-001, the operation not started.
  template <class T, class Op, class Token>
  auto async_execute(int permits, Op&& op, Token&& token);

  /// Gives up every permit left in the current period (none when calls already wait for
  /// reserved ones) and returns how many it gave up; the next period refills as usual.
  /// resilience4j's drainPermissions().
  int drain() noexcept;

  /// A permit taken without blocking, for asynchronous callers.
  struct Reservation {
    enum class Kind : std::uint8_t {
      now,      // usable at once
      later,    // reserved in a coming period: usable from `ready_at`; the caller waits
      refused,  // none within timeout_duration (counted in `rejected`)
    };
    Kind kind = Kind::refused;
    std::chrono::nanoseconds ready_at{0};  // on the clock's now() scale; for `later` only
  };
  /// Takes a permit as acquire() does, sharing its accounting, but never waits: a `later`
  /// reservation counts in waiting_calls until the caller calls end_wait(), whether it used the
  /// permit or gave up (the permit stays taken either way).
  Reservation reserve_permit() noexcept;
  /// reserve_permit() for `permits` permits; R4C-USE-001 as try_acquire(n).
  Reservation reserve_permit(int permits);
  /// Ends a wait that reserve_permit() began.
  void end_wait() noexcept { waiting_.fetch_sub(1, std::memory_order_relaxed); }
  /// The RequestNotPermittedException refused calls fail with (one object, shared).
  const std::exception_ptr& rejection() const noexcept { return refused_; }
  /// The clock the permits and waits run on.
  const std::shared_ptr<Clock>& clock() const noexcept { return clock_owner_; }

  RateLimiterHandle handle() const noexcept { return RateLimiterHandle(*this); }
  const std::string& instance_id() const noexcept { return instance_id_; }
  /// The config now (reconfigure() replaces it).
  const RateLimiterConfig& config() const noexcept { return live_config_.get(); }
  RateLimiterSnapshot snapshot() const;

  /// Takes a new config on a live limiter (what registry.reconfigure() calls): validates it
  /// (ConfigException, nothing changed), then re-bases the periods on now: a new period of the
  /// new length starts now with the permits left as of now, at most the new limit_for_period;
  /// permits already reserved stay owed, their waiters wake when they were told. A call
  /// reserves against either the old or the new schedule, never a mix. Allocation: yes.
  void reconfigure(const RateLimiterConfig& next);

 private:
  // How the state word's periods map to time; replaced whole by reconfigure(). Period
  // `offset + k` starts at `start + k * period_ticks`; offsets grow across reconfigurations, so
  // the word never comes back to a value it had.
  struct Schedule {
    std::int64_t start;
    std::int64_t offset;
    std::int64_t period_ticks;
    std::int64_t timeout_ticks;
    std::int32_t limit;
  };
  // The word while reconfigure() replaces the schedule (never a real state).
  static constexpr std::uint64_t kRebasing = ~std::uint64_t{0};
  // The word (acquire, never kRebasing) and the schedule it counts in.
  std::uint64_t load_state(const Schedule** schedule) const noexcept;
  // The permits as of `now` under `schedule` (state_ read once).
  std::int64_t permits_at(const Schedule& schedule, std::uint64_t word,
                          std::int64_t now) const noexcept;
  // A refusal: counted in `rejected`, or in observe mode in `would_have_rejected` (true: let
  // the call through).
  bool refuse() noexcept;
  // Ticks to wait for `permits` permits reserved now, or -1 when they cannot be had within
  // `max_wait`.
  // `Permits`: std::int64_t, or a constant 1 (OnePermit) so that the weight-1 calls compile to
  // what they were before weights.
  template <class Permits>
  std::int64_t reserve(std::int64_t now, std::int64_t max_wait, Permits permits) noexcept;
  // Throws R4C-USE-001 for a weight no period can grant.
  void check_weight(int permits) const;
  // A reservation that could not be had now: refused (wait < 0) or later.
  Reservation reserve_permit_at(std::int64_t now) noexcept;
  Reservation reserved_later(std::int64_t now, std::int64_t wait) noexcept;
  bool wait_unless_refused(const Reservation& reservation);
  void wait_for(const Reservation& reservation);

  alignas(detail::kCacheLine) std::atomic<std::uint64_t> state_;  // period << 24 | permits
  alignas(detail::kCacheLine) const detail::ClockReader clock_;
  detail::LiveConfig<Schedule> schedule_;
  std::atomic<std::int32_t> waiting_{0};
  // A refusal as a value, named by the kind's descriptor (defined after it, below).
  Refusal refusal() const noexcept;
  const std::string instance_id_;
  detail::LiveConfig<RateLimiterConfig> live_config_;
  const std::shared_ptr<Clock> clock_owner_;
  const std::exception_ptr refused_;
  detail::StripedCounter rejected_;
  detail::StripedCounter would_reject_;
  std::atomic<bool> observe_;     // read only by a call without a permit
  std::mutex reconfigure_mutex_;  // one reconfiguration at a time (cold)
};

/// The rate limiter as a policy kind: what the registry, the pipelines, the metrics and the tools
/// know of it (see <r4c/detail/setting.hpp>; <r4c/detail/kinds.hpp> lists the kinds).
struct RateLimiterKind : detail::KindBase<RateLimiter, RequestNotPermittedException> {
  static constexpr KindNames kNames = {"rate_limiter", "rateLimiter", "rate limiter",
                                       "ratelimiter"};
  /// Every setting the external file takes, in the documented order.
  static std::span<const detail::Setting<Config>> settings() noexcept;
  /// Appends the metrics of one instance's snapshot (docs/observability.md).
  static void metrics(const Snapshot& snapshot, metrics::Emitter& out);
};

inline Refusal RateLimiter::refusal() const noexcept {
  return Refusal(refused_, RateLimiterKind::kNames.metrics, instance_id_);
}

}  // namespace r4c
