// SPDX-License-Identifier: Apache-2.0
#include "r4c/hedge.hpp"

#include <stdexcept>

#include "config_check.hpp"
#include "exception_match.hpp"
#include "kind_settings.hpp"
#include "r4c/metrics.hpp"

namespace r4c {
namespace detail {

// Whether `failure` says that a policy inside the call refused it: another attempt would only
// meet the same refusal and add load. Shared with the asynchronous face; any kind's refusal is
// a RejectedException, so no list of types is kept here.
bool is_inner_rejection(const std::exception_ptr& failure) noexcept {
  return holds_exception<RejectedException>(failure);
}

}  // namespace detail

namespace {

void check_delay(std::chrono::nanoseconds value) {
  if (value.count() <= 0 || value > HedgeConfig::kLongestDelay) {
    detail::fail(detail::kInvalidValue, "delay", detail::show(value),
                 "1 ns .. 1 h (1 .. 3600000000000 ns)");
  }
}

void check_max_attempts(int value) {
  if (value < 1) {
    detail::fail(detail::kLimitBelowOne, "max_attempts", detail::show(value), "an integer >= 1");
  }
}

std::shared_ptr<Executor> checked(std::shared_ptr<Executor> executor) {
  if (!executor) detail::fail(detail::kInvalidValue, "executor", "null", "an executor");
  return executor;
}

std::shared_ptr<Clock> or_system_clock(std::shared_ptr<Clock> clock) {
  if (!clock) clock = std::make_shared<SystemClock>();
  return clock;
}

}  // namespace

HedgeConfig& HedgeConfig::delay(std::chrono::nanoseconds value) {
  return detail::store_checked(*this, delay_, value, check_delay);
}

HedgeConfig& HedgeConfig::max_attempts(int value) {
  return detail::store_checked(*this, max_attempts_, value, check_max_attempts);
}

void HedgeConfig::validate() const {
  check_delay(delay_);
  check_max_attempts(max_attempts_);
}

std::optional<SettingDifference> first_difference(const HedgeConfig& first,
                                                  const HedgeConfig& second) {
  return detail::settings_difference<HedgeKind>(first, second);
}

namespace detail {

void throw_hedge_needs_copyable(const std::string& id) {
  throw std::invalid_argument("hedge '" + id +
                              "': the callable cannot be copied, and each hedged call needs a "
                              "copy its attempts share (they may outlive the call); capture "
                              "move-only state in a std::shared_ptr");
}

void HedgeCallBase::report_failure(std::exception_ptr failure) noexcept {
  const bool rejection = is_inner_rejection(failure);
  std::lock_guard<std::mutex> lock(mutex_);
  --running_;
  if (winner_ == 0) failure_ = std::move(failure);  // after a win it is discarded
  if (rejection) rejected_ = true;
  changed_.notify_all();
}

void HedgeCallBase::report_end(int index, bool won, std::unique_lock<std::mutex>&) noexcept {
  --running_;
  if (won) winner_ = index;
  changed_.notify_all();
}

void HedgeCallBase::LaunchTimer::fire() noexcept {
  std::lock_guard<std::mutex> lock(call_->mutex_);
  call_->launch_due_ = true;
  call_->changed_.notify_all();
}

}  // namespace detail

Hedge::Hedge(std::string instance_id, HedgeConfig config, std::shared_ptr<Clock> clock,
             std::shared_ptr<Executor> executor)
    : instance_id_(std::move(instance_id)),
      config_(detail::validated(config)),
      clock_(or_system_clock(std::move(clock))),
      executor_(checked(std::move(executor))) {}

bool Hedge::launch(detail::HedgeCallBase& call, int index) {
  call.sources_.emplace_back();
  std::function<void()> task;
  try {
    task = call.attempt(index, call.sources_.back().get_token());
  } catch (...) {
    call.sources_.pop_back();
    throw;
  }
  {
    // Counted before it can end, so that running_ never reaches 0 while it is queued.
    std::lock_guard<std::mutex> lock(call.mutex_);
    ++call.running_;
  }
  bool posted = false;
  try {
    posted = executor_->try_post(std::move(task));
  } catch (...) {
    // The queue could not grow: the same as a refusal.
  }
  if (posted) return true;
  call.sources_.pop_back();
  std::lock_guard<std::mutex> lock(call.mutex_);
  --call.running_;
  return false;
}

void Hedge::run(detail::HedgeCallBase& call) {
  const HedgeConfig& config = config_.get();  // the whole call runs on one config
  const int max_attempts = config.max_attempts();
  Clock& clock = *clock_;
  if (!launch(call, 1)) {
    // The executor is full: this thread runs the one attempt, without hedging.
    executor_refusals_.increment();
    {
      std::lock_guard<std::mutex> lock(call.mutex_);
      ++call.running_;
    }
    call.sources_.emplace_back();
    call.run_attempt(1, call.sources_.back().get_token());
  } else {
    int launched = 1;
    bool refused = false;
    // The timer is never scheduled while this thread holds the call's mutex: a deadline
    // already due fires on the scheduling thread, and fire() takes that mutex.
    auto arm = [&] {
      if (launched >= max_attempts) return;
      clock.cancel(call.timer_);  // waits for a fire in progress, so the task can be reused
      clock.schedule(call.timer_, clock.now() + config.delay());
    };
    try {
      arm();
    } catch (...) {
      refused = true;  // the attempt runs: wait for it without hedging
    }
    std::unique_lock<std::mutex> lock(call.mutex_);
    for (;;) {
      call.changed_.wait(
          lock, [&] { return call.winner_ != 0 || call.running_ == 0 || call.launch_due_; });
      if (call.winner_ != 0 || call.running_ == 0) break;
      call.launch_due_ = false;
      if (call.rejected_ || refused || launched >= max_attempts) continue;
      lock.unlock();
      try {
        if (launch(call, launched + 1)) {
          ++launched;
          hedges_launched_.increment();
          arm();
        } else {
          executor_refusals_.increment();
          refused = true;
        }
      } catch (...) {
        // Out of memory while attempts run: the call must still wait for them and end
        // cleanly, so it only stops launching.
        refused = true;
      }
      lock.lock();
    }
    lock.unlock();
    clock.cancel(call.timer_);  // after this no fire() touches the call
  }
  // Ask the losers to stop. Only this thread touches the sources; a winner is final.
  std::unique_lock<std::mutex> lock(call.mutex_);
  const int winner = call.winner_;
  lock.unlock();
  if (winner != 0) {
    for (std::size_t i = 0; i < call.sources_.size(); ++i) {
      if (static_cast<int>(i) + 1 != winner) call.sources_[i].request_stop();
    }
    if (winner > 1) won_by_hedge_.increment();
  } else {
    failed_.increment();
  }
  calls_.increment();
}

void Hedge::reconfigure(const HedgeConfig& next) {
  next.validate();
  config_.replace(next);
}

HedgeSnapshot Hedge::snapshot() const {
  HedgeSnapshot snapshot;
  const HedgeConfig& config = config_.get();
  snapshot.delay = config.delay();
  snapshot.max_attempts = config.max_attempts();
  snapshot.calls = calls_.total();
  snapshot.hedges_launched = hedges_launched_.total();
  snapshot.won_by_hedge = won_by_hedge_.total();
  snapshot.failed = failed_.total();
  snapshot.executor_refusals = executor_refusals_.total();
  return snapshot;
}

// The file keys in the documented order (R4C-CFG-003 lists them so).
std::span<const detail::Setting<HedgeKind::Config>> HedgeKind::settings() noexcept {
  using R = detail::SettingRows<Config>;  // Config: the kind's
  static constexpr detail::Setting<Config> kSettings[] = {
      R::field<std::chrono::nanoseconds, &Config::delay, &Config::delay>("delay", "delay"),
      R::field<int, &Config::max_attempts, &Config::max_attempts>("maxAttempts", "max_attempts")};
  return kSettings;
}

void HedgeKind::metrics(const Snapshot& s, metrics::Emitter& out) {
  using metrics::count;
  out.counter("r4c.hedge.calls", "Hedged calls that ended.", count(s.calls));
  out.counter("r4c.hedge.failed.calls", "Hedged calls that ended with a failure.", count(s.failed));
  out.counter("r4c.hedge.hedges.launched", "Attempts after the first, over every call.",
              count(s.hedges_launched));
  out.counter("r4c.hedge.won.by.hedge", "Calls whose result came from an attempt after the first.",
              count(s.won_by_hedge));
  out.counter("r4c.hedge.executor.refusals", "Attempts the executor refused.",
              count(s.executor_refusals));
}

}  // namespace r4c
