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
//
//   r4c::CircuitBreaker breaker("inventory", r4c::CircuitBreakerConfig()
//                                                .failure_rate_threshold(50)
//                                                .ignore_on<NotFound>(), clock);
//   auto stock = breaker.execute([&] { return inventory.stock(sku); });  // may throw
//
// Other policies use the non-throwing pair: `try_acquire()` returns a permit, whose
// on_success/on_error record the outcome (or `try_acquire_permission()` and the breaker's own
// on_success/on_error/release_permission, as resilience4j spells them).
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
#include <utility>
#include <vector>

#include "r4c/clock.hpp"
#include "r4c/detail/cache_line.hpp"
#include "r4c/detail/setting.hpp"
#include "r4c/detail/striped_counter.hpp"
#include "r4c/errors.hpp"
#include "r4c/events.hpp"
#include "r4c/exception_type.hpp"
#include "r4c/text.hpp"

namespace r4c {
namespace metrics {
class Emitter;
}  // namespace metrics
namespace detail {
template <class Event>
class EventHub;
}

/// The state of a circuit breaker.
enum class CircuitBreakerState : std::uint8_t { closed, open, half_open };

inline constexpr EnumName<CircuitBreakerState> kCircuitBreakerStateNames[] = {
    {"closed", CircuitBreakerState::closed},
    {"open", CircuitBreakerState::open},
    {"half_open", CircuitBreakerState::half_open}};
constexpr std::span<const EnumName<CircuitBreakerState>> enum_names(CircuitBreakerState) noexcept {
  return kCircuitBreakerStateNames;
}

/// "closed", "open" or "half_open".
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

  double failure_rate_threshold() const noexcept { return failure_rate_threshold_; }
  double slow_call_rate_threshold() const noexcept { return slow_call_rate_threshold_; }
  std::chrono::nanoseconds slow_call_duration() const noexcept { return slow_call_duration_; }
  SlidingWindowType sliding_window_type() const noexcept { return sliding_window_type_; }
  int sliding_window_size() const noexcept { return sliding_window_size_; }
  int minimum_number_of_calls() const noexcept { return minimum_number_of_calls_; }
  std::chrono::nanoseconds wait_in_open() const noexcept { return wait_in_open_; }
  int permitted_calls_in_half_open() const noexcept { return permitted_calls_in_half_open_; }
  /// The recorded types (empty: every failure).
  const std::vector<ExceptionType>& record_on_types() const noexcept { return record_on_; }
  /// The ignored types.
  const std::vector<ExceptionType>& ignore_on_types() const noexcept { return ignore_on_; }

  /// Checks every setting; throws ConfigException; does nothing when the config is valid.
  void validate() const;

 private:
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
};

/// Compares two configs setting by setting; nullopt when they are equal.
std::optional<SettingDifference> first_difference(const CircuitBreakerConfig& first,
                                                  const CircuitBreakerConfig& second);

/// A value picture of a circuit breaker. The rates and counts are those of the closed window
/// (kept while open), or of the trial calls while half-open.
struct CircuitBreakerSnapshot {
  CircuitBreakerState state = CircuitBreakerState::closed;
  double failure_rate = -1;    // percent; -1 while fewer than the minimum calls are recorded
  double slow_call_rate = -1;  // percent; -1 likewise
  std::uint64_t buffered_calls = 0;
  std::uint64_t failed_calls = 0;
  std::uint64_t slow_calls = 0;
  std::uint64_t not_permitted_calls = 0;  // exact
  std::uint64_t transitions = 0;          // state changes since the breaker was built
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

  const SlidingWindowType type_;
  const std::int64_t size_;
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
class CircuitBreakerHandle {
 public:
  explicit CircuitBreakerHandle(const CircuitBreaker& breaker) noexcept : breaker_(&breaker) {}
  CircuitBreakerState state() const noexcept;
  CircuitBreakerSnapshot snapshot() const;
  const std::string& instance_id() const noexcept;
  /// Calls `listener` on every state transition, until the Subscription ends (see
  /// <r4c/events.hpp>).
  Subscription on_state_transition(
      std::function<void(const CircuitBreakerTransitionEvent&)> listener) const;

 private:
  const CircuitBreaker* breaker_;
};

/// Stops calls to a dependency that fails or is slow too often; see the top of this header.
/// Thread safety: every member may be called from any thread. Admission while closed, and a
/// rejection while open, read one atomic word; outcomes and transitions take a mutex.
class CircuitBreaker {
 public:
  /// Builds a closed breaker; validates `config` (throws ConfigException). A null clock means a
  /// SystemClock.
  CircuitBreaker(std::string instance_id, CircuitBreakerConfig config = {},
                 std::shared_ptr<Clock> clock = nullptr);
  CircuitBreaker(const CircuitBreaker&) = delete;
  CircuitBreaker& operator=(const CircuitBreaker&) = delete;

  /// Takes permission for a call, or returns an empty permit when open or when half-open has no
  /// trial left (counted in `not_permitted_calls`). Never throws, never allocates.
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
  /// Opens the breaker now for wait_in_open (an operator's override). Does nothing when already
  /// open.
  void transition_to_open();

  CircuitBreakerState state() const noexcept {
    return state_of(word_.load(std::memory_order_relaxed));
  }
  CircuitBreakerHandle handle() const noexcept { return CircuitBreakerHandle(*this); }
  const std::string& instance_id() const noexcept { return instance_id_; }
  const CircuitBreakerConfig& config() const noexcept { return config_; }
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

 private:
  friend class CircuitBreakerPermit;
  static constexpr int kStateBits = 2;
  static constexpr std::uint64_t kCurrentEpoch = ~std::uint64_t{0};

  static CircuitBreakerState state_of(std::uint64_t word) noexcept {
    return static_cast<CircuitBreakerState>(word & ((1u << kStateBits) - 1));
  }
  std::chrono::nanoseconds elapsed_since(std::int64_t start) const noexcept {
    return std::chrono::nanoseconds(clock_.to_ns(clock_.ticks() - start));
  }
  // Cold: open (reject or move to half-open) and half-open (count trials).
  CircuitBreakerPermit acquire_slow(std::uint64_t word) noexcept;
  void record(std::uint64_t epoch, bool failed, std::chrono::nanoseconds duration) noexcept;
  void record_locked(std::uint64_t epoch, bool failed, bool slow, std::int64_t now) noexcept;
  void release(std::uint64_t epoch) noexcept;
  // Inside a catch: ignore_on, then record_on (a failure not recorded is a success).
  void record_current_exception(CircuitBreakerPermit& permit,
                                std::chrono::nanoseconds duration) noexcept;
  std::int64_t second_of(std::int64_t ticks) const noexcept;
  // Under mutex_.
  // Under mutex_. `decided_by`: the outcomes that decided it, if any (for the event).
  void move_to(CircuitBreakerState state, std::int64_t now,
               const detail::CallWindow::Totals* decided_by = nullptr);
  // Not under mutex_: hands the transitions queued by move_to to the listeners, in order.
  void publish_transitions() noexcept;
  bool rates_exceeded(const detail::CallWindow::Totals& totals) const noexcept;

  // Read on every call: the transition count << kStateBits | the state. Written under mutex_.
  alignas(detail::kCacheLine) std::atomic<std::uint64_t> word_{0};
  std::atomic<std::int64_t> open_until_{0};  // ticks; an open breaker rejects before this
  const detail::ClockReader clock_;

  // A mutex, not atomics: a transition must change the state, the window and the trial counts
  // together, and it is taken only on outcomes and off the closed admission path.
  alignas(detail::kCacheLine) mutable std::mutex mutex_;
  mutable detail::CallWindow window_;  // snapshot() forgets expired buckets too
  std::int64_t trials_permitted_ = 0;  // half-open: permits granted and not given back
  detail::CallWindow::Totals trials_;  // half-open: outcomes of the trial calls

  const std::int64_t wait_in_open_ticks_;
  const std::uint64_t minimum_calls_;
  const std::string instance_id_;
  const CircuitBreakerConfig config_;
  const std::shared_ptr<Clock> clock_owner_;
  const std::exception_ptr not_permitted_;
  detail::StripedCounter not_permitted_count_;

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
  return breaker_->on_state_transition(std::move(listener));
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
  if (config_.ignore_on_types().empty() && config_.record_on_types().empty()) {
    return permit.on_error(duration);
  }
  try {
    std::rethrow_exception(failure);
  } catch (...) {
    record_current_exception(permit, duration);
  }
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
      permit.on_success(elapsed_since(start));
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

inline CircuitBreakerState CircuitBreakerHandle::state() const noexcept {
  return breaker_->state();
}
inline CircuitBreakerSnapshot CircuitBreakerHandle::snapshot() const {
  return breaker_->snapshot();
}
inline const std::string& CircuitBreakerHandle::instance_id() const noexcept {
  return breaker_->instance_id();
}

/// The circuit breaker as a policy kind: what the registry, the pipelines, the metrics and the
/// tools know of it (see <r4c/detail/setting.hpp>; <r4c/detail/kinds.hpp> lists the kinds).
struct CircuitBreakerKind {
  using Config = CircuitBreakerConfig;
  using Policy = CircuitBreaker;
  using Snapshot = CircuitBreakerSnapshot;
  using Handle = CircuitBreakerHandle;
  /// The exception the policy itself fails a call with (its refusal); the file's exception
  /// lists know it by its class name.
  using Exception = CallNotPermittedException;
  static constexpr KindNames kNames = {"circuit_breaker", "circuitBreaker", "circuit breaker",
                                       "circuitbreaker"};
  /// Every setting the external file takes, in the documented order.
  static std::span<const detail::Setting<Config>> settings() noexcept;
  /// Appends the metrics of one instance's snapshot (docs/observability.md).
  static void metrics(const Snapshot& snapshot, metrics::Emitter& out);
  /// A new instance; a registry's resources give it its clock.
  template <class Resources>
  static std::unique_ptr<Policy> make(std::string id, Config config, Resources& resources) {
    return std::make_unique<CircuitBreaker>(std::move(id), std::move(config), resources.clock());
  }
};

}  // namespace r4c
