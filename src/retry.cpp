// SPDX-License-Identifier: Apache-2.0
#include "r4c/retry.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>

#include "config_check.hpp"
#include "exception_match.hpp"
#include "kind_settings.hpp"
#include "r4c/detail/event_hub.hpp"
#include "r4c/metrics.hpp"

namespace r4c {
namespace {

// Whether failures are told apart (else every one is retried, and none needs a rethrow).
bool classifies(const RetryConfig& config) noexcept {
  return !config.retry_on_types().empty() || !config.abort_on_types().empty() ||
         config.retry_on_predicate() || config.abort_on_predicate();
}

void check_wait(const char* setting, std::chrono::nanoseconds value) {
  if (value.count() < 0 || value > RetryConfig::kLongestWait) {
    detail::fail(detail::kInvalidValue, setting, detail::show(value),
                 "0 .. 1 h (0 .. 3600000000000 ns)");
  }
}

std::string type_name(const std::optional<std::type_index>& type) {
  if (!type) return "none";
  return detail::demangle(type->name());
}

RetryConfig validated(RetryConfig config) {
  config.validate();
  return config;
}

std::shared_ptr<Clock> or_system_clock(std::shared_ptr<Clock> clock) {
  if (!clock) clock = std::make_shared<SystemClock>();
  return clock;
}

}  // namespace

RetryConfig& RetryConfig::max_attempts(int value) {
  if (value < 1) {
    detail::fail(detail::kLimitBelowOne, "max_attempts", detail::show(value), "an integer >= 1");
  }
  return detail::store(*this, max_attempts_, value);
}

RetryConfig& RetryConfig::wait(std::chrono::nanoseconds value) {
  return detail::store_checked(*this, wait_, value, check_wait, "wait");
}

RetryConfig& RetryConfig::exponential_backoff(double multiplier,
                                              std::chrono::nanoseconds max_wait) {
  detail::check_factor("backoff_multiplier", multiplier);
  check_wait("max_wait", max_wait);
  exponential_backoff_ = true;
  backoff_multiplier_ = multiplier;
  max_wait_ = max_wait;
  return *this;
}

RetryConfig& RetryConfig::randomized_wait(double jitter) {
  if (!(jitter >= 0.0 && jitter < 1.0)) {
    detail::fail(detail::kInvalidValue, "randomized_wait", detail::show(jitter), "[0, 1)");
  }
  return detail::store(*this, jitter_, jitter);
}

RetryConfig& RetryConfig::random_source(std::function<double()> uniform) {
  if (!uniform) {
    detail::fail(detail::kInvalidValue, "random_source", "an empty function",
                 "a callable returning numbers in [0, 1)");
  }
  random_source_ = std::make_shared<const std::function<double()>>(std::move(uniform));
  return *this;
}

RetryConfig& RetryConfig::retry_on(std::vector<ExceptionType> types) {
  return detail::store(*this, retry_on_, std::move(types));
}

RetryConfig& RetryConfig::abort_on(std::vector<ExceptionType> types) {
  return detail::store(*this, abort_on_, std::move(types));
}

void RetryConfig::check_function(const char* setting, bool present) {
  detail::check_present(setting, present);
}

RetryConfig& RetryConfig::retry_on(std::function<bool(const std::exception_ptr&)> predicate) {
  return detail::store_checked(*this, retry_if_, std::move(predicate), detail::check_callable,
                               "retry_on");
}

RetryConfig& RetryConfig::abort_on(std::function<bool(const std::exception_ptr&)> predicate) {
  return detail::store_checked(*this, abort_if_, std::move(predicate), detail::check_callable,
                               "abort_on");
}

RetryConfig& RetryConfig::retry_on_error_code(
    std::function<bool(const std::error_code&)> predicate) {
  return detail::store_checked(*this, retry_if_code_, std::move(predicate), detail::check_callable,
                               "retry_on_error_code");
}

RetryConfig& RetryConfig::retry_on_void_result(std::function<bool()> predicate) {
  return detail::store_checked(*this, void_predicate_, std::move(predicate), detail::check_callable,
                               "retry_on_void_result");
}

RetryConfig& RetryConfig::fail_after_max_attempts(bool value) {
  return detail::store(*this, fail_after_max_attempts_, value);
}

RetryConfig& RetryConfig::interval_function(std::function<std::chrono::nanoseconds(int)> interval) {
  return detail::store_checked(*this, interval_, std::move(interval), detail::check_callable,
                               "interval_function");
}

RetryConfig& RetryConfig::interval_function(
    std::function<std::chrono::nanoseconds(int, const RetryOutcome&)> interval) {
  return detail::store_checked(*this, interval_by_outcome_, std::move(interval),
                               detail::check_callable, "interval_function");
}

void RetryConfig::validate() const {
  RetryConfig check;
  check.max_attempts(max_attempts_).wait(wait_).randomized_wait(jitter_);
  if (exponential_backoff_) {
    check.exponential_backoff(backoff_multiplier_, max_wait_);
    if (max_wait_ < wait_) {
      throw ConfigException(detail::kBoundsOrRange,
                            "max_wait (" + detail::show(max_wait_) + ") is less than wait (" +
                                detail::show(wait_) + "); valid: max_wait >= wait");
    }
  }
}

std::optional<SettingDifference> first_difference(const RetryConfig& first,
                                                  const RetryConfig& second) {
  if (auto difference =
          detail::DifferenceFinder()
              .compare("max_attempts", first.max_attempts(), second.max_attempts())
              .compare("wait", first.wait(), second.wait())
              .compare("exponential_backoff", first.exponential_backoff(),
                       second.exponential_backoff())
              .compare("backoff_multiplier", first.backoff_multiplier(),
                       second.backoff_multiplier())
              .compare("max_wait", first.max_wait(), second.max_wait())
              .compare("randomized_wait", first.randomized_wait(), second.randomized_wait())
              .compare("retry_on", first.retry_on_types(), second.retry_on_types())
              .compare("abort_on", first.abort_on_types(), second.abort_on_types())
              .compare("fail_after_max_attempts", first.fail_after_max_attempts(),
                       second.fail_after_max_attempts())
              .compare("retry_on_predicate", static_cast<bool>(first.retry_on_predicate()),
                       static_cast<bool>(second.retry_on_predicate()))
              .compare("abort_on_predicate", static_cast<bool>(first.abort_on_predicate()),
                       static_cast<bool>(second.abort_on_predicate()))
              .compare("retry_on_error_code", static_cast<bool>(first.error_code_predicate()),
                       static_cast<bool>(second.error_code_predicate()))
              .compare("retry_on_void_result", first.void_result_predicate() != nullptr,
                       second.void_result_predicate() != nullptr)
              .compare("interval_function", first.has_interval_function(),
                       second.has_interval_function())
              .compare("random_source", first.random_source() != nullptr,
                       second.random_source() != nullptr)
              .result()) {
    return difference;
  }
  // A predicate cannot be compared; its presence and result type can.
  if (first.retry_on_result_type() != second.retry_on_result_type()) {
    return SettingDifference{"retry_on_result", type_name(first.retry_on_result_type()),
                             type_name(second.retry_on_result_type())};
  }
  return std::nullopt;
}

Retry::Retry(std::string instance_id, RetryConfig config, std::shared_ptr<Clock> clock)
    : instance_id_(std::move(instance_id)),
      config_(validated(std::move(config))),
      clock_(or_system_clock(std::move(clock))),
      max_attempts_(config_->max_attempts()),
      classifies_(classifies(config_.get())),
      give_up_listeners_(
          std::make_shared<detail::EventHub<RetryGiveUpEvent>>(RetryKind::kNames.metrics)),
      attempt_listeners_(
          std::make_shared<detail::EventHub<RetryAttemptEvent>>(RetryKind::kNames.metrics)) {}

Subscription Retry::on_attempt(std::function<void(const RetryAttemptEvent&)> listener) const {
  attempt_listened_.store(true, std::memory_order_relaxed);
  return attempt_listeners_->subscribe(std::move(listener));
}

void Retry::reconfigure(const RetryConfig& next) {
  next.validate();
  config_.replace(next);
  // relaxed: the calls after this one read the new config, whose publication is the release.
  max_attempts_.store(next.max_attempts(), std::memory_order_relaxed);
  classifies_.store(classifies(next), std::memory_order_relaxed);
}

Subscription Retry::on_give_up(std::function<void(const RetryGiveUpEvent&)> listener) const {
  return give_up_listeners_->subscribe(std::move(listener));
}

bool Retry::retryable_current() const noexcept {
  if (!classifies_.load(std::memory_order_relaxed)) return true;
  return retryable_current(config_.get());
}

bool Retry::retryable_current(const RetryConfig& config) const noexcept {
  // resilience4j's precedence: aborted (by type or predicate) never; else retried by type or
  // predicate, or every failure when neither is set.
  if (detail::matches_current(config.abort_on_types(), config.abort_on_predicate())) {
    return false;
  }
  const bool retries_some = !config.retry_on_types().empty() || config.retry_on_predicate();
  return !retries_some ||
         detail::matches_current(config.retry_on_types(), config.retry_on_predicate());
}

void Retry::publish_attempt(int attempt, bool failed, bool retrying, std::chrono::nanoseconds wait,
                            const std::exception_ptr& failure) const noexcept {
  if (!attempt_listened_.load(std::memory_order_relaxed) || !attempt_listeners_->has_listeners())
      [[likely]] {
    return;
  }
  attempt_listeners_->publish(
      RetryAttemptEvent{instance_id_, attempt, failed, retrying, wait, failure});
}

bool Retry::wants_failure() const noexcept {
  return static_cast<bool>(config_->interval_by_outcome()) ||
         (attempt_listened_.load(std::memory_order_relaxed) && attempt_listeners_->has_listeners());
}

void Retry::succeeded(int attempt) noexcept {
  count_success(attempt);
  publish_attempt(attempt, false, false, std::chrono::nanoseconds::zero(), nullptr);
}

void Retry::failed(int attempt, const std::exception_ptr& failure) noexcept {
  count_failure(attempt);
  publish_attempt(attempt, true, false, std::chrono::nanoseconds::zero(), failure);
}

void Retry::failed_current(int attempt) noexcept {
  failed(attempt,
         attempt_listened_.load(std::memory_order_relaxed) ? std::current_exception() : nullptr);
}

bool Retry::gave_up_on_result(int attempt) noexcept {
  count_failure(attempt);
  publish_attempt(attempt, false, false, std::chrono::nanoseconds::zero(), nullptr);
  return config_->fail_after_max_attempts();
}

std::exception_ptr Retry::max_retries_exceeded(int attempts) const {
  return std::make_exception_ptr(MaxRetriesExceededException(
      instance_id_, attempts,
      "retry '" + instance_id_ + "' gave up after " + std::to_string(attempts) +
          " attempts: the result predicate still asked for a retry (fail_after_max_attempts)"));
}

void Retry::throw_max_retries(int attempts) const {
  std::rethrow_exception(max_retries_exceeded(attempts));
}

std::chrono::nanoseconds Retry::wait_after(int attempt, const RetryOutcome& outcome) const {
  const auto clamped = [](std::chrono::nanoseconds wait) {
    return std::clamp(wait, std::chrono::nanoseconds::zero(), RetryConfig::kLongestWait);
  };
  if (const auto& by_outcome = config_->interval_by_outcome()) [[unlikely]] {
    return clamped(by_outcome(attempt, outcome));
  }
  if (const auto& by_attempt = config_->interval_by_attempt()) [[unlikely]] {
    return clamped(by_attempt(attempt));
  }
  return std::chrono::nanoseconds(static_cast<std::int64_t>(backoff_wait(attempt)));
}

std::chrono::nanoseconds Retry::begin_retry(int attempt, const RetryOutcome& outcome, bool failed) {
  const std::chrono::nanoseconds span = wait_after(attempt, outcome);
  retries_.increment();
  publish_attempt(attempt, failed, true, span, outcome.failure);
  waiting_.fetch_add(1, std::memory_order_relaxed);
  return span;
}

std::chrono::nanoseconds Retry::retry_current(int attempt) {
  RetryOutcome outcome;
  if (wants_failure()) outcome.failure = std::current_exception();
  try {
    return begin_retry(attempt, outcome, true);
  } catch (...) {
    failed_current(attempt);  // the interval function's exception ends the call
    throw;
  }
}

void Retry::count_success(int attempts) noexcept {
  if (attempts == 1) [[likely]] {
    successful_without_retry_.increment();
  } else {
    successful_with_retry_.increment();
  }
}

void Retry::count_failure(int attempts) noexcept {
  if (attempts == 1) {
    failed_without_retry_.increment();
  } else {
    failed_with_retry_.increment();
    if (give_up_listeners_->has_listeners()) [[unlikely]] {
      give_up_listeners_->publish(RetryGiveUpEvent{instance_id_, attempts});
    }
  }
}

bool Retry::retryable(const std::exception_ptr& failure) const noexcept {
  return retryable(failure, config_.get());
}

bool Retry::retryable(const std::exception_ptr& failure, const RetryConfig& config) const noexcept {
  if (!classifies_.load(std::memory_order_relaxed)) return true;
  try {
    std::rethrow_exception(failure);
  } catch (...) {
    return retryable_current(config);
  }
}

bool Retry::retryable(const std::error_code& code) const noexcept {
  return retryable(code, config_.get());
}

bool Retry::retryable(const std::error_code& code, const RetryConfig& config) const noexcept {
  if (const auto& predicate = config.error_code_predicate()) {
    try {
      return predicate(code);
    } catch (...) {
      return false;  // a predicate that throws answers false, as retry_on's do
    }
  }
  // No exception type or predicate can match a code: retried when every failure is.
  return config.retry_on_types().empty() && !config.retry_on_predicate();
}

double Retry::backoff_wait(int failed_attempt) const {
  const RetryConfig& config = config_.get();  // one config for the whole computation
  double wait = static_cast<double>(config.wait().count());
  if (wait <= 0.0) return 0.0;  // 0 * inf would be NaN
  if (config.exponential_backoff()) {
    // In double: multiplier^n may overflow any integer long before the cap matters. Not capped
    // yet: resilience4j randomises the uncapped wait and caps the draw.
    wait *= std::pow(config.backoff_multiplier(), failed_attempt - 1);
  }
  // Without the backoff there is no max_wait: the band is the whole range, as before.
  const double cap = config.exponential_backoff() ? static_cast<double>(config.max_wait().count())
                                                  : std::numeric_limits<double>::infinity();
  if (const double jitter = config.randomized_wait(); jitter > 0.0) {
    const double low = wait * (1.0 - jitter);
    if (low >= cap) return cap;  // also an infinite wait: inf - inf would be NaN below
    double u = 0.0;
    if (const std::function<double()>* source = config.random_source()) [[unlikely]] {
      u = std::clamp((*source)(), 0.0, std::nextafter(1.0, 0.0));
    } else {
      // One engine per thread, seeded once: no lock, and threads do not share a sequence.
      thread_local std::mt19937 engine{std::random_device{}()};
      u = std::uniform_real_distribution<double>(0.0, 1.0)(engine);
    }
    wait = low + u * (2.0 * jitter * wait);
  }
  return std::min(wait, cap);
}

void Retry::sleep_for(int failed_attempt, std::chrono::nanoseconds span) {
  // Ends the wait count however the wait ends (sleep_until may throw std::bad_alloc).
  struct Unwait {
    Retry& retry;
    ~Unwait() { retry.end_wait(); }
  } unwait{*this};
  try {
    clock_->sleep_until(clock_->now() + span);
  } catch (...) {
    count_failure(failed_attempt + 1);  // the call ends here: it still gets one outcome
    throw;
  }
}

RetrySnapshot Retry::snapshot() const {
  RetrySnapshot snap;
  snap.max_attempts = max_attempts_.load(std::memory_order_relaxed);
  snap.successful_without_retry = successful_without_retry_.total();
  snap.successful_with_retry = successful_with_retry_.total();
  snap.failed_without_retry = failed_without_retry_.total();
  snap.failed_with_retry = failed_with_retry_.total();
  snap.retries = retries_.total();
  snap.waiting_calls = waiting_.load(std::memory_order_relaxed);
  return snap;
}

// The file keys in the documented order (R4C-CFG-003 lists them so).
std::span<const detail::Setting<RetryKind::Config>> RetryKind::settings() noexcept {
  using R = detail::SettingRows<Config>;  // Config: the kind's
  using enum detail::SettingType;
  static constexpr detail::Setting<Config> kSettings[] = {
      R::field<int, &Config::max_attempts, &Config::max_attempts>("maxAttempts", "max_attempts"),
      R::field<std::chrono::nanoseconds, &Config::wait, &Config::wait>("wait", "wait"),
      // As the file always did: a multiplier alone is capped only by the longest wait (1 h);
      // a maxWait alone keeps the multiplier (1 when none was set).
      R::row(
          "exponentialBackoffMultiplier", "exponential_backoff_multiplier", number,
          [](auto& c, auto& v) {
            c.exponential_backoff(
                v.number, c.exponential_backoff() ? c.max_wait() : RetryConfig::kLongestWait);
          },
          [](const auto& c) { return detail::value_of(c.backoff_multiplier()); }),
      R::row(
          "maxWait", "max_wait", duration,
          [](auto& c, auto& v) { c.exponential_backoff(c.backoff_multiplier(), v.duration); },
          [](const auto& c) { return detail::value_of(c.max_wait()); }),
      R::field<double, &Config::randomized_wait, &Config::randomized_wait>("randomizedWait",
                                                                           "randomized_wait"),
      R::field<std::vector<ExceptionType>, &Config::retry_on, &Config::retry_on_types>("retryOn",
                                                                                       "retry_on"),
      R::field<std::vector<ExceptionType>, &Config::abort_on, &Config::abort_on_types>("abortOn",
                                                                                       "abort_on"),
      R::field<bool, &Config::fail_after_max_attempts, &Config::fail_after_max_attempts>(
          "failAfterMaxAttempts", "fail_after_max_attempts")};
  return kSettings;
}

void RetryKind::metrics(const Snapshot& s, metrics::Emitter& out) {
  using metrics::count;
  static constexpr std::string_view kHelp = "Retried calls that ended, by result.";
  out.counter("r4c.retry.calls", kHelp, count(s.failed_with_retry),
              {metrics::Label{"result", "failed_with_retry"}});
  out.counter("r4c.retry.calls", kHelp, count(s.failed_without_retry),
              {metrics::Label{"result", "failed_without_retry"}});
  out.counter("r4c.retry.calls", kHelp, count(s.successful_with_retry),
              {metrics::Label{"result", "successful_with_retry"}});
  out.counter("r4c.retry.calls", kHelp, count(s.successful_without_retry),
              {metrics::Label{"result", "successful_without_retry"}});
  out.counter("r4c.retry.retries", "Attempts after the first, over every call.", count(s.retries));
  out.gauge("r4c.retry.waiting.calls", "Calls waiting between attempts.", s.waiting_calls);
}

}  // namespace r4c
