// SPDX-License-Identifier: Apache-2.0
#include "r4c/bulkhead.hpp"

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "config_check.hpp"
#include "kind_settings.hpp"
#include "observe_metrics.hpp"
#include "r4c/metrics.hpp"

namespace r4c {

BulkheadConfig& BulkheadConfig::max_concurrent(int value) {
  if (value < 1)
    detail::fail(detail::kLimitBelowOne, "max_concurrent", detail::show(value), "an integer >= 1");
  return detail::store(*this, max_concurrent_, value);
}

BulkheadConfig& BulkheadConfig::max_wait(std::chrono::nanoseconds value) {
  if (value < std::chrono::nanoseconds(0) || value > std::chrono::hours(1))
    detail::fail(detail::kInvalidValue, "max_wait", detail::show(value),
                 "0 .. 1 h (0: a full bulkhead rejects at once)");
  return detail::store(*this, max_wait_, value);
}

BulkheadConfig& BulkheadConfig::mode(PolicyMode value) noexcept {
  return detail::store(*this, mode_, value);
}

BulkheadConfig& BulkheadConfig::latency_histogram(bool value) noexcept {
  return detail::store(*this, latency_histogram_, value);
}

void BulkheadConfig::validate() const {
  BulkheadConfig().max_concurrent(max_concurrent_).max_wait(max_wait_);
  detail::check_no_wait_when_observing(
      mode_ == PolicyMode::observe, "max_wait", max_wait_,
      "an observing bulkhead lets a call through instead of making it wait");
}

std::optional<SettingDifference> first_difference(const BulkheadConfig& first,
                                                  const BulkheadConfig& second) {
  // In the order it has always compared them (the table lists mode last).
  return detail::settings_difference<BulkheadKind>(
      first, second, {"max_concurrent", "max_wait", "mode", "latency_histogram"});
}

namespace {

// A synchronous waiter, on its caller's stack, blocked on its own condition variable.
class SyncWaiter final : public detail::BulkheadWaiter {
 public:
  // Under the queue's mutex, which the waiter waits with: it cannot leave before this returns.
  void wake() noexcept override { woken.notify_one(); }
  std::condition_variable woken;
};

BulkheadRejectReason reason_of(detail::BulkheadWaiter::State state) noexcept {
  return state == detail::BulkheadWaiter::State::timed_out ? BulkheadRejectReason::wait_timeout
                                                           : BulkheadRejectReason::cancelled;
}

}  // namespace

struct Bulkhead::WaitQueue {
  std::mutex mutex;
  detail::BulkheadWaiter* head = nullptr;  // oldest first
  detail::BulkheadWaiter* tail = nullptr;
  int size = 0;
  // The wait's figures (snapshot()); relaxed, each alone.
  std::atomic<std::uint64_t> waits_granted{0};
  std::atomic<std::int64_t> wait_ns{0};
  std::array<std::atomic<std::uint64_t>, kBulkheadRejectReasons> rejected{};

  void push(detail::BulkheadWaiter& w) noexcept {
    ++size;
    w.prev = tail;
    (tail != nullptr ? tail->next : head) = &w;
    tail = &w;
  }
  void remove(detail::BulkheadWaiter& w) noexcept {
    --size;
    (w.prev != nullptr ? w.prev->next : head) = w.next;
    (w.next != nullptr ? w.next->prev : tail) = w.prev;
    w.prev = w.next = nullptr;
  }
  // Ends a listed waiter's wait with `state` and wakes it (under the mutex).
  void end(detail::BulkheadWaiter& w, detail::BulkheadWaiter::State state) noexcept {
    remove(w);
    w.state = state;
    w.wake();
  }
};

// A latency histogram's window (the bulkhead has no window of its own).
constexpr std::chrono::nanoseconds kLatencyWindow = std::chrono::seconds(1);

Bulkhead::Bulkhead(std::string instance_id, BulkheadConfig config, std::shared_ptr<Clock> clock)
    : max_concurrent_(std::min(detail::validated(config).max_concurrent(), kListened - 1)),
      observe_(config.mode() == PolicyMode::observe),
      permitted_listeners_(std::make_shared<Listeners>(BulkheadKind::kNames.metrics)),
      rejected_listeners_(std::make_shared<Listeners>(BulkheadKind::kNames.metrics)),
      finished_listeners_(std::make_shared<Listeners>(BulkheadKind::kNames.metrics)),
      instance_id_(std::move(instance_id)),
      config_(config),
      full_(std::make_exception_ptr(BulkheadFullException(
          instance_id_, "bulkhead '" + instance_id_ + "' is full (max_concurrent " +
                            std::to_string(config.max_concurrent()) +
                            "): the call was rejected without running"))),
      waits_(config.max_wait().count() > 0),
      clock_(clock ? std::move(clock) : std::make_shared<SystemClock>()),
      reader_(clock_.get()),
      // Always there: reconfigure() may give a bulkhead that did not wait a max_wait.
      queue_(std::make_unique<WaitQueue>()),
      latency_owned_(config.latency_histogram()
                         ? std::make_unique<detail::LatencyHistogram>(
                               reader_.to_ticks(kLatencyWindow.count()), reader_.ticks())
                         : nullptr) {
  latency_.store(latency_owned_.get(), std::memory_order_relaxed);
  // Every call of a bulkhead that waits takes the out-of-line path, which counts under the
  // queue's mutex, and every release hands its slot to the oldest waiter there.
  if (waits_now()) in_flight_.fetch_or(kListened, std::memory_order_relaxed);
}

Bulkhead::~Bulkhead() = default;

BulkheadPermit Bulkhead::admitted(std::int32_t running) noexcept {
  const std::uint8_t listening = listening_.load(std::memory_order_relaxed);
  if ((listening & kPermitted) != 0)
    publish(*permitted_listeners_, kPermitted, BulkheadEventType::call_permitted, running);
  // A waiting bulkhead's releases always take the announced path (they hand slots over).
  const bool announce =
      waits_now() || ((listening & kFinished) != 0 && !forget(*finished_listeners_, kFinished));
  return BulkheadPermit(this, announce, stamp());
}

BulkheadPermit Bulkhead::refused(std::int32_t running, BulkheadRejectReason reason) noexcept {
  rejected_.increment();
  if (waits_now())
    queue_->rejected[static_cast<int>(reason)].fetch_add(1, std::memory_order_relaxed);
  if (listening(kRejected))
    publish(*rejected_listeners_, kRejected, BulkheadEventType::call_rejected, running);
  return BulkheadPermit();
}

BulkheadPermit Bulkhead::acquire(std::stop_token stop) noexcept {
  if (!waits()) return try_acquire();
  return wait_for_slot(true, stop);
}

BulkheadPermit Bulkhead::admit_now() noexcept {
  std::unique_lock lock(queue_->mutex);
  const std::int32_t running = in_flight_.load(std::memory_order_relaxed) & (kListened - 1);
  // No barging: a free slot is a newcomer's only while nobody waits.
  if (queue_->head != nullptr || running >= max_concurrent()) {
    if (!observe_.load(std::memory_order_relaxed)) return BulkheadPermit();
    would_reject_.increment();
  }
  in_flight_.fetch_add(1, std::memory_order_relaxed);
  lock.unlock();
  return admitted(running + 1);
}

Bulkhead::WaitStart Bulkhead::begin_wait(detail::BulkheadWaiter& waiter, bool stopped) noexcept {
  WaitQueue& queue = *queue_;
  std::scoped_lock lock(queue.mutex);
  std::int32_t running = in_flight_.load(std::memory_order_relaxed) & (kListened - 1);
  if (waiter.state != WaitState::pending) return {waiter.state, running};  // cancelled first
  // Slots left free by releases off the mutex path (before the bulkhead waited) go to the
  // waiters before this caller.
  if (queue.head != nullptr && running < max_concurrent()) {
    grant_free_slots();
    running = in_flight_.load(std::memory_order_relaxed) & (kListened - 1);
  }
  if (queue.head == nullptr && running < max_concurrent()) {
    in_flight_.fetch_add(1, std::memory_order_relaxed);
    waiter.state = WaitState::granted;
    return {WaitState::granted, running + 1};
  }
  if (stopped) {
    waiter.state = WaitState::cancelled;
    return {WaitState::cancelled, running};
  }
  waiter.since = clock_->now();
  waiter.state = WaitState::waiting;
  queue.push(waiter);
  return {WaitState::waiting, running};
}

Bulkhead::WaitState Bulkhead::end_wait(detail::BulkheadWaiter& waiter, WaitState end) noexcept {
  std::scoped_lock lock(queue_->mutex);
  if (waiter.state == WaitState::waiting) {
    queue_->end(waiter, end);
  } else if (waiter.state == WaitState::pending) {
    waiter.state = end;  // not queued yet: begin_wait() will not queue it
  }
  return waiter.state;
}

BulkheadPermit Bulkhead::wait_for_slot(bool may_wait, const std::stop_token& stop) noexcept {
  // The wait's length now: reconfigure() may have set it to 0 since the bulkhead waited.
  const std::chrono::nanoseconds max_wait = config().max_wait();
  if (!may_wait || max_wait.count() == 0) {
    // try_acquire() never waits: the free slot of a bulkhead nobody waits for, or a refusal.
    BulkheadPermit permit = admit_now();
    if (!permit) return refused(in_flight());
    return permit;
  }
  SyncWaiter me;
  const WaitStart start = begin_wait(me, stop.stop_requested());
  if (start.state == WaitState::granted) return admitted(start.running);
  if (start.state != WaitState::waiting) return refused(start.running, reason_of(start.state));
  // Whoever ends the wait first (a release, the timer, the stop token) does it under the mutex.
  class Timer final : public TimerTask {
   public:
    Timer(Bulkhead& bulkhead, SyncWaiter& waiter) noexcept : bulkhead_(bulkhead), waiter_(waiter) {}
    void fire() noexcept override { (void)bulkhead_.end_wait(waiter_, WaitState::timed_out); }

   private:
    Bulkhead& bulkhead_;
    SyncWaiter& waiter_;
  } timer(*this, me);
  bool scheduled = true;
  try {
    clock_->schedule(timer, me.since + max_wait);
  } catch (...) {
    scheduled = false;  // no timer (std::bad_alloc): the wait ends at once
    (void)end_wait(me, WaitState::timed_out);
  }
  std::int32_t running = 0;
  {
    std::stop_callback on_stop(stop, [&]() noexcept { (void)end_wait(me, WaitState::cancelled); });
    std::unique_lock lock(queue_->mutex);
    me.woken.wait(lock, [&] { return me.state != WaitState::waiting; });
    running = in_flight_.load(std::memory_order_relaxed) & (kListened - 1);
  }
  if (scheduled) (void)clock_->cancel(timer);  // returns once its fire() has, if it fired
  // Granted: the releaser kept the slot counted for this caller.
  if (me.state == WaitState::granted) return admitted(running);
  return refused(running, reason_of(me.state));
}

void Bulkhead::throw_full() const { std::rethrow_exception(full_); }

Subscription Bulkhead::subscribe(Listeners& listeners, std::uint8_t type,
                                 std::function<void(const BulkheadEvent&)> listener) const {
  Subscription subscription = listeners.subscribe(std::move(listener));
  // After the subscription: a publication that cleared the bits since sees them set again.
  // A rejection is off the admitted path already; permissions and ends send the calls there.
  listening_.fetch_or(type, std::memory_order_seq_cst);
  if (type != kRejected) in_flight_.fetch_or(kListened, std::memory_order_seq_cst);
  return subscription;
}

Subscription Bulkhead::on_call_permitted(std::function<void(const BulkheadEvent&)> listener) const {
  return subscribe(*permitted_listeners_, kPermitted, std::move(listener));
}

Subscription Bulkhead::on_call_rejected(std::function<void(const BulkheadEvent&)> listener) const {
  return subscribe(*rejected_listeners_, kRejected, std::move(listener));
}

Subscription Bulkhead::on_call_finished(std::function<void(const BulkheadEvent&)> listener) const {
  return subscribe(*finished_listeners_, kFinished, std::move(listener));
}

BulkheadPermit Bulkhead::acquire_slowly(bool may_wait) noexcept {
  if (waits_now()) return wait_for_slot(may_wait, std::stop_token());
  std::int32_t state = in_flight_.load(std::memory_order_relaxed);
  bool over = false;
  for (;;) {
    const std::int32_t running = state & (kListened - 1);
    over = running >= max_concurrent();
    // observe: the call goes through on a slot beyond the limit.
    if (over && !observe_.load(std::memory_order_relaxed)) return refused(running);
    // relaxed: a slot guards no data; kListened stays as it is.
    if (in_flight_.compare_exchange_weak(state, state + 1, std::memory_order_relaxed,
                                         std::memory_order_relaxed)) {
      if (over) would_reject_.increment();
      return admitted(running + 1);
    }
  }
}

void Bulkhead::grant_free_slots() noexcept {
  std::int32_t running = in_flight_.load(std::memory_order_relaxed) & (kListened - 1);
  while (queue_->head != nullptr && running < max_concurrent()) {
    detail::BulkheadWaiter& oldest = *queue_->head;
    const std::int64_t waited = (clock_->now() - oldest.since).count();
    queue_->wait_ns.fetch_add(std::max<std::int64_t>(waited, 0), std::memory_order_relaxed);
    queue_->waits_granted.fetch_add(1, std::memory_order_relaxed);
    in_flight_.fetch_add(1, std::memory_order_relaxed);  // counted for the waiter
    ++running;
    queue_->end(oldest, WaitState::granted);
  }
}

void Bulkhead::released_listened() noexcept {
  // A slot taken the short way before reconfigure() gave the bulkhead a max_wait: its waiters
  // get it, as a release on the mutex path would give it to them.
  if (!waits_now()) return;
  std::scoped_lock lock(queue_->mutex);
  grant_free_slots();
}

void Bulkhead::finish_announced(std::int64_t since) noexcept {
  if (since != kUnstamped) record_latency(since);
  std::int32_t left = 0;
  if (waits_now()) {
    // Under the mutex, so that a caller that found the bulkhead full is listed before this
    // release looks for it: the freed slot goes to the oldest waiter, unless a lower limit
    // keeps it (then every slot free below the limit, also one a release off this path left).
    std::scoped_lock lock(queue_->mutex);
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
    grant_free_slots();
    left = in_flight_.load(std::memory_order_relaxed) & (kListened - 1);
  } else {
    left = (in_flight_.fetch_sub(1, std::memory_order_relaxed) - 1) & (kListened - 1);
  }
  // A release announced for its waiters alone skips publish(), whose forget()
  // would clear the already clear bit with a read-modify-write on every call. A subscription
  // racing this release may miss its event, as one racing a short-path release does.
  if ((listening_.load(std::memory_order_relaxed) & kFinished) != 0)
    publish(*finished_listeners_, kFinished, BulkheadEventType::call_finished, left);
}

bool Bulkhead::forget(const Listeners& listeners, std::uint8_t bit) const noexcept {
  if (listeners.has_listeners()) return false;
  // The last listener left: clear the bit, then look again, so that a subscription racing
  // this one keeps its bit (seq_cst: the clear and the second look are not reordered).
  const std::uint8_t before =
      listening_.fetch_and(static_cast<std::uint8_t>(~bit), std::memory_order_seq_cst);
  if (listeners.has_listeners()) {
    listening_.fetch_or(bit, std::memory_order_seq_cst);
    return false;
  }
  if ((before & ~bit & (kPermitted | kFinished)) == 0) unlisten();
  return true;
}

void Bulkhead::unlisten() const noexcept {
  if (waits_now()) return;
  // Nothing on the admitted path is listened to any more: its calls go the short way
  // again, unless a subscription came meanwhile (it sets its bit, then kListened again), or
  // reconfigure() gave the bulkhead a max_wait (it sets waits_, then kListened).
  in_flight_.fetch_and(~kListened, std::memory_order_seq_cst);
  if ((listening_.load(std::memory_order_seq_cst) & (kPermitted | kFinished)) != 0 ||
      waits_.load(std::memory_order_seq_cst))
    in_flight_.fetch_or(kListened, std::memory_order_seq_cst);
}

void Bulkhead::publish(const Listeners& listeners, std::uint8_t bit, BulkheadEventType type,
                       std::int32_t in_flight) const noexcept {
  if (forget(listeners, bit)) return;
  listeners.publish(BulkheadEvent{instance_id_, type, in_flight, config().max_concurrent()});
}

BulkheadSnapshot Bulkhead::snapshot() const {
  BulkheadSnapshot snap;
  // The setting (the count's limit is it, capped below kListened).
  snap.max_concurrent = config().max_concurrent();
  snap.mode = observe_.load(std::memory_order_relaxed) ? PolicyMode::observe : PolicyMode::enforce;
  snap.would_have_rejected = would_reject_.total();
  if (const detail::LatencyHistogram* latency = latency_.load(std::memory_order_acquire)) {
    snap.latency = latency->distribution();
  }
  snap.in_flight = in_flight();
  snap.available = snap.in_flight < snap.max_concurrent ? snap.max_concurrent - snap.in_flight : 0;
  snap.rejected = rejected_.total();
  if (waits_now()) {
    {
      std::scoped_lock lock(queue_->mutex);
      snap.waiting = queue_->size;
    }
    snap.waits_granted = queue_->waits_granted.load(std::memory_order_relaxed);
    snap.wait_time = std::chrono::nanoseconds(queue_->wait_ns.load(std::memory_order_relaxed));
    // The reasons after the total: a refusal counts in the total first, so `full` (the rest)
    // never goes below zero.
    std::uint64_t waited = 0;
    for (int r = 1; r < kBulkheadRejectReasons; ++r) {
      snap.rejected_by_reason[r] = queue_->rejected[r].load(std::memory_order_relaxed);
      waited += snap.rejected_by_reason[r];
    }
    snap.rejected = std::max(snap.rejected, waited);
    snap.rejected_by_reason[0] = snap.rejected - waited;
  } else {
    snap.rejected_by_reason[0] = snap.rejected;
  }
  return snap;
}

void Bulkhead::reconfigure(const BulkheadConfig& next) {
  next.validate();
  std::lock_guard<std::mutex> lock(reconfigure_mutex_);
  // Everything that may throw (allocation) comes before the bulkhead changes.
  if (next.latency_histogram() && !latency_owned_) {
    latency_owned_ = std::make_unique<detail::LatencyHistogram>(
        reader_.to_ticks(kLatencyWindow.count()), reader_.ticks());
  }
  config_.replace(next);
  observe_.store(next.mode() == PolicyMode::observe, std::memory_order_relaxed);
  // Under the queue's mutex: a waiter is listed, or granted, against one limit, and a raised
  // limit's new slots go to the oldest waiters at once. A lower limit takes nothing back.
  std::scoped_lock queue_lock(queue_->mutex);
  max_concurrent_.store(std::min(next.max_concurrent(), kListened - 1), std::memory_order_relaxed);
  if (next.max_wait().count() > 0 && !waits_now()) {
    // From now on every call passes the mutex; calls holding a slot taken the short way
    // release it the short way, and the next release or wait on the mutex path gives
    // what they free to the waiters.
    // seq_cst: ordered with forget()'s clearing of kListened and its second look.
    waits_.store(true, std::memory_order_seq_cst);
    in_flight_.fetch_or(kListened, std::memory_order_seq_cst);
  }
  detail::LatencyHistogram* const latency =
      next.latency_histogram() ? latency_owned_.get() : nullptr;
  // release: a call that sees the histogram sees it made. Every call stamps its permit on
  // its own path, so kListened is not the histogram's business.
  latency_.store(latency, std::memory_order_release);
  grant_free_slots();
}

// The file keys in the documented order (R4C-CFG-003 lists them so).
std::span<const detail::Setting<BulkheadKind::Config>> BulkheadKind::settings() noexcept {
  using R = detail::SettingRows<Config>;  // Config: the kind's
  static constexpr detail::Setting<Config> kSettings[] = {
      R::field<int, &Config::max_concurrent, &Config::max_concurrent>("maxConcurrent",
                                                                      "max_concurrent"),
      R::field<std::chrono::nanoseconds, &Config::max_wait, &Config::max_wait>("maxWait",
                                                                               "max_wait"),
      R::file_field<bool, &Config::latency_histogram, &Config::latency_histogram>(
          "latencyHistogram", "latency_histogram"),
      R::file_field<PolicyMode, &Config::mode, &Config::mode>("mode", "mode")};
  return kSettings;
}

void BulkheadKind::metrics(const Snapshot& s, metrics::Emitter& out) {
  out.rejected(s.rejected);
  out.gauge("r4c.bulkhead.concurrent.calls", "Calls holding a slot of the bulkhead.", s.in_flight);
  out.gauge("r4c.bulkhead.available.concurrent.calls", "Free slots of the bulkhead.", s.available);
  out.gauge("r4c.bulkhead.max.allowed.concurrent.calls", "Slots of the bulkhead.",
            s.max_concurrent);
  detail::emit_would_reject(
      out, s, "r4c.bulkhead.would.reject",
      "Calls the bulkhead in observe mode would have rejected and let through.");
  out.histogram("r4c.bulkhead.call.latency.seconds",
                "How long the bulkhead's calls held their slot (latencyHistogram on).",
                s.latency);  // nothing unless enabled
  // Only for a bulkhead that waits (or has waited), so that a plain one's metrics stay as
  // they were.
  std::uint64_t waited = s.waits_granted;
  for (int r = 1; r < kBulkheadRejectReasons; ++r) waited += s.rejected_by_reason[r];
  if (s.waiting == 0 && waited == 0 && s.wait_time.count() == 0) return;
  using metrics::count;
  out.gauge("r4c.bulkhead.waiting.calls", "Calls waiting for a slot of the bulkhead.", s.waiting);
  out.counter("r4c.bulkhead.waits.granted", "Waits for a bulkhead slot that ended with the slot.",
              count(s.waits_granted));
  out.counter("r4c.bulkhead.wait.seconds", "Total time granted waits waited for a bulkhead slot.",
              metrics::seconds(s.wait_time));
  for (int r = 0; r < kBulkheadRejectReasons; ++r) {
    out.counter("r4c.bulkhead.rejections", "Calls the bulkhead rejected, by reason.",
                count(s.rejected_by_reason[r]),
                {{"reason", std::string(to_string(static_cast<BulkheadRejectReason>(r)))}});
  }
}

}  // namespace r4c
