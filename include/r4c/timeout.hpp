// SPDX-License-Identifier: Apache-2.0
// A timeout. C++ cannot stop a thread, so a synchronous timeout is cooperative: the call runs on
// the caller's thread, and a callable that takes a std::stop_token gets one that is stopped when
// the deadline passes. A call that ends after its deadline, or throws after stop was requested,
// fails with CallTimeoutException; its late result is discarded.
//
//   r4c::Timeout timeout("search", r4c::TimeoutConfig().timeout(std::chrono::seconds(2)), clock);
//   auto hits = timeout.execute([&](std::stop_token stop) { return backend.search(q, stop); });
//
// No thread per call. On the default clock (SystemClock) a token's deadline sits in a slot of
// the calling thread's own, taking no lock and allocating nothing; one scanner thread for the
// process stops the token when the deadline passes (detail::DeadlineSlots). On any other clock
// it is scheduled on the clock's timers: with a ManualClock, advance() fires every deadline it
// passes on the calling thread, exactly at its time. A callable without a token needs no timer
// at all: its end is compared with its deadline. Inside an adaptive limit a timeout is the
// overload signal: CallTimeoutException is a drop by default.
//
// registry.reconfigure() may change the timeout of a live instance: calls that start after the
// change take the new duration, calls under way keep the deadline they started with.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <type_traits>
#include <utility>

#include "r4c/clock.hpp"
#include "r4c/detail/handle.hpp"
#include "r4c/detail/live_config.hpp"
#include "r4c/detail/setting.hpp"
#include "r4c/detail/striped_counter.hpp"
#include "r4c/detail/timer.hpp"
#include "r4c/errors.hpp"
#include "r4c/exception_type.hpp"

namespace r4c {

/// Settings of a timeout.
class TimeoutConfig {
 public:
  static constexpr std::chrono::nanoseconds kDefaultTimeout = std::chrono::seconds(1);

  /// How long a call may take (1 s). R4C-REG-001 outside 1 ns .. 24 h.
  TimeoutConfig& timeout(std::chrono::nanoseconds value);
  std::chrono::nanoseconds timeout() const noexcept { return timeout_; }
  void validate() const;

 private:
  std::chrono::nanoseconds timeout_ = kDefaultTimeout;
};

std::optional<SettingDifference> first_difference(const TimeoutConfig& first,
                                                  const TimeoutConfig& second);

struct TimeoutSnapshot {
  std::chrono::nanoseconds timeout{0};
  std::uint64_t timed_out = 0;  // calls that failed with CallTimeoutException; exact
};

class Timeout;

/// A view of a timeout for operators and tests. Valid while the timeout lives.
class TimeoutHandle : public detail::HandleBase<Timeout> {
 public:
  using HandleBase::HandleBase;
};

namespace detail {

// The deadline task of a call whose deadline goes to the clock's timers. Its stop_source is
// reused by the thread's next such call when this one's was never stopped (std::stop_source
// allocates its state): a token is valid for its call only.
class StopAtDeadline final : public TimerTask {
 public:
  StopAtDeadline();
  ~StopAtDeadline();
  void fire() noexcept override { source.request_stop(); }

  std::stop_source source;
  std::stop_token token;
};

// How a callable gets its token: by reference when it can take one (no reference count to
// change), else a copy of its own.
template <class F>
using TokenArg = std::conditional_t<std::is_invocable_v<F, const std::stop_token&>,
                                    const std::stop_token&, std::stop_token>;

// A call's deadline with a token. On a SystemClock it sits in the thread's DeadlineSlots (no
// lock, no allocation), with the slot's own stop source; on any other clock, or nested deeper
// than the slots go, on the clock's timer queue, which a ManualClock fires exactly at its
// deadline inside advance(). always_inline: the slots' path is a few loads and stores, less
// than the calls GCC would otherwise make to it; the queue's path is out of line.
class TokenDeadline {
 public:
  // `start`: the call's start, read on `reader`; `timeout_ticks` in its ticks.
  [[gnu::always_inline]] TokenDeadline(const ClockReader& reader, Clock& clock,
                                       std::int64_t timeout_ticks, std::int64_t start)
      : reader_(reader), clock_(clock), deadline_(start + timeout_ticks) {
    if (reader.system_time()) [[likely]] {
      DeadlineSlots::Block* const block = DeadlineSlots::block();
      if (block != nullptr && block->depth < DeadlineSlots::kDepth) [[likely]] {
        token_ = &DeadlineSlots::arm_stop(*block, deadline_);
        block_ = block;
        return;
      }
    }
    queue();
  }
  TokenDeadline(const TokenDeadline&) = delete;
  TokenDeadline& operator=(const TokenDeadline&) = delete;
  [[gnu::always_inline]] ~TokenDeadline() {
    if (!ended_) end();
  }

  /// The call's token as `F` takes it (TokenArg).
  template <class F>
  [[gnu::always_inline]] TokenArg<F> token() const noexcept {
    return *token_;
  }
  bool ended() const noexcept { return ended_; }

  /// Ends the deadline (once: later calls are not made); once it returns nothing touches the
  /// token's state. Returns whether the token was stopped.
  [[gnu::always_inline]] bool end() noexcept {
    ended_ = true;
    if (block_ != nullptr) [[likely]]
      return DeadlineSlots::disarm_stop(*block_);
    return end_queued();
  }

  /// Ends the deadline; whether the call was late: its token stopped, or it ended at or after
  /// its deadline (read from `readings`, SharedReadings or OwnReadings).
  template <class Readings>
  [[gnu::always_inline]] bool end_late(Readings& readings) noexcept {
    ended_ = true;
    if (block_ != nullptr) [[likely]]
      return DeadlineSlots::disarm_stop(*block_) || readings.end(reader_) >= deadline_;
    return end_queued() || readings.end(reader_) >= deadline_;
  }

 private:
  void queue();
  bool end_queued() noexcept;

  const ClockReader& reader_;
  Clock& clock_;
  DeadlineSlots::Block* block_ = nullptr;  // nullptr: the deadline is queued_
  const std::stop_token* token_;
  std::int64_t deadline_ = 0;
  bool ended_ = false;
  // Made by queue() and destroyed by end_queued(): the slots' path neither builds nor destroys
  // it.
  union {
    StopAtDeadline queued_;
  };
};

}  // namespace detail

/// Fails calls that take longer than the timeout with CallTimeoutException.
/// Thread safety: every member may be called from any thread.
class Timeout {
 public:
  Timeout(std::string instance_id, TimeoutConfig config = {},
          std::shared_ptr<Clock> clock = nullptr);
  Timeout(const Timeout&) = delete;
  Timeout& operator=(const Timeout&) = delete;

  /// Runs `f()` or `f(std::stop_token)` on this thread; returns its result, or throws this
  /// timeout's CallTimeoutException when it ended at or after its deadline (or threw after
  /// its token was stopped). Other exceptions pass through unchanged.
  template <class F>
  decltype(auto) execute(F&& f);
  /// execute() without a throw (<r4c/outcome.hpp>): `f` (returning a value or an Outcome) ends
  /// as an Outcome; one that ended at or after its deadline (or failed after its token was
  /// stopped) is this timeout's CallTimeoutException as a failure, as execute() throws it. A
  /// CallTimeoutException of the call's own passes unchanged.
  template <class F>
  [[gnu::always_inline]] auto try_execute(F&& f) {
    detail::OwnReadings own;
    return try_execute(own, f);
  }
  /// try_execute() with the call's clock readings shared with the policies around and inside
  /// it (a pipeline's stage): the deadline counts from the call's start as an outer policy read
  /// it.
  template <class Readings, class F>
  [[gnu::always_inline]] auto try_execute(Readings& readings, F&& f) {
    if constexpr (std::is_invocable_v<F&, std::stop_token>) {
      return try_execute_with_token(f, readings);
    } else {
      return try_execute_without_token(f, readings);
    }
  }

  /// Runs the Asio operation `op` under the deadline, completing `token` with
  /// void(std::exception_ptr, T). Defined in <r4c/asio.hpp>; see docs/async.md.
  template <class T, class Op, class Token>
  auto async_execute(Op&& op, Token&& token);

  /// Throws this timeout's CallTimeoutException and counts it.
  [[noreturn]] void throw_timed_out();
  /// Counts a timed-out call and returns this timeout's CallTimeoutException (one object,
  /// shared), for an asynchronous call, which completes with it instead of throwing it.
  const std::exception_ptr& count_timed_out() noexcept {
    timed_out_count_.increment();
    return timed_out_;
  }

  TimeoutHandle handle() const noexcept { return TimeoutHandle(*this); }
  const std::string& instance_id() const noexcept { return instance_id_; }
  /// The config now (reconfigure() replaces it).
  const TimeoutConfig& config() const noexcept { return live_config_.get(); }
  const std::shared_ptr<Clock>& clock() const noexcept { return clock_owner_; }
  TimeoutSnapshot snapshot() const;

  /// Takes a new config on a live timeout (what registry.reconfigure() calls): validates it
  /// (ConfigException, nothing changed); calls that start afterwards take the new duration,
  /// calls under way keep their deadline. Allocation: yes.
  void reconfigure(const TimeoutConfig& next);

 private:
  // relaxed: a call reads its duration once, at its start; nothing else depends on it.
  std::int64_t timeout_ticks() const noexcept {
    return timeout_ticks_.load(std::memory_order_relaxed);
  }
  std::chrono::nanoseconds timeout_ns() const noexcept {
    return std::chrono::nanoseconds(timeout_ns_.load(std::memory_order_relaxed));
  }
  template <class F>
  decltype(auto) execute_with_token(F&& f);
  // One function per kind of callable, each with one object returned on every path (built in
  // the caller's slot, never moved: under `if constexpr` GCC 12 moved it).
  template <class F, class Readings>
  [[gnu::always_inline]] auto try_execute_with_token(F& f, Readings& readings) {
    detail::TokenDeadline deadline(clock_, *clock_owner_, timeout_ticks(), readings.start(clock_));
    auto outcome = detail::invoke_outcome(f, deadline.template token<F&>());
    if (deadline.end_late(readings)) [[unlikely]]
      outcome = late(std::move(outcome));
    return outcome;
  }
  template <class F, class Readings>
  [[gnu::always_inline]] auto try_execute_without_token(F& f, Readings& readings) {
    const std::int64_t deadline = readings.start(clock_) + timeout_ticks();
    auto outcome = detail::invoke_outcome(f);
    if (readings.end(clock_) >= deadline) [[unlikely]]
      outcome = late(std::move(outcome));
    return outcome;
  }
  // A call that ended late: its result or failure becomes this timeout's, but for a
  // CallTimeoutException of its own (another timeout's failure, or the call's).
  template <class Out>
  Out late(Out outcome) noexcept {
    if (outcome.failed() && (outcome.stock() || is_call_timeout(outcome.error()))) return outcome;
    return Out::stock_failure(count_timed_out());
  }
  static bool is_call_timeout(const std::exception_ptr& error) noexcept;

  const detail::ClockReader clock_;
  std::atomic<std::int64_t> timeout_ticks_;
  std::atomic<std::int64_t> timeout_ns_;
  const std::string instance_id_;
  detail::LiveConfig<TimeoutConfig> live_config_;
  const std::shared_ptr<Clock> clock_owner_;
  const std::exception_ptr timed_out_;
  detail::StripedCounter timed_out_count_;
};

template <class F>
decltype(auto) Timeout::execute(F&& f) {
  if constexpr (std::is_invocable_v<F, std::stop_token>) {
    return execute_with_token(std::forward<F>(f));
  } else {
    using Result = std::invoke_result_t<F>;
    const std::int64_t deadline = clock_.ticks() + timeout_ticks();
    try {
      if constexpr (std::is_void_v<Result>) {
        std::invoke(std::forward<F>(f));
        if (clock_.ticks() >= deadline) throw_timed_out();
        return;
      } else {
        Result result = std::invoke(std::forward<F>(f));
        if (clock_.ticks() >= deadline) throw_timed_out();  // the late result is destroyed
        if constexpr (std::is_reference_v<Result>) {
          return static_cast<Result>(result);
        } else {
          return result;
        }
      }
    } catch (const CallTimeoutException&) {
      throw;
    } catch (...) {
      if (clock_.ticks() < deadline) throw;
    }
    throw_timed_out();  // threw after its deadline: its exception is replaced
  }
}

template <class F>
decltype(auto) Timeout::execute_with_token(F&& f) {
  using Result = std::invoke_result_t<F, detail::TokenArg<F>>;
  // Ends the timer however the call ends; once it has, nothing touches the token's state.
  detail::OwnReadings readings;
  detail::TokenDeadline deadline(clock_, *clock_owner_, timeout_ticks(), readings.start(clock_));
  try {
    if constexpr (std::is_void_v<Result>) {
      std::invoke(std::forward<F>(f), deadline.template token<F>());
      if (deadline.end_late(readings)) throw_timed_out();
      return;
    } else {
      Result result = std::invoke(std::forward<F>(f), deadline.template token<F>());
      if (deadline.end_late(readings)) throw_timed_out();  // the late result is destroyed
      if constexpr (std::is_reference_v<Result>) {
        return static_cast<Result>(result);
      } else {
        return result;
      }
    }
  } catch (const CallTimeoutException&) {
    throw;
  } catch (...) {
    // Ended already: the result's own copy or move threw, after a call in time.
    if (deadline.ended() || !deadline.end_late(readings)) throw;
  }
  throw_timed_out();  // threw after stop was requested: its exception is replaced
}

/// The timeout as a policy kind: what the registry, the pipelines, the metrics and the tools
/// know of it (see <r4c/detail/setting.hpp>; <r4c/detail/kinds.hpp> lists the kinds).
struct TimeoutKind : detail::KindBase<Timeout, CallTimeoutException> {
  static constexpr KindNames kNames = {"timeout", "timeout", "timeout", "timeout"};
  /// Every setting the external file takes, in the documented order.
  static std::span<const detail::Setting<Config>> settings() noexcept;
  /// Appends the metrics of one instance's snapshot (docs/observability.md).
  static void metrics(const Snapshot& snapshot, metrics::Emitter& out);
};

}  // namespace r4c
