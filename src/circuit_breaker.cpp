// SPDX-License-Identifier: Apache-2.0
#include "r4c/circuit_breaker.hpp"

#include <algorithm>
#include <cmath>

#include "config_check.hpp"
#include "exception_match.hpp"
#include "kind_settings.hpp"
#include "observe_metrics.hpp"
#include "r4c/detail/event_hub.hpp"
#include "r4c/metrics.hpp"

namespace r4c {

// Found by DifferenceFinder through argument-dependent lookup.
static std::string show(PolicyMode value) { return std::string(to_string(value)); }

// The name in the enum's table of names, as every other enum of the vocabulary.
std::string_view to_string(CircuitBreakerState state) noexcept {
  return to_string<CircuitBreakerState>(state);
}

// The name in the enum's table of names, as every other enum of the vocabulary.
std::string_view to_string(SlidingWindowType type) noexcept {
  return to_string<SlidingWindowType>(type);
}

// Found by DifferenceFinder through argument-dependent lookup (config_check.hpp knows only the
// types it was written for).
static std::string show(SlidingWindowType value) { return std::string(to_string(value)); }
static std::string show(CircuitBreakerState value) { return std::string(to_string(value)); }

namespace {

void check_rate(const char* setting, double value) {
  // Written so that NaN fails too.
  if (!(value > 0 && value <= 100)) {
    detail::fail(detail::kInvalidValue, setting, detail::show(value), "a percentage in (0, 100]");
  }
}

void check_count(const char* setting, int value) {
  if (value < 1)
    detail::fail(detail::kLimitBelowOne, setting, detail::show(value), "an integer >= 1");
}

// R4C-REG-001 unless low <= value <= 24 h; `valid` says so in words.
void check_duration(const char* setting, std::chrono::nanoseconds value,
                    std::chrono::nanoseconds low, const char* valid) {
  if (value < low || value > CircuitBreakerConfig::kMaxWaitInOpen) {
    detail::fail(detail::kInvalidValue, setting, detail::show(value), valid);
  }
}

void check_wait_in_open(const char* setting, std::chrono::nanoseconds value) {
  check_duration(setting, value, std::chrono::nanoseconds(1), "1 ns .. 24 h");
}

const CircuitBreakerConfig& validated(const CircuitBreakerConfig& config) {
  config.validate();
  return config;
}

const Clock* or_system_clock(std::shared_ptr<Clock>& clock) {
  if (!clock) clock = std::make_shared<SystemClock>();
  return clock.get();
}

// As resilience4j: a count-based window never needs more calls than it holds.
std::uint64_t minimum_calls_of(const CircuitBreakerConfig& config) {
  return static_cast<std::uint64_t>(
      config.sliding_window_type() == SlidingWindowType::count_based
          ? std::min(config.minimum_number_of_calls(), config.sliding_window_size())
          : config.minimum_number_of_calls());
}

std::int64_t floor_div(std::int64_t value, std::int64_t divisor) {
  const std::int64_t quotient = value / divisor;
  return (value % divisor != 0 && value < 0) ? quotient - 1 : quotient;
}

// Where second `second` lives in a ring of `size` buckets (seconds may be negative).
std::size_t ring_index(std::int64_t second, std::int64_t size) {
  return static_cast<std::size_t>(second - floor_div(second, size) * size);
}

}  // namespace

CircuitBreakerConfig& CircuitBreakerConfig::failure_rate_threshold(double value) {
  return detail::store_checked(*this, failure_rate_threshold_, value, check_rate,
                               "failure_rate_threshold");
}

CircuitBreakerConfig& CircuitBreakerConfig::slow_call_rate_threshold(double value) {
  return detail::store_checked(*this, slow_call_rate_threshold_, value, check_rate,
                               "slow_call_rate_threshold");
}

CircuitBreakerConfig& CircuitBreakerConfig::slow_call_duration(std::chrono::nanoseconds value) {
  if (value <= std::chrono::nanoseconds::zero()) {
    detail::fail(detail::kInvalidValue, "slow_call_duration", detail::show(value), "> 0 ns");
  }
  return detail::store(*this, slow_call_duration_, value);
}

CircuitBreakerConfig& CircuitBreakerConfig::sliding_window_type(SlidingWindowType value) {
  if (value != SlidingWindowType::count_based && value != SlidingWindowType::time_based) {
    detail::fail(detail::kInvalidValue, "sliding_window_type",
                 detail::show(static_cast<int>(value)), "count_based or time_based");
  }
  return detail::store(*this, sliding_window_type_, value);
}

CircuitBreakerConfig& CircuitBreakerConfig::sliding_window_size(int value) {
  check_count("sliding_window_size", value);
  if (value > kMaxSlidingWindowSize) {
    detail::fail(detail::kInvalidValue, "sliding_window_size", detail::show(value),
                 "an integer from 1 to 1000000");
  }
  return detail::store(*this, sliding_window_size_, value);
}

CircuitBreakerConfig& CircuitBreakerConfig::minimum_number_of_calls(int value) {
  return detail::store_checked(*this, minimum_number_of_calls_, value, check_count,
                               "minimum_number_of_calls");
}

CircuitBreakerConfig& CircuitBreakerConfig::wait_in_open(std::chrono::nanoseconds value) {
  return detail::store_checked(*this, wait_in_open_, value, check_wait_in_open, "wait_in_open");
}

CircuitBreakerConfig& CircuitBreakerConfig::permitted_calls_in_half_open(int value) {
  return detail::store_checked(*this, permitted_calls_in_half_open_, value, check_count,
                               "permitted_calls_in_half_open");
}

CircuitBreakerConfig& CircuitBreakerConfig::exponential_wait_in_open(
    double multiplier, std::chrono::nanoseconds max_wait) {
  detail::check_factor("wait_in_open_multiplier", multiplier);
  check_wait_in_open("max_wait_in_open", max_wait);
  wait_in_open_multiplier_ = multiplier;
  max_wait_in_open_ = max_wait;
  max_wait_in_open_set_ = true;
  return *this;
}

CircuitBreakerConfig& CircuitBreakerConfig::wait_interval_in_open(
    std::function<std::chrono::nanoseconds(int)> interval) {
  check_predicate("wait_interval_in_open", static_cast<bool>(interval));
  wait_interval_ =
      std::make_shared<const std::function<std::chrono::nanoseconds(int)>>(std::move(interval));
  return *this;
}

std::chrono::nanoseconds CircuitBreakerConfig::wait_in_open_for(int opening) const {
  opening = std::max(opening, 1);
  if (wait_interval_) {
    return std::clamp((*wait_interval_)(opening), std::chrono::nanoseconds(1), kMaxWaitInOpen);
  }
  if (wait_in_open_multiplier_ == 1.0) return std::min(wait_in_open_, max_wait_in_open());
  // In double: multiplier^n overflows any integer long before the cap matters.
  const double wait =
      static_cast<double>(wait_in_open_.count()) * std::pow(wait_in_open_multiplier_, opening - 1);
  const double cap = static_cast<double>(max_wait_in_open().count());
  return std::chrono::nanoseconds(static_cast<std::int64_t>(std::min(wait, cap)));
}

CircuitBreakerConfig& CircuitBreakerConfig::max_wait_in_half_open(std::chrono::nanoseconds value) {
  check_duration("max_wait_in_half_open", value, std::chrono::nanoseconds::zero(),
                 "0 (no limit) .. 24 h");
  return detail::store(*this, max_wait_in_half_open_, value);
}

CircuitBreakerConfig& CircuitBreakerConfig::state_after_max_wait_in_half_open(
    CircuitBreakerState value) {
  if (value != CircuitBreakerState::open && value != CircuitBreakerState::closed) {
    detail::fail(detail::kInvalidValue, "state_after_max_wait_in_half_open",
                 detail::show(static_cast<int>(value)), "open or closed");
  }
  return detail::store(*this, state_after_max_wait_in_half_open_, value);
}

CircuitBreakerConfig& CircuitBreakerConfig::mode(PolicyMode value) noexcept {
  return detail::store(*this, mode_, value);
}

CircuitBreakerConfig& CircuitBreakerConfig::initial_state(CircuitBreakerState value) {
  if (static_cast<int>(value) > static_cast<int>(CircuitBreakerState::forced_open)) {
    detail::fail(detail::kInvalidValue, "initial_state", detail::show(static_cast<int>(value)),
                 text::choices<CircuitBreakerState>());
  }
  return detail::store(*this, initial_state_, value);
}

void CircuitBreakerConfig::check_predicate(const char* setting, bool present) {
  detail::check_present(setting, present);
}

CircuitBreakerConfig& CircuitBreakerConfig::record_on(
    std::function<bool(const std::exception_ptr&)> predicate) {
  return detail::store_checked(*this, record_if_, std::move(predicate), detail::check_callable,
                               "record_on");
}

CircuitBreakerConfig& CircuitBreakerConfig::ignore_on(
    std::function<bool(const std::exception_ptr&)> predicate) {
  return detail::store_checked(*this, ignore_if_, std::move(predicate), detail::check_callable,
                               "ignore_on");
}

CircuitBreakerConfig& CircuitBreakerConfig::record_on(std::vector<ExceptionType> types) {
  return detail::store(*this, record_on_, std::move(types));
}

CircuitBreakerConfig& CircuitBreakerConfig::ignore_on(std::vector<ExceptionType> types) {
  return detail::store(*this, ignore_on_, std::move(types));
}

void CircuitBreakerConfig::validate() const {
  CircuitBreakerConfig()
      .failure_rate_threshold(failure_rate_threshold_)
      .slow_call_rate_threshold(slow_call_rate_threshold_)
      .slow_call_duration(slow_call_duration_)
      .sliding_window_type(sliding_window_type_)
      .sliding_window_size(sliding_window_size_)
      .minimum_number_of_calls(minimum_number_of_calls_)
      .wait_in_open(wait_in_open_)
      .permitted_calls_in_half_open(permitted_calls_in_half_open_)
      .max_wait_in_half_open(max_wait_in_half_open_)
      .state_after_max_wait_in_half_open(state_after_max_wait_in_half_open_)
      .initial_state(initial_state_);
  if (max_wait_in_open_set_) {
    CircuitBreakerConfig().exponential_wait_in_open(wait_in_open_multiplier_, max_wait_in_open_);
    if (max_wait_in_open_ < wait_in_open_) {
      throw ConfigException(detail::kBoundsOrRange,
                            "max_wait_in_open (" + detail::show(max_wait_in_open_) +
                                ") is less than wait_in_open (" + detail::show(wait_in_open_) +
                                "); valid: max_wait_in_open >= wait_in_open");
    }
  }
}

std::optional<SettingDifference> first_difference(const CircuitBreakerConfig& first,
                                                  const CircuitBreakerConfig& second) {
  return detail::DifferenceFinder()
      .compare("failure_rate_threshold", first.failure_rate_threshold(),
               second.failure_rate_threshold())
      .compare("slow_call_rate_threshold", first.slow_call_rate_threshold(),
               second.slow_call_rate_threshold())
      .compare("slow_call_duration", first.slow_call_duration(), second.slow_call_duration())
      .compare("sliding_window_type", first.sliding_window_type(), second.sliding_window_type())
      .compare("sliding_window_size", first.sliding_window_size(), second.sliding_window_size())
      .compare("minimum_number_of_calls", first.minimum_number_of_calls(),
               second.minimum_number_of_calls())
      .compare("wait_in_open", first.wait_in_open(), second.wait_in_open())
      .compare("permitted_calls_in_half_open", first.permitted_calls_in_half_open(),
               second.permitted_calls_in_half_open())
      .compare("record_on", first.record_on_types(), second.record_on_types())
      .compare("ignore_on", first.ignore_on_types(), second.ignore_on_types())
      .compare("wait_in_open_multiplier", first.wait_in_open_multiplier(),
               second.wait_in_open_multiplier())
      .compare("max_wait_in_open", first.max_wait_in_open(), second.max_wait_in_open())
      .compare("wait_interval_in_open", first.has_wait_interval_in_open(),
               second.has_wait_interval_in_open())
      .compare("max_wait_in_half_open", first.max_wait_in_half_open(),
               second.max_wait_in_half_open())
      .compare("state_after_max_wait_in_half_open", first.state_after_max_wait_in_half_open(),
               second.state_after_max_wait_in_half_open())
      .compare("initial_state", first.initial_state(), second.initial_state())
      .compare("mode", first.mode(), second.mode())
      .compare("record_on_predicate", static_cast<bool>(first.record_on_predicate()),
               static_cast<bool>(second.record_on_predicate()))
      .compare("ignore_on_predicate", static_cast<bool>(first.ignore_on_predicate()),
               static_cast<bool>(second.ignore_on_predicate()))
      .compare("record_result", first.record_result_type().has_value(),
               second.record_result_type().has_value())
      .result();
}

namespace detail {

CallWindow::CallWindow(SlidingWindowType type, int size) : type_(type), size_(size) {
  if (type_ == SlidingWindowType::count_based) {
    outcomes_.assign(static_cast<std::size_t>(size_), 0);
  } else {
    buckets_.assign(static_cast<std::size_t>(size_), Bucket{});
  }
}

void CallWindow::record(std::int64_t second, bool failed, bool slow) {
  if (type_ == SlidingWindowType::count_based) {
    std::uint8_t& slot = outcomes_[static_cast<std::size_t>(next_)];
    if (totals_.calls == static_cast<std::uint64_t>(size_)) {  // full: the oldest call leaves
      totals_.failed -= (slot & kFailed) ? 1 : 0;
      totals_.slow -= (slot & kSlow) ? 1 : 0;
    } else {
      ++totals_.calls;
    }
    slot = static_cast<std::uint8_t>((failed ? kFailed : 0) | (slow ? kSlow : 0));
    totals_.failed += failed ? 1 : 0;
    totals_.slow += slow ? 1 : 0;
    next_ = next_ + 1 == size_ ? 0 : next_ + 1;
  } else {
    advance_to(second);
    // A call whose reading is older than the newest second (read before another thread's) is
    // counted in the newest: it ended at most a lock wait earlier.
    Bucket& bucket = buckets_[ring_index(latest_second_, size_)];
    ++bucket.calls;
    ++totals_.calls;
    if (failed) ++bucket.failed, ++totals_.failed;
    if (slow) ++bucket.slow, ++totals_.slow;
  }
}

void CallWindow::record_successes(std::int64_t second, std::uint64_t count) {
  if (type_ == SlidingWindowType::count_based) {
    const auto size = static_cast<std::uint64_t>(size_);
    if (totals_.failed == 0 && totals_.slow == 0) {  // every slot holds a success: only counts move
      totals_.calls = std::min(size, totals_.calls + count);
      next_ = static_cast<std::int64_t>((static_cast<std::uint64_t>(next_) + count % size) % size);
      return;
    }
    const std::uint64_t one_by_one = std::min(count, size);
    for (std::uint64_t i = 0; i < one_by_one; ++i) record(second, false, false);
    if (count > size) {  // the window holds successes only by now: the rest move the ring on
      next_ = static_cast<std::int64_t>(
          (static_cast<std::uint64_t>(next_) + (count - size) % size) % size);
    }
  } else {
    advance_to(second);
    Bucket& bucket = buckets_[ring_index(latest_second_, size_)];
    bucket.calls += static_cast<std::uint32_t>(count);
    totals_.calls += count;
  }
}

void CallWindow::advance_to(std::int64_t second) {
  if (type_ != SlidingWindowType::time_based) return;
  if (!started_) {
    started_ = true;
    latest_second_ = second;
    return;
  }
  if (second <= latest_second_) return;
  // The seconds that begin now reuse the buckets of the seconds that leave the window.
  const std::int64_t entering = std::min(second - latest_second_, size_);
  for (std::int64_t k = second - entering + 1; k <= second; ++k) {
    Bucket& bucket = buckets_[ring_index(k, size_)];
    totals_.calls -= bucket.calls;
    totals_.failed -= bucket.failed;
    totals_.slow -= bucket.slow;
    bucket = Bucket{};
  }
  latest_second_ = second;
}

void CallWindow::reset() {
  std::fill(outcomes_.begin(), outcomes_.end(), std::uint8_t{0});
  std::fill(buckets_.begin(), buckets_.end(), Bucket{});
  next_ = 0;
  started_ = false;
  totals_ = Totals{};
}

}  // namespace detail

namespace {
// Whether a breaker on `config` classifies failures (a rethrow each) or records them all.
bool classifies(const CircuitBreakerConfig& config) noexcept {
  return !config.ignore_on_types().empty() || !config.record_on_types().empty() ||
         config.ignore_on_predicate() || config.record_on_predicate();
}
}  // namespace

CircuitBreaker::CircuitBreaker(std::string instance_id, CircuitBreakerConfig config,
                               std::shared_ptr<Clock> clock)
    : clock_(or_system_clock(clock)),
      slow_call_ns_(config.slow_call_duration().count()),
      time_based_(config.sliding_window_type() == SlidingWindowType::time_based),
      window_(validated(config).sliding_window_type(), config.sliding_window_size()),
      max_half_open_ticks_(clock_.to_ticks(config.max_wait_in_half_open().count())),
      classifies_(classifies(config)),
      minimum_calls_(minimum_calls_of(config)),
      instance_id_(std::move(instance_id)),
      live_config_(config),
      clock_owner_(std::move(clock)),
      not_permitted_(std::make_exception_ptr(CallNotPermittedException(
          instance_id_, "circuit breaker '" + instance_id_ +
                            "' does not permit the call (open, forced open, or half-open with "
                            "its " +
                            std::to_string(config.permitted_calls_in_half_open()) +
                            " trial calls taken): the call was rejected without running"))),
      observe_(config.mode() == PolicyMode::observe),
      transition_listeners_(std::make_shared<detail::EventHub<CircuitBreakerTransitionEvent>>(
          CircuitBreakerKind::kNames.metrics)) {
  const CircuitBreakerState initial = config.initial_state();
  if (initial == CircuitBreakerState::closed) return;
  // The initial state is where the breaker starts, not a transition: no count, no event.
  const std::int64_t now = clock_.ticks();
  if (initial == CircuitBreakerState::open) {
    openings_ = 1;
    open_until_.store(now + clock_.to_ticks(config.wait_in_open_for(1).count()),
                      std::memory_order_relaxed);
  } else if (initial == CircuitBreakerState::half_open) {
    half_open_until_ = now + max_half_open_ticks_;
  }
  word_.store(static_cast<std::uint64_t>(initial), std::memory_order_release);
}

void CircuitBreaker::throw_not_permitted() const { std::rethrow_exception(not_permitted_); }

std::int64_t CircuitBreaker::second_of(std::int64_t ticks) const noexcept {
  return floor_div(clock_.to_clock_ns(ticks), 1'000'000'000);
}

CircuitBreakerPermit CircuitBreaker::acquire_slow(std::uint64_t word) noexcept {
  switch (state_of(word)) {
    case CircuitBreakerState::disabled:
    case CircuitBreakerState::metrics_only:  // permitted as when closed, without the lock
      return CircuitBreakerPermit(this, word >> kStateBits);
    case CircuitBreakerState::forced_open:
      return refuse();
    default:
      break;
  }
  const std::int64_t now = clock_.ticks();
  // An open breaker rejects without the lock. A stale open_until_ is earlier (the next opening
  // is later), which merely sends the call to the locked check, or, just after an operator
  // shortened the wait, later, which rejects the call as it would have been a moment before.
  if (state_of(word) == CircuitBreakerState::open &&
      now < open_until_.load(std::memory_order_relaxed)) {
    return refuse();
  }
  bool permitted = false;
  {
    Locked locked(*this, now);
    resolve_half_open_locked(now);
    word = word_.load(std::memory_order_relaxed);
    switch (state_of(word)) {
      case CircuitBreakerState::closed:
      case CircuitBreakerState::disabled:
      case CircuitBreakerState::metrics_only:
        permitted = true;
        break;
      case CircuitBreakerState::forced_open:
        break;
      case CircuitBreakerState::open:
        if (now < open_until_.load(std::memory_order_relaxed)) break;
        move_to(CircuitBreakerState::half_open, now);  // lazily: the first call after the wait
        word = word_.load(std::memory_order_relaxed);
        [[fallthrough]];
      case CircuitBreakerState::half_open:
        if (trials_permitted_ < live_config_.get().permitted_calls_in_half_open()) {
          ++trials_permitted_;
          permitted = true;
        }
        break;
    }
  }
  publish_transitions();
  if (permitted) return CircuitBreakerPermit(this, word >> kStateBits);
  return refuse();
}

CircuitBreakerPermit CircuitBreaker::refuse() noexcept {
  if (observe_.load(std::memory_order_relaxed)) {
    would_reject_.increment();
    return CircuitBreakerPermit(this, kObservedEpoch);
  }
  not_permitted_count_.increment();
  return CircuitBreakerPermit();
}

void CircuitBreaker::reconfigure(const CircuitBreakerConfig& next) {
  next.validate();
  const CircuitBreakerConfig& current = live_config_.get();
  const bool new_window = next.sliding_window_type() != current.sliding_window_type() ||
                          next.sliding_window_size() != current.sliding_window_size();
  // Everything that may throw (allocation) comes before the breaker changes.
  std::optional<detail::CallWindow> window;
  if (new_window) window.emplace(next.sliding_window_type(), next.sliding_window_size());
  live_config_.replace(next);
  {
    Locked locked(*this, clock_.ticks());
    if (window) {
      // The successes Locked folded in belong to the old window: they go with it.
      window_ = std::move(*window);
      time_based_.store(next.sliding_window_type() == SlidingWindowType::time_based,
                        std::memory_order_relaxed);
    }
    minimum_calls_ = minimum_calls_of(next);
    max_half_open_ticks_ = clock_.to_ticks(next.max_wait_in_half_open().count());
    slow_call_ns_.store(next.slow_call_duration().count(), std::memory_order_relaxed);
    observe_.store(next.mode() == PolicyMode::observe, std::memory_order_relaxed);
    classifies_.store(classifies(next), std::memory_order_relaxed);
  }
  publish_transitions();
}

void CircuitBreaker::resolve_half_open_locked(std::int64_t now) {
  if (max_half_open_ticks_ == 0 ||
      state_of(word_.load(std::memory_order_relaxed)) != CircuitBreakerState::half_open ||
      now < half_open_until_) {
    return;
  }
  move_to(live_config_.get().state_after_max_wait_in_half_open(), now);
}

CircuitBreaker::Locked::Locked(const CircuitBreaker& breaker, std::int64_t now)
    : lock_(breaker.mutex_), breaker_(breaker), now_(now) {
  // Shut the lock-free path while the lock is held; what it counted comes first, in order. No
  // threshold check: the budget the last holder left keeps every rate below its threshold.
  const std::uint64_t pending = breaker.pending_.exchange(kPendingShut, std::memory_order_acquire);
  if ((pending & kPendingOrdered) != 0) {
    const std::uint64_t run = (pending >> kRunShift) & kMaxRun;
    if (run != 0) breaker.window_.record_successes(0, run);
    const auto ordered = static_cast<int>((pending >> kOrderedShift) & kSixBits);
    for (int i = 0; i < ordered; ++i) breaker.window_.record(0, ((pending >> i) & 1U) != 0, false);
    return;
  }
  const std::uint64_t count = pending & kPendingCount;
  if (count != 0) breaker.window_.record_successes(breaker.pending_second_, count);
}

CircuitBreaker::Locked::~Locked() {
  if (breaker_.state() != CircuitBreakerState::closed) return;  // stays shut
  const detail::CallWindow::Totals& totals = breaker_.window_.totals();
  if (!breaker_.time_based_.load(std::memory_order_relaxed)) {
    // Count-based: the failures that may come without the lock. A call never lowers the
    // window's count and never raises its slow calls, and a threshold is only checked from
    // minimum_calls_ on, so with b failures more the rates stay at most those of
    // {max(calls, minimum), failed + b, slow}: the largest b below the thresholds there.
    const detail::CallWindow::Totals floor{std::max(totals.calls, breaker_.minimum_calls_),
                                           totals.failed, totals.slow};
    const auto reachable = [&](std::uint64_t more) {
      detail::CallWindow::Totals t = floor;
      t.failed += more;
      return t.calls != 0 && (t.failed != 0 || t.slow != 0) && breaker_.rates_exceeded(t);
    };
    if (reachable(0)) return;  // a success could decide: stays shut
    std::uint64_t budget = 0;  // the largest b that cannot reach a threshold
    for (std::uint64_t step = kMaxOrdered; step != 0; step /= 2) {
      if (budget + step <= static_cast<std::uint64_t>(kMaxOrdered) && !reachable(budget + step))
        budget += step;
    }
    breaker_.pending_.store(kPendingOrdered | (budget << kBudgetShift), std::memory_order_release);
    return;
  }
  if (totals.failed != 0 || totals.slow != 0) {
    return;  // stays shut: a success may change the rates
  }
  breaker_.pending_second_ = breaker_.second_of(now_);
  breaker_.pending_.store(tag_of(breaker_.pending_second_), std::memory_order_release);
}

void CircuitBreaker::record_locked_path(std::uint64_t epoch, bool failed,
                                        std::chrono::nanoseconds duration) noexcept {
  // Disabled and forced open record nothing: no lock for them. A transition racing with this
  // reading sees the outcome as one of the state it leaves, as any late outcome.
  const CircuitBreakerState state = state_of(word_.load(std::memory_order_relaxed));
  if (state == CircuitBreakerState::disabled || state == CircuitBreakerState::forced_open) return;
  const bool slow = duration.count() >= slow_call_ns_.load(std::memory_order_relaxed);
  const std::int64_t now = clock_.ticks();
  {
    Locked locked(*this, now);
    record_locked(epoch, failed, slow, now);
  }
  publish_transitions();
}

void CircuitBreaker::record_locked(std::uint64_t epoch, bool failed, bool slow,
                                   std::int64_t now) noexcept {
  resolve_half_open_locked(now);
  const std::uint64_t word = word_.load(std::memory_order_relaxed);
  switch (state_of(word)) {
    case CircuitBreakerState::closed:
      window_.record(second_of(now), failed, slow);
      // Rates of 0 never reach a threshold (thresholds are > 0): no division for them.
      if (window_.totals().calls >= minimum_calls_ &&
          (window_.totals().failed != 0 || window_.totals().slow != 0) &&
          rates_exceeded(window_.totals())) {
        const detail::CallWindow::Totals totals = window_.totals();
        move_to(CircuitBreakerState::open, now, &totals);
      }
      break;
    case CircuitBreakerState::metrics_only:
      window_.record(second_of(now), failed, slow);  // rated by whoever reads it, never opens
      break;
    case CircuitBreakerState::open:
      // A call admitted before the breaker opened counts in the figures that opened it, as
      // resilience4j's open state records into the metrics it took over.
      if (open_shows_trials_) {
        ++trials_.calls;
        if (failed) ++trials_.failed;
        if (slow) ++trials_.slow;
      } else {
        window_.record(second_of(now), failed, slow);
      }
      break;
    case CircuitBreakerState::half_open:
      // Only the trial calls of this half-open period rate it.
      if (epoch != kCurrentEpoch && epoch != word >> kStateBits) break;
      ++trials_.calls;
      if (failed) ++trials_.failed;
      if (slow) ++trials_.slow;
      if (trials_.calls >=
          static_cast<std::uint64_t>(live_config_.get().permitted_calls_in_half_open())) {
        const detail::CallWindow::Totals totals = trials_;
        move_to(rates_exceeded(totals) ? CircuitBreakerState::open : CircuitBreakerState::closed,
                now, &totals);
      }
      break;
    case CircuitBreakerState::disabled:
    case CircuitBreakerState::forced_open:
      break;
  }
}

void CircuitBreaker::release(std::uint64_t epoch) noexcept {
  // Only a half-open breaker counts what is given back. A release racing with a transition to
  // half-open is one of the state it leaves (its permit's epoch could not match the new one).
  if (epoch == kObservedEpoch || state() != CircuitBreakerState::half_open) return;
  Locked locked(*this, clock_.ticks());
  const std::uint64_t word = word_.load(std::memory_order_relaxed);
  if (state_of(word) != CircuitBreakerState::half_open) return;
  if (epoch != kCurrentEpoch && epoch != word >> kStateBits) return;
  if (trials_permitted_ > 0) --trials_permitted_;
}

void CircuitBreaker::on_success(std::chrono::nanoseconds duration) noexcept {
  record(kCurrentEpoch, false, duration);
}

void CircuitBreaker::on_error(std::chrono::nanoseconds duration) noexcept {
  record(kCurrentEpoch, true, duration);
}

void CircuitBreaker::release_permission() noexcept { release(kCurrentEpoch); }

void CircuitBreaker::record_current_exception(CircuitBreakerPermit& permit,
                                              std::chrono::nanoseconds duration) noexcept {
  switch (classify_current(live_config_.get())) {
    case kIgnored:
      return permit.release();
    case kSucceeded:
      return permit.on_success(duration);  // as resilience4j: a failure not recorded is a success
    default:
      permit.on_error(duration);
  }
}

int CircuitBreaker::classify_current(const CircuitBreakerConfig& config) const noexcept {
  // resilience4j's precedence: ignored (by type or predicate), else recorded (by type or
  // predicate; everything when neither is set), else a success.
  if (detail::matches_current(config.ignore_on_types(), config.ignore_on_predicate())) {
    return kIgnored;
  }
  const bool records_some = !config.record_on_types().empty() || config.record_on_predicate();
  if (records_some &&
      !detail::matches_current(config.record_on_types(), config.record_on_predicate())) {
    return kSucceeded;
  }
  return kFailed;
}

int CircuitBreaker::classify(const std::exception_ptr& failure,
                             const CircuitBreakerConfig& config) const noexcept {
  if (!classifies_.load(std::memory_order_relaxed)) return kFailed;
  try {
    std::rethrow_exception(failure);
  } catch (...) {
    return classify_current(config);
  }
}

bool CircuitBreaker::rates_exceeded(const detail::CallWindow::Totals& totals) const noexcept {
  const double calls = static_cast<double>(totals.calls);
  return static_cast<double>(totals.failed) * 100.0 / calls >=
             live_config_.get().failure_rate_threshold() ||
         static_cast<double>(totals.slow) * 100.0 / calls >=
             live_config_.get().slow_call_rate_threshold();
}

void CircuitBreaker::move_to(CircuitBreakerState state, std::int64_t now,
                             const detail::CallWindow::Totals* decided_by, std::int64_t open_wait) {
  const CircuitBreakerState from = this->state();
  if (transition_listeners_->has_listeners()) [[unlikely]] {
    CircuitBreakerTransitionEvent event{
        instance_id_, from, state,
        -1,           -1,   (word_.load(std::memory_order_relaxed) >> kStateBits) + 1};
    if (decided_by != nullptr && decided_by->calls > 0) {
      const double calls = static_cast<double>(decided_by->calls);
      event.failure_rate = static_cast<double>(decided_by->failed) * 100.0 / calls;
      event.slow_call_rate = static_cast<double>(decided_by->slow) * 100.0 / calls;
    }
    if (unpublished_count_ == unpublished_.size()) {  // the oldest is lost
      unpublished_first_ = (unpublished_first_ + 1) % unpublished_.size();
      --unpublished_count_;
    }
    unpublished_[(unpublished_first_ + unpublished_count_) % unpublished_.size()] = event;
    ++unpublished_count_;
    has_unpublished_.store(true, std::memory_order_seq_cst);
  }
  // Each state's figures start empty, except open's, which are those of the calls that opened
  // it (see CircuitBreakerSnapshot).
  switch (state) {
    case CircuitBreakerState::open:
      if (open_wait < 0) {
        ++openings_;
        open_wait = clock_.to_ticks(live_config_.get().wait_in_open_for(openings_).count());
      }
      open_shows_trials_ = from == CircuitBreakerState::half_open;
      open_until_.store(now + open_wait, std::memory_order_relaxed);
      break;
    case CircuitBreakerState::half_open:
      trials_permitted_ = 0;
      trials_ = detail::CallWindow::Totals{};
      half_open_until_ = now + max_half_open_ticks_;
      break;
    case CircuitBreakerState::closed:
    case CircuitBreakerState::disabled:
    case CircuitBreakerState::metrics_only:
      openings_ = 0;
      [[fallthrough]];
    case CircuitBreakerState::forced_open:
      window_.reset();
      trials_ = detail::CallWindow::Totals{};
      break;
  }
  const std::uint64_t transitions = (word_.load(std::memory_order_relaxed) >> kStateBits) + 1;
  // release: a thread that sees the new state (acquire in try_acquire) sees open_until_.
  word_.store(transitions << kStateBits | static_cast<std::uint64_t>(state),
              std::memory_order_release);
}

void CircuitBreaker::transition_by_hand(CircuitBreakerState state) {
  {
    Locked locked(*this, clock_.ticks());
    if (this->state() != state) move_to(state, locked.now());
  }
  publish_transitions();
}

void CircuitBreaker::transition_to_closed() { transition_by_hand(CircuitBreakerState::closed); }
void CircuitBreaker::transition_to_open() { transition_by_hand(CircuitBreakerState::open); }
void CircuitBreaker::transition_to_half_open() {
  transition_by_hand(CircuitBreakerState::half_open);
}
void CircuitBreaker::transition_to_forced_open() {
  transition_by_hand(CircuitBreakerState::forced_open);
}
void CircuitBreaker::transition_to_disabled() { transition_by_hand(CircuitBreakerState::disabled); }
void CircuitBreaker::transition_to_metrics_only() {
  transition_by_hand(CircuitBreakerState::metrics_only);
}

void CircuitBreaker::reset() {
  {
    Locked locked(*this, clock_.ticks());
    if (state() != CircuitBreakerState::closed) {
      move_to(CircuitBreakerState::closed, locked.now());
    } else {
      window_.reset();
      openings_ = 0;
    }
  }
  publish_transitions();
}

void CircuitBreaker::open_for_ticks(std::int64_t wait_ticks) {
  {
    Locked locked(*this, clock_.ticks());
    const std::int64_t now = locked.now();
    if (state() == CircuitBreakerState::open) {
      open_until_.store(now + wait_ticks, std::memory_order_relaxed);
    } else {
      move_to(CircuitBreakerState::open, now, nullptr, wait_ticks);
    }
  }
  publish_transitions();
}

void CircuitBreaker::transition_to_open_for(std::chrono::nanoseconds wait) {
  check_duration("transition_to_open_for", wait, std::chrono::nanoseconds::zero(), "0 .. 24 h");
  open_for_ticks(clock_.to_ticks(wait.count()));
}

void CircuitBreaker::transition_to_open_until(std::chrono::nanoseconds deadline) {
  const std::chrono::nanoseconds wait =
      std::clamp(deadline - clock_owner_->now(), std::chrono::nanoseconds::zero(),
                 CircuitBreakerConfig::kMaxWaitInOpen);
  open_for_ticks(clock_.to_ticks(wait.count()));
}

void CircuitBreaker::publish_transitions() noexcept {
  // seq_cst on has_unpublished_ and publishing_: a thread that queues a transition while the
  // publisher is finishing either sees publishing_ clear and publishes, or the publisher sees
  // has_unpublished_ set after clearing publishing_ and goes on.
  while (has_unpublished_.load(std::memory_order_seq_cst)) {
    if (publishing_.exchange(true, std::memory_order_seq_cst)) return;  // it will see ours
    for (;;) {
      CircuitBreakerTransitionEvent event;
      {
        std::lock_guard lock(mutex_);
        if (unpublished_count_ == 0) {
          has_unpublished_.store(false, std::memory_order_seq_cst);
          break;
        }
        event = unpublished_[unpublished_first_];
        unpublished_first_ = (unpublished_first_ + 1) % unpublished_.size();
        --unpublished_count_;
      }
      transition_listeners_->publish(event);  // a listener's own transitions queue behind
    }
    publishing_.store(false, std::memory_order_seq_cst);
  }
}

Subscription CircuitBreaker::on_state_transition(
    std::function<void(const CircuitBreakerTransitionEvent&)> listener) const {
  return transition_listeners_->subscribe(std::move(listener));
}

CircuitBreakerSnapshot CircuitBreaker::snapshot() const {
  CircuitBreakerSnapshot snap;
  const std::int64_t now = clock_.ticks();
  const Locked locked(*this, now);
  const std::uint64_t word = word_.load(std::memory_order_relaxed);
  snap.state = state_of(word);
  snap.transitions = word >> kStateBits;
  detail::CallWindow::Totals totals;
  std::uint64_t minimum = minimum_calls_;
  if (snap.state == CircuitBreakerState::half_open ||
      (snap.state == CircuitBreakerState::open && open_shows_trials_)) {
    totals = trials_;
    minimum = static_cast<std::uint64_t>(live_config_.get().permitted_calls_in_half_open());
  } else {
    window_.advance_to(second_of(now));
    totals = window_.totals();  // empty while disabled or forced open
  }
  snap.buffered_calls = totals.calls;
  snap.failed_calls = totals.failed;
  snap.slow_calls = totals.slow;
  if (totals.calls > 0 && totals.calls >= minimum) {
    snap.failure_rate =
        static_cast<double>(totals.failed) * 100.0 / static_cast<double>(totals.calls);
    snap.slow_call_rate =
        static_cast<double>(totals.slow) * 100.0 / static_cast<double>(totals.calls);
  }
  snap.not_permitted_calls = not_permitted_count_.total();
  snap.would_have_rejected = would_reject_.total();
  snap.mode = live_config_.get().mode();
  return snap;
}

std::span<const detail::Setting<CircuitBreakerKind::Config>>
CircuitBreakerKind::settings() noexcept {
  using Config = CircuitBreakerKind::Config;
  using R = detail::SettingRows<Config>;  // Config: the kind's
  using enum detail::SettingType;
  static constexpr detail::Setting<Config> kSettings[] = {
      R::field<double, &Config::failure_rate_threshold, &Config::failure_rate_threshold>(
          "failureRateThreshold", "failure_rate_threshold"),
      R::field<double, &Config::slow_call_rate_threshold, &Config::slow_call_rate_threshold>(
          "slowCallRateThreshold", "slow_call_rate_threshold"),
      R::field<std::chrono::nanoseconds, &Config::slow_call_duration, &Config::slow_call_duration>(
          "slowCallDuration", "slow_call_duration"),
      R::field<SlidingWindowType, &Config::sliding_window_type, &Config::sliding_window_type>(
          "slidingWindowType", "sliding_window_type"),
      R::field<int, &Config::sliding_window_size, &Config::sliding_window_size>(
          "slidingWindowSize", "sliding_window_size"),
      R::field<int, &Config::minimum_number_of_calls, &Config::minimum_number_of_calls>(
          "minimumNumberOfCalls", "minimum_number_of_calls"),
      R::field<std::chrono::nanoseconds, &Config::wait_in_open, &Config::wait_in_open>(
          "waitInOpen", "wait_in_open"),
      R::field<int, &Config::permitted_calls_in_half_open, &Config::permitted_calls_in_half_open>(
          "permittedCallsInHalfOpen", "permitted_calls_in_half_open"),
      // As the retry's backoff pair: a multiplier alone is capped only by the longest wait
      // (24 h); a maxWaitInOpen alone keeps the multiplier (1 when none was set).
      R::row(
          "waitInOpenMultiplier", "wait_in_open_multiplier", number,
          [](auto& c, auto& v) {
            c.exponential_wait_in_open(v.number, c.exponential_wait_in_open()
                                                     ? c.max_wait_in_open()
                                                     : CircuitBreakerConfig::kMaxWaitInOpen);
          },
          [](const auto& c) { return detail::value_of(c.wait_in_open_multiplier()); }),
      R::row(
          "maxWaitInOpen", "max_wait_in_open", duration,
          [](auto& c, auto& v) {
            c.exponential_wait_in_open(c.wait_in_open_multiplier(), v.duration);
          },
          [](const auto& c) { return detail::value_of(c.max_wait_in_open()); }),
      R::field<std::chrono::nanoseconds, &Config::max_wait_in_half_open,
               &Config::max_wait_in_half_open>("maxWaitInHalfOpen", "max_wait_in_half_open"),
      R::field<CircuitBreakerState, &Config::state_after_max_wait_in_half_open,
               &Config::state_after_max_wait_in_half_open>("stateAfterMaxWaitInHalfOpen",
                                                           "state_after_max_wait_in_half_open"),
      R::field<CircuitBreakerState, &Config::initial_state, &Config::initial_state>(
          "initialState", "initial_state"),
      R::field<std::vector<ExceptionType>, &Config::record_on, &Config::record_on_types>(
          "recordOn", "record_on"),
      R::field<std::vector<ExceptionType>, &Config::ignore_on, &Config::ignore_on_types>(
          "ignoreOn", "ignore_on"),
      R::file_field<PolicyMode, &Config::mode, &Config::mode>("mode", "mode")};
  return kSettings;
}

void CircuitBreakerKind::metrics(const Snapshot& s, metrics::Emitter& out) {
  using metrics::count;
  static constexpr std::string_view kStateHelp =
      "1 for the circuit breaker's current state, 0 for the others.";
  out.rejected(s.not_permitted_calls);
  for (CircuitBreakerState state :
       {CircuitBreakerState::closed, CircuitBreakerState::half_open, CircuitBreakerState::open,
        CircuitBreakerState::disabled, CircuitBreakerState::metrics_only,
        CircuitBreakerState::forced_open}) {
    out.gauge("r4c.circuitbreaker.state", kStateHelp, s.state == state ? 1 : 0,
              {metrics::Label{"state", std::string(to_string(state))}});
  }
  out.gauge("r4c.circuitbreaker.failure.rate",
            "Percent of recorded calls that failed; -1 while fewer than the minimum are recorded.",
            s.failure_rate);
  out.gauge("r4c.circuitbreaker.slow.call.rate",
            "Percent of recorded calls that were slow; -1 while fewer than the minimum are "
            "recorded.",
            s.slow_call_rate);
  out.gauge("r4c.circuitbreaker.buffered.calls", "Calls in the circuit breaker's window.",
            count(s.buffered_calls));
  out.counter("r4c.circuitbreaker.transitions", "State changes of the circuit breaker.",
              count(s.transitions));
  detail::emit_would_reject(
      out, s, "r4c.circuitbreaker.would.reject",
      "Calls the circuit breaker in observe mode would have refused and let through.");
}

}  // namespace r4c
