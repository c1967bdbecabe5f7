// SPDX-License-Identifier: Apache-2.0
// A circuit breaker, as resilience4j's CircuitBreaker: it stops calling a dependency that fails
// (or is slow) too often, and lets a few trial calls through after a wait to see if it is back.
//
// CLOSED rates the calls in its sliding window (the last N calls, or the calls of the last N
// seconds); once the window holds minimum_number_of_calls and the failure rate or the slow-call
// rate reaches its threshold, it opens. OPEN rejects every call with CallNotPermittedException
// until wait_in_open has passed; the first call after that moves it to HALF_OPEN (lazily: nothing
// is scheduled on the clock). HALF_OPEN lets permitted_calls_in_half_open trial calls through,
// rejects the rest, and once the trials have ended rates them: it opens again or closes.
// Consecutive openings may wait longer each time (exponential_wait_in_open), and a half-open
// breaker whose trials take longer than max_wait_in_half_open resolves (to open, by default).
//
// Three more states are set by an operator (or as the initial state), as in resilience4j:
// FORCED_OPEN rejects every call until another transition; DISABLED permits every call and
// records nothing; METRICS_ONLY permits every call, records and publishes as CLOSED does, and
// never opens. Failures are classified by type and by predicate (ignore_on first, then
// record_on; a failure not recorded is a success), and a result predicate (record_result)
// records chosen results as failures.
//
//   r4c::CircuitBreaker breaker("inventory", r4c::CircuitBreakerConfig()
//                                                .failure_rate_threshold(50)
//                                                .ignore_on<NotFound>(), clock);
//   auto stock = breaker.execute([&] { return inventory.stock(sku); });  // may throw
//
// Other policies use the non-throwing pair: `try_acquire()` returns a permit, whose
// on_success/on_error record the outcome (or `try_acquire_permission()` and the breaker's own
// on_success/on_error/release_permission, as resilience4j spells them).
//
// Operating it (docs/operations.md): `mode = observe` runs the whole state machine but lets
// through the calls it would refuse (counted in `would_have_rejected`, their outcomes not
// recorded, as in enforce they would not have run); registry.reconfigure() changes a live
// breaker's settings, keeping its state and window unless the window's type or size changes.
#pragma once

#include <array>
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
#include <string_view>
#include <type_traits>
#include <typeindex>
#include <utility>
#include <vector>

#include "r4c/adaptive_limit_config.hpp"  // PolicyMode
#include "r4c/clock.hpp"
#include "r4c/detail/cache_line.hpp"
#include "r4c/detail/handle.hpp"
#include "r4c/detail/live_config.hpp"
#include "r4c/detail/outcome_predicates.hpp"
#include "r4c/detail/setting.hpp"
#include "r4c/detail/striped_counter.hpp"
#include "r4c/errors.hpp"
#include "r4c/events.hpp"
#include "r4c/exception_type.hpp"
#include "r4c/text.hpp"

namespace r4c {

/// The state of a circuit breaker. closed, open and half_open follow the calls; the others
/// change only by a transition_to_... call or the initial state.
enum class CircuitBreakerState : std::uint8_t {
  closed,
  open,
  half_open,
  disabled,      // permits every call, records nothing
  metrics_only,  // permits every call, records and publishes, never opens
  forced_open    // rejects every call until an operator moves it
};

inline constexpr EnumName<CircuitBreakerState> kCircuitBreakerStateNames[] = {
    {"closed", CircuitBreakerState::closed},
    {"open", CircuitBreakerState::open},
    {"half_open", CircuitBreakerState::half_open},
    {"disabled", CircuitBreakerState::disabled},
    {"metrics_only", CircuitBreakerState::metrics_only},
    {"forced_open", CircuitBreakerState::forced_open}};
constexpr std::span<const EnumName<CircuitBreakerState>> enum_names(CircuitBreakerState) noexcept {
  return kCircuitBreakerStateNames;
}

/// "closed", "open", "half_open", "disabled", "metrics_only" or "forced_open".
std::string_view to_string(CircuitBreakerState state) noexcept;

/// What a closed breaker rates: the last N calls, or the calls of the last N seconds.
enum class SlidingWindowType : std::uint8_t { count_based, time_based };

/// The file has always also taken "countbased" and "timebased".
inline constexpr EnumName<SlidingWindowType> kSlidingWindowTypeNames[] = {
    {"count_based", SlidingWindowType::count_based},
    {"time_based", SlidingWindowType::time_based},
    {"countbased", SlidingWindowType::count_based},
    {"timebased", SlidingWindowType::time_based}};
constexpr std::span<const EnumName<SlidingWindowType>> enum_names(SlidingWindowType) noexcept {
  return kSlidingWindowTypeNames;
}

/// "count_based" or "time_based".
std::string_view to_string(SlidingWindowType type) noexcept;

/// Settings of a circuit breaker. Defaults are resilience4j's.
class CircuitBreakerConfig {
 public:
  static constexpr double kDefaultFailureRateThreshold = 50;
  static constexpr double kDefaultSlowCallRateThreshold = 100;
  static constexpr std::chrono::nanoseconds kDefaultSlowCallDuration = std::chrono::seconds(60);
  static constexpr SlidingWindowType kDefaultSlidingWindowType = SlidingWindowType::count_based;
  static constexpr int kDefaultSlidingWindowSize = 100;
  static constexpr int kMaxSlidingWindowSize = 1'000'000;
  static constexpr int kDefaultMinimumNumberOfCalls = 100;
  static constexpr std::chrono::nanoseconds kDefaultWaitInOpen = std::chrono::seconds(60);
  static constexpr std::chrono::nanoseconds kMaxWaitInOpen = std::chrono::hours(24);
  static constexpr int kDefaultPermittedCallsInHalfOpen = 10;
  static constexpr CircuitBreakerState kDefaultInitialState = CircuitBreakerState::closed;
  static constexpr std::chrono::nanoseconds kDefaultMaxWaitInHalfOpen{0};
  static constexpr CircuitBreakerState kDefaultStateAfterMaxWaitInHalfOpen =
      CircuitBreakerState::open;

  /// Failure rate, in percent, at which the breaker opens (50). R4C-REG-001 outside (0, 100].
  CircuitBreakerConfig& failure_rate_threshold(double value);
  /// Slow-call rate, in percent, at which the breaker opens (100). R4C-REG-001 outside (0, 100].
  CircuitBreakerConfig& slow_call_rate_threshold(double value);
  /// A call that takes at least this long is slow (60 s). R4C-REG-001 unless > 0.
  CircuitBreakerConfig& slow_call_duration(std::chrono::nanoseconds value);
  /// count_based (default) or time_based. R4C-REG-001 for a value outside the enum.
  CircuitBreakerConfig& sliding_window_type(SlidingWindowType value);
  /// Calls (count_based) or seconds (time_based) in the window (100). R4C-ATR-003 below 1;
  /// R4C-REG-001 above 1000000.
  CircuitBreakerConfig& sliding_window_size(int value);
  /// Calls the window must hold before it is rated (100). R4C-ATR-003 below 1. A count-based
  /// window uses at most its size, as resilience4j does.
  CircuitBreakerConfig& minimum_number_of_calls(int value);
  /// How long an open breaker rejects calls (60 s). R4C-REG-001 outside 1 ns .. 24 h.
  CircuitBreakerConfig& wait_in_open(std::chrono::nanoseconds value);
  /// Trial calls a half-open breaker lets through (10). R4C-ATR-003 below 1.
  CircuitBreakerConfig& permitted_calls_in_half_open(int value);
  /// Makes the wait of the n-th consecutive opening (n >= 1; closing starts the count again)
  /// wait_in_open * multiplier^(n-1), capped at max_wait, as resilience4j's
  /// waitIntervalFunctionInOpenState with IntervalFunction.ofExponentialBackoff (off by
  /// default: every opening waits wait_in_open). R4C-REG-001 for a multiplier that is not a
  /// finite number >= 1 or a max_wait outside 1 ns .. 24 h; validate() throws R4C-ATR-009 when
  /// max_wait < wait_in_open.
  CircuitBreakerConfig& exponential_wait_in_open(double multiplier,
                                                 std::chrono::nanoseconds max_wait);
  /// Any wait-in-open interval function: `interval(n)` is the wait of the n-th consecutive
  /// opening, clamped into 1 ns .. 24 h. Replaces exponential_wait_in_open. Called under the
  /// breaker's lock when it opens: it must not call the breaker. R4C-REG-001 when empty.
  CircuitBreakerConfig& wait_interval_in_open(
      std::function<std::chrono::nanoseconds(int)> interval);
  /// How long a half-open breaker waits for its trials before it resolves to
  /// state_after_max_wait_in_half_open (0, the default: it waits for them however long). As
  /// the end of the open wait, it is noticed by the first call or outcome after it (nothing is
  /// scheduled). R4C-REG-001 outside 0 .. 24 h.
  CircuitBreakerConfig& max_wait_in_half_open(std::chrono::nanoseconds value);
  /// open (default) or closed: where a half-open breaker goes after max_wait_in_half_open.
  /// R4C-REG-001 for any other state.
  CircuitBreakerConfig& state_after_max_wait_in_half_open(CircuitBreakerState value);
  /// The state a new breaker starts in (closed). An open one waits its first wait_in_open from
  /// its construction. R4C-REG-001 for a value outside the enum.
  CircuitBreakerConfig& initial_state(CircuitBreakerState value);
  /// observe: the breaker moves between its states as in enforce, but a call it would refuse
  /// runs, counted in `would_have_rejected` and not recorded (enforce, the default).
  CircuitBreakerConfig& mode(PolicyMode value) noexcept;
  PolicyMode mode() const noexcept { return mode_; }
  /// The failures that are recorded, matched by dynamic type (derived classes included); any
  /// other failure counts as a success. Replaces the list; empty (the default) records every
  /// failure.
  template <class Exception, class... More>
  CircuitBreakerConfig& record_on() {
    record_on_ = {ExceptionType::of<Exception>(), ExceptionType::of<More>()...};
    return *this;
  }
  /// Same as `record_on<...>()` with types known at run time.
  CircuitBreakerConfig& record_on(std::vector<ExceptionType> types);
  /// The failures that are neither successes nor failures (they only free their permit). Ignore
  /// wins over record. Replaces the list; empty by default.
  template <class Exception, class... More>
  CircuitBreakerConfig& ignore_on() {
    ignore_on_ = {ExceptionType::of<Exception>(), ExceptionType::of<More>()...};
    return *this;
  }
  /// Same as `ignore_on<...>()` with types known at run time.
  CircuitBreakerConfig& ignore_on(std::vector<ExceptionType> types);
  /// Records a result for which `predicate` is true as a failure (resilience4j's
  /// recordResult); the result is still returned. Applies to execute() and async_execute()
  /// calls whose result type, without reference and const, is T. Replaces an earlier
  /// predicate. A predicate that throws ends the call with its exception, recording nothing.
  /// R4C-REG-001 when empty. Thread safety: called from every thread, without a lock.
  template <class T>
  CircuitBreakerConfig& record_result(std::function<bool(const T&)> predicate) {
    check_predicate("record_result", static_cast<bool>(predicate));
    result_predicate_.set<T>(std::move(predicate));
    return *this;
  }
  // Predicates on the failure, besides the types above.
  /// Also records the failures for which `predicate` is true (resilience4j's
  /// recordException(Predicate)): a failure is recorded when it is of a record_on type or the
  /// predicate says so; with neither set, every failure is. Replaces an earlier predicate.
  /// A predicate that throws answers false. R4C-REG-001 when empty.
  /// Thread safety: called from every thread whose call fails, without a lock.
  CircuitBreakerConfig& record_on(std::function<bool(const std::exception_ptr&)> predicate);
  /// Also ignores the failures for which `predicate` is true (resilience4j's
  /// ignoreException(Predicate)); ignore wins over record, by type or by predicate. Replaces
  /// an earlier predicate. A predicate that throws answers false. R4C-REG-001 when empty.
  CircuitBreakerConfig& ignore_on(std::function<bool(const std::exception_ptr&)> predicate);
  /// `record_on(predicate)` and `ignore_on(predicate)` for failures of dynamic type Exception
  /// (others answer false), e.g. `record_on<HttpError>([](const HttpError& e) { return e.status()
  /// >= 500; })`.
  template <class Exception, class Predicate>
  requires std::is_invocable_r_v<bool, Predicate&, const Exception&> CircuitBreakerConfig&
  record_on(Predicate predicate) {
    return record_on(detail::exception_predicate<Exception>(std::move(predicate)));
  }
  template <class Exception, class Predicate>
  requires std::is_invocable_r_v<bool, Predicate&, const Exception&> CircuitBreakerConfig&
  ignore_on(Predicate predicate) {
    return ignore_on(detail::exception_predicate<Exception>(std::move(predicate)));
  }

  double failure_rate_threshold() const noexcept { return failure_rate_threshold_; }
  double slow_call_rate_threshold() const noexcept { return slow_call_rate_threshold_; }
  std::chrono::nanoseconds slow_call_duration() const noexcept { return slow_call_duration_; }
  SlidingWindowType sliding_window_type() const noexcept { return sliding_window_type_; }
  int sliding_window_size() const noexcept { return sliding_window_size_; }
  int minimum_number_of_calls() const noexcept { return minimum_number_of_calls_; }
  std::chrono::nanoseconds wait_in_open() const noexcept { return wait_in_open_; }
  int permitted_calls_in_half_open() const noexcept { return permitted_calls_in_half_open_; }
  /// The wait-in-open multiplier (1 when off) and its cap (wait_in_open when off).
  double wait_in_open_multiplier() const noexcept { return wait_in_open_multiplier_; }
  std::chrono::nanoseconds max_wait_in_open() const noexcept {
    return wait_in_open_multiplier_ == 1.0 && !max_wait_in_open_set_ ? wait_in_open_
                                                                     : max_wait_in_open_;
  }
  /// Whether exponential_wait_in_open() was set.
  bool exponential_wait_in_open() const noexcept { return max_wait_in_open_set_; }
  /// Whether wait_interval_in_open() set a function.
  bool has_wait_interval_in_open() const noexcept { return wait_interval_ != nullptr; }
  /// The wait of the n-th consecutive opening (n >= 1), from the function or the backoff.
  std::chrono::nanoseconds wait_in_open_for(int opening) const;
  std::chrono::nanoseconds max_wait_in_half_open() const noexcept { return max_wait_in_half_open_; }
  CircuitBreakerState state_after_max_wait_in_half_open() const noexcept {
    return state_after_max_wait_in_half_open_;
  }
  CircuitBreakerState initial_state() const noexcept { return initial_state_; }
  /// The predicates set by record_on(predicate) and ignore_on(predicate) (empty when not set).
  const detail::ExceptionPredicate& record_on_predicate() const noexcept { return record_if_; }
  const detail::ExceptionPredicate& ignore_on_predicate() const noexcept { return ignore_if_; }
  /// The result predicate when it applies to results of type T, else nullptr.
  template <class T>
  const std::function<bool(const T&)>* result_predicate() const noexcept {
    return result_predicate_.get<T>();
  }
  /// The result type record_result applies to, or nullopt without one.
  std::optional<std::type_index> record_result_type() const noexcept {
    return result_predicate_.type();
  }
  /// The recorded types (empty: every failure).
  const std::vector<ExceptionType>& record_on_types() const noexcept { return record_on_; }
  /// The ignored types.
  const std::vector<ExceptionType>& ignore_on_types() const noexcept { return ignore_on_; }

  /// Checks every setting; throws ConfigException; does nothing when the config is valid.
  void validate() const;

 private:
  static void check_predicate(const char* setting, bool present);

  double failure_rate_threshold_ = kDefaultFailureRateThreshold;
  double slow_call_rate_threshold_ = kDefaultSlowCallRateThreshold;
  std::chrono::nanoseconds slow_call_duration_ = kDefaultSlowCallDuration;
  SlidingWindowType sliding_window_type_ = kDefaultSlidingWindowType;
  int sliding_window_size_ = kDefaultSlidingWindowSize;
  int minimum_number_of_calls_ = kDefaultMinimumNumberOfCalls;
  std::chrono::nanoseconds wait_in_open_ = kDefaultWaitInOpen;
  int permitted_calls_in_half_open_ = kDefaultPermittedCallsInHalfOpen;
  std::vector<ExceptionType> record_on_;
  std::vector<ExceptionType> ignore_on_;
  double wait_in_open_multiplier_ = 1.0;
  std::chrono::nanoseconds max_wait_in_open_ = kDefaultWaitInOpen;
  bool max_wait_in_open_set_ = false;
  std::shared_ptr<const std::function<std::chrono::nanoseconds(int)>> wait_interval_;
  std::chrono::nanoseconds max_wait_in_half_open_ = kDefaultMaxWaitInHalfOpen;
  CircuitBreakerState state_after_max_wait_in_half_open_ = kDefaultStateAfterMaxWaitInHalfOpen;
  CircuitBreakerState initial_state_ = kDefaultInitialState;
  PolicyMode mode_ = PolicyMode::enforce;
  detail::ExceptionPredicate record_if_;
  detail::ExceptionPredicate ignore_if_;
  detail::ResultPredicate result_predicate_;
};

/// Compares two configs setting by setting; nullopt when they are equal.
std::optional<SettingDifference> first_difference(const CircuitBreakerConfig& first,
                                                  const CircuitBreakerConfig& second);

/// A value picture of a circuit breaker. Each figure is either per state (it starts again at
/// every transition, as resilience4j's metrics do) or since the breaker was built:
///
/// - per state, the calls of the state's window: closed and metrics_only, their sliding
///   window; half_open, its trial calls; open, the calls that opened it (the closed window, or
///   the half-open trials when the trials reopened it), plus outcomes that arrive while it is
///   open; disabled and forced_open, none.
/// - since creation: not_permitted_calls and transitions.
struct CircuitBreakerSnapshot {
  /// The state now (a wait that ended is noticed by the next call: see the top of the header).
  CircuitBreakerState state = CircuitBreakerState::closed;
  /// Per state: percent of buffered_calls that failed; -1 while fewer than the state's minimum
  /// are recorded (minimum_number_of_calls, or permitted_calls_in_half_open for the trials).
  double failure_rate = -1;
  /// Per state: percent of buffered_calls that were slow; -1 likewise.
  double slow_call_rate = -1;
  /// Per state: the calls recorded in the state's window.
  std::uint64_t buffered_calls = 0;
  /// Per state: of buffered_calls, those recorded as failures.
  std::uint64_t failed_calls = 0;
  /// Per state: of buffered_calls, those at least slow_call_duration long.
  std::uint64_t slow_calls = 0;
  /// Since creation: calls refused without running (open, forced_open, half-open full); exact.
  std::uint64_t not_permitted_calls = 0;
  /// Since creation: state changes.
  std::uint64_t transitions = 0;
  /// observe mode: calls it would have refused and let through (never in not_permitted_calls).
  std::uint64_t would_have_rejected = 0;
  PolicyMode mode = PolicyMode::enforce;
};

namespace detail {

/// The outcomes a closed breaker rates: a ring of the last N calls, or per-second buckets of
/// the last N seconds. Not thread-safe: the breaker guards it with its mutex.
class CallWindow {
 public:
  struct Totals {
    std::uint64_t calls = 0;
    std::uint64_t failed = 0;
    std::uint64_t slow = 0;
  };

  CallWindow(SlidingWindowType type, int size);
  /// Records a call that ended in `second` (of the clock; ignored when count-based).
  void record(std::int64_t second, bool failed, bool slow);
  /// Records `count` successes, none slow, that ended in `second`, as `count` record() calls.
  void record_successes(std::int64_t second, std::uint64_t count);
  /// Forgets the buckets that are older than the window ending in `second` (time-based only).
  void advance_to(std::int64_t second);
  void reset();
  const Totals& totals() const noexcept { return totals_; }

 private:
  struct Bucket {
    std::uint32_t calls = 0;
    std::uint32_t failed = 0;
    std::uint32_t slow = 0;
  };
  static constexpr std::uint8_t kFailed = 1;
  static constexpr std::uint8_t kSlow = 2;

  SlidingWindowType type_;  // not const: a reconfigured breaker assigns a new window
  std::int64_t size_;
  std::vector<std::uint8_t> outcomes_;  // count-based: the ring, kFailed | kSlow per call
  std::int64_t next_ = 0;               // count-based: where the next outcome goes
  std::vector<Bucket> buckets_;         // time-based: second s lives at s mod size
  std::int64_t latest_second_ = 0;      // time-based: the newest second seen
  bool started_ = false;                // time-based: latest_second_ is meaningful
  Totals totals_;
};

}  // namespace detail

class CircuitBreaker;

/// Permission for one call, taken by CircuitBreaker::try_acquire(). Record its outcome with
/// on_success or on_error; a permit destroyed or released without one is an ignored call (a
/// half-open trial is given back). It remembers the state it was granted in, so an outcome that
/// arrives after the breaker moved on is never taken for a trial. Move-only.
class [[nodiscard]] CircuitBreakerPermit {
 public:
  CircuitBreakerPermit() noexcept = default;
  CircuitBreakerPermit(CircuitBreakerPermit&& other) noexcept
      : breaker_(std::exchange(other.breaker_, nullptr)), epoch_(other.epoch_) {}
  CircuitBreakerPermit& operator=(CircuitBreakerPermit&& other) noexcept {
    if (this != &other) {
      release();
      breaker_ = std::exchange(other.breaker_, nullptr);
      epoch_ = other.epoch_;
    }
    return *this;
  }
  CircuitBreakerPermit(const CircuitBreakerPermit&) = delete;
  CircuitBreakerPermit& operator=(const CircuitBreakerPermit&) = delete;
  ~CircuitBreakerPermit() { release(); }

  explicit operator bool() const noexcept { return breaker_ != nullptr; }
  /// Records a success that took `duration` (slow if at least slow_call_duration).
  void on_success(std::chrono::nanoseconds duration) noexcept;
  /// Records a failure that took `duration`.
  void on_error(std::chrono::nanoseconds duration) noexcept;
  /// Ends the call without an outcome (an ignored failure).
  void release() noexcept;

 private:
  friend class CircuitBreaker;
  CircuitBreakerPermit(CircuitBreaker* breaker, std::uint64_t epoch) noexcept
      : breaker_(breaker), epoch_(epoch) {}
  CircuitBreaker* breaker_ = nullptr;
  std::uint64_t epoch_ = 0;  // the breaker's transition count when the permit was granted
};

/// A view of a circuit breaker for operators and tests. Valid while the breaker lives.
class CircuitBreakerHandle : public detail::HandleBase<CircuitBreaker> {
 public:
  using HandleBase::HandleBase;
  /// The breaker's state now.
  CircuitBreakerState state() const noexcept;
  /// Calls `listener` on every state transition, until the Subscription ends (see
  /// <r4c/events.hpp>).
  Subscription on_state_transition(
      std::function<void(const CircuitBreakerTransitionEvent&)> listener) const;
};

/// Stops calls to a dependency that fails or is slow too often; see the top of this header.
/// Thread safety: every member may be called from any thread. Admission while closed, and a
/// rejection while open, read one atomic word. While closed with no failure and no slow call in
/// its window, a success (not slow) is counted with one compare-and-swap and no lock, and
/// folded into the window by the next thread that takes the lock, before anything it does:
/// every transition and snapshot sees it, in order. Other outcomes and transitions take a
/// mutex.
class CircuitBreaker {
 public:
  /// Builds a closed breaker; validates `config` (throws ConfigException). A null clock means a
  /// SystemClock.
  CircuitBreaker(std::string instance_id, CircuitBreakerConfig config = {},
                 std::shared_ptr<Clock> clock = nullptr);
  CircuitBreaker(const CircuitBreaker&) = delete;
  CircuitBreaker& operator=(const CircuitBreaker&) = delete;

  /// Takes permission for a call, or returns an empty permit when open, forced open, or
  /// half-open with no trial left (counted in `not_permitted_calls`). Closed, disabled and
  /// metrics_only permit without the lock. Never throws, never allocates.
  CircuitBreakerPermit try_acquire() noexcept {
    const std::uint64_t word = word_.load(std::memory_order_acquire);
    if (state_of(word) == CircuitBreakerState::closed) [[likely]]
      return CircuitBreakerPermit(this, word >> kStateBits);
    return acquire_slow(word);
  }

  /// Runs `f` and returns its result. When the breaker does not permit the call, throws its
  /// CallNotPermittedException (one preallocated object, rethrown) without calling `f`. The
  /// call's duration is measured on the clock; what `f` throws is classified (ignore_on, then
  /// record_on), recorded, and rethrown unchanged.
  template <class F>
  decltype(auto) execute(F&& f);
  /// execute() without a throw to say no (<r4c/outcome.hpp>): a refusal is returned as a value;
  /// `f` (returning a value or an Outcome) ends as an Outcome, recorded as execute() records
  /// it: a failure or an inner refusal is classified by ignore_on, then record_on (a policy's
  /// preallocated exception once per object, its verdict kept).
  template <class F>
  detail::OutcomeOf<F> try_execute(F&& f) {
    detail::OwnReadings own;
    return try_execute(own, f);
  }
  /// try_execute() with the call's clock readings (detail::SharedReadings: shared with the
  /// policies around and inside it, a pipeline's stage).
  template <class Readings, class F>
  detail::OutcomeOf<F> try_execute(Readings& readings, F&& f) {
    using Out = detail::OutcomeOf<F>;
    CircuitBreakerPermit permit = try_acquire();
    if (!permit) [[unlikely]]
      return Out::refused(refusal());
    return try_execute_permitted(permit, f, readings);
  }

 private:
  // try_execute() once permitted. Every return is `outcome`, so it is built in the caller's
  // slot (a copy of an Outcome through the stack stalled on store forwarding).
  template <class F, class Readings>
  detail::OutcomeOf<F> try_execute_permitted(CircuitBreakerPermit& permit, F& f,
                                             Readings& readings) {
    using Out = detail::OutcomeOf<F>;
    const std::int64_t start = readings.start(clock_);
    const auto elapsed = [&] {
      return std::chrono::nanoseconds(clock_.to_ns(readings.end(clock_) - start));
    };
    Out outcome = detail::invoke_outcome(f);
    if (outcome.has_value()) [[likely]] {
      if constexpr (std::is_void_v<typename Out::Value>) {
        permit.on_success(elapsed());
      } else {
        try {
          record_result<typename Out::Value>(permit, outcome.value(), elapsed());
        } catch (...) {
          outcome = Out::failure(std::current_exception());  // the predicate's, recording nothing
        }
      }
      return outcome;
    }
    // A failure the call returned as an error code is a failure (no exception to classify).
    switch (verdict_of(outcome)) {
      case kIgnored:
        permit.release();
        break;
      case kSucceeded:
        permit.on_success(elapsed());
        break;
      default:
        permit.on_error(elapsed());
    }
    return outcome;
  }

 private:
  static constexpr int kSucceeded = 0, kFailed = 1, kIgnored = 2;
  // How a failure is recorded: kSucceeded, kFailed or kIgnored (ignore_on, then record_on).
  // Decided by `config`, one read of the live config for a whole verdict.
  int classify(const std::exception_ptr& failure,
               const CircuitBreakerConfig& config) const noexcept;
  int classify_current(const CircuitBreakerConfig& config) const noexcept;  // inside a catch
  detail::StockVerdicts outcome_verdicts_;  // try_execute's verdicts on stock failures
  // try_execute's verdict on the failed `outcome` (a failure as a code is a failure: no
  // exception to classify); a stock exception's is kept per config.
  template <class Out>
  int verdict_of(const Out& outcome) noexcept {
    const CircuitBreakerConfig& config = live_config_.get();
    static_assert(alignof(CircuitBreakerConfig) >= 4,
                  "StockVerdicts keeps verdicts by config address");
    return outcome_verdicts_.verdict_of(
        outcome,
        [&](const auto& e) {
          if constexpr (std::is_same_v<std::remove_cvref_t<decltype(e)>, std::error_code>) {
            return kFailed;
          } else {
            return classify(e, config);
          }
        },
        &config);
  }

 public:
  /// resilience4j's tryAcquirePermission: whether a call may run now; a refusal is counted in
  /// `not_permitted_calls`. Pair it with exactly one of on_success, on_error or
  /// release_permission. These outcomes count for the state the breaker is in when they
  /// arrive, as in resilience4j; a CircuitBreakerPermit is exact.
  [[nodiscard]] bool try_acquire_permission() noexcept {
    CircuitBreakerPermit permit = try_acquire();
    if (!permit) return false;
    permit.breaker_ = nullptr;  // the caller completes it through the breaker
    return true;
  }
  /// Records a success of a call permitted by try_acquire_permission().
  void on_success(std::chrono::nanoseconds duration) noexcept;
  /// Records a failure of a call permitted by try_acquire_permission().
  void on_error(std::chrono::nanoseconds duration) noexcept;
  /// Ends a call permitted by try_acquire_permission() without an outcome (an ignored failure):
  /// gives a half-open trial back.
  void release_permission() noexcept;

  /// Runs the Asio operation `op` with the breaker's permission and records how it completed,
  /// completing `token` with void(std::exception_ptr, T). Defined in <r4c/asio.hpp>; see
  /// docs/async.md.
  template <class T, class Op, class Token>
  auto async_execute(Op&& op, Token&& token);

  /// Records how the call `permit` admitted ended with `result`: a failure when the
  /// record_result predicate for T says so, else a success. A predicate that throws gives
  /// the permit back unrecorded and lets its exception through.
  template <class T>
  void record_result(CircuitBreakerPermit& permit, const T& result,
                     std::chrono::nanoseconds duration);

  /// Throws this breaker's CallNotPermittedException.
  [[noreturn]] void throw_not_permitted() const;
  /// The CallNotPermittedException a refused call fails with (one object, shared), for an
  /// asynchronous call, which completes with it instead of throwing it.
  const std::exception_ptr& rejection() const noexcept { return not_permitted_; }
  /// Records how the call `permit` admitted ended, for an asynchronous call whose failure
  /// arrives as an exception_ptr: none is a success; a failure is classified as execute()
  /// classifies what it catches (ignore_on, then record_on).
  void record_outcome(CircuitBreakerPermit& permit, const std::exception_ptr& failure,
                      std::chrono::nanoseconds duration) noexcept;

  /// Closes the breaker now with an empty window (an operator's override). Does nothing when
  /// already closed.
  void transition_to_closed();
  /// Opens the breaker now for the wait of its next consecutive opening (wait_in_open unless
  /// exponential_wait_in_open or wait_interval_in_open say otherwise), an operator's override.
  /// Does nothing when already open.
  void transition_to_open();
  /// Opens the breaker now for exactly `wait` (resilience4j's transitionToOpenStateFor);
  /// when already open it only moves the end of the wait. The count of consecutive openings
  /// stays as it is. R4C-REG-001 (ConfigException) for a wait outside 0 .. 24 h.
  void transition_to_open_for(std::chrono::nanoseconds wait);
  /// Opens the breaker until `deadline` on its clock (Clock::now()); a deadline already past
  /// lets the next call through as a half-open trial. As transition_to_open_for otherwise.
  void transition_to_open_until(std::chrono::nanoseconds deadline);
  /// Moves the breaker to half-open now with no trial taken. Does nothing when half-open.
  void transition_to_half_open();
  /// Rejects every call until another transition. Does nothing when forced open.
  void transition_to_forced_open();
  /// Permits every call and records nothing until another transition. Does nothing when
  /// disabled.
  void transition_to_disabled();
  /// Permits every call, records and publishes as closed does, and never opens, until another
  /// transition; it starts with an empty window. Does nothing when already in it.
  void transition_to_metrics_only();
  /// Back to closed with empty statistics from any state, and the count of consecutive
  /// openings at 0 (resilience4j's reset). A transition (counted and published) unless it
  /// was closed; not_permitted_calls stays, as it counts since creation.
  void reset();

  CircuitBreakerState state() const noexcept {
    return state_of(word_.load(std::memory_order_relaxed));
  }
  CircuitBreakerHandle handle() const noexcept { return CircuitBreakerHandle(*this); }
  const std::string& instance_id() const noexcept { return instance_id_; }
  /// The config now (reconfigure() replaces it).
  const CircuitBreakerConfig& config() const noexcept { return live_config_.get(); }
  /// The clock durations are measured on (an asynchronous call measures to its completion).
  const std::shared_ptr<Clock>& clock() const noexcept { return clock_owner_; }
  /// A consistent picture of the state and its window.
  CircuitBreakerSnapshot snapshot() const;
  /// Calls `listener` on every state transition, until the Subscription ends (see
  /// <r4c/events.hpp>). Listeners run after the breaker's lock is released, in transition
  /// order, on a thread whose call moved the breaker; they may call the breaker. Up to
  /// kUnpublishedTransitions transitions wait for the listeners; beyond that (listeners slower
  /// than a breaker flapping on many threads) the oldest are dropped, which a gap in
  /// CircuitBreakerTransitionEvent::transition shows.
  Subscription on_state_transition(
      std::function<void(const CircuitBreakerTransitionEvent&)> listener) const;
  static constexpr std::size_t kUnpublishedTransitions = 32;

  /// Takes a new config on a live breaker (what registry.reconfigure() calls): validates it
  /// (ConfigException, nothing changed). The state, the trials and the window stay; a new
  /// sliding window type or size starts an empty window. Thresholds, the minimum, the slow
  /// duration and permitted trials rate the next outcome; wait_in_open and
  /// max_wait_in_half_open apply from the next opening or half-open period; initial_state only
  /// to breakers built later. record_on and ignore_on (types and predicates) classify the next
  /// outcome: a call under way whose failure is being classified finishes on the lists it
  /// read; a verdict kept on a stock exception belongs to the config it was decided by, so
  /// the new lists decide again. Allocation: yes.
  void reconfigure(const CircuitBreakerConfig& next);

 private:
  friend class CircuitBreakerPermit;
  static constexpr int kStateBits = 3;
  static constexpr std::uint64_t kCurrentEpoch = ~std::uint64_t{0};
  // The epoch of a call observe mode let through: its outcome is never recorded.
  static constexpr std::uint64_t kObservedEpoch = kCurrentEpoch - 1;

  static CircuitBreakerState state_of(std::uint64_t word) noexcept {
    return static_cast<CircuitBreakerState>(word & ((1u << kStateBits) - 1));
  }
  std::chrono::nanoseconds elapsed_since(std::int64_t start) const noexcept {
    return std::chrono::nanoseconds(clock_.to_ns(clock_.ticks() - start));
  }
  // Cold: open (reject or move to half-open) and half-open (count trials).
  CircuitBreakerPermit acquire_slow(std::uint64_t word) noexcept;
  void record(std::uint64_t epoch, bool failed, std::chrono::nanoseconds duration) noexcept {
    if (epoch == kObservedEpoch) [[unlikely]]
      return;
    if (count_lock_free(failed, duration)) [[likely]]
      return;
    record_locked_path(epoch, failed, duration);
  }
  void record_locked_path(std::uint64_t epoch, bool failed,
                          std::chrono::nanoseconds duration) noexcept;
  // The lock-free record of a closed breaker's outcome (never a slow one): one CAS on
  // pending_, which only succeeds while the last holder of the lock left it open. Else false:
  // the locked path records it.
  bool count_lock_free(bool failed, std::chrono::nanoseconds duration) noexcept {
    if (duration.count() >= slow_call_ns_.load(std::memory_order_relaxed)) return false;
    std::uint64_t pending = pending_.load(std::memory_order_relaxed);
    if ((pending & kPendingOrdered) != 0) {
      do {
        std::uint64_t next = 0;
        if (!next_ordered(pending, failed, next)) return false;
        if (pending_.compare_exchange_weak(pending, next, std::memory_order_relaxed,
                                           std::memory_order_relaxed)) {
          return true;
        }
      } while ((pending & kPendingOrdered) != 0);
      return false;  // shut meanwhile (or the window's type changed)
    }
    // Time-based: successes of a clean window, tagged with their second.
    if (failed) return false;
    const std::uint64_t tag =
        time_based_.load(std::memory_order_relaxed) ? tag_of(second_of(clock_.ticks())) : 0;
    do {
      if ((pending & ~kPendingCount) != tag || (pending & kPendingCount) == kPendingCount) {
        return false;
      }
    } while (!pending_.compare_exchange_weak(pending, pending + 1, std::memory_order_relaxed,
                                             std::memory_order_relaxed));
    return true;
  }
  // A count-based window's pending_ (kPendingOrdered set): the calls, in the order they
  // ended, that the next holder of the lock records. First a run of successes (kRun), then up
  // to kMaxOrdered outcomes as bits (1: failed) in ending order; kBudget failures more may
  // come before the lock must decide: as many as cannot reach a threshold whatever follows.
  static constexpr std::uint64_t kPendingOrdered = std::uint64_t{1} << 62;
  static constexpr int kMaxOrdered = 32;    // the bits 0..31
  static constexpr int kOrderedShift = 32;  // 6 bits: how many of the bits are outcomes
  static constexpr int kBudgetShift = 38;   // 6 bits: failures it may still take
  static constexpr int kRunShift = 44;      // 18 bits: successes before the first bit
  static constexpr std::uint64_t kSixBits = 0x3f;
  static constexpr std::uint64_t kMaxRun = (std::uint64_t{1} << 18) - 1;
  // The word after one more outcome, or false when it cannot take it (full, out of budget).
  static bool next_ordered(std::uint64_t pending, bool failed, std::uint64_t& next) noexcept {
    const std::uint64_t ordered = (pending >> kOrderedShift) & kSixBits;
    if (!failed && ordered == 0) {
      if (((pending >> kRunShift) & kMaxRun) == kMaxRun) return false;
      next = pending + (std::uint64_t{1} << kRunShift);
      return true;
    }
    if (ordered == static_cast<std::uint64_t>(kMaxOrdered)) return false;
    if (!failed) {
      next = pending + (std::uint64_t{1} << kOrderedShift);
      return true;
    }
    if (((pending >> kBudgetShift) & kSixBits) == 0) return false;
    next = (pending + (std::uint64_t{1} << kOrderedShift) - (std::uint64_t{1} << kBudgetShift)) |
           (std::uint64_t{1} << ordered);
    return true;
  }
  static std::uint64_t tag_of(std::int64_t second) noexcept {
    // 30 bits: bit 62 is kPendingOrdered's.
    return (static_cast<std::uint64_t>(second) & 0x3fff'ffffu) << 32;
  }
  // mutex_, with the outcomes counted meanwhile folded into window_ first and the lock-free
  // path opened again (or kept shut) by what the holder left.
  class Locked {
   public:
    Locked(const CircuitBreaker& breaker, std::int64_t now);
    ~Locked();
    Locked(const Locked&) = delete;
    Locked& operator=(const Locked&) = delete;
    std::int64_t now() const noexcept { return now_; }

   private:
    std::lock_guard<std::mutex> lock_;
    const CircuitBreaker& breaker_;
    const std::int64_t now_;
  };
  void record_locked(std::uint64_t epoch, bool failed, bool slow, std::int64_t now) noexcept;
  void release(std::uint64_t epoch) noexcept;
  // Inside a catch: ignore_on, then record_on (a failure not recorded is a success).
  void record_current_exception(CircuitBreakerPermit& permit,
                                std::chrono::nanoseconds duration) noexcept;
  std::int64_t second_of(std::int64_t ticks) const noexcept;
  // Under mutex_.
  // Under mutex_. `decided_by`: the outcomes that decided it, if any (for the event).
  // `open_wait`: the wait of an opening, in ticks (-1: the next consecutive opening's).
  void move_to(CircuitBreakerState state, std::int64_t now,
               const detail::CallWindow::Totals* decided_by = nullptr, std::int64_t open_wait = -1);
  // Under mutex_: resolves a half-open breaker whose max_wait_in_half_open has passed.
  void resolve_half_open_locked(std::int64_t now);
  // Moves to `state` under the lock unless it is already there, then publishes.
  void transition_by_hand(CircuitBreakerState state);
  // Opens for `wait_ticks` (re-arms the wait when already open), then publishes.
  void open_for_ticks(std::int64_t wait_ticks);
  // Not under mutex_: hands the transitions queued by move_to to the listeners, in order.
  void publish_transitions() noexcept;
  bool rates_exceeded(const detail::CallWindow::Totals& totals) const noexcept;

  // Read on every call: the transition count << kStateBits | the state. Written under mutex_.
  alignas(detail::kCacheLine) std::atomic<std::uint64_t> word_{0};
  std::atomic<std::int64_t> open_until_{0};  // ticks; an open breaker rejects before this
  const detail::ClockReader clock_;
  // relaxed: changed by reconfigure() under mutex_; a success racing with it is rated either
  // way, and a tag of the other window type only sends it to the locked path.
  std::atomic<std::int64_t> slow_call_ns_;
  std::atomic<bool> time_based_;

  // Written by every lock-free outcome: a line of its own. kPendingShut while the lock-free
  // path is shut (not closed, the lock held, or, time-based, a failure or slow call in the
  // window; count-based, a threshold within reach of one more outcome); else, time-based, the
  // tag of the second its successes fall in | their count; count-based, kPendingOrdered | the
  // outcomes in order (next_ordered()).
  static constexpr std::uint64_t kPendingShut = std::uint64_t{1} << 63;
  static constexpr std::uint64_t kPendingCount = 0xffff'ffffu;
  alignas(detail::kCacheLine) mutable std::atomic<std::uint64_t> pending_{kPendingShut};

  // A mutex, not atomics: a transition must change the state, the window and the trial counts
  // together, and it is taken only on outcomes that may decide one (and, once a closed window
  // holds a failure, on about every 33rd outcome) and off the closed admission path.
  alignas(detail::kCacheLine) mutable std::mutex mutex_;
  mutable detail::CallWindow window_;  // snapshot() forgets expired buckets too
  std::int64_t trials_permitted_ = 0;  // half-open: permits granted and not given back
  // Half-open: outcomes of the trial calls; kept as the open state's figures when they reopen it.
  detail::CallWindow::Totals trials_;
  bool open_shows_trials_ = false;    // open: its figures are trials_, not window_
  int openings_ = 0;                  // consecutive openings since the last close
  std::int64_t half_open_until_ = 0;  // ticks; max_wait_in_half_open's end (when set)
  std::int64_t max_half_open_ticks_;  // 0: no limit; under mutex_
  // Whether failures are classified at all (no rethrow needed if not). relaxed: set by
  // reconfigure(); a call that reads it before the config it classifies by uses the old lists.
  std::atomic<bool> classifies_;
  mutable std::int64_t pending_second_ = 0;  // the second pending_'s tag stands for

  std::uint64_t minimum_calls_;  // under mutex_
  // A refusal as a value, named by the kind's descriptor (defined after it, below).
  Refusal refusal() const noexcept;
  const std::string instance_id_;
  detail::LiveConfig<CircuitBreakerConfig> live_config_;
  const std::shared_ptr<Clock> clock_owner_;
  const std::exception_ptr not_permitted_;
  detail::StripedCounter not_permitted_count_;
  // Observe mode: read only by a call the breaker would refuse.
  std::atomic<bool> observe_;
  detail::StripedCounter would_reject_;
  // A refusal: counted, or in observe mode let through with an observed permit.
  CircuitBreakerPermit refuse() noexcept;

  // Transitions wait here (under mutex_) until a thread without the lock hands them to the
  // listeners: one thread at a time (publishing_), oldest first, so listeners see them in
  // order and may call this breaker. Queued only while someone listens.
  const std::shared_ptr<detail::EventHub<CircuitBreakerTransitionEvent>> transition_listeners_;
  std::array<CircuitBreakerTransitionEvent, kUnpublishedTransitions> unpublished_{};
  std::size_t unpublished_first_ = 0;
  std::size_t unpublished_count_ = 0;
  std::atomic<bool> has_unpublished_{false};
  std::atomic<bool> publishing_{false};
};

inline Subscription CircuitBreakerHandle::on_state_transition(
    std::function<void(const CircuitBreakerTransitionEvent&)> listener) const {
  return policy().on_state_transition(std::move(listener));
}

inline void CircuitBreakerPermit::on_success(std::chrono::nanoseconds duration) noexcept {
  if (CircuitBreaker* breaker = std::exchange(breaker_, nullptr)) {
    breaker->record(epoch_, false, duration);
  }
}

inline void CircuitBreakerPermit::on_error(std::chrono::nanoseconds duration) noexcept {
  if (CircuitBreaker* breaker = std::exchange(breaker_, nullptr)) {
    breaker->record(epoch_, true, duration);
  }
}

inline void CircuitBreakerPermit::release() noexcept {
  if (CircuitBreaker* breaker = std::exchange(breaker_, nullptr)) breaker->release(epoch_);
}

inline void CircuitBreaker::record_outcome(CircuitBreakerPermit& permit,
                                           const std::exception_ptr& failure,
                                           std::chrono::nanoseconds duration) noexcept {
  if (!failure) return permit.on_success(duration);
  // Without ignore_on or record_on every failure is recorded: no rethrow needed.
  if (!classifies_.load(std::memory_order_relaxed)) return permit.on_error(duration);
  try {
    std::rethrow_exception(failure);
  } catch (...) {
    record_current_exception(permit, duration);
  }
}

template <class T>
void CircuitBreaker::record_result(CircuitBreakerPermit& permit, const T& result,
                                   std::chrono::nanoseconds duration) {
  const std::function<bool(const T&)>* failed = live_config_.get().result_predicate<T>();
  if (failed == nullptr) [[likely]]
    return permit.on_success(duration);
  bool recorded_as_failure = false;
  try {
    recorded_as_failure = (*failed)(result);
  } catch (...) {
    permit.release();
    throw;
  }
  if (recorded_as_failure) return permit.on_error(duration);
  permit.on_success(duration);
}

template <class F>
decltype(auto) CircuitBreaker::execute(F&& f) {
  CircuitBreakerPermit permit = try_acquire();
  if (!permit) [[unlikely]]
    throw_not_permitted();
  using Result = std::invoke_result_t<F>;
  const std::int64_t start = clock_.ticks();
  try {
    if constexpr (std::is_void_v<Result>) {
      std::invoke(std::forward<F>(f));
      permit.on_success(elapsed_since(start));
    } else {
      Result result = std::invoke(std::forward<F>(f));
      // A throwing predicate releases the permit: the catch below then records nothing.
      record_result<std::remove_cvref_t<Result>>(permit, result, elapsed_since(start));
      if constexpr (std::is_reference_v<Result>) {
        return static_cast<Result>(result);
      } else {
        return result;
      }
    }
  } catch (...) {
    record_current_exception(permit, elapsed_since(start));
    throw;
  }
}

inline CircuitBreakerState CircuitBreakerHandle::state() const noexcept { return policy().state(); }

/// The circuit breaker as a policy kind: what the registry, the pipelines, the metrics and the
/// tools know of it (see <r4c/detail/setting.hpp>; <r4c/detail/kinds.hpp> lists the kinds).
struct CircuitBreakerKind : detail::KindBase<CircuitBreaker, CallNotPermittedException> {
  static constexpr KindNames kNames = {"circuit_breaker", "circuitBreaker", "circuit breaker",
                                       "circuitbreaker"};
  /// Every setting the external file takes, in the documented order.
  static std::span<const detail::Setting<Config>> settings() noexcept;
  /// Appends the metrics of one instance's snapshot (docs/observability.md).
  static void metrics(const Snapshot& snapshot, metrics::Emitter& out);
};

inline Refusal CircuitBreaker::refusal() const noexcept {
  return Refusal(not_permitted_, CircuitBreakerKind::kNames.metrics, instance_id_);
}

}  // namespace r4c
