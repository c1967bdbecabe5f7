// SPDX-License-Identifier: Apache-2.0
// The adaptive limit: a bulkhead that finds its own concurrency limit.
//
// It raises the limit while the dependency's latency holds and lowers it when latency grows or
// calls fail with a drop (a timeout, a full bulkhead), so surplus calls are rejected at once
// instead of piling up behind slow ones. Use it when a dependency's capacity is unknown or
// changes; use a fixed bulkhead when you know the right number, a rate limiter for calls per
// second. See docs/adaptive-limit.md.
//
//   r4c::AdaptiveLimit limit("orders");
//   std::string reply = limit.execute([&] { return backend.place(order); });   // may throw
//
//   if (r4c::Permit permit = limit.try_acquire()) {    // never throws, never allocates
//     backend.place(order);
//     permit.on_success();
//   }
//
// A call may also say its priority class (try_acquire(r4c::CallClass::bulk): admitted below its
// share of the limit; bypass: not limited, not counted) and, with max_wait set, wait for a slot
// (acquire(), execute(), async_execute(): FIFO, LIFO or adaptive LIFO, a freed slot handed to
// the chosen waiter). See docs/adaptive-limit.md, "Waiting for a slot".
//
// The whole hot path is in this header: admission is one compare-and-swap on the in-flight
// counter; completion is one decrement, a few plain stores into the calling thread's own stripe
// and one relaxed load of the window's end. Windows are recomputed by the first call that ends
// after its window did, out of line (AdaptiveLimit::close_window in src/adaptive_limit.cpp).
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
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "r4c/adaptive_limit_config.hpp"
#include "r4c/clock.hpp"
#include "r4c/detail/admission.hpp"
#include "r4c/detail/cache_line.hpp"
#include "r4c/detail/handle.hpp"
#include "r4c/detail/limit_algorithms.hpp"
#include "r4c/detail/live_config.hpp"
#include "r4c/detail/setting.hpp"
#include "r4c/detail/striped_counter.hpp"
#include "r4c/detail/thread_slot.hpp"
#include "r4c/errors.hpp"
#include "r4c/events.hpp"
#include "r4c/latency_histogram.hpp"

namespace r4c {
class AdaptiveLimit;
namespace detail {
struct LimitQueueAccess;
}  // namespace detail

/// Why a call was not admitted. limit: the limit (or the call's class share) was full and the
/// call could not wait; queue_full: nobody of a lower class to evict from a full queue;
/// wait_timeout: max_wait passed; deadline: the caller's deadline could not be met;
/// cancelled: its stop token or Asio cancellation; evicted: a higher class took its place.
enum class RejectReason : std::uint8_t {
  none,
  limit,
  queue_full,
  wait_timeout,
  deadline,
  cancelled,
  evicted
};
inline constexpr int kRejectReasons = 7;

inline constexpr EnumName<RejectReason> kRejectReasonNames[] = {
    {"none", RejectReason::none},
    {"limit", RejectReason::limit},
    {"queue_full", RejectReason::queue_full},
    {"wait_timeout", RejectReason::wait_timeout},
    {"deadline", RejectReason::deadline},
    {"cancelled", RejectReason::cancelled},
    {"evicted", RejectReason::evicted}};
constexpr std::span<const EnumName<RejectReason>> enum_names(RejectReason) noexcept {
  return kRejectReasonNames;
}

namespace detail {
/// Why a wait that ended without a slot was rejected.
constexpr RejectReason reason_of(WaitEnd end) noexcept {
  switch (end) {
    case WaitEnd::timed_out:
      return RejectReason::wait_timeout;
    case WaitEnd::cancelled:
      return RejectReason::cancelled;
    case WaitEnd::evicted:
      return RejectReason::evicted;
    default:
      return RejectReason::none;
  }
}
}  // namespace detail

/// What a call says when it asks for a slot that it may wait for (AdaptiveLimit::acquire()).
struct Admission {
  /// Its priority class (critical: the class of a call that says none).
  CallClass cls = CallClass::critical;
  /// Its partition, on a limit that has partitions (none: what no partition reserves). A call
  /// is admitted when both its class and its partition allow it.
  LimitPartition partition = {};
  /// Stops the wait (the call is rejected as cancelled).
  std::stop_token stop = {};
  /// When the caller gives up, on the limit's clock (Clock::now()). A call that would have to
  /// wait past it for a slot and then for the limit's average latency is rejected at once.
  std::optional<std::chrono::nanoseconds> deadline = std::nullopt;
};

/// One partition in a limit's snapshot (AdaptiveLimitConfig::partition).
struct LimitPartitionSnapshot {
  std::string name;  // "" for the calls that name no partition
  double share = 0.0;
  int guaranteed = 0;  // floor(share × limit): the slots it is guaranteed now
  int in_flight = 0;
  std::uint64_t rejected = 0;
};

/// A value picture of one limit. The window_* members describe the last recomputed window.
struct AdaptiveLimitSnapshot {
  int limit = 0;
  int in_flight = 0;
  int min_limit = 0;
  int max_limit = 0;
  LimitAlgorithm algorithm = LimitAlgorithm::gradient2;
  bool enabled = true;
  std::uint64_t windows = 0;                   // how many windows recomputed the limit
  std::chrono::nanoseconds window_latency{0};  // the last window's average latency
  std::chrono::nanoseconds long_latency{0};    // gradient2's long-term average; 0 for aimd
  int window_max_in_flight = 0;
  bool window_dropped = false;
  std::uint64_t window_samples = 0;  // samples in the last recomputed window
  std::uint64_t samples = 0;         // samples in all recomputed windows
  std::uint64_t limit_changes = 0;   // recomputed windows that changed the limit
  std::uint64_t rejected = 0;        // exact, also under concurrency
  /// The limit as a real number: `limit`, except for delay_target below one call at a time,
  /// where it is the share of the time one call may run (the limit paces, see
  /// docs/adaptive-limit.md; `limit` is then 1 while a call may start and 0 while it waits).
  double fractional_limit = 0.0;
  // Waiting (max_wait above 0; all 0 otherwise).
  int waiting = 0;                        // calls waiting for a slot now
  int max_queue = 0;                      // how many may wait now (max_queue or factor × limit)
  std::uint64_t waits_granted = 0;        // waits that ended with a slot
  std::chrono::nanoseconds wait_time{0};  // total time granted waits waited
  std::uint64_t granted_on_raise = 0;     // waiters granted by a window that raised the limit
  /// Rejections by RejectReason (index 0, none, stays 0); they sum to `rejected`.
  std::array<std::uint64_t, kRejectReasons> rejected_by_reason{};
  /// Rejections by CallClass (bypass is never rejected); they sum to `rejected`.
  std::array<std::uint64_t, kLimitedClasses> rejected_by_class{};
  /// Partitions (none unless configured): the config's, in order, then what no partition
  /// reserves (name ""); their in_flight sum to `in_flight` (when no call starts or ends
  /// meanwhile), their rejected to `rejected`.
  std::vector<LimitPartitionSnapshot> partitions;
  /// observe mode: the calls it would have rejected and admitted instead (never in `rejected`).
  std::uint64_t would_have_rejected = 0;
  PolicyMode mode = PolicyMode::enforce;
  /// With latency_histogram on: the latencies of the calls that ended with a sample.
  LatencyDistribution latency;
};

/// The right to run one call under a limit, from `AdaptiveLimit::try_acquire()`. Converts to
/// true while it holds a slot. End it with exactly one of `on_success()` (a sample),
/// `on_drop()` (a sample marked as an overload signal) or `on_ignore()` (frees the slot only);
/// destroying an untouched permit is `on_ignore()`. Calls after the first do nothing.
/// Thread safety: a permit belongs to one thread at a time; it may end on another thread than
/// the one that acquired it.
class [[nodiscard]] Permit {
 public:
  /// An empty permit, as a rejection returns.
  Permit() noexcept = default;
  Permit(Permit&& other) noexcept
      : limit_(std::exchange(other.limit_, nullptr)),
        start_(other.start_),
        admission_(other.admission_) {}
  Permit& operator=(Permit&& other) noexcept {
    if (this != &other) {
      on_ignore();
      limit_ = std::exchange(other.limit_, nullptr);
      start_ = other.start_;
      admission_ = other.admission_;
    }
    return *this;
  }
  Permit(const Permit&) = delete;
  Permit& operator=(const Permit&) = delete;
  ~Permit() { on_ignore(); }

  /// Whether the call was admitted and has not ended yet.
  explicit operator bool() const noexcept { return limit_ != nullptr; }

  /// The call returned: frees the slot and adds its latency to the window.
  void on_success() & noexcept;
  /// The call failed with an overload signal: a sample marked as a drop.
  void on_drop() & noexcept;
  /// The call failed in a way that says nothing about load: frees the slot only.
  void on_ignore() & noexcept;
  void on_success() && = delete;  // end a permit you hold, not a temporary
  void on_drop() && = delete;
  void on_ignore() && = delete;

 private:
  friend class AdaptiveLimit;
  Permit(AdaptiveLimit* limit, std::int64_t start, std::int32_t in_flight,
         std::uint32_t partition = 0) noexcept
      : limit_(limit),
        start_(start),
        admission_(static_cast<std::uint32_t>(in_flight) | std::uint64_t{partition} << 32) {}
  // Calls in flight when admitted, itself included; 0 = disabled.
  std::int32_t in_flight() const noexcept { return static_cast<std::int32_t>(admission_); }
  // Its partition: (layout << 8) | (slot + 1), the layout it was admitted under (a reconfigure
  // may change the partitions while it runs); 0: admitted without partitions.
  std::uint32_t partition() const noexcept { return static_cast<std::uint32_t>(admission_ >> 32); }

  AdaptiveLimit* limit_ = nullptr;
  std::int64_t start_ = 0;  // clock ticks (detail::ClockReader)
  // in_flight() and partition() in one word, stored and copied whole: as two 4-byte stores
  // read back by the move's 8-byte load, a permit returned from an out-of-line try_acquire()
  // stalled on store forwarding (a fifth of an async call's own time, bench target 9).
  std::uint64_t admission_ = 0;
};

/// A cheap, copyable view of a limit for operators and tests. Valid while the limit lives.
class AdaptiveLimitHandle : public detail::HandleBase<AdaptiveLimit> {
 public:
  using HandleBase::HandleBase;
  /// How many calls may run at once now.
  int limit() const noexcept;
  /// How many calls hold a slot right now.
  int in_flight() const noexcept;
  /// Calls `listener` whenever a window changes the limit, until the Subscription ends (see
  /// <r4c/events.hpp>).
  Subscription on_limit_change(std::function<void(const LimitChangeEvent&)> listener) const;
};

/// A concurrency limit that moves once per window with the dependency's latency and drops.
/// Thread safety: every member may be called from any number of threads.
/// Allocation: none per call on `try_acquire()`, window ends included; `execute()` adds none of
/// its own (a rejection rethrows a preallocated exception; the C++ runtime still mallocs its
/// small exception header for every throw, as it does for any exception).
class AdaptiveLimit {
 public:
  /// Builds a limit; validates `config` (throws ConfigException). A null clock means a
  /// SystemClock. The first window starts now.
  explicit AdaptiveLimit(std::string instance_id, AdaptiveLimitConfig config = {},
                         std::shared_ptr<Clock> clock = nullptr);
  AdaptiveLimit(const AdaptiveLimit&) = delete;
  AdaptiveLimit& operator=(const AdaptiveLimit&) = delete;
  ~AdaptiveLimit();

  /// Takes a slot, or returns an empty permit when the limit is full (counted in `rejected`).
  /// Never waits, never throws, never allocates; reads the clock only when admitted. A critical
  /// call: with waiters queued it is rejected, as it may not pass them (no barging).
  Permit try_acquire() noexcept;
  /// The same for a call of class `cls`: admitted while in flight is below the class's share
  /// of the limit, checked and taken in one step; bypass is admitted and not counted.
  Permit try_acquire(CallClass cls) noexcept;
  /// The same for a call of partition `partition` (and class `cls`): admitted while the
  /// partition is below its guaranteed share, or, with partition_borrow, while a slot is free
  /// that no other partition's unused guarantee keeps; always below the limit, checked and
  /// taken in one step. On a limit without partitions the partition is ignored.
  Permit try_acquire(LimitPartition partition, CallClass cls = CallClass::critical) noexcept;
  /// The partition called `name`, for the calls to name at admission. Throws ConfigException
  /// R4C-REG-012 when the limit has no such partition (the message lists them).
  LimitPartition partition(std::string_view name) const;
  /// Takes a slot, waiting up to max_wait for one when the limit is full (with max_wait 0, as
  /// try_acquire(admission.cls)). Blocks on this waiter's own wake-up; the wait's timer runs
  /// on the limit's clock. An empty permit is a rejection, its reason stored in `*reason`
  /// when given. Never throws; allocates nothing of its own.
  Permit acquire(const Admission& admission = {}, RejectReason* reason = nullptr) noexcept;

  /// Runs `f` under the limit and returns its result. When full, throws this limit's
  /// LimitExceededException (one preallocated object, rethrown) without calling `f`. What `f`
  /// throws is classified (a `drop_on` type is a drop, anything else frees the slot only) and
  /// rethrown unchanged.
  template <class F>
  decltype(auto) execute(F&& f);
  /// The same for a call of class `cls`; with max_wait set, both wait as acquire() does.
  template <class F>
  decltype(auto) execute(CallClass cls, F&& f) {
    return execute(cls, LimitPartition{}, std::forward<F>(f));
  }
  /// The same for a call of partition `partition` (and class `cls`).
  template <class F>
  decltype(auto) execute(LimitPartition partition, F&& f) {
    return execute(CallClass::critical, partition, std::forward<F>(f));
  }
  template <class F>
  decltype(auto) execute(CallClass cls, LimitPartition partition, F&& f);
  /// execute() without a throw to say no (<r4c/outcome.hpp>): a full limit (after max_wait,
  /// when set) returns a refusal,
  /// and `f` (returning a value or an Outcome) ends as an Outcome, its failure classified as
  /// execute() classifies what `f` throws (a policy's preallocated exception once per object).
  template <class F>
  detail::OutcomeOf<F> try_execute(F&& f) {
    return try_execute(CallClass::critical, std::forward<F>(f));
  }
  /// The same for a call of class `cls` (a pipeline's limit stage comes through here).
  template <class F>
  detail::OutcomeOf<F> try_execute(CallClass cls, F&& f) {
    return try_execute(cls, LimitPartition{}, std::forward<F>(f));
  }
  /// The same for a call of partition `partition` (and class `cls`).
  template <class F>
  detail::OutcomeOf<F> try_execute(LimitPartition partition, F&& f) {
    return try_execute(CallClass::critical, partition, std::forward<F>(f));
  }
  template <class F>
  detail::OutcomeOf<F> try_execute(CallClass cls, LimitPartition partition, F&& f) {
    // With max_wait set it waits as execute() does; its refusal says why (rejection(reason)).
    RejectReason why = RejectReason::limit;
    Permit permit =
        waits() ? acquire(Admission{cls, partition}, &why) : try_acquire(partition, cls);
    if (!permit) [[unlikely]]
      return detail::OutcomeOf<F>::refused(refusal(why));
    auto outcome = detail::invoke_outcome(f);
    if (outcome.has_value()) [[likely]] {
      permit.on_success();
    } else if (is_drop_outcome(outcome)) {
      permit.on_drop();
    } else {
      permit.on_ignore();
    }
    return outcome;
  }
  /// try_execute() with the call's clock readings shared with the policies around and inside
  /// it (a pipeline's stage): the admission takes the start an outer policy read (or reads it
  /// for the policies inside), and the latency ends at the end they read.
  template <class F>
  detail::OutcomeOf<F> try_execute(detail::SharedReadings& readings, CallClass cls,
                                   LimitPartition partition, F&& f) {
    RejectReason why = RejectReason::limit;
    const bool queues = waits();
    Permit permit = queues ? acquire(Admission{cls, partition}, &why)
                           : try_acquire_at(partition, cls, SharedStart{readings, clock_});
    if (!permit) [[unlikely]]
      return detail::OutcomeOf<F>::refused(refusal(why));
    if (queues) [[unlikely]]
      readings.waited();  // the admission after the wait is the start of the policies inside
    auto outcome = detail::invoke_outcome(f);
    permit.limit_ = nullptr;
    // One complete() per outcome, each with its outcome constant (the outcome in a variable cost
    // BM_PipelineLimit 2.7 ns), and the end read here, where `readings` is at hand (passed on
    // into the out-of-line end_sampled() it cost 3 ns); a disabled limit's permit ends unread.
    const auto end = [&] { return Reading{permit.in_flight() != 0 ? readings.end(clock_) : 0}; };
    if (outcome.has_value()) [[likely]] {
      complete(permit, Outcome::kSuccess, end());
    } else if (is_drop_outcome(outcome)) {
      complete(permit, Outcome::kDrop, end());
    } else {
      complete(permit, Outcome::kIgnore, Reading{0});
    }
    return outcome;
  }

 private:
  // try_execute's verdicts on stock failures, under the current dropOn: reconfigure() starts a
  // new one (published after the config it classifies by); the old ones stay alive.
  std::atomic<detail::StockVerdicts*> drop_verdicts_{nullptr};
  // Whether try_execute's failed `outcome` is a drop (dropOn, dropOnError).
  template <class Out>
  bool is_drop_outcome(const Out& outcome) noexcept {
    return drop_verdicts_.load(std::memory_order_acquire)
               ->verdict_of(outcome, [this](const auto& e) { return is_drop(e) ? 1 : 0; }) != 0;
  }

 public:
  /// Runs the asynchronous operation `op` (an Asio initiation: a callable taking a completion
  /// handler) under the limit, completing `token` with `void(std::exception_ptr, T)`. Defined
  /// in <r4c/asio.hpp>, which must be included to call it; see docs/async.md.
  template <class T, class Op, class Token>
  auto async_execute(Op&& op, Token&& token);
  /// The same for a call of class `cls` (max_wait set: it may wait, holding no thread).
  template <class T, class Op, class Token>
  auto async_execute(CallClass cls, Op&& op, Token&& token);
  /// The same for a call of partition `partition` (and class `cls`).
  template <class T, class Op, class Token>
  auto async_execute(LimitPartition partition, Op&& op, Token&& token);
  template <class T, class Op, class Token>
  auto async_execute(CallClass cls, LimitPartition partition, Op&& op, Token&& token);
  /// Runs the coroutine `f()` returns (an asio::awaitable<T>) under the limit; returns an
  /// asio::awaitable<T>. Defined in <r4c/asio.hpp>.
  template <class F>
  auto co_execute(F f);

  /// Whether a failure is a drop under this limit's config: its exception matches a
  /// `drop_on` type, or its error code satisfies `drop_on_error` (also the code of a
  /// std::system_error, whether a synchronous call threw it or an inner async layer passed an
  /// error code on as one).
  bool is_drop(const std::exception_ptr& failure) const noexcept;
  bool is_drop(const std::error_code& code) const noexcept;
  /// The LimitExceededException a full limit fails calls with (one object, shared).
  const std::exception_ptr& rejection() const noexcept { return rejection_; }
  /// The exception a call rejected for `reason` fails with (one object per reason): with
  /// max_wait set, the LimitExceededException subclass of <r4c/errors.hpp> for queue_full,
  /// wait_timeout, deadline, cancelled and evicted; rejection() otherwise.
  const std::exception_ptr& rejection(RejectReason reason) const noexcept;

  AdaptiveLimitHandle handle() const noexcept { return AdaptiveLimitHandle(*this); }
  const std::string& instance_id() const noexcept { return instance_id_; }
  /// The config now: the one it was built with, or the last reconfigure()'s.
  const AdaptiveLimitConfig& config() const noexcept { return live_config_.get(); }
  /// Applies `next` (validated; throws ConfigException otherwise) to the running limit, as the
  /// registry's reconfigure() does: the same algorithm keeps its learnt state and the current
  /// limit, clamped into the new bounds; another algorithm starts from the current limit. Every
  /// setting changes (docs/operations.md, "Live reconfiguration", says how each takes effect);
  /// in-flight calls, their samples and the waiters stay. Blocking: waits for a window close
  /// under way and the queue's and partitions' mutexes (short). Allocation: yes (cold).
  void reconfigure(const AdaptiveLimitConfig& next);
  int limit() const noexcept { return limit_.load(std::memory_order_relaxed); }
  int in_flight() const noexcept { return in_flight_.load(std::memory_order_relaxed); }
  /// Whether calls may wait for a slot (max_wait above 0).
  bool waits() const noexcept { return (flags_.load(std::memory_order_relaxed) & kWaits) != 0; }
  /// Whether the limit has partitions.
  bool partitioned() const noexcept {
    return (flags_.load(std::memory_order_relaxed) & kPartitioned) != 0;
  }
  /// The clock the limit reads and times its waits on.
  const std::shared_ptr<Clock>& clock() const noexcept { return clock_owner_; }
  /// A consistent picture of the limit and the last recomputed window.
  AdaptiveLimitSnapshot snapshot() const;
  /// Calls `listener` whenever a window changes the limit, on the thread that closed the
  /// window, until the Subscription ends (see <r4c/events.hpp>). Costs admitted calls nothing.
  Subscription on_limit_change(std::function<void(const LimitChangeEvent&)> listener) const;

 private:
  friend class Permit;
  friend struct detail::LimitQueueAccess;
  enum class Outcome { kSuccess, kDrop, kIgnore };
  static constexpr int kShareShift = 16;
  // flags_: what a call must look at beyond the plain path, set by the constructor and
  // reconfigure(). kSpecial: try_acquire() leaves the plain path (disabled, waits or
  // partitioned). kQueued: a release looks for waiters. kHistogram: a sample is recorded in
  // the latency histogram. kRelease: what a release reads once (issue 17: one test of these
  // and of the permit's partition, so that a limit with none costs what it did without them).
  static constexpr std::uint8_t kSpecial = 1;
  static constexpr std::uint8_t kQueued = 2;
  static constexpr std::uint8_t kHistogram = 4;
  static constexpr std::uint8_t kWaits = 8;  // max_wait above 0 (and enabled): calls may wait
  static constexpr std::uint8_t kPartitioned = 16;
  static constexpr std::uint8_t kDisabled = 32;
  static constexpr std::uint8_t kRelease = kQueued | kHistogram;
  class SyncWaiter;

  // One thread's running totals. Cumulative, never reset: the thread that closes a window
  // subtracts what it saw at the previous close, so stripes never need a writer other than
  // their thread.
  struct alignas(detail::kCacheLine) Stripe {
    std::atomic<std::uint64_t> samples{0};
    std::atomic<std::uint64_t> latency_sum_ns{0};
    std::atomic<std::uint64_t> drops{0};
    std::atomic<std::uint64_t> rejected{0};
  };

  void complete(Permit& permit, Outcome outcome) noexcept;
  // Where complete() takes the end's reading: the clock, or one taken already. always_inline: as
  // lambdas GCC made them calls of their own (4 ns on BM_PipelineLimit).
  struct ReadClock {
    const detail::ClockReader& clock;
    [[gnu::always_inline]] std::int64_t operator()() const noexcept { return clock.ticks(); }
  };
  struct Reading {
    std::int64_t now;
    [[gnu::always_inline]] std::int64_t operator()() const noexcept { return now; }
  };
  // An admission's start shared with the policies around and inside (read on admission only).
  struct SharedStart {
    detail::SharedReadings& readings;
    const detail::ClockReader& clock;
    [[gnu::always_inline]] std::int64_t operator()() const noexcept {
      return readings.start(clock);
    }
  };

  // complete() with the end's reading from `now()`.
  template <class Now>
  void complete(Permit& permit, Outcome outcome, Now now) noexcept;
  // A release with nothing to hand over: the sample, and the histogram's record if asked.
  template <bool Histogram, class Now>
  void end_sampled(Permit& permit, Outcome outcome, Now now) noexcept;
  // Out of line: a release with waiters to look for or a partition (flags_).
  void complete_extras(Permit& permit, Outcome outcome) noexcept;
  void release_slot(std::uint32_t partition, std::uint8_t flags) noexcept;
  // Cold: a partitioned release, under the partitions' mutex, into the layout current now.
  void release_partitioned(std::uint32_t partition) noexcept;
  // The partition a call asks for: its index + 1, 0 for none; take() resolves it against the
  // partitions current then (one that no longer exists counts as none).
  static std::uint8_t partition_slot(LimitPartition partition) noexcept {
    return static_cast<std::uint8_t>(partition.index() + 1 > 0 ? partition.index() + 1 : 0);
  }
  // The window's maximum in flight, after an admission that made it `admitted`.
  void note_in_flight(std::int32_t admitted) noexcept;
  void count_rejection() noexcept;
  // Cold: disabled, bypass, or waiters may be queued.
  Permit try_acquire_special(CallClass cls, std::uint8_t partition) noexcept;
  template <class Start>
  Permit try_acquire_class(CallClass cls, Start start) noexcept;
  // The admissions above with the start from `start()` (ReadClock, SharedStart).
  template <class Start>
  Permit try_acquire_at(Start start) noexcept;
  template <class Start>
  Permit try_acquire_at(CallClass cls, Start start) noexcept;
  template <class Start>
  Permit try_acquire_at(LimitPartition partition, CallClass cls, Start start) noexcept;
  // A slot now if one is free and nobody of the class or above waits; counts nothing.
  Permit admit_now(CallClass cls, std::uint8_t partition = 0) noexcept;
  // One CAS loop: in flight below the class's share of the limit; 0 when full, else the count.
  // A partitioned limit checks the partition too, under the partitions' mutex; `tag` says
  // where the call counts (Permit::partition_).
  std::int32_t take(CallClass cls, std::uint8_t partition, std::uint32_t& tag) noexcept;
  std::int32_t take_plain(CallClass cls) noexcept;
  std::int32_t take_partitioned(CallClass cls, std::uint8_t partition, std::uint32_t& tag) noexcept;
  // The limit now; a paced limit reopens for the first call after its pause.
  std::int32_t open_limit() noexcept;
  void count_rejection(CallClass cls, RejectReason reason, std::uint8_t partition = 0) noexcept;
  // What begin_wait() decided under the queue's mutex: refused, granted at once (not queued,
  // never woken), or queued. A queued waiter may be granted, timed out or evicted on another
  // thread as soon as the mutex is released: only the mutex may read its end() after that.
  struct WaitStart {
    RejectReason refused = RejectReason::none;
    bool granted = false;
  };
  // Waiting, under the queue's mutex unless said otherwise.
  WaitStart begin_wait(detail::LimitWaiter& waiter, const Admission& admission) noexcept;
  // Takes the waiter off the queue with `end` unless its wait has ended already; either way
  // returns how it ended. Takes the mutex.
  detail::WaitEnd end_wait(detail::LimitWaiter& waiter, detail::WaitEnd end) noexcept;
  // Both return how many waiters they granted.
  int grant_locked(std::int64_t now, bool raise) noexcept;
  // The waiter the next slot goes to, its slot taken (`admitted` says the count); nullptr:
  // nobody may take one now. Without partitions and with them.
  detail::LimitWaiter* class_waiter(bool newest_first, std::int32_t& admitted,
                                    std::uint32_t& tag) noexcept;
  detail::LimitWaiter* partition_waiter(bool newest_first, std::int32_t& admitted,
                                        std::uint32_t& tag) noexcept;
  int grant_waiters(bool raise) noexcept;  // takes the mutex
  void end_locked(detail::LimitWaiter& waiter, detail::WaitEnd end, std::int64_t now) noexcept;
  int queue_bound() const noexcept;
  Permit permit_of(const detail::LimitWaiter& waiter) noexcept {
    return Permit(this, waiter.granted_at, waiter.admitted, waiter.granted_tag);
  }
  detail::WaitQueue* queue() const noexcept { return queue_.load(std::memory_order_acquire); }
  // Under partition_mutex_ (or the queue's mutex, which a layout change holds too).
  int resolve_partition(std::uint8_t partition) const noexcept;
  // Cold, reconfigure(): the new layout, the queue, the histogram, the flags.
  void apply_live(const AdaptiveLimitConfig& next, std::int64_t window_ticks);
  void apply_partitions(const AdaptiveLimitConfig& next, std::int64_t window_ticks);
  void record_sample(std::int64_t latency_ns, bool drop) noexcept;
  bool is_drop_current() const noexcept;
  [[noreturn]] void throw_rejected(RejectReason reason = RejectReason::limit) const;
  // Cold: the call that ends after the window did recomputes the limit or extends the window.
  // While the limit paces (a delay_target limit below 1), every call that ends comes here.
  void close_window(std::int64_t now, std::int64_t latency_ns) noexcept;
  // Cold: a paced limit is 0 between calls; the first call after the pause reopens it.
  Permit try_acquire_paced() noexcept;
  void pace(std::int64_t now, std::int64_t latency_ns) noexcept;
  void store_window_end(std::int64_t end) noexcept;
  // Cold, observe mode only: the limit (or the class's share) is full; counts what it would
  // have rejected and admits the call anyway.
  Permit over_limit(std::uint8_t partition = 0, bool partitioned = false) noexcept;

  // Read on every call, written once per window. Times are clock ticks (ClockReader).
  alignas(detail::kCacheLine) std::atomic<std::int32_t> limit_;
  std::atomic<std::uint8_t> flags_;  // kSpecial, kQueued, ...: one relaxed load per decision
  // observe mode: read only by a call the limit would reject; set by reconfigure().
  std::atomic<bool> observe_;
  // Each class's share of the limit in 16.16 fixed point (one relaxed load per admission).
  std::array<std::atomic<std::uint32_t>, kLimitedClasses> shares_;
  const detail::ClockReader clock_;
  std::atomic<std::int64_t> window_end_;
  std::int64_t window_ticks_;  // changed by reconfigure() while it holds the closing token
  // latency_histogram on (kHistogram): read by every call that ends with a sample. Never freed
  // before the limit: a call may still record into one that reconfigure() switched off.
  std::atomic<detail::LatencyHistogram*> latency_{nullptr};

  // Written on every admitted call.
  alignas(detail::kCacheLine) std::atomic<std::int32_t> in_flight_{0};
  // Read on every admitted call, written only when a window sees a new maximum: apart from
  // in_flight_, whose line the other cores keep taking back.
  alignas(detail::kCacheLine) std::atomic<std::int32_t> window_max_in_flight_{0};

  std::array<Stripe, detail::kThreadSlots> stripes_;

  // Cold from here on.
  alignas(detail::kCacheLine) std::atomic<std::uint64_t> shared_slot_rejected_{0};
  // Waiting: waiting_ is read by every release of a limit that waits, written under the
  // queue's mutex.
  alignas(detail::kCacheLine) std::atomic<std::int32_t> waiting_{0};
  // Made once calls may wait (the constructor or reconfigure()); kept from then on.
  std::atomic<detail::WaitQueue*> queue_{nullptr};
  std::unique_ptr<detail::WaitQueue> queue_owner_;
  std::atomic<std::int64_t> max_wait_ticks_;  // written under the queue's mutex
  // The partitions now (null: none) and what the calls admitted under an earlier layout count
  // in now (partition_remap_[layout][slot]: a slot of partitions_, or kUncounted). Guarded by
  // partition_mutex_; a change of layout holds the queue's mutex too.
  mutable std::mutex partition_mutex_;
  std::unique_ptr<detail::LimitPartitions> partitions_;
  std::uint32_t partition_layout_ = 0;
  std::vector<std::array<std::uint8_t, kMaxPartitions + 1>> partition_remap_;
  static constexpr std::uint8_t kUncounted = 0xff;
  std::array<std::atomic<std::uint64_t>, kRejectReasons> rejected_by_reason_{};
  std::array<std::atomic<std::uint64_t>, kLimitedClasses> rejected_by_class_{};
  std::atomic<std::uint64_t> waits_granted_{0};
  std::atomic<std::uint64_t> wait_time_ns_{0};
  std::atomic<std::uint64_t> granted_on_raise_{0};
  // A refusal as a value, named by the kind's descriptor (defined after it, below).
  Refusal refusal(RejectReason why) const noexcept;
  const std::string instance_id_;
  const std::shared_ptr<Clock> clock_owner_;
  const std::exception_ptr rejection_;
  const std::shared_ptr<detail::EventHub<LimitChangeEvent>> limit_change_listeners_;

  // Touched only by the thread that won the window close (ordered by window_end_).
  struct StripeTotals {
    std::uint64_t samples = 0;
    std::uint64_t latency_sum_ns = 0;
    std::uint64_t drops = 0;
  };
  std::array<StripeTotals, detail::kThreadSlots> consumed_{};
  // Live reconfiguration (cold): the config now; one reconfigure() at a time; what it keeps
  // alive that a call may still read (verdict caches, switched-off histograms).
  detail::LiveConfig<AdaptiveLimitConfig> live_config_;
  std::mutex reconfigure_mutex_;
  std::vector<std::unique_ptr<detail::StockVerdicts>> verdict_caches_;
  std::vector<std::unique_ptr<detail::LatencyHistogram>> histograms_;
  detail::LimitEstimator estimator_;

  // What snapshot() reports of the last window, published under a sequence lock.
  std::atomic<std::uint64_t> stats_sequence_{0};
  std::atomic<std::uint64_t> windows_{0};
  std::atomic<std::int64_t> window_latency_ns_{0};
  std::atomic<std::int64_t> long_latency_ns_{0};
  std::atomic<std::int32_t> last_window_max_in_flight_{0};
  std::atomic<bool> last_window_dropped_{false};
  std::atomic<std::uint64_t> last_window_samples_{0};
  std::atomic<std::uint64_t> samples_{0};
  std::atomic<std::uint64_t> limit_changes_{0};
  std::atomic<double> fractional_limit_{0.0};

  // Pacing: while the estimate is below 1 (delay_target only). Written by the closing thread;
  // paced_resume_ is read by rejected calls too.
  bool pacing_ = false;
  double share_ = 1.0;
  std::int64_t paced_window_end_ = 0;
  std::atomic<std::int64_t> paced_resume_{0};

  // Observe mode (cold: read by over_limit()).
  detail::StripedCounter would_reject_;
};

// ---- the hot path ------------------------------------------------------------------------

inline Permit AdaptiveLimit::try_acquire() noexcept { return try_acquire_at(ReadClock{clock_}); }

// try_acquire() with the start read by `start()`: the clock, or the reading a pipeline's outer
// policy took.
template <class Start>
[[gnu::always_inline]] inline Permit AdaptiveLimit::try_acquire_at(Start start) noexcept {
  if (flags_.load(std::memory_order_relaxed) & kSpecial) [[unlikely]]
    return try_acquire_special(CallClass::critical, 0);
  // relaxed: a slot guards no data; the count itself is all that is shared.
  std::int32_t running = in_flight_.load(std::memory_order_relaxed);
  do {
    const std::int32_t limit = limit_.load(std::memory_order_relaxed);
    if (running >= limit) [[unlikely]] {
      if (limit == 0) return try_acquire_paced();  // only a pacing limit is ever 0
      if (observe_.load(std::memory_order_relaxed)) return over_limit();
      count_rejection();
      return Permit();
    }
  } while (!in_flight_.compare_exchange_weak(running, running + 1, std::memory_order_relaxed,
                                             std::memory_order_relaxed));
  note_in_flight(running + 1);
  return Permit(this, start(), running + 1);
}

inline void AdaptiveLimit::note_in_flight(std::int32_t admitted) noexcept {
  // A new maximum is rare once a window is under way: one load, and a CAS only when it grows.
  std::int32_t seen = window_max_in_flight_.load(std::memory_order_relaxed);
  while (admitted > seen &&
         !window_max_in_flight_.compare_exchange_weak(seen, admitted, std::memory_order_relaxed)) {
  }
}

// always_inline (these two): the dispatch of a call that says no class and no partition, which
// GCC otherwise keeps as a call of its own (about 13 instructions on every admitted call).
[[gnu::always_inline]] inline Permit AdaptiveLimit::try_acquire(CallClass cls) noexcept {
  if (cls == CallClass::critical) return try_acquire();
  return try_acquire_at(cls, ReadClock{clock_});
}

template <class Start>
[[gnu::always_inline]] inline Permit AdaptiveLimit::try_acquire_at(CallClass cls,
                                                                   Start start) noexcept {
  if (cls == CallClass::critical) return try_acquire_at(start);
  if ((flags_.load(std::memory_order_relaxed) & kSpecial) || cls == CallClass::bypass) [[unlikely]]
    return try_acquire_special(cls, 0);
  return try_acquire_class(cls, start);
}

[[gnu::always_inline]] inline Permit AdaptiveLimit::try_acquire(LimitPartition partition,
                                                                CallClass cls) noexcept {
  if (!(flags_.load(std::memory_order_relaxed) & kSpecial)) [[likely]]
    return try_acquire(cls);  // no partitions
  return try_acquire_special(cls, partition_slot(partition));
}

template <class Start>
[[gnu::always_inline]] inline Permit AdaptiveLimit::try_acquire_at(LimitPartition partition,
                                                                   CallClass cls,
                                                                   Start start) noexcept {
  if (!(flags_.load(std::memory_order_relaxed) & kSpecial)) [[likely]]
    return try_acquire_at(cls, start);  // no partitions
  return try_acquire_special(cls, partition_slot(partition));
}

// The plain path with the class's share: one multiply more than try_acquire().
template <class Start>
inline Permit AdaptiveLimit::try_acquire_class(CallClass cls, Start start) noexcept {
  const std::uint64_t share = shares_[static_cast<int>(cls)].load(std::memory_order_relaxed);
  std::int32_t running = in_flight_.load(std::memory_order_relaxed);
  do {
    const std::int32_t limit = limit_.load(std::memory_order_relaxed);
    const auto allowed =
        static_cast<std::int32_t>((static_cast<std::uint64_t>(limit) * share) >> kShareShift);
    if (running >= allowed) [[unlikely]] {
      if (limit == 0) return try_acquire_paced();
      if (observe_.load(std::memory_order_relaxed)) return over_limit();
      count_rejection(cls, RejectReason::limit);
      return Permit();
    }
  } while (!in_flight_.compare_exchange_weak(running, running + 1, std::memory_order_relaxed,
                                             std::memory_order_relaxed));
  note_in_flight(running + 1);
  return Permit(this, start(), running + 1);
}

inline void AdaptiveLimit::release_slot(std::uint32_t partition, std::uint8_t flags) noexcept {
  if (partition != 0) {
    release_partitioned(partition);
    return;
  }
  if (!(flags & kQueued)) {
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  // seq_cst with begin_wait's increment of waiting_ and its take(): either this release sees
  // the new waiter or the waiter's take() sees the freed slot.
  in_flight_.fetch_sub(1, std::memory_order_seq_cst);
  if (waiting_.load(std::memory_order_seq_cst) != 0) [[unlikely]]
    grant_waiters(false);
}

inline void AdaptiveLimit::count_rejection() noexcept {
  const detail::ThreadSlot slot = detail::thread_slot();
  if (slot.exclusive) [[likely]] {
    std::atomic<std::uint64_t>& rejected = stripes_[slot.index].rejected;
    rejected.store(rejected.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  } else {
    shared_slot_rejected_.fetch_add(1, std::memory_order_relaxed);
  }
}

inline void AdaptiveLimit::record_sample(std::int64_t latency_ns, bool drop) noexcept {
  Stripe& stripe = stripes_[detail::thread_slot().index];
  // Plain load and store: the stripe has one writer (see detail/thread_slot.hpp).
  stripe.latency_sum_ns.store(stripe.latency_sum_ns.load(std::memory_order_relaxed) +
                                  static_cast<std::uint64_t>(latency_ns),
                              std::memory_order_relaxed);
  if (drop)
    stripe.drops.store(stripe.drops.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  // release: whoever sees this sample counted also sees its latency and drop.
  stripe.samples.store(stripe.samples.load(std::memory_order_relaxed) + 1,
                       std::memory_order_release);
}

inline void AdaptiveLimit::complete(Permit& permit, Outcome outcome) noexcept {
  complete(permit, outcome, ReadClock{clock_});
}

template <class Now>
inline void AdaptiveLimit::complete(Permit& permit, Outcome outcome, Now now) noexcept {
  if (permit.in_flight() == 0) return;  // disabled: nothing was counted
  // One test for waiters, the histogram and partitions: a plain limit pays for none of them.
  const std::uint8_t flags = flags_.load(std::memory_order_relaxed);
  if ((flags & kRelease) | permit.partition()) [[unlikely]] {
    // A histogram alone stays inline: out of line it cost target 19 its bound.
    if ((flags & kQueued) != 0 || permit.partition() != 0) {
      complete_extras(permit, outcome);
      return;
    }
    end_sampled<true>(permit, outcome, now);
    return;
  }
  end_sampled<false>(permit, outcome, now);
}

template <bool Histogram, class Now>
inline void AdaptiveLimit::end_sampled(Permit& permit, Outcome outcome, Now read_now) noexcept {
  if (outcome == Outcome::kIgnore) {
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  const std::int64_t now = read_now();
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
  const std::int64_t latency = clock_.to_ns(now - permit.start_);
  record_sample(latency > 0 ? latency : 0, outcome == Outcome::kDrop);
  if constexpr (Histogram) {
    // acquire: pairs with reconfigure()'s publication, so the histogram is seen made.
    if (detail::LatencyHistogram* histogram = latency_.load(std::memory_order_acquire))
      histogram->record(latency, now);
  }
  if (now >= window_end_.load(std::memory_order_relaxed)) [[unlikely]]
    close_window(now, latency);
}

inline void Permit::on_success() & noexcept {
  if (AdaptiveLimit* limit = std::exchange(limit_, nullptr))
    limit->complete(*this, AdaptiveLimit::Outcome::kSuccess);
}

inline void Permit::on_drop() & noexcept {
  if (AdaptiveLimit* limit = std::exchange(limit_, nullptr))
    limit->complete(*this, AdaptiveLimit::Outcome::kDrop);
}

inline void Permit::on_ignore() & noexcept {
  if (AdaptiveLimit* limit = std::exchange(limit_, nullptr))
    limit->complete(*this, AdaptiveLimit::Outcome::kIgnore);
}

template <class F>
decltype(auto) AdaptiveLimit::execute(F&& f) {
  return execute(CallClass::critical, LimitPartition{}, std::forward<F>(f));
}

template <class F>
decltype(auto) AdaptiveLimit::execute(CallClass cls, LimitPartition partition, F&& f) {
  RejectReason why = RejectReason::limit;
  Permit permit = waits() ? acquire(Admission{cls, partition}, &why) : try_acquire(partition, cls);
  if (!permit) [[unlikely]]
    throw_rejected(why);
  using Result = std::invoke_result_t<F>;
  try {
    if constexpr (std::is_void_v<Result>) {
      std::invoke(std::forward<F>(f));
      permit.on_success();
    } else {
      Result result = std::invoke(std::forward<F>(f));
      permit.on_success();
      if constexpr (std::is_reference_v<Result>) {
        return static_cast<Result>(result);
      } else {
        return result;
      }
    }
  } catch (...) {
    if (is_drop_current()) {
      permit.on_drop();
    } else {
      permit.on_ignore();
    }
    throw;
  }
}

inline int AdaptiveLimitHandle::limit() const noexcept { return policy().limit(); }
inline int AdaptiveLimitHandle::in_flight() const noexcept { return policy().in_flight(); }
inline Subscription AdaptiveLimitHandle::on_limit_change(
    std::function<void(const LimitChangeEvent&)> listener) const {
  return policy().on_limit_change(std::move(listener));
}

/// The adaptive limit as a policy kind: what the registry, the pipelines, the metrics and the tools
/// know of it (see <r4c/detail/setting.hpp>; <r4c/detail/kinds.hpp> lists the kinds).
struct AdaptiveLimitKind : detail::KindBase<AdaptiveLimit, LimitExceededException> {
  static constexpr KindNames kNames = {"adaptive_limit", "adaptiveLimit", "adaptive limit",
                                       "adaptivelimit"};
  /// Every setting the external file takes, in the documented order.
  static std::span<const detail::Setting<Config>> settings() noexcept;
  /// Appends the metrics of one instance's snapshot (docs/observability.md).
  static void metrics(const Snapshot& snapshot, metrics::Emitter& out);
};

inline Refusal AdaptiveLimit::refusal(RejectReason why) const noexcept {
  return Refusal(rejection(why), AdaptiveLimitKind::kNames.metrics, instance_id_);
}

}  // namespace r4c
