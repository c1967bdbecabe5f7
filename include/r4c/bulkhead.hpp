// SPDX-License-Identifier: Apache-2.0
// A fixed bulkhead: at most max_concurrent calls at once; a full bulkhead rejects at once.
//
// Use it when you know the right number (a pool of 10 connections, a licence for 4 sessions).
// Inside an adaptive limit, a full bulkhead is an overload signal: BulkheadFullException is a
// drop by default.
//
//   r4c::Bulkhead bulkhead("pool", r4c::BulkheadConfig().max_concurrent(10));
//   auto rows = bulkhead.execute([&] { return db.query(sql); });   // BulkheadFullException
//
// It publishes each call's permission, rejection and end (<r4c/events.hpp>) to whoever
// listens; while nobody listens for permissions and ends, an admitted call runs exactly the
// instructions of a bulkhead without events (the listening flag rides in the slot count).
//
//   r4c::Subscription s = bulkhead.on_call_rejected(
//       [](const r4c::BulkheadEvent& e) { log("{} full ({})", e.instance_id, e.max_concurrent); });
//
// Operating it (docs/operations.md): `mode = observe` lets every call through and counts in
// `would_have_rejected` the calls a full bulkhead would have refused; registry.reconfigure()
// changes maxConcurrent, maxWait and mode of a live bulkhead (calls in flight and waiters are
// kept); `latencyHistogram = true` records how long calls hold their slot.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>

#include "r4c/adaptive_limit_config.hpp"  // PolicyMode
#include "r4c/clock.hpp"
#include "r4c/detail/cache_line.hpp"
#include "r4c/detail/event_hub.hpp"
#include "r4c/detail/handle.hpp"
#include "r4c/detail/live_config.hpp"
#include "r4c/detail/setting.hpp"
#include "r4c/detail/striped_counter.hpp"
#include "r4c/errors.hpp"
#include "r4c/events.hpp"
#include "r4c/exception_type.hpp"
#include "r4c/latency_histogram.hpp"

namespace r4c {

/// Settings of a bulkhead.
class BulkheadConfig {
 public:
  static constexpr int kDefaultMaxConcurrent = 25;

  /// Most calls at once (25). Throws R4C-ATR-003 below 1.
  BulkheadConfig& max_concurrent(int value);
  int max_concurrent() const noexcept { return max_concurrent_; }
  /// How long execute() and acquire() wait for a slot of a full bulkhead (resilience4j's
  /// maxWaitDuration): 0, the default, rejects at once. Waiters get freed slots oldest first,
  /// and while anyone waits a newcomer never takes a slot (try_acquire() is rejected). Throws
  /// R4C-REG-001 outside 0 .. 1 h.
  BulkheadConfig& max_wait(std::chrono::nanoseconds value);
  std::chrono::nanoseconds max_wait() const noexcept { return max_wait_; }
  /// observe: a full bulkhead lets the call through anyway (it holds a slot beyond
  /// max_concurrent) and counts it in `would_have_rejected`; enforce (the default) rejects it.
  /// validate() refuses observe with max_wait above 0 (R4C-ATR-009): an observing bulkhead
  /// lets a call through instead of making it wait.
  BulkheadConfig& mode(PolicyMode value) noexcept;
  PolicyMode mode() const noexcept { return mode_; }
  /// Records how long each call holds its slot in a latency histogram
  /// (<r4c/latency_histogram.hpp>): snapshot().latency and a Prometheus histogram. Off by default;
  /// changes live (Bulkhead::reconfigure()).
  BulkheadConfig& latency_histogram(bool value) noexcept;
  bool latency_histogram() const noexcept { return latency_histogram_; }
  /// Checks every setting; throws ConfigException.
  void validate() const;

 private:
  int max_concurrent_ = kDefaultMaxConcurrent;
  std::chrono::nanoseconds max_wait_{0};
  PolicyMode mode_ = PolicyMode::enforce;
  bool latency_histogram_ = false;
};

std::optional<SettingDifference> first_difference(const BulkheadConfig& first,
                                                  const BulkheadConfig& second);

/// Why a bulkhead refused a call. full: no slot, and the call could not wait (no max_wait,
/// or try_acquire()); wait_timeout: max_wait passed; cancelled: its stop token or Asio
/// cancellation ended its wait.
enum class BulkheadRejectReason : std::uint8_t { full, wait_timeout, cancelled };
inline constexpr int kBulkheadRejectReasons = 3;

inline constexpr EnumName<BulkheadRejectReason> kBulkheadRejectReasonNames[] = {
    {"full", BulkheadRejectReason::full},
    {"wait_timeout", BulkheadRejectReason::wait_timeout},
    {"cancelled", BulkheadRejectReason::cancelled}};
constexpr std::span<const EnumName<BulkheadRejectReason>> enum_names(
    BulkheadRejectReason) noexcept {
  return kBulkheadRejectReasonNames;
}

struct BulkheadSnapshot {
  int max_concurrent = 0;
  int in_flight = 0;
  int available = 0;           // max_concurrent - in_flight, never below 0
  std::uint64_t rejected = 0;  // exact
  // Waiting (max_wait above 0; all 0 otherwise).
  int waiting = 0;                        // callers waiting for a slot now
  std::uint64_t waits_granted = 0;        // waits that ended with a slot
  std::chrono::nanoseconds wait_time{0};  // total time granted waits waited
  /// Rejections by BulkheadRejectReason; they sum to `rejected`.
  std::array<std::uint64_t, kBulkheadRejectReasons> rejected_by_reason{};
  /// observe mode: calls a full bulkhead would have rejected and let through (never in
  /// `rejected`).
  std::uint64_t would_have_rejected = 0;
  PolicyMode mode = PolicyMode::enforce;
  /// How long calls held their slot (latencyHistogram on; the window is one second).
  LatencyDistribution latency;
};

class Bulkhead;

namespace detail {
/// One caller waiting for a bulkhead's slot (max_wait): a synchronous caller's, on its stack,
/// or an asynchronous call's, in its state. Its members are the queue's, under the queue's
/// mutex, while it is listed; whoever takes it off the list (a release handing it the slot,
/// its timer, its caller's cancellation) sets its state and wakes it, once.
class BulkheadWaiter {
 public:
  enum class State : std::uint8_t { pending, waiting, granted, timed_out, cancelled };
  BulkheadWaiter() = default;
  BulkheadWaiter(const BulkheadWaiter&) = delete;
  BulkheadWaiter& operator=(const BulkheadWaiter&) = delete;
  /// Called once, under the queue's mutex, right after `state` was set. Must not call into
  /// the bulkhead.
  virtual void wake() noexcept = 0;

  BulkheadWaiter* next = nullptr;
  BulkheadWaiter* prev = nullptr;
  State state = State::pending;
  std::chrono::nanoseconds since{0};  // on the bulkhead's clock, when it began waiting

 protected:
  ~BulkheadWaiter() = default;
};
struct BulkheadQueueAccess;
}  // namespace detail

/// A slot in a bulkhead; released when destroyed or by release(). Move-only.
class [[nodiscard]] BulkheadPermit {
 public:
  BulkheadPermit() noexcept = default;
  BulkheadPermit(BulkheadPermit&& other) noexcept
      : bulkhead_(std::exchange(other.bulkhead_, nullptr)),
        announce_(other.announce_),
        since_(other.since_) {}
  BulkheadPermit& operator=(BulkheadPermit&& other) noexcept {
    if (this != &other) {
      release();
      bulkhead_ = std::exchange(other.bulkhead_, nullptr);
      announce_ = other.announce_;
      since_ = other.since_;
    }
    return *this;
  }
  BulkheadPermit(const BulkheadPermit&) = delete;
  BulkheadPermit& operator=(const BulkheadPermit&) = delete;
  ~BulkheadPermit() { release(); }

  explicit operator bool() const noexcept { return bulkhead_ != nullptr; }
  void release() noexcept;

 private:
  friend class Bulkhead;
  BulkheadPermit(Bulkhead* bulkhead, bool announce, std::int64_t since) noexcept
      : bulkhead_(bulkhead), announce_(announce), since_(since) {}
  Bulkhead* bulkhead_ = nullptr;
  // Whether call_finished had listeners when the slot was taken (or the bulkhead waits): the
  // release then takes the out-of-line path, and a release nobody listens to reads nothing of
  // the bulkhead's but its count (and, when stamped, its histogram).
  bool announce_ = false;
  // latencyHistogram: when the slot was taken, in the bulkhead's ClockReader ticks
  // (kUnstamped: it was off then).
  std::int64_t since_ = 0;
};

/// A view of a bulkhead for operators and tests. Valid while the bulkhead lives.
class BulkheadHandle : public detail::HandleBase<Bulkhead> {
 public:
  using HandleBase::HandleBase;
  int in_flight() const noexcept;
  int max_concurrent() const noexcept;
  /// Bulkhead::on_call_permitted, on_call_rejected and on_call_finished.
  Subscription on_call_permitted(std::function<void(const BulkheadEvent&)> listener) const;
  Subscription on_call_rejected(std::function<void(const BulkheadEvent&)> listener) const;
  Subscription on_call_finished(std::function<void(const BulkheadEvent&)> listener) const;
};

/// At most max_concurrent calls at once. Lock-free; no allocation per call. With max_wait set,
/// execute() and acquire() wait for a slot on the bulkhead's clock (the registry's), under one
/// mutex that only a bulkhead that has had a max_wait takes (reconfigure()).
/// Thread safety: every member may be called from any number of threads.
class Bulkhead {
 public:
  /// `clock` times the waits of max_wait (a SystemClock when null).
  explicit Bulkhead(std::string instance_id, BulkheadConfig config = {},
                    std::shared_ptr<Clock> clock = nullptr);
  ~Bulkhead();
  Bulkhead(const Bulkhead&) = delete;
  Bulkhead& operator=(const Bulkhead&) = delete;

  /// Takes a slot, or returns an empty permit when full (counted in `rejected`). Publishes
  /// call_permitted or call_rejected to their listeners, if any, on this thread.
  BulkheadPermit try_acquire() noexcept { return take(false); }

 private:
  // may_wait: execute()'s, which a bulkhead with max_wait lets wait on its slow path.
  BulkheadPermit take(bool may_wait) noexcept {
    std::int32_t running = in_flight_.load(std::memory_order_relaxed);
    do {
      // A listened-to bulkhead's count carries kListened, above any max_concurrent: its calls
      // and the full bulkhead's take the one out-of-line branch, the others the path of a
      // bulkhead without events (a histogram's too: it only stamps the permit).
      // relaxed: reconfigure() may change the limit; a call sees the old or the new one.
      if (running >= max_concurrent_.load(std::memory_order_relaxed)) [[unlikely]]
        return acquire_slowly(may_wait);
      // relaxed: a slot guards no data.
    } while (!in_flight_.compare_exchange_weak(running, running + 1, std::memory_order_relaxed,
                                               std::memory_order_relaxed));
    return BulkheadPermit(this, false, stamp());
  }

 public:
  /// Runs `f` in a slot; when full, throws this bulkhead's BulkheadFullException (one
  /// preallocated object) without calling `f`.
  template <class F>
  decltype(auto) execute(F&& f) {
    BulkheadPermit permit = take(true);
    if (!permit) [[unlikely]]
      throw_full();
    return std::invoke(std::forward<F>(f));
  }
  /// execute() without a throw to say no (<r4c/outcome.hpp>): a full bulkhead returns a
  /// refusal; `f` (returning a value or an Outcome) ends as an Outcome.
  template <class F>
  detail::OutcomeOf<F> try_execute(F&& f) {
    BulkheadPermit permit = take(true);
    if (!permit) [[unlikely]]
      return detail::OutcomeOf<F>::refused(refusal());
    return detail::invoke_outcome(f);
  }

  /// Takes a slot, waiting up to max_wait for one (FIFO) until `stop` is requested; an empty
  /// permit when none came (counted in `rejected`, published as call_rejected). Without
  /// max_wait: try_acquire().
  BulkheadPermit acquire(std::stop_token stop = {}) noexcept;

  /// Runs the Asio operation `op` in a slot held until it completes, completing `token` with
  /// void(std::exception_ptr, T). With max_wait set, a call that finds the bulkhead full
  /// waits for a slot (FIFO, handed over by a release) holding no thread, its wait timed on
  /// the bulkhead's clock and ended by the caller's cancellation (terminal or partial:
  /// operation_aborted). Defined in <r4c/asio.hpp>; see docs/async.md.
  template <class T, class Op, class Token>
  auto async_execute(Op&& op, Token&& token);

  /// Throws this bulkhead's BulkheadFullException.
  [[noreturn]] void throw_full() const;
  /// The BulkheadFullException a full bulkhead fails calls with (one object, shared), for an
  /// asynchronous call, which completes with it instead of throwing it.
  const std::exception_ptr& rejection() const noexcept { return full_; }

  BulkheadHandle handle() const noexcept { return BulkheadHandle(*this); }
  const std::string& instance_id() const noexcept { return instance_id_; }
  /// The config now (reconfigure() replaces it).
  const BulkheadConfig& config() const noexcept { return config_.get(); }
  /// The slots now: max_concurrent of the config now, capped at 2^30 - 1.
  int max_concurrent() const noexcept { return max_concurrent_.load(std::memory_order_relaxed); }
  /// Whether calls may wait for a slot (max_wait above 0 now).
  bool waits() const noexcept { return config().max_wait().count() > 0; }
  /// The clock the bulkhead times its waits and latencies on (a SystemClock when none was given).
  const std::shared_ptr<Clock>& clock() const noexcept { return clock_; }
  int in_flight() const noexcept {
    return in_flight_.load(std::memory_order_relaxed) & (kListened - 1);
  }
  BulkheadSnapshot snapshot() const;

  /// Takes a new config on a live bulkhead (what registry.reconfigure() calls): validates it
  /// (ConfigException, nothing changed). A higher max_concurrent hands the new slots to the
  /// oldest waiters at once; a lower one lets the calls in flight finish (no new call gets a
  /// slot until they are below it) and keeps the waiters waiting. A new max_wait applies to
  /// the waits that start after it; once a bulkhead has waited, its calls keep taking the
  /// waiting bulkhead's path. latencyHistogram on (the histogram is made here, the first time)
  /// records the calls that take their slot after it; off stops recording at once (snapshot()
  /// and the metrics show no latency while it is off) and lets the calls go the short way
  /// again when nothing else listens; on again resumes the same histogram, whose one-second
  /// window has aged out what is old. Allocation: yes.
  void reconfigure(const BulkheadConfig& next);

  /// Calls `listener` for every call that takes a slot, on the caller's thread, until the
  /// Subscription ends (see <r4c/events.hpp>). The three kinds of event have their own
  /// listeners: listening for one costs the others nothing.
  Subscription on_call_permitted(std::function<void(const BulkheadEvent&)> listener) const;
  /// Likewise for every call a full bulkhead rejects.
  Subscription on_call_rejected(std::function<void(const BulkheadEvent&)> listener) const;
  /// Likewise for every permitted call when it gives its slot back (the permit's release,
  /// on the thread that releases it), for the calls that took their slot after it subscribed.
  Subscription on_call_finished(std::function<void(const BulkheadEvent&)> listener) const;

 private:
  friend class BulkheadPermit;
  friend struct detail::BulkheadQueueAccess;
  using Listeners = detail::EventHub<BulkheadEvent>;
  using WaitState = detail::BulkheadWaiter::State;

  // Bits of listening_, one per type of event.
  static constexpr std::uint8_t kPermitted = 1;
  static constexpr std::uint8_t kRejected = 2;
  static constexpr std::uint8_t kFinished = 4;
  // In in_flight_ while call_permitted or call_finished may have listeners, above every count
  // (max_concurrent_ is the setting capped below it: 2^30 calls at once never happen); the
  // count is the bits below.
  static constexpr std::int32_t kListened = std::int32_t{1} << 30;

  // Whether the type may have listeners: set when one subscribes, cleared by the first
  // publication that finds none. relaxed: an event racing a subscription may go either way.
  bool listening(std::uint8_t type) const noexcept {
    return (listening_.load(std::memory_order_relaxed) & type) != 0;
  }
  Subscription subscribe(Listeners& listeners, std::uint8_t type,
                         std::function<void(const BulkheadEvent&)> listener) const;
  // Out of line: a full bulkhead, or one whose permissions or ends are listened to.
  BulkheadPermit acquire_slowly(bool may_wait) noexcept;
  BulkheadPermit wait_for_slot(bool may_wait, const std::stop_token& stop) noexcept;
  // Clears `bit` (and kListened when no permission or end is listened to any more) once its
  // listeners have gone; false when they had.
  bool forget(const Listeners& listeners, std::uint8_t bit) const noexcept;
  // Nothing listens on the admitted path: clears kListened unless the bulkhead waits, or a
  // subscription comes meanwhile.
  void unlisten() const noexcept;
  void publish(const Listeners& listeners, std::uint8_t bit, BulkheadEventType type,
               std::int32_t in_flight) const noexcept;
  void finish(bool announce, std::int64_t since) noexcept {
    if (announce) [[unlikely]] {
      finish_announced(since);
      return;
    }
    if (since != kUnstamped) record_latency(since);
    // A count with kListened: the bulkhead has begun to wait, or is listened to, since the
    // slot was taken (the result of the subtraction costs nothing more).
    if (in_flight_.fetch_sub(1, std::memory_order_relaxed) >= kListened) [[unlikely]]
      released_listened();
  }
  void finish_announced(std::int64_t since) noexcept;
  // Inline: with a histogram on, every call records, and an out-of-line call on each end cost
  // more than the record (docs/performance.md, target 25).
  void record_latency(std::int64_t since) noexcept {
    // acquire: pairs with reconfigure()'s store, so the histogram is seen made. Off since the
    // permit was stamped: nothing is recorded.
    if (detail::LatencyHistogram* latency = latency_.load(std::memory_order_acquire)) {
      const std::int64_t now = reader_.ticks();
      latency->record(reader_.to_ns(now - since), now);
    }
  }
  void released_listened() noexcept;
  // max_wait: the waiters and the mutex that guards them and every change of the count.
  struct WaitQueue;
  BulkheadPermit admitted(std::int32_t running) noexcept;  // publishes call_permitted
  // Counts, publishes call_rejected.
  BulkheadPermit refused(std::int32_t running,
                         BulkheadRejectReason reason = BulkheadRejectReason::full) noexcept;
  // max_wait: what begin_wait() decided under the mutex. granted: the slot is counted for the
  // waiter (never queued, never woken); refused: its caller had cancelled; else queued. Either
  // way the caller counts and publishes the outcome itself, as it answers.
  struct WaitStart {
    WaitState state = WaitState::pending;
    std::int32_t running = 0;
  };
  WaitStart begin_wait(detail::BulkheadWaiter& waiter, bool stopped) noexcept;
  // Ends the wait with `end` unless it has ended; returns how it ended (under the mutex).
  WaitState end_wait(detail::BulkheadWaiter& waiter, WaitState end) noexcept;
  // A slot now, when one is free and nobody waits (in observe mode, always: counted in
  // would_have_rejected when it was not free); counts nothing otherwise.
  BulkheadPermit admit_now() noexcept;
  // Under the queue's mutex: hands every free slot to the oldest waiters.
  void grant_free_slots() noexcept;
  bool waits_now() const noexcept { return waits_.load(std::memory_order_relaxed); }
  // A permit taken while latencyHistogram was off: its release records nothing.
  static constexpr std::int64_t kUnstamped = std::numeric_limits<std::int64_t>::min();
  // A latency's start in the reader's ticks: the time stamp counter itself where the clock is
  // a SystemClock on it, so that timing a call costs two counter reads and one conversion.
  std::int64_t stamp() const noexcept {
    // relaxed: only whether to read the clock; the record loads the histogram with acquire.
    return latency_.load(std::memory_order_relaxed) != nullptr ? reader_.ticks() : kUnstamped;
  }

  // The calls holding a slot, and kListened (set by a const subscription: mutable).
  alignas(detail::kCacheLine) mutable std::atomic<std::int32_t> in_flight_{0};
  // Read by every call, written by reconfigure() only: apart from the slot count's line.
  alignas(detail::kCacheLine) std::atomic<std::int32_t> max_concurrent_;
  std::atomic<bool> observe_;
  // latencyHistogram: the histogram while on, nullptr while off; read by every call (to stamp
  // its permit), beside max_concurrent_. The histogram itself is latency_owned_, below.
  std::atomic<detail::LatencyHistogram*> latency_{nullptr};
  // Read only off the admitted path (acquire_slowly and the announced release).
  mutable std::atomic<std::uint8_t> listening_{0};
  const std::shared_ptr<Listeners> permitted_listeners_;
  const std::shared_ptr<Listeners> rejected_listeners_;
  const std::shared_ptr<Listeners> finished_listeners_;
  // A refusal as a value, named by the kind's descriptor (defined after it, below).
  Refusal refusal() const noexcept;
  const std::string instance_id_;
  detail::LiveConfig<BulkheadConfig> config_;
  const std::exception_ptr full_;
  detail::StripedCounter rejected_;
  detail::StripedCounter would_reject_;
  // max_wait has been above 0: its calls pass the mutex (kListened stays set). Set once, under
  // the queue's mutex, never cleared (a waiter listed then is served by the mutex path).
  std::atomic<bool> waits_;
  const std::shared_ptr<Clock> clock_;
  const detail::ClockReader reader_;  // clock_, read without a virtual call
  const std::unique_ptr<WaitQueue> queue_;
  // latencyHistogram: the histogram, made the first time it is on and kept (a release may be
  // recording into it when it goes off).
  std::unique_ptr<detail::LatencyHistogram> latency_owned_;  // under reconfigure_mutex_
  std::mutex reconfigure_mutex_;                             // one reconfiguration at a time (cold)
};

inline void BulkheadPermit::release() noexcept {
  if (Bulkhead* bulkhead = std::exchange(bulkhead_, nullptr)) bulkhead->finish(announce_, since_);
}

inline int BulkheadHandle::in_flight() const noexcept { return policy().in_flight(); }
inline int BulkheadHandle::max_concurrent() const noexcept {
  return policy().config().max_concurrent();
}
inline Subscription BulkheadHandle::on_call_permitted(
    std::function<void(const BulkheadEvent&)> listener) const {
  return policy().on_call_permitted(std::move(listener));
}
inline Subscription BulkheadHandle::on_call_rejected(
    std::function<void(const BulkheadEvent&)> listener) const {
  return policy().on_call_rejected(std::move(listener));
}
inline Subscription BulkheadHandle::on_call_finished(
    std::function<void(const BulkheadEvent&)> listener) const {
  return policy().on_call_finished(std::move(listener));
}

/// The bulkhead as a policy kind: what the registry, the pipelines, the metrics and the tools
/// know of it (see <r4c/detail/setting.hpp>; <r4c/detail/kinds.hpp> lists the kinds).
struct BulkheadKind : detail::KindBase<Bulkhead, BulkheadFullException> {
  static constexpr KindNames kNames = {"bulkhead", "bulkhead", "bulkhead", "bulkhead"};
  /// Every setting the external file takes, in the documented order.
  static std::span<const detail::Setting<Config>> settings() noexcept;
  /// Appends the metrics of one instance's snapshot (docs/observability.md).
  static void metrics(const Snapshot& snapshot, metrics::Emitter& out);
};

inline Refusal Bulkhead::refusal() const noexcept {
  return Refusal(full_, BulkheadKind::kNames.metrics, instance_id_);
}

}  // namespace r4c
