// SPDX-License-Identifier: Apache-2.0
#include "r4c/timeout.hpp"

#include <new>

#include "config_check.hpp"
#include "exception_match.hpp"
#include "kind_settings.hpp"
#include "r4c/metrics.hpp"

namespace r4c {
namespace detail {
namespace {

// One spare stop_source per thread: reused while no deadline has stopped it, so a call that
// ends in time allocates nothing.
thread_local std::optional<std::stop_source> spare_source;

std::stop_source take_source() {
  if (spare_source) {
    std::stop_source source = std::move(*spare_source);
    spare_source.reset();
    return source;
  }
  return std::stop_source();
}

}  // namespace

StopAtDeadline::StopAtDeadline() : source(take_source()), token(source.get_token()) {}

StopAtDeadline::~StopAtDeadline() {
  if (!source.stop_requested() && !spare_source) spare_source.emplace(std::move(source));
}

// Past the slots (another clock, no scanner, or nested deeper than they go): the clock's timer
// queue, on the time of the clock's own now() (a SystemClock's: the ticks read above).
void TokenDeadline::queue() {
  new (&queued_) StopAtDeadline;
  token_ = &queued_.token;
  try {
    clock_.schedule(queued_, std::chrono::nanoseconds(reader_.to_clock_ns(deadline_)));
  } catch (...) {
    queued_.~StopAtDeadline();
    throw;
  }
}

bool TokenDeadline::end_queued() noexcept {
  clock_.cancel(queued_);
  const bool stopped = queued_.source.stop_requested();
  queued_.~StopAtDeadline();
  return stopped;
}

}  // namespace detail

TimeoutConfig& TimeoutConfig::timeout(std::chrono::nanoseconds value) {
  if (value <= std::chrono::nanoseconds(0) || value > std::chrono::hours(24)) {
    detail::fail(detail::kInvalidValue, "timeout", detail::show(value), "1 ns .. 24 h");
  }
  timeout_ = value;
  return *this;
}

void TimeoutConfig::validate() const { TimeoutConfig().timeout(timeout_); }

std::optional<SettingDifference> first_difference(const TimeoutConfig& first,
                                                  const TimeoutConfig& second) {
  return detail::settings_difference<TimeoutKind>(first, second);
}

Timeout::Timeout(std::string instance_id, TimeoutConfig config, std::shared_ptr<Clock> clock)
    : clock_(detail::or_system_clock(clock)),
      timeout_ticks_(clock_.to_ticks(detail::validated(config).timeout().count())),
      timeout_ns_(config.timeout().count()),
      instance_id_(std::move(instance_id)),
      live_config_(config),
      clock_owner_(std::move(clock)),
      timed_out_(std::make_exception_ptr(
          CallTimeoutException("timeout '" + instance_id_ + "': the call took " +
                               detail::show(config.timeout()) + " or longer"))) {}

void Timeout::reconfigure(const TimeoutConfig& next) {
  next.validate();
  live_config_.replace(next);
  timeout_ticks_.store(clock_.to_ticks(next.timeout().count()), std::memory_order_relaxed);
  timeout_ns_.store(next.timeout().count(), std::memory_order_relaxed);
}

void Timeout::throw_timed_out() {
  timed_out_count_.increment();
  std::rethrow_exception(timed_out_);
}

bool Timeout::is_call_timeout(const std::exception_ptr& error) noexcept {
  return detail::holds_exception<CallTimeoutException>(error);
}

TimeoutSnapshot Timeout::snapshot() const {
  return TimeoutSnapshot{timeout_ns(), timed_out_count_.total()};
}

// The file keys in the documented order (R4C-CFG-003 lists them so).
std::span<const detail::Setting<TimeoutKind::Config>> TimeoutKind::settings() noexcept {
  using R = detail::SettingRows<Config>;  // Config: the kind's
  static constexpr detail::Setting<Config> kSettings[] = {
      R::field<std::chrono::nanoseconds, &Config::timeout, &Config::timeout>("timeout", "timeout")};
  return kSettings;
}

void TimeoutKind::metrics(const Snapshot& s, metrics::Emitter& out) {
  using metrics::count;
  out.counter("r4c.timeout.calls.timed.out", "Calls that failed with CallTimeoutException.",
              count(s.timed_out));
}

}  // namespace r4c
