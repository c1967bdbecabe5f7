// SPDX-License-Identifier: Apache-2.0
// A hedge: when a call is slow, starts another attempt of it, and takes the first success.
//
// Use it for idempotent reads whose latency has a long tail (a replica that stalls now and
// then): the caller pays for a second attempt only when the first has not finished after
// `delay`, and at most max_attempts attempts are launched per call.
//
//   auto executor = std::make_shared<r4c::Executor>(8);
//   r4c::Hedge hedge("profiles", r4c::HedgeConfig().delay(50ms).max_attempts(2), clock, executor);
//   auto profile = hedge.execute([id](std::stop_token stop) { return replica().get(id, stop); });
//
// Every attempt runs on the executor; the caller waits for the outcome. A hedge is not a retry:
// when every launched attempt has failed the call fails at once with the last failure. An
// attempt that fails with an inner rejection (a full limit, an open breaker, a full bulkhead, a
// rate limit) ends the launching: more attempts would only add load to a system that said no.
// Delays come from the clock (one TimerTask per call), so with a ManualClock a hedge is
// launched only when the test advances the clock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "r4c/clock.hpp"
#include "r4c/detail/handle.hpp"
#include "r4c/detail/live_config.hpp"
#include "r4c/detail/setting.hpp"
#include "r4c/detail/striped_counter.hpp"
#include "r4c/detail/timer.hpp"
#include "r4c/errors.hpp"
#include "r4c/exception_type.hpp"
#include "r4c/executor.hpp"

namespace r4c {

/// Settings of a hedge. A setter rejects a bad value at once (the config keeps its old value).
class HedgeConfig {
 public:
  static constexpr std::chrono::nanoseconds kDefaultDelay = std::chrono::milliseconds(100);
  static constexpr std::chrono::nanoseconds kLongestDelay = std::chrono::hours(1);
  static constexpr int kDefaultMaxAttempts = 2;

  /// How long the latest attempt may run without any attempt finishing before another is
  /// launched (100 ms). Throws R4C-REG-001 outside 1 ns .. 1 h.
  HedgeConfig& delay(std::chrono::nanoseconds value);
  /// Most attempts per call, the first included (2); so also the most in flight at once.
  /// Throws R4C-ATR-003 below 1 (1 turns hedging off).
  HedgeConfig& max_attempts(int value);

  std::chrono::nanoseconds delay() const noexcept { return delay_; }
  int max_attempts() const noexcept { return max_attempts_; }
  /// Checks every setting; throws ConfigException; does nothing when the config is valid.
  void validate() const;

 private:
  std::chrono::nanoseconds delay_ = kDefaultDelay;
  int max_attempts_ = kDefaultMaxAttempts;
};

/// Compares two configs setting by setting; nullopt when they are equal.
std::optional<SettingDifference> first_difference(const HedgeConfig& first,
                                                  const HedgeConfig& second);

/// Counters of a hedge since it was built; each is exact.
struct HedgeSnapshot {
  std::chrono::nanoseconds delay{0};
  int max_attempts = 0;
  std::uint64_t calls = 0;            // calls that ended (returned or threw)
  std::uint64_t hedges_launched = 0;  // attempts after the first, over every call
  std::uint64_t won_by_hedge = 0;     // calls whose result came from an attempt after the first
  std::uint64_t failed = 0;           // calls that ended with a failure
  /// Attempts the executor refused: a first attempt then ran on the caller's thread, a later
  /// one ended the launching for its call.
  std::uint64_t executor_refusals = 0;
};

class Hedge;

/// A view of a hedge for operators and tests. Valid while the hedge lives.
class HedgeHandle : public detail::HandleBase<Hedge> {
 public:
  using HandleBase::HandleBase;
};

namespace detail {

/// The state one hedged call shares with its attempts, which may outlive the call: owned by a
/// shared_ptr that every attempt holds. Only the caller's thread launches attempts and touches
/// the stop sources; attempts and the timer report under the mutex.
class HedgeCallBase : public std::enable_shared_from_this<HedgeCallBase> {
 public:
  HedgeCallBase() : timer_(*this) {}
  virtual ~HedgeCallBase() = default;
  HedgeCallBase(const HedgeCallBase&) = delete;
  HedgeCallBase& operator=(const HedgeCallBase&) = delete;

  /// The task that runs attempt `index` (1-based) with `stop`.
  virtual std::function<void()> attempt(int index, std::stop_token stop) = 0;
  /// Runs attempt `index` on this thread and reports its outcome.
  virtual void run_attempt(int index, std::stop_token stop) noexcept = 0;

  /// An attempt's failure: kept as the call's failure unless an attempt has won.
  void report_failure(std::exception_ptr failure) noexcept;

 protected:
  // Whether the attempt that just succeeded is the first to: then it stores its result and
  // reports with won = true. Both under `lock`.
  bool first_win(const std::unique_lock<std::mutex>&) const noexcept { return winner_ == 0; }
  void report_end(int index, bool won, std::unique_lock<std::mutex>& lock) noexcept;

 public:
  // Launches the next attempt when the delay passes.
  class LaunchTimer final : public TimerTask {
   public:
    explicit LaunchTimer(HedgeCallBase& call) noexcept : call_(&call) {}
    void fire() noexcept override;

   private:
    HedgeCallBase* call_;
  };

  std::mutex mutex_;
  std::condition_variable changed_;        // an attempt ended, or a launch is due
  int running_ = 0;                        // attempts launched and not ended
  int winner_ = 0;                         // the index of the winning attempt; 0: none yet
  bool launch_due_ = false;                // the timer fired
  bool rejected_ = false;                  // an attempt failed with an inner rejection
  std::exception_ptr failure_;             // the last failure while no attempt has won
  std::vector<std::stop_source> sources_;  // one per launched attempt; the caller's thread only
  LaunchTimer timer_;
};

template <class Fn, class Result>
class HedgeCall final : public HedgeCallBase {
 public:
  template <class F>
  explicit HedgeCall(F&& f) : fn_(std::forward<F>(f)) {}

  std::function<void()> attempt(int index, std::stop_token stop) override {
    return [self = std::static_pointer_cast<HedgeCall>(shared_from_this()), index,
            stop = std::move(stop)] { self->run_attempt(index, stop); };
  }

  void run_attempt(int index, std::stop_token stop) noexcept override {
    // Reported after the catch block has ended, so that this thread holds no reference to the
    // exception once the caller may have it (the caller then frees it; the exception's
    // reference count lives in uninstrumented libstdc++, where TSan cannot see it).
    std::exception_ptr failure;
    try {
      if constexpr (std::is_void_v<Result>) {
        invoke(std::move(stop));
        std::unique_lock<std::mutex> lock(mutex_);
        report_end(index, first_win(lock), lock);
      } else {
        Result result = invoke(std::move(stop));
        std::unique_lock<std::mutex> lock(mutex_);
        const bool won = first_win(lock);
        if (won) {
          if constexpr (std::is_reference_v<Result>) {
            result_ = &result;
          } else {
            result_.emplace(std::move(result));
          }
        }
        report_end(index, won, lock);
        // A late result is destroyed here, on the attempt's thread.
      }
    } catch (...) {
      failure = std::current_exception();
    }
    if (failure) report_failure(std::move(failure));
  }

  /// The winner's result; called by the caller after the attempts reported a winner.
  Result take() {
    if constexpr (std::is_reference_v<Result>) {
      return static_cast<Result>(*result_);
    } else if constexpr (!std::is_void_v<Result>) {
      return std::move(*result_);
    }
  }

 private:
  decltype(auto) invoke(std::stop_token stop) {
    if constexpr (std::is_invocable_v<Fn&, std::stop_token>) {
      return std::invoke(fn_, std::move(stop));
    } else {
      return std::invoke(fn_);
    }
  }

  using Stored =
      std::conditional_t<std::is_reference_v<Result>,
                         std::add_pointer_t<std::remove_reference_t<Result>>,
                         std::optional<std::conditional_t<std::is_void_v<Result>, char, Result>>>;
  Fn fn_;
  Stored result_{};
};

/// Whether `failure` is an inner rejection (a RejectedException: LimitExceededException,
/// CallNotPermittedException, BulkheadFullException, RequestNotPermittedException, ...): another
/// attempt would only meet the same refusal, so the hedge launches no more.
bool is_inner_rejection(const std::exception_ptr& failure) noexcept;

// The asynchronous face's access to a hedge's counters (<r4c/asio/hedge.hpp>).
struct HedgeAsyncAccess;

/// Throws std::invalid_argument: hedge `id` was given a callable it cannot copy into the state
/// its attempts share.
[[noreturn]] void throw_hedge_needs_copyable(const std::string& id);

template <class Fn>
using HedgeResult = typename std::conditional_t<std::is_invocable_v<Fn&, std::stop_token>,
                                                std::invoke_result<Fn&, std::stop_token>,
                                                std::invoke_result<Fn&>>::type;

}  // namespace detail

/// Runs a call on an executor and, while no attempt has finished, launches another attempt
/// every `delay` (up to max_attempts per call); returns the first success.
/// Thread safety: every member may be called from any number of threads.
class Hedge {
 public:
  /// Validates `config` (throws ConfigException). A null clock means a SystemClock; a null
  /// executor throws ConfigException R4C-REG-001.
  Hedge(std::string instance_id, HedgeConfig config, std::shared_ptr<Clock> clock,
        std::shared_ptr<Executor> executor);
  Hedge(const Hedge&) = delete;
  Hedge& operator=(const Hedge&) = delete;

  /// Calls `f(std::stop_token)` (or `f()`) on the executor, launching another attempt whenever
  /// `delay` passes on the clock with no attempt finished, up to max_attempts. Returns the first
  /// successful result; the other attempts' tokens are then stopped and their results discarded.
  /// When every launched attempt fails, rethrows the last failure (the same object). An attempt
  /// that fails with a RejectedException (LimitExceededException, CallNotPermittedException,
  /// BulkheadFullException, RequestNotPermittedException, ...) stops further launches. When the
  /// executor refuses the first attempt it runs on this thread (no hedging for that call); when
  /// it refuses a later one, no further attempts are launched.
  ///
  /// `f` is decay-copied (or moved) into state shared with the attempts, which may run
  /// concurrently with each other and outlive this call: what `f` refers to must outlive its
  /// attempts (capture by value or by shared_ptr), and `f` must be safe to call from several
  /// threads at once. A reference result refers into whatever the winning attempt returned.
  /// Blocking: waits for the outcome. Allocation: the shared call state, one task per attempt
  /// and one stop_source per attempt.
  template <class F>
  decltype(auto) execute(F&& f);
  /// Hedges the Asio operation `op` (a callable taking a completion handler), launching its
  /// attempts on the caller's executor, and completes `token` with
  /// `void(std::exception_ptr, T)`. Defined in <r4c/asio.hpp>; see docs/async.md.
  template <class T, class Op, class Token>
  auto async_execute(Op&& op, Token&& token);

  /// A view for operators and tests.
  HedgeHandle handle() const noexcept { return HedgeHandle(*this); }
  /// The id given at construction.
  const std::string& instance_id() const noexcept { return instance_id_; }
  /// The validated config.
  const HedgeConfig& config() const noexcept { return config_.get(); }
  /// Makes `next` (validated; throws ConfigException otherwise) the config of the calls that
  /// start after it, as the registry's reconfigure() does; a call under way keeps the config
  /// it started with. Allocation: yes (cold).
  void reconfigure(const HedgeConfig& next);
  /// The clock the delays run on.
  const std::shared_ptr<Clock>& clock() const noexcept { return clock_; }
  /// The executor the attempts run on.
  const std::shared_ptr<Executor>& executor() const noexcept { return executor_; }
  /// The counters now; each is exact, read without stopping calls.
  HedgeSnapshot snapshot() const;

 private:
  friend struct detail::HedgeAsyncAccess;

  // Launches and waits for the attempts of one call; on return `call` holds a winner or a
  // failure, no attempt of it is launched any more, and its timer is off the clock.
  void run(detail::HedgeCallBase& call);
  // Posts attempt `index`; false when the executor refused it.
  bool launch(detail::HedgeCallBase& call, int index);

  const std::string instance_id_;
  detail::LiveConfig<HedgeConfig> config_;
  const std::shared_ptr<Clock> clock_;
  const std::shared_ptr<Executor> executor_;
  detail::StripedCounter calls_;
  detail::StripedCounter hedges_launched_;
  detail::StripedCounter won_by_hedge_;
  detail::StripedCounter failed_;
  detail::StripedCounter executor_refusals_;
};

template <class F>
decltype(auto) Hedge::execute(F&& f) {
  using Fn = std::decay_t<F>;
  using Result = detail::HedgeResult<Fn>;
  auto call = std::make_shared<detail::HedgeCall<Fn, Result>>(std::forward<F>(f));
  run(*call);
  // run() returned: the winner (if any) was stored under the mutex, which run() took since.
  // Taken out of the shared state: the caller's copy is the last, wherever the state dies.
  if (call->winner_ == 0) std::rethrow_exception(std::exchange(call->failure_, nullptr));
  if constexpr (std::is_void_v<Result>) {
    return;
  } else {
    return call->take();
  }
}

/// The hedge as a policy kind: what the registry, the pipelines, the metrics and the tools
/// know of it (see <r4c/detail/setting.hpp>; <r4c/detail/kinds.hpp> lists the kinds).
/// It fails a call with no exception of its own (Exception is void): it passes on what an
/// attempt threw.
struct HedgeKind : detail::KindBase<Hedge, void> {
  static constexpr KindNames kNames = {"hedge", "hedge", "hedge", "hedge"};
  /// Every setting the external file takes, in the documented order.
  static std::span<const detail::Setting<Config>> settings() noexcept;
  /// Appends the metrics of one instance's snapshot (docs/observability.md).
  static void metrics(const Snapshot& snapshot, metrics::Emitter& out);
  /// A new instance; a registry's resources give it its clock and the executor the attempts run
  /// on (hides KindBase::make).
  template <class Resources>
  static std::unique_ptr<Policy> make(std::string id, Config config, Resources& resources) {
    return std::make_unique<Hedge>(std::move(id), std::move(config), resources.clock(),
                                   resources.executor());
  }
};

}  // namespace r4c
