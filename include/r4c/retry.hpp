// SPDX-License-Identifier: Apache-2.0
// A retry: calls a function up to max_attempts times, waiting on the clock between attempts.
//
// Use it outside the other policies, for failures that a later attempt may not meet (a full
// limit, a dropped connection). Which failures are retried is chosen by type and by predicate
// (retry_on / abort_on, abort wins) and, for results, by a predicate (retry_on_result, or
// retry_on_void_result for calls returning void). The last failure reaches the caller
// unchanged: the same exception object, rethrown; a result still retried at the last attempt
// is returned, or fails with MaxRetriesExceededException under fail_after_max_attempts. The
// waits are wait, exponential_backoff and randomized_wait, or an interval function of the
// attempt (and of its outcome). on_attempt listens to every attempt.
//
//   using namespace std::chrono_literals;
//   r4c::Retry retry("orders", r4c::RetryConfig().max_attempts(4).wait(100ms)
//                                  .exponential_backoff(2.0, 1s).abort_on<NotFound>(), clock);
//   auto order = retry.execute([&] { return backend.place(request); });
//
// Waits come from the clock (Clock::sleep_until), so with a ManualClock a wait ends only when
// another thread advances the clock: tests never sleep. resilience4j's Retry is the reference.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <type_traits>
#include <typeindex>
#include <typeinfo>
#include <utility>
#include <vector>

#include "r4c/clock.hpp"
#include "r4c/detail/handle.hpp"
#include "r4c/detail/live_config.hpp"
#include "r4c/detail/outcome_predicates.hpp"
#include "r4c/detail/setting.hpp"
#include "r4c/detail/striped_counter.hpp"
#include "r4c/errors.hpp"
#include "r4c/events.hpp"
#include "r4c/exception_type.hpp"

namespace r4c {

/// How an attempt that is retried ended, for an interval function of the outcome: its failure,
/// or the result the result predicate retries.
struct RetryOutcome {
  /// The attempt's failure; empty when it returned a result (or nothing, for void) that the
  /// result predicate retries.
  std::exception_ptr failure;
  /// The result when the attempt returned one of type T (without reference and const), else
  /// nullptr. Valid while the interval function runs.
  template <class T>
  const T* result() const noexcept {
    if (result_ == nullptr || *result_type_ != typeid(T)) return nullptr;
    return static_cast<const T*>(result_);
  }

  const void* result_ = nullptr;                 // internal: the result, if any
  const std::type_info* result_type_ = nullptr;  // internal: its type
};

/// Settings of a retry. A setter rejects a value invalid on its own at once (the config keeps
/// its old value); validate() then checks the settings against each other.
class RetryConfig {
 public:
  static constexpr int kDefaultMaxAttempts = 3;
  static constexpr std::chrono::nanoseconds kDefaultWait = std::chrono::milliseconds(500);
  static constexpr std::chrono::nanoseconds kLongestWait = std::chrono::hours(1);

  /// Most calls of the function, the first included (3). Throws R4C-ATR-003 below 1.
  RetryConfig& max_attempts(int value);
  /// The wait before the first retry (500 ms). Throws R4C-REG-001 outside 0 .. 1 h.
  RetryConfig& wait(std::chrono::nanoseconds value);
  /// Makes the wait before retry n (n >= 1) wait * multiplier^(n-1), capped at max_wait (off by
  /// default). Throws R4C-REG-001 for a multiplier that is not a finite number >= 1 or a
  /// max_wait outside 0 .. 1 h; validate() throws R4C-ATR-009 when max_wait < wait.
  RetryConfig& exponential_backoff(double multiplier, std::chrono::nanoseconds max_wait);
  /// Draws each wait w uniformly from [w * (1 - jitter), w * (1 + jitter)) and then caps it at
  /// max_wait when the backoff is on, as resilience4j's ofExponentialRandomBackoff(wait,
  /// multiplier, jitter, max_wait) does: w is the uncapped wait * multiplier^(n-1), so no wait
  /// exceeds max_wait, and a wait whose lower bound is past the cap is max_wait exactly (0: off,
  /// the default). resilience4j draws in milliseconds over a band 1 ms wider; r4c draws in
  /// nanoseconds over the band itself. Throws R4C-REG-001 outside [0, 1).
  RetryConfig& randomized_wait(double jitter);
  /// Where the jitter's draws come from: each call of `uniform` returns a number in [0, 1)
  /// (clamped into it otherwise). By default a per-thread std::mt19937 seeded from
  /// std::random_device; tests give a fixed sequence. Throws R4C-REG-001 when empty.
  /// Thread safety: called from every thread that waits, without a lock.
  RetryConfig& random_source(std::function<double()> uniform);
  /// The failures that are retried, matched by dynamic type (derived classes included).
  /// Replaces the list; an empty list (the default) retries every failure.
  template <class Exception, class... More>
  RetryConfig& retry_on() {
    retry_on_ = {ExceptionType::of<Exception>(), ExceptionType::of<More>()...};
    return *this;
  }
  /// Same as `retry_on<...>()` with types known at run time.
  RetryConfig& retry_on(std::vector<ExceptionType> types);
  /// The failures that reach the caller at once, even when retry_on lists them (abort wins).
  /// Matched by dynamic type; replaces the list (empty by default).
  template <class Exception, class... More>
  RetryConfig& abort_on() {
    abort_on_ = {ExceptionType::of<Exception>(), ExceptionType::of<More>()...};
    return *this;
  }
  /// Same as `abort_on<...>()` with types known at run time.
  RetryConfig& abort_on(std::vector<ExceptionType> types);
  /// Retries a result for which `predicate` returns true while attempts remain; when they run
  /// out the last result is returned. Applies only to callables whose result type, without
  /// reference and const, is T. Replaces any earlier predicate. Throws R4C-REG-001 when empty.
  /// Thread safety: the predicate is called from every thread that executes the retry.
  template <class T>
  RetryConfig& retry_on_result(std::function<bool(const T&)> predicate);
  // Predicates on the failure, besides the types above.
  /// Also retries the failures for which `predicate` is true (resilience4j's
  /// retryOnException): a failure is retried when it is of a retry_on type or the predicate
  /// says so (every failure when neither is set), and is not aborted. Replaces an earlier
  /// predicate; one that throws answers false. Throws R4C-REG-001 when empty.
  /// Thread safety: called from every thread that executes the retry, without a lock.
  RetryConfig& retry_on(std::function<bool(const std::exception_ptr&)> predicate);
  /// Also aborts the failures for which `predicate` is true; abort wins over retry, by type or
  /// by predicate. Replaces an earlier predicate; one that throws answers false. Throws
  /// R4C-REG-001 when empty.
  RetryConfig& abort_on(std::function<bool(const std::exception_ptr&)> predicate);
  /// `retry_on(predicate)` and `abort_on(predicate)` for failures of dynamic type Exception (others
  /// answer false), e.g. `retry_on<HttpError>([](const HttpError& e) { return e.status() >= 500;
  /// })`.
  template <class Exception, class Predicate>
  requires std::is_invocable_r_v<bool, Predicate&, const Exception&> RetryConfig& retry_on(
      Predicate predicate) {
    return retry_on(detail::exception_predicate<Exception>(std::move(predicate)));
  }
  template <class Exception, class Predicate>
  requires std::is_invocable_r_v<bool, Predicate&, const Exception&> RetryConfig& abort_on(
      Predicate predicate) {
    return abort_on(detail::exception_predicate<Exception>(std::move(predicate)));
  }
  /// The result predicate of calls returning void: after an attempt that returned, retries
  /// while `predicate()` is true and attempts remain (it judges the outcome by what the call
  /// left behind: a status, a flag). Applies only to callables returning void. Throws
  /// R4C-REG-001 when empty. Thread safety: as retry_on_result.
  RetryConfig& retry_on_void_result(std::function<bool()> predicate);
  /// Whether a failure the call returned as an error code (Outcome::failure(code), or a call
  /// returning a non-empty std::error_code, through try_execute or a pipeline) is retried:
  /// decided without an exception, so without a throw. Without it such a failure is retried
  /// when every failure is (no retry_on type or predicate set); retry_on / abort_on match
  /// exceptions only, thrown ones (std::system_error included) keep being decided by them.
  /// Replaces an earlier predicate; one that throws answers false. Throws R4C-REG-001 when
  /// empty. Thread safety: called from every thread that executes the retry, without a lock.
  RetryConfig& retry_on_error_code(std::function<bool(const std::error_code&)> predicate);
  /// When a result is still retried after the last attempt, fail the call with
  /// MaxRetriesExceededException instead of returning the result (false, as resilience4j's
  /// failAfterMaxAttempts).
  RetryConfig& fail_after_max_attempts(bool value);
  /// The wait before the attempt after attempt n (n >= 1), instead of wait, backoff and
  /// jitter (resilience4j's IntervalFunction); clamped into 0 .. 1 h. Replaces an earlier
  /// function. Throws R4C-REG-001 when empty. Thread safety: called from every waiting thread.
  RetryConfig& interval_function(std::function<std::chrono::nanoseconds(int)> interval);
  /// As interval_function, given also how attempt n ended (resilience4j's
  /// IntervalBiFunction); wins over interval_function.
  RetryConfig& interval_function(
      std::function<std::chrono::nanoseconds(int, const RetryOutcome&)> interval);

  /// Most calls of the function, the first included.
  int max_attempts() const noexcept { return max_attempts_; }
  /// The wait before the first retry.
  std::chrono::nanoseconds wait() const noexcept { return wait_; }
  /// Whether exponential_backoff() was set.
  bool exponential_backoff() const noexcept { return exponential_backoff_; }
  /// The backoff multiplier (1 when the backoff is off).
  double backoff_multiplier() const noexcept { return backoff_multiplier_; }
  /// The backoff cap (0 when the backoff is off).
  std::chrono::nanoseconds max_wait() const noexcept { return max_wait_; }
  /// The jitter (0 when off).
  double randomized_wait() const noexcept { return jitter_; }
  /// The jitter's source set by random_source(), or nullptr for the default.
  const std::function<double()>* random_source() const noexcept {
    return random_source_ ? random_source_.get() : nullptr;
  }
  /// The retried failure types (empty: every failure).
  const std::vector<ExceptionType>& retry_on_types() const noexcept { return retry_on_; }
  /// The failure types that reach the caller at once.
  const std::vector<ExceptionType>& abort_on_types() const noexcept { return abort_on_; }
  /// The result type the predicate applies to, or nullopt without one.
  std::optional<std::type_index> retry_on_result_type() const noexcept {
    return result_predicate_.type();
  }
  /// The predicate when it applies to results of type T, else nullptr.
  template <class T>
  const std::function<bool(const T&)>* result_predicate() const noexcept {
    return result_predicate_.get<T>();
  }
  /// The predicate of void calls, or nullptr.
  const std::function<bool()>* void_result_predicate() const noexcept {
    return void_predicate_ ? &void_predicate_ : nullptr;
  }
  /// The predicate set by retry_on_error_code (empty when not set).
  const std::function<bool(const std::error_code&)>& error_code_predicate() const noexcept {
    return retry_if_code_;
  }
  /// Whether a result still retried at the last attempt fails the call.
  bool fail_after_max_attempts() const noexcept { return fail_after_max_attempts_; }
  /// The predicates set by retry_on(predicate) and abort_on(predicate) (empty when not set).
  const detail::ExceptionPredicate& retry_on_predicate() const noexcept { return retry_if_; }
  const detail::ExceptionPredicate& abort_on_predicate() const noexcept { return abort_if_; }
  /// Whether an interval function (of either kind) replaces wait, backoff and jitter.
  bool has_interval_function() const noexcept { return interval_ || interval_by_outcome_; }
  /// The interval functions (empty when not set).
  const std::function<std::chrono::nanoseconds(int)>& interval_by_attempt() const noexcept {
    return interval_;
  }
  const std::function<std::chrono::nanoseconds(int, const RetryOutcome&)>& interval_by_outcome()
      const noexcept {
    return interval_by_outcome_;
  }

  /// Checks every setting, each on its own first, then R4C-ATR-009 when the backoff is on and
  /// max_wait < wait. Throws ConfigException; does nothing when the config is valid.
  void validate() const;

 private:
  static void check_function(const char* setting, bool present);

  int max_attempts_ = kDefaultMaxAttempts;
  std::chrono::nanoseconds wait_ = kDefaultWait;
  bool exponential_backoff_ = false;
  double backoff_multiplier_ = 1.0;
  std::chrono::nanoseconds max_wait_{0};
  double jitter_ = 0.0;
  std::shared_ptr<const std::function<double()>> random_source_;
  std::vector<ExceptionType> retry_on_;
  std::vector<ExceptionType> abort_on_;
  detail::ResultPredicate result_predicate_;
  std::function<bool()> void_predicate_;
  bool fail_after_max_attempts_ = false;
  detail::ExceptionPredicate retry_if_;
  detail::ExceptionPredicate abort_if_;
  std::function<bool(const std::error_code&)> retry_if_code_;
  std::function<std::chrono::nanoseconds(int)> interval_;
  std::function<std::chrono::nanoseconds(int, const RetryOutcome&)> interval_by_outcome_;
};

/// Compares two configs setting by setting; nullopt when they are equal. Result predicates
/// compare by presence and result type only.
std::optional<SettingDifference> first_difference(const RetryConfig& first,
                                                  const RetryConfig& second);

/// Counters of a retry since it was built; every finished call is in exactly one of the four
/// outcome counters.
struct RetrySnapshot {
  int max_attempts = 0;
  std::uint64_t successful_without_retry = 0;  // succeeded at the first attempt; exact
  std::uint64_t successful_with_retry = 0;     // succeeded after one or more retries; exact
  /// Failed at the first attempt without a retry (aborted, not retryable, or max_attempts 1);
  /// exact.
  std::uint64_t failed_without_retry = 0;
  /// Failed after one or more retries (ran out of attempts, or aborted / not retryable after a
  /// retry); a retried result still wanting a retry at the last attempt counts here too; exact.
  std::uint64_t failed_with_retry = 0;
  std::uint64_t retries = 0;  // attempts after the first, over every call; exact
  int waiting_calls = 0;      // calls waiting between attempts right now
};

class Retry;

namespace detail {
template <class T, class Handler, class Op>
class RetryCall;  // an asynchronous call (<r4c/asio.hpp>)
}  // namespace detail

/// A view of a retry for operators and tests. Valid while the retry lives.
class RetryHandle : public detail::HandleBase<Retry> {
 public:
  using HandleBase::HandleBase;
  /// Calls `listener` whenever a call gives up (see RetryGiveUpEvent), until the Subscription
  /// ends (see <r4c/events.hpp>).
  Subscription on_give_up(std::function<void(const RetryGiveUpEvent&)> listener) const;
};

/// Calls a function up to max_attempts times, waiting on the clock between attempts.
/// Thread safety: every member may be called from any number of threads.
class Retry {
 public:
  /// Validates `config` (throws ConfigException); a null clock means a SystemClock.
  Retry(std::string instance_id, RetryConfig config = {}, std::shared_ptr<Clock> clock = nullptr);
  Retry(const Retry&) = delete;
  Retry& operator=(const Retry&) = delete;

  /// Calls `f()` until it succeeds, its failure is not retried, or max_attempts calls were made;
  /// returns its result or rethrows its last exception unchanged. `f` is called as an lvalue.
  /// Blocking: waits on the clock between attempts. Allocation: none when `f` succeeds at once
  /// and allocates nothing.
  template <class F>
  decltype(auto) execute(F&& f);
  /// execute() without a throw to say no (<r4c/outcome.hpp>): `f` (returning a value or an
  /// Outcome) is called as execute() calls it, and a failure or a refusal it returns (or
  /// throws) is retried or ends the call as execute() decides for the same exception (a
  /// policy's preallocated exception is classified once per object, its verdict kept). The
  /// last outcome is returned; MaxRetriesExceededException comes as a failure.
  template <class F>
  detail::OutcomeOf<F> try_execute(F&& f);
  /// Runs the asynchronous operation `op` (invoked as an lvalue, once per attempt) until it
  /// succeeds, its failure is not retried, or max_attempts attempts were made, waiting on a
  /// timer between attempts; completes `token` with `void(std::exception_ptr, T)`.
  /// Defined in <r4c/asio.hpp>; see docs/async.md.
  template <class T, class Op, class Token>
  auto async_execute(Op&& op, Token&& token);

  /// A view for operators and tests.
  RetryHandle handle() const noexcept { return RetryHandle(*this); }
  /// The id given at construction.
  const std::string& instance_id() const noexcept { return instance_id_; }
  /// The validated config.
  const RetryConfig& config() const noexcept { return config_.get(); }
  /// Makes `next` (validated; throws ConfigException otherwise) the config of the calls that
  /// start after it, as the registry's reconfigure() does; every setting may change. A call
  /// under way takes its next decisions (attempts left, wait, and whether its next failure is
  /// retried: retry_on, abort_on and their predicates) from it; the counters stay. A verdict
  /// kept on a stock exception (try_execute) belongs to the config it was decided by, so the
  /// next one is decided by the new lists. Allocation: yes (cold).
  void reconfigure(const RetryConfig& next);
  /// The clock the waits run on.
  const std::shared_ptr<Clock>& clock() const noexcept { return clock_; }
  /// The counters now; each is exact, read without stopping calls.
  RetrySnapshot snapshot() const;
  /// Calls `listener` on the calling thread whenever a call gives up (see RetryGiveUpEvent),
  /// until the Subscription ends (see <r4c/events.hpp>).
  Subscription on_give_up(std::function<void(const RetryGiveUpEvent&)> listener) const;
  /// Calls `listener` on the calling thread after every attempt of every call (see
  /// RetryAttemptEvent), until the Subscription ends. Without listeners an attempt costs one
  /// atomic load more.
  Subscription on_attempt(std::function<void(const RetryAttemptEvent&)> listener) const;

 private:
  // What the code inside execute()'s try block was running when something was thrown.
  enum class Stage : std::uint8_t {
    function,  // the callable: its failure is classified
    decision,  // r4c's predicates or interval function: the call ends with it
    counted    // MaxRetriesExceededException: the call was counted already
  };

  // Inside a catch: whether the exception being handled is retried (types and predicates).
  bool retryable_current() const noexcept;
  // Whether `failure` is retried (retryable_current() outside a catch).
  bool retryable(const std::exception_ptr& failure) const noexcept;
  // Whether a failure returned as an error code is retried (retry_on_error_code).
  bool retryable(const std::error_code& code) const noexcept;
  // The same, decided by `config` (one read of the live config for a whole verdict).
  bool retryable_current(const RetryConfig& config) const noexcept;
  bool retryable(const std::exception_ptr& failure, const RetryConfig& config) const noexcept;
  bool retryable(const std::error_code& code, const RetryConfig& config) const noexcept;
  // Counts a call that ends after `attempts` attempts.
  void count_success(int attempts) noexcept;
  void count_failure(int attempts) noexcept;
  // A call ends at `attempt`: counted and published.
  void succeeded(int attempt) noexcept;
  // succeeded(), with the common case inline: a first attempt that nobody listens to.
  void succeeded_at(int attempt) noexcept {
    if (attempt == 1 && !attempt_listened_.load(std::memory_order_relaxed)) [[likely]] {
      successful_without_retry_.increment();
      return;
    }
    succeeded(attempt);
  }
  void failed(int attempt, const std::exception_ptr& failure) noexcept;
  // Inside a catch: failed() with the exception being handled (taken only for listeners).
  void failed_current(int attempt) noexcept;
  // A result still retried at the last attempt: counts, publishes, and returns whether the
  // call fails with max_retries_exceeded().
  bool gave_up_on_result(int attempt) noexcept;
  std::exception_ptr max_retries_exceeded(int attempts) const;
  [[noreturn]] void throw_max_retries(int attempts) const;
  // Attempt `attempt` ended as `outcome` and is retried: computes the wait (an interval
  // function may throw), counts the retry, publishes, and counts the call in waiting_calls
  // until end_wait(). Never blocks.
  std::chrono::nanoseconds begin_retry(int attempt, const RetryOutcome& outcome, bool failed);
  // Inside a catch: begin_retry for the exception being handled; a throwing interval function
  // ends the call (counted) with its exception.
  std::chrono::nanoseconds retry_current(int attempt);
  // The wait before the attempt after `attempt`: the interval functions, or wait_of().
  std::chrono::nanoseconds wait_after(int attempt, const RetryOutcome& outcome) const;
  // Backoff, jitter, then the cap.
  double backoff_wait(int failed_attempt) const;
  // Waits `span` before the attempt after `failed_attempt`, counted in waiting_calls.
  void sleep_for(int failed_attempt, std::chrono::nanoseconds span);
  void end_wait() noexcept { waiting_.fetch_sub(1, std::memory_order_relaxed); }
  void publish_attempt(int attempt, bool failed, bool retrying, std::chrono::nanoseconds wait,
                       const std::exception_ptr& failure) const noexcept;
  // Whether a failure is needed as an exception_ptr (interval function of the outcome, or
  // attempt listeners).
  bool wants_failure() const noexcept;

  // The asynchronous call decides and counts with the members above, as execute() does.
  template <class T, class Handler, class Op>
  friend class detail::RetryCall;

  const std::string instance_id_;
  detail::LiveConfig<RetryConfig> config_;
  const std::shared_ptr<Clock> clock_;
  // relaxed: set by reconfigure(); a call reads them per decision and needs no other data.
  std::atomic<int> max_attempts_;
  std::atomic<bool> classifies_;          // false when every failure is retried: no rethrow needed
  detail::StockVerdicts retry_verdicts_;  // try_execute's verdicts on stock failures
  // 1 if try_execute retries the failed `outcome`, by one read of the live config.
  template <class Out>
  int verdict_of(const Out& outcome) noexcept {
    const RetryConfig& config = config_.get();
    static_assert(alignof(RetryConfig) >= 4, "StockVerdicts keeps verdicts by config address");
    return retry_verdicts_.verdict_of(
        outcome, [&](const auto& e) { return retryable(e, config) ? 1 : 0; }, &config);
  }
  std::atomic<std::int32_t> waiting_{0};
  detail::StripedCounter successful_without_retry_;
  detail::StripedCounter successful_with_retry_;
  detail::StripedCounter failed_without_retry_;
  detail::StripedCounter failed_with_retry_;
  detail::StripedCounter retries_;
  const std::shared_ptr<detail::EventHub<RetryGiveUpEvent>> give_up_listeners_;
  const std::shared_ptr<detail::EventHub<RetryAttemptEvent>> attempt_listeners_;
  // Whether on_attempt was ever called: a plain member read, where the hub's own flag is one
  // more pointer away, keeps the call that nobody listens to as it was. Never cleared (the hub
  // still checks for listeners).
  mutable std::atomic<bool> attempt_listened_{false};
};

template <class T>
RetryConfig& RetryConfig::retry_on_result(std::function<bool(const T&)> predicate) {
  check_function("retry_on_result", static_cast<bool>(predicate));
  result_predicate_.set<T>(std::move(predicate));
  return *this;
}

template <class F>
decltype(auto) Retry::execute(F&& f) {
  using Result = std::invoke_result_t<F&>;
  for (int attempt = 1;; ++attempt) {
    Stage stage = Stage::function;
    std::chrono::nanoseconds span{0};
    try {
      if constexpr (std::is_void_v<Result>) {
        std::invoke(f);
        stage = Stage::decision;
        const std::function<bool()>* retry_void = config_->void_result_predicate();
        if (retry_void == nullptr || !(*retry_void)()) [[likely]] {
          succeeded_at(attempt);
          return;
        }
        if (attempt >= max_attempts_.load(std::memory_order_relaxed)) {
          stage = Stage::counted;
          if (gave_up_on_result(attempt)) throw_max_retries(attempt);
          return;
        }
        span = begin_retry(attempt, RetryOutcome{}, false);
      } else {
        using Value = std::remove_cvref_t<Result>;
        Result result = std::invoke(f);
        stage = Stage::decision;
        const std::function<bool(const Value&)>* retry_result =
            config_->template result_predicate<Value>();
        const bool wanted =
            retry_result == nullptr || !(*retry_result)(static_cast<const Value&>(result));
        if (wanted || attempt >= max_attempts_.load(std::memory_order_relaxed)) [[likely]] {
          if (wanted) {
            succeeded_at(attempt);
          } else {
            stage = Stage::counted;
            // Out of attempts: the last result is returned, or the call fails.
            if (gave_up_on_result(attempt)) throw_max_retries(attempt);
          }
          if constexpr (std::is_reference_v<Result>) {
            return static_cast<Result>(result);
          } else {
            return result;
          }
        }
        span = begin_retry(
            attempt, RetryOutcome{{}, &static_cast<const Value&>(result), &typeid(Value)}, false);
        // Falls through: the unwanted result is destroyed before the wait.
      }
    } catch (...) {
      if (stage == Stage::counted) throw;
      if (stage == Stage::decision || attempt >= max_attempts_.load(std::memory_order_relaxed) ||
          !retryable_current()) {
        failed_current(attempt);
        throw;  // the same exception object
      }
      span = retry_current(attempt);
    }
    // Outside the handler, so the failure is destroyed before the wait.
    sleep_for(attempt, span);
  }
}

template <class F>
detail::OutcomeOf<F> Retry::try_execute(F&& f) {
  using Out = detail::OutcomeOf<F>;
  using Value = typename Out::Value;
  for (int attempt = 1;; ++attempt) {
    std::chrono::nanoseconds span{0};
    {
      Out outcome = detail::invoke_outcome(f);
      try {  // r4c's predicates and interval function: what they throw ends the call
        if (outcome.has_value()) [[likely]] {
          bool wanted = true;
          RetryOutcome retried;
          if constexpr (std::is_void_v<Value>) {
            const std::function<bool()>* retry_void = config_->void_result_predicate();
            wanted = retry_void == nullptr || !(*retry_void)();
          } else {
            const std::function<bool(const Value&)>* retry_result =
                config_->template result_predicate<Value>();
            wanted = retry_result == nullptr || !(*retry_result)(outcome.value());
            retried = RetryOutcome{{}, &outcome.value(), &typeid(Value)};
          }
          if (wanted) [[likely]] {
            succeeded_at(attempt);
            return outcome;
          }
          if (attempt >= max_attempts_.load(std::memory_order_relaxed)) {
            // Out of attempts: the last result is returned, or the call fails.
            if (gave_up_on_result(attempt)) return Out::failure(max_retries_exceeded(attempt));
            return outcome;
          }
          span = begin_retry(attempt, retried, false);
        } else {
          // A code failure is decided on its code (no exception made); the others by the
          // verdicts, skipped when every failure is retried.
          if (attempt >= max_attempts_.load(std::memory_order_relaxed) ||
              ((outcome.has_code() || classifies_.load(std::memory_order_relaxed)) &&
               verdict_of(outcome) == 0)) {
            // A code failure is made an exception only for the listeners.
            if (outcome.has_code() && !wants_failure()) {
              failed(attempt, nullptr);
            } else {
              failed(attempt, outcome.error());
            }
            return outcome;
          }
          RetryOutcome retried;
          if (wants_failure()) retried.failure = outcome.error();
          span = begin_retry(attempt, retried, true);
        }
      } catch (...) {
        failed_current(attempt);
        return Out::failure(std::current_exception());
      }
    }
    // Outside the block, so the unwanted outcome is destroyed before the wait.
    sleep_for(attempt, span);
  }
}

inline Subscription RetryHandle::on_give_up(
    std::function<void(const RetryGiveUpEvent&)> listener) const {
  return policy().on_give_up(std::move(listener));
}

/// The retry as a policy kind: what the registry, the pipelines, the metrics and the tools
/// know of it (see <r4c/detail/setting.hpp>; <r4c/detail/kinds.hpp> lists the kinds).
/// It fails a call with no exception of its own (Exception is void): it passes on what the call
/// threw.
struct RetryKind : detail::KindBase<Retry, void> {
  static constexpr KindNames kNames = {"retry", "retry", "retry", "retry"};
  /// Every setting the external file takes, in the documented order.
  static std::span<const detail::Setting<Config>> settings() noexcept;
  /// Appends the metrics of one instance's snapshot (docs/observability.md).
  static void metrics(const Snapshot& snapshot, metrics::Emitter& out);
};

}  // namespace r4c
