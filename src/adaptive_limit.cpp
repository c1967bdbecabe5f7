// SPDX-License-Identifier: Apache-2.0
// The adaptive limit's cold paths: construction, the window close, snapshots.
// The hot path is inline in include/r4c/adaptive_limit.hpp.
#include "r4c/adaptive_limit.hpp"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <system_error>
#include <thread>

#include "config_check.hpp"
#include "exception_match.hpp"
#include "kind_settings.hpp"
#include "observe_metrics.hpp"
#include "r4c/detail/event_hub.hpp"
#include "r4c/metrics.hpp"
#include "thread_frames.hpp"

namespace r4c {
namespace {

// window_end_ while one thread closes the window: later than any now, so no other thread
// tries to close it too.
constexpr std::int64_t kClosing = std::numeric_limits<std::int64_t>::max();
// window_end_ while the limit paces: earlier than any now, so every call that ends comes to
// close_window, which pauses the limit for the call's share of time.
constexpr std::int64_t kEveryCall = std::numeric_limits<std::int64_t>::min();

// Totals only grow on a stripe with one writer. On a shared stripe a racing writer can store a
// stale total, so what was consumed is a high-water mark and a dip counts as nothing: a
// sample may be lost that way, never counted twice.
std::uint64_t growth(std::uint64_t consumed, std::uint64_t seen) {
  return seen > consumed ? seen - consumed : 0;
}

std::uint32_t fixed_share(const AdaptiveLimitConfig& config, int cls) {
  return static_cast<std::uint32_t>(config.class_share(static_cast<CallClass>(cls)) * 65536.0);
}

// Whether two layouts of partitions decide alike (then a reconfigure keeps the one it has).
bool same_layout(const detail::LimitPartitions& a, const detail::LimitPartitions& b) {
  return a.slots == b.slots && a.borrow == b.borrow && a.demand_ticks == b.demand_ticks &&
         a.shares == b.shares && a.names == b.names;
}

// One preallocated exception per reason a wait may be rejected for, each its own subclass of
// LimitExceededException.
void make_wait_rejections(detail::WaitQueue& queue, const std::string& id) {
  static_assert(kRejectReasons <= std::tuple_size_v<decltype(queue.rejections)>);
  const std::string prefix = "adaptive limit '" + id + "' ";
  const auto at = [&](RejectReason reason) -> std::exception_ptr& {
    return queue.rejections[static_cast<int>(reason)];
  };
  at(RejectReason::queue_full) = std::make_exception_ptr(LimitQueueFullException(
      id, prefix + "is full and so is its wait queue: the call was rejected without running"));
  at(RejectReason::wait_timeout) = std::make_exception_ptr(LimitWaitTimeoutException(
      id, prefix + "gave the call no slot within its wait: rejected without running"));
  at(RejectReason::deadline) = std::make_exception_ptr(LimitDeadlineException(
      id, prefix + "is full and the call's deadline leaves no time to wait: rejected"));
  at(RejectReason::cancelled) = std::make_exception_ptr(LimitWaitCancelledException(
      id, prefix + "is full and the call was cancelled while it waited: rejected"));
  at(RejectReason::evicted) = std::make_exception_ptr(LimitEvictedException(
      id, prefix + "gave the waiting call's place to a call of a higher class: rejected"));
}

// Pacing (delay_target only): below one call at a time the limit admits one call at a time for
// a share of the time. Entering it, the limit opens; already in it, the pause under way stands.
std::int32_t paced_limit(std::int32_t next, std::int32_t previous, double fractional, bool& pacing,
                         double& share) noexcept {
  if (fractional < 1.0) {
    next = pacing ? previous : 1;
    pacing = true;
    share = fractional;
  } else {
    pacing = false;
  }
  return next;
}

}  // namespace

AdaptiveLimit::AdaptiveLimit(std::string instance_id, AdaptiveLimitConfig config,
                             std::shared_ptr<Clock> clock)
    : limit_(detail::validated(config).initial_limit()),
      flags_(0),
      observe_(config.mode() == PolicyMode::observe),
      clock_(detail::or_system_clock(clock)),
      window_end_(0),
      window_ticks_(clock_.to_ticks(config.window().count())),
      max_wait_ticks_(0),
      instance_id_(std::move(instance_id)),
      clock_owner_(std::move(clock)),
      rejection_(std::make_exception_ptr(LimitExceededException(
          instance_id_,
          "adaptive limit '" + instance_id_ + "' is full: the call was rejected without running"))),
      limit_change_listeners_(
          std::make_shared<detail::EventHub<LimitChangeEvent>>(AdaptiveLimitKind::kNames.metrics)),
      live_config_(std::move(config)),
      estimator_(live_config_.get()) {
  window_end_.store(clock_.ticks() + window_ticks_, std::memory_order_relaxed);
  fractional_limit_.store(limit_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  apply_live(live_config_.get(), window_ticks_);
}

AdaptiveLimit::~AdaptiveLimit() = default;

Subscription AdaptiveLimit::on_limit_change(
    std::function<void(const LimitChangeEvent&)> listener) const {
  return limit_change_listeners_->subscribe(std::move(listener));
}

int AdaptiveLimit::resolve_partition(std::uint8_t partition) const noexcept {
  return partition < partitions_->slots ? partition : 0;
}

LimitPartition AdaptiveLimit::partition(std::string_view name) const {
  const AdaptiveLimitConfig& config = live_config_.get();
  if (const std::optional<int> index = config.partition_index(name))
    return LimitPartition::at(*index);
  std::string names;
  for (const LimitPartitionShare& known : config.partitions())
    names += (names.empty() ? "" : ", ") + known.name;
  throw ConfigException("R4C-REG-012", "adaptive limit '" + instance_id_ + "' has no partition '" +
                                           std::string(name) + "'; valid: " +
                                           (names.empty() ? "none (it has no partitions)" : names));
}

void AdaptiveLimit::throw_rejected(RejectReason reason) const {
  std::rethrow_exception(rejection(reason));
}

const std::exception_ptr& AdaptiveLimit::rejection(RejectReason reason) const noexcept {
  const detail::WaitQueue* const waits = queue();
  if (waits == nullptr) return rejection_;
  const std::exception_ptr& special = waits->rejections[static_cast<int>(reason)];
  return special ? special : rejection_;
}

bool AdaptiveLimit::is_drop(const std::exception_ptr& failure) const noexcept {
  if (!failure) return false;
  return detail::ask_rethrown<&AdaptiveLimit::is_drop_current>(*this, failure);
}

bool AdaptiveLimit::is_drop(const std::error_code& code) const noexcept {
  const auto& predicate = live_config_->drop_on_error();
  try {
    return code && predicate && predicate(code);
  } catch (...) {
    return false;  // a predicate that throws decides nothing
  }
}

bool AdaptiveLimit::is_drop_current() const noexcept {
  // The config now, once: a reconfigure meanwhile does not mix two dropOn lists.
  const AdaptiveLimitConfig& config = live_config_.get();
  for (const ExceptionType& type : config.drop_on_types()) {
    if (type.matches_current()) return true;
  }
  if (!config.drop_on_error()) return false;
  // An error code thrown as a std::system_error (asio::system_error is one), by the call itself
  // or by an inner layer passing an async error on, is classified as the code would be: the same
  // failure is a drop or not whichever way it reaches the limit.
  try {
    throw;
  } catch (const std::system_error& error) {
    return is_drop(error.code());
  } catch (...) {
    return false;
  }
}

Permit AdaptiveLimit::try_acquire_paced() noexcept {
  // acquire: pairs with pace()'s release of the resume time.
  if (clock_.ticks() >= paced_resume_.load(std::memory_order_acquire)) {
    std::int32_t closed = 0;
    // One call may start: whoever wins reopens the limit; a loser sees it open.
    (void)limit_.compare_exchange_strong(closed, 1, std::memory_order_relaxed);
    if (limit_.load(std::memory_order_relaxed) > 0) return try_acquire();
  }
  if (observe_.load(std::memory_order_relaxed)) return over_limit();
  count_rejection();
  return Permit();
}

// A limit of share s < 1 lets one call run for a share s of the time: after a call of latency L
// it stays closed for L × (1 / s − 1).
void AdaptiveLimit::pace(std::int64_t now, std::int64_t latency_ns) noexcept {
  const double pause_ns = static_cast<double>(latency_ns) * (1.0 / share_ - 1.0);
  const std::int64_t pause = clock_.to_ticks(static_cast<std::int64_t>(pause_ns));
  paced_resume_.store(now + pause, std::memory_order_release);
  limit_.store(0, std::memory_order_release);
}

void AdaptiveLimit::store_window_end(std::int64_t end) noexcept {
  // release: publishes this close to the next closer.
  if (pacing_) {
    paced_window_end_ = end;
    window_end_.store(kEveryCall, std::memory_order_release);
  } else {
    window_end_.store(end, std::memory_order_release);
  }
}

namespace {
// The limits whose limit-change listeners this thread runs, innermost first, each while it
// holds that limit's closing token (and, from reconfigure(), its mutex): a reconfigure() of one
// of them that a listener calls, directly or through another limit's listener, cannot wait
// for either, so it is kept in that limit's frame and applied once its listeners have returned.
class ListeningTo : public detail::ThreadFrame<ListeningTo> {
 public:
  explicit ListeningTo(const AdaptiveLimit* limit) noexcept : ThreadFrame(limit) {}
  void ask(const AdaptiveLimitConfig& next) {
    asked_ = std::make_unique<AdaptiveLimitConfig>(next);
  }
  // The last reconfiguration a listener asked for, if any.
  std::unique_ptr<AdaptiveLimitConfig> asked() { return std::move(asked_); }

 private:
  std::unique_ptr<AdaptiveLimitConfig> asked_;
};
}  // namespace

void AdaptiveLimit::close_window(std::int64_t now, std::int64_t latency_ns) noexcept {
  std::int64_t end = window_end_.load(std::memory_order_relaxed);
  if (now < end) return;
  // acquire: the previous close's estimator state and consumed totals happen before this one.
  if (!window_end_.compare_exchange_strong(end, kClosing, std::memory_order_acquire,
                                           std::memory_order_relaxed)) {
    return;  // another thread is closing it
  }
  if (pacing_) {
    pace(now, latency_ns);
    end = paced_window_end_;
    if (now < end) {
      window_end_.store(kEveryCall, std::memory_order_release);
      return;
    }
  }

  std::array<StripeTotals, detail::kThreadSlots> seen;
  StripeTotals window;
  for (std::size_t i = 0; i < stripes_.size(); ++i) {
    // acquire pairs with record_sample's release: a counted sample brings its latency along.
    seen[i].samples = stripes_[i].samples.load(std::memory_order_acquire);
    seen[i].latency_sum_ns = stripes_[i].latency_sum_ns.load(std::memory_order_relaxed);
    seen[i].drops = stripes_[i].drops.load(std::memory_order_relaxed);
    window.samples += growth(consumed_[i].samples, seen[i].samples);
    window.latency_sum_ns += growth(consumed_[i].latency_sum_ns, seen[i].latency_sum_ns);
    window.drops += growth(consumed_[i].drops, seen[i].drops);
  }

  if (window.samples < static_cast<std::uint64_t>(live_config_->min_window_samples())) {
    // Too few samples: keep them, and move the end forward by whole windows past now.
    // release: the next closer sees this one's state.
    const std::int64_t next_end = now - (now - end) % window_ticks_ + window_ticks_;
    store_window_end(next_end);
    return;
  }

  for (std::size_t i = 0; i < stripes_.size(); ++i) {
    consumed_[i].samples = std::max(consumed_[i].samples, seen[i].samples);
    consumed_[i].latency_sum_ns = std::max(consumed_[i].latency_sum_ns, seen[i].latency_sum_ns);
    consumed_[i].drops = std::max(consumed_[i].drops, seen[i].drops);
  }
  // The calls in flight now are in flight during the next window too.
  const std::int32_t max_in_flight = window_max_in_flight_.exchange(
      in_flight_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  // samplePercentile: the window's sample is a percentile of its latencies (the histogram's,
  // since the previous window's end) instead of their average.
  std::int64_t sample_ns = static_cast<std::int64_t>(window.latency_sum_ns / window.samples);
  detail::LatencyHistogram* const histogram =
      (flags_.load(std::memory_order_relaxed) & kHistogram) != 0
          ? latency_.load(std::memory_order_acquire)
          : nullptr;
  if (const double percentile = live_config_->sample_percentile();
      percentile > 0.0 && histogram != nullptr) {
    if (const std::int64_t at = histogram->quantile_since_last(percentile); at > 0) sample_ns = at;
  }
  const detail::WindowAggregate aggregate{sample_ns, max_in_flight, window.drops > 0,
                                          window.samples, clock_.to_clock_ns(now)};
  const std::int32_t previous = limit_.load(std::memory_order_relaxed);
  std::int32_t next = estimator_.update(aggregate);
  const double fractional = estimator_.fractional_limit();
  next = paced_limit(next, previous, fractional, pacing_, share_);

  // Sequence lock: snapshot() retries while a close is under way, so it never mixes windows.
  const std::uint64_t sequence = stats_sequence_.load(std::memory_order_relaxed);
  stats_sequence_.store(sequence + 1, std::memory_order_relaxed);
  // Each store is release so that a reader that sees it also sees the odd sequence and retries
  // (a fence would do the same, but ThreadSanitizer does not understand fences).
  limit_.store(next, std::memory_order_release);
  windows_.store(windows_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  window_latency_ns_.store(aggregate.avg_latency_ns, std::memory_order_release);
  long_latency_ns_.store(estimator_.long_latency_ns(), std::memory_order_release);
  last_window_max_in_flight_.store(max_in_flight, std::memory_order_release);
  last_window_dropped_.store(aggregate.dropped, std::memory_order_release);
  last_window_samples_.store(window.samples, std::memory_order_release);
  fractional_limit_.store(fractional, std::memory_order_release);
  samples_.store(samples_.load(std::memory_order_relaxed) + window.samples,
                 std::memory_order_release);
  if (next != previous) {
    limit_changes_.store(limit_changes_.load(std::memory_order_relaxed) + 1,
                         std::memory_order_release);
  }
  stats_sequence_.store(sequence + 2, std::memory_order_release);

  // Every slot a raise adds goes to a waiter, before a newcomer can see it (and before the
  // event, which says how many).
  int granted = 0;
  if ((flags_.load(std::memory_order_relaxed) & kQueued) && next > previous &&
      waiting_.load(std::memory_order_seq_cst) != 0)
    granted = grant_waiters(true);

  // Before the window reopens, so that events come in window order; a listener's snapshot
  // shows this window.
  std::unique_ptr<AdaptiveLimitConfig> asked;
  if (next != previous && limit_change_listeners_->has_listeners()) [[unlikely]] {
    ListeningTo listening(this);
    limit_change_listeners_->publish(LimitChangeEvent{
        instance_id_, previous, next, std::chrono::nanoseconds(aggregate.avg_latency_ns),
        max_in_flight, aggregate.dropped, std::chrono::nanoseconds(estimator_.long_latency_ns()),
        granted});
    asked = listening.asked();
  }

  // The new window starts now.
  store_window_end(now + window_ticks_);
  // Validated when asked: what is left to fail is allocation.
  if (asked) [[unlikely]]
    reconfigure(*asked);
}

AdaptiveLimitSnapshot AdaptiveLimit::snapshot() const {
  AdaptiveLimitSnapshot snap;
  const AdaptiveLimitConfig& config = live_config_.get();
  snap.min_limit = config.min_limit();
  snap.max_limit = config.max_limit();
  snap.algorithm = config.algorithm();
  snap.mode = config.mode();
  snap.would_have_rejected = would_reject_.total();
  const std::uint8_t flags = flags_.load(std::memory_order_acquire);
  snap.enabled = (flags & kDisabled) == 0;
  snap.in_flight = in_flight_.load(std::memory_order_relaxed);
  const detail::LatencyHistogram* const histogram =
      (flags & kHistogram) != 0 ? latency_.load(std::memory_order_acquire) : nullptr;
  if (histogram != nullptr) snap.latency = histogram->distribution();
  for (;;) {
    const std::uint64_t before = stats_sequence_.load(std::memory_order_acquire);
    if (before & 1) continue;  // a close is writing; it is short
    // acquire: a value from a close under way brings its odd sequence along, so we retry.
    snap.limit = limit_.load(std::memory_order_acquire);
    snap.windows = windows_.load(std::memory_order_acquire);
    snap.window_latency =
        std::chrono::nanoseconds(window_latency_ns_.load(std::memory_order_acquire));
    snap.long_latency = std::chrono::nanoseconds(long_latency_ns_.load(std::memory_order_acquire));
    snap.window_max_in_flight = last_window_max_in_flight_.load(std::memory_order_acquire);
    snap.window_dropped = last_window_dropped_.load(std::memory_order_acquire);
    snap.window_samples = last_window_samples_.load(std::memory_order_acquire);
    snap.samples = samples_.load(std::memory_order_acquire);
    snap.limit_changes = limit_changes_.load(std::memory_order_acquire);
    snap.fractional_limit = fractional_limit_.load(std::memory_order_acquire);
    if (stats_sequence_.load(std::memory_order_relaxed) == before) break;
  }
  // The reasons and classes first: a rejection counts in its stripe before them, so the
  // remainders (limit, critical) never go below zero.
  std::uint64_t other_reasons = 0;
  for (int r = 2; r < kRejectReasons; ++r) {
    snap.rejected_by_reason[r] = rejected_by_reason_[r].load(std::memory_order_relaxed);
    other_reasons += snap.rejected_by_reason[r];
  }
  std::uint64_t other_classes = 0;
  for (int c = 1; c < kLimitedClasses; ++c) {
    snap.rejected_by_class[c] = rejected_by_class_[c].load(std::memory_order_relaxed);
    other_classes += snap.rejected_by_class[c];
  }
  std::uint64_t rejected = shared_slot_rejected_.load(std::memory_order_seq_cst);
  for (const Stripe& stripe : stripes_) rejected += stripe.rejected.load(std::memory_order_seq_cst);
  rejected = std::max(rejected, std::max(other_reasons, other_classes));
  snap.rejected = rejected;
  snap.rejected_by_reason[static_cast<int>(RejectReason::limit)] = rejected - other_reasons;
  snap.rejected_by_class[static_cast<int>(CallClass::critical)] = rejected - other_classes;
  if ((flags & (kWaits | kQueued)) != 0) {
    snap.waiting = waiting_.load(std::memory_order_relaxed);
    snap.max_queue = queue_bound();
    snap.waits_granted = waits_granted_.load(std::memory_order_relaxed);
    snap.wait_time = std::chrono::nanoseconds(wait_time_ns_.load(std::memory_order_relaxed));
    snap.granted_on_raise = granted_on_raise_.load(std::memory_order_relaxed);
  }
  if ((flags & kPartitioned) != 0) {
    std::scoped_lock lock(partition_mutex_);
    // The config's partitions in order, then what none reserves (slot 0).
    for (int i = 1; partitions_ && i <= partitions_->slots; ++i) {
      const int slot = i % partitions_->slots;
      LimitPartitionSnapshot part;
      part.name = partitions_->names[slot];
      part.share = partitions_->shares[slot];
      part.guaranteed = partitions_->guaranteed(slot, snap.limit);
      part.in_flight = partitions_->in_flight[slot];
      part.rejected = partitions_->rejected[slot];
      snap.partitions.push_back(std::move(part));
    }
  }
  return snap;
}

// ---- admission beyond the plain path ----------------------------------------------------

void AdaptiveLimit::count_rejection(CallClass cls, RejectReason reason,
                                    std::uint8_t partition) noexcept {
  if ((flags_.load(std::memory_order_acquire) & kPartitioned) != 0) {
    std::scoped_lock lock(partition_mutex_);
    if (partitions_) ++partitions_->rejected[resolve_partition(partition)];
  }
  // seq_cst pairs with snapshot(): the stripe's count is seen before the reason's and class's.
  const detail::ThreadSlot slot = detail::thread_slot();
  if (slot.exclusive) {
    std::atomic<std::uint64_t>& rejected = stripes_[slot.index].rejected;
    rejected.store(rejected.load(std::memory_order_relaxed) + 1, std::memory_order_seq_cst);
  } else {
    shared_slot_rejected_.fetch_add(1, std::memory_order_seq_cst);
  }
  if (reason != RejectReason::limit) {
    rejected_by_reason_[static_cast<int>(reason)].fetch_add(1, std::memory_order_seq_cst);
  }
  if (cls != CallClass::critical && cls != CallClass::bypass) {
    rejected_by_class_[static_cast<int>(cls)].fetch_add(1, std::memory_order_seq_cst);
  }
}

std::int32_t AdaptiveLimit::open_limit() noexcept {
  std::int32_t limit = limit_.load(std::memory_order_relaxed);
  if (limit == 0 && clock_.ticks() >= paced_resume_.load(std::memory_order_acquire)) {
    // A paced limit reopens for the first call after its pause (try_acquire_paced's rule).
    (void)limit_.compare_exchange_strong(limit, 1, std::memory_order_relaxed);
    limit = limit_.load(std::memory_order_relaxed);
  }
  return limit;
}

std::int32_t AdaptiveLimit::take(CallClass cls, std::uint8_t partition,
                                 std::uint32_t& tag) noexcept {
  tag = 0;
  // acquire: a layout published by reconfigure() is seen whole.
  if ((flags_.load(std::memory_order_acquire) & kPartitioned) != 0)
    return take_partitioned(cls, partition, tag);
  return take_plain(cls);
}

std::int32_t AdaptiveLimit::take_plain(CallClass cls) noexcept {
  const std::uint64_t share = shares_[static_cast<int>(cls)].load(std::memory_order_relaxed);
  std::int32_t running = in_flight_.load(std::memory_order_seq_cst);
  do {
    const std::int32_t limit = open_limit();
    const auto allowed =
        static_cast<std::int32_t>((static_cast<std::uint64_t>(limit) * share) >> kShareShift);
    if (running >= allowed) return 0;
  } while (!in_flight_.compare_exchange_weak(running, running + 1, std::memory_order_seq_cst,
                                             std::memory_order_seq_cst));
  note_in_flight(running + 1);
  return running + 1;
}

// The whole decision of a partitioned limit under one mutex: the class's share of the limit,
// then the partition's guarantee or what it may borrow; the total and the partition's count
// grow together.
std::int32_t AdaptiveLimit::take_partitioned(CallClass cls, std::uint8_t partition,
                                             std::uint32_t& tag) noexcept {
  std::scoped_lock lock(partition_mutex_);
  if (!partitions_) return take_plain(cls);  // switched off meanwhile
  const int slot = resolve_partition(partition);
  const std::int32_t limit = open_limit();
  const std::uint64_t share = shares_[static_cast<int>(cls)].load(std::memory_order_relaxed);
  const auto allowed =
      static_cast<std::int32_t>((static_cast<std::uint64_t>(limit) * share) >> kShareShift);
  // seq_cst: as take()'s compare-and-swap, against release_slot()'s look for waiters.
  const std::int32_t running = in_flight_.load(std::memory_order_seq_cst);
  if (!partitions_->allows(slot, limit, clock_.ticks()) || running >= allowed) return 0;
  in_flight_.fetch_add(1, std::memory_order_seq_cst);
  ++partitions_->in_flight[slot];
  tag = (partition_layout_ << 8) | static_cast<std::uint32_t>(slot + 1);
  note_in_flight(running + 1);
  return running + 1;
}

void AdaptiveLimit::release_partitioned(std::uint32_t partition) noexcept {
  {
    std::scoped_lock lock(partition_mutex_);
    const std::uint32_t layout = partition >> 8;
    int slot = static_cast<int>(partition & 0xff) - 1;
    if (!partitions_ || layout != partition_layout_) {
      // Admitted under an earlier layout: where its slot counts now (if anywhere).
      slot = layout < partition_remap_.size() ? partition_remap_[layout][slot] : kUncounted;
    }
    if (slot != kUncounted) --partitions_->in_flight[slot];
    // seq_cst: as release_slot(), against begin_wait()'s increment of waiting_.
    in_flight_.fetch_sub(1, std::memory_order_seq_cst);
  }
  if ((flags_.load(std::memory_order_relaxed) & kQueued) &&
      waiting_.load(std::memory_order_seq_cst) != 0)
    grant_waiters(false);
}

void AdaptiveLimit::complete_extras(Permit& permit, Outcome outcome) noexcept {
  const std::uint8_t flags = flags_.load(std::memory_order_relaxed);
  if (outcome == Outcome::kIgnore) {
    release_slot(permit.partition(), flags);
    return;
  }
  const std::int64_t now = clock_.ticks();
  release_slot(permit.partition(), flags);
  const std::int64_t latency = clock_.to_ns(now - permit.start_);
  record_sample(latency > 0 ? latency : 0, outcome == Outcome::kDrop);
  if ((flags & kHistogram) != 0) {
    if (detail::LatencyHistogram* histogram = latency_.load(std::memory_order_acquire))
      histogram->record(latency, now);
  }
  if (now >= window_end_.load(std::memory_order_relaxed)) [[unlikely]]
    close_window(now, latency);
}

Permit AdaptiveLimit::admit_now(CallClass cls, std::uint8_t partition) noexcept {
  const std::uint8_t flags = flags_.load(std::memory_order_acquire);
  if ((flags & kDisabled) != 0 || cls == CallClass::bypass) return Permit(this, 0, 0);
  // A queue: a newcomer may not pass a waiter of its class or a higher one. With partitions,
  // the waiters are served first (each a slot its partition may take); whoever is left
  // waiting could not use what the newcomer may take.
  detail::WaitQueue* const waits = (flags & kQueued) != 0 ? queue() : nullptr;
  if (waits != nullptr && waiting_.load(std::memory_order_seq_cst) != 0) {
    std::scoped_lock lock(waits->mutex);
    if (partitions_) {  // the queue's mutex guards it against a change of layout
      grant_locked(clock_.ticks(), false);
    } else if (waits->waits_at_or_above(cls)) {
      return Permit();
    }
  }
  std::uint32_t tag = 0;
  if (const std::int32_t admitted = take(cls, partition, tag))
    return Permit(this, clock_.ticks(), admitted, tag);
  return Permit();
}

Permit AdaptiveLimit::try_acquire_special(CallClass cls, std::uint8_t partition) noexcept {
  Permit permit = admit_now(cls, partition);
  if (!permit) {
    // observe mode with partitions (no wait: validate() refuses observe with max_wait).
    if (partitioned() && observe_.load(std::memory_order_relaxed))
      return over_limit(partition, true);
    count_rejection(cls, RejectReason::limit, partition);
  }
  return permit;
}

int AdaptiveLimit::queue_bound() const noexcept {
  const AdaptiveLimitConfig& config = live_config_.get();
  const double factor = config.max_queue_factor();
  if (factor <= 0.0) return config.max_queue();
  const double bound = std::ceil(factor * limit_.load(std::memory_order_relaxed));
  return std::max(1, static_cast<int>(std::min(bound, double{AdaptiveLimitConfig::kMaxMaxQueue})));
}

void AdaptiveLimit::end_locked(detail::LimitWaiter& waiter, detail::WaitEnd end,
                               std::int64_t now) noexcept {
  detail::WaitQueue& waits = *queue_.load(std::memory_order_relaxed);  // under its mutex
  waits.remove(waiter, now);
  waiter.end_ = end;
  waiting_.fetch_sub(1, std::memory_order_seq_cst);
  // Waiting switched off (max_wait 0) and the last waiter gone: releases stop looking.
  if (waits.size == 0 && max_wait_ticks_.load(std::memory_order_relaxed) == 0)
    flags_.fetch_and(static_cast<std::uint8_t>(~kQueued), std::memory_order_relaxed);
  if (end != detail::WaitEnd::granted && !waiter.counted_by_caller)
    count_rejection(waiter.cls, reason_of(end), waiter.partition);
  waiter.wake();
}

int AdaptiveLimit::grant_locked(std::int64_t now, bool raise) noexcept {
  detail::WaitQueue& waits = *queue_.load(std::memory_order_relaxed);  // under its mutex
  // The config now: a changed order or CoDel setting takes effect with the next grant.
  const AdaptiveLimitConfig& config = live_config_.get();
  const QueueOrder order = config.queue_order();
  bool newest_first = order == QueueOrder::lifo;
  if (order == QueueOrder::adaptive_lifo && waits.size > 0 &&
      now - waits.last_empty > clock_.to_ticks(config.codel_interval().count())) {
    // A standing queue: newest first, and nobody waits past the CoDel target any more.
    newest_first = true;
    const std::int64_t oldest_allowed = now - clock_.to_ticks(config.codel_target().count());
    for (detail::WaitList& list : waits.lists) {
      while (!list.empty() && list.oldest()->since < oldest_allowed) {
        end_locked(*list.oldest(), detail::WaitEnd::timed_out, now);
      }
    }
  }
  int granted = 0;
  for (;;) {
    std::int32_t admitted = 0;
    std::uint32_t tag = 0;
    detail::LimitWaiter* waiter = partitions_ ? partition_waiter(newest_first, admitted, tag)
                                              : class_waiter(newest_first, admitted, tag);
    if (waiter == nullptr) break;
    waiter->granted_at = clock_.ticks();
    waiter->admitted = admitted;
    waiter->granted_tag = tag;
    wait_time_ns_.fetch_add(static_cast<std::uint64_t>(std::max<std::int64_t>(
                                0, clock_.to_ns(waiter->granted_at - waiter->since))),
                            std::memory_order_relaxed);
    waits_granted_.fetch_add(1, std::memory_order_relaxed);
    if (raise) granted_on_raise_.fetch_add(1, std::memory_order_relaxed);
    end_locked(*waiter, detail::WaitEnd::granted, now);
    ++granted;
  }
  return granted;
}

detail::LimitWaiter* AdaptiveLimit::class_waiter(bool newest_first, std::int32_t& admitted,
                                                 std::uint32_t& tag) noexcept {
  detail::WaitList* list = queue_.load(std::memory_order_relaxed)->highest();
  if (list == nullptr) return nullptr;
  detail::LimitWaiter* waiter = newest_first ? list->newest() : list->oldest();
  // Shares never grow towards lower classes: when the highest class waiting finds no room,
  // nobody below it would.
  admitted = take(waiter->cls, waiter->partition, tag);
  return admitted != 0 ? waiter : nullptr;
}

// The highest class first, and in it the queue's order; a waiter whose partition may not take
// the slot is passed over (it keeps its place), and so is the rest of its partition: its lower
// classes have smaller shares and the same partition rule.
detail::LimitWaiter* AdaptiveLimit::partition_waiter(bool newest_first, std::int32_t& admitted,
                                                     std::uint32_t& tag) noexcept {
  std::uint32_t stuck = 0;  // partitions whose waiters found no room, by slot
  for (detail::WaitList& list : queue_.load(std::memory_order_relaxed)->lists) {
    for (detail::LimitWaiter* waiter = newest_first ? list.newest() : list.oldest();
         waiter != nullptr; waiter = newest_first ? waiter->prev : waiter->next) {
      const std::uint32_t bit = 1u << resolve_partition(waiter->partition);
      if ((stuck & bit) != 0) continue;
      admitted = take(waiter->cls, waiter->partition, tag);
      if (admitted != 0) return waiter;
      stuck |= bit;
    }
  }
  return nullptr;
}

int AdaptiveLimit::grant_waiters(bool raise) noexcept {
  detail::WaitQueue* const waits = queue();
  if (waits == nullptr) return 0;
  std::scoped_lock lock(waits->mutex);
  return grant_locked(clock_.ticks(), raise);
}

AdaptiveLimit::WaitStart AdaptiveLimit::begin_wait(detail::LimitWaiter& waiter,
                                                   const Admission& admission) noexcept {
  const CallClass cls = admission.cls;
  detail::WaitQueue& waits = *queue();  // made before kWaits was set, and kept
  std::scoped_lock lock(waits.mutex);
  const std::int64_t now = clock_.ticks();
  // Not queued yet, so still the caller's: its class and partition say where a refusal counts
  // (an asynchronous caller counts its own, from these).
  waiter.cls = cls;
  waiter.partition = partition_slot(admission.partition);
  if (waiter.end_ != detail::WaitEnd::pending) {
    // Its caller gave up (end_wait) before it could be queued.
    if (!waiter.counted_by_caller) count_rejection(cls, RejectReason::cancelled, waiter.partition);
    return {RejectReason::cancelled, false};
  }
  if ((flags_.load(std::memory_order_relaxed) & kDisabled) != 0) {
    // Switched off since the caller looked: a pass-through, as admit_now() would be.
    waiter.granted_at = now;
    waiter.admitted = 0;
    waiter.granted_tag = 0;
    waiter.end_ = detail::WaitEnd::granted;
    return {RejectReason::none, true};
  }
  // With partitions the waiters are served first, as in admit_now().
  const bool partitioned = partitions_ != nullptr;  // the queue's mutex guards it too
  if (partitioned && waiting_.load(std::memory_order_relaxed) != 0) grant_locked(now, false);
  if (partitioned || !waits.waits_at_or_above(cls)) {
    if (const std::int32_t admitted = take(cls, waiter.partition, waiter.granted_tag)) {
      waiter.granted_at = clock_.ticks();
      waiter.admitted = admitted;
      waiter.end_ = detail::WaitEnd::granted;
      return {RejectReason::none, true};
    }
  }
  RejectReason refused = RejectReason::none;
  // Read under the mutex reconfigure() changes it under: 0 since the caller looked means no
  // wait (a full limit's call is rejected at once).
  const std::int64_t max_wait = max_wait_ticks_.load(std::memory_order_relaxed);
  std::int64_t until = now + max_wait;
  if (max_wait <= 0) {
    refused = RejectReason::limit;
  } else if (admission.stop.stop_requested()) {
    refused = RejectReason::cancelled;
  } else if (admission.deadline) {
    // The slot must come early enough for a call of the usual latency to end by the deadline.
    const std::int64_t left_ns = admission.deadline->count() - clock_.to_clock_ns(now) -
                                 window_latency_ns_.load(std::memory_order_relaxed);
    if (left_ns <= 0) {
      refused = RejectReason::deadline;
    } else {
      until = std::min(until, now + clock_.to_ticks(left_ns));
    }
  }
  // A lowered bound evicts nobody: the queue above it drains as its waiters end, and a
  // newcomer meanwhile may only take the place of a waiter of a lower class.
  if (refused == RejectReason::none && waits.size >= queue_bound()) {
    detail::LimitWaiter* victim = waits.lowest_oldest();
    if (victim != nullptr && victim->cls > cls) {
      end_locked(*victim, detail::WaitEnd::evicted, now);
    } else {
      refused = RejectReason::queue_full;
    }
  }
  if (refused != RejectReason::none) {
    if (!waiter.counted_by_caller) count_rejection(cls, refused, waiter.partition);
    return {refused, false};
  }
  waiter.since = now;
  waiter.until = until;
  waiter.end_ = detail::WaitEnd::waiting;
  if (waits.size == 0) waits.last_empty = now;
  waits.push(waiter);
  waiting_.fetch_add(1, std::memory_order_seq_cst);
  // A release between the failed take() and the increment saw nobody waiting: look again.
  grant_locked(now, false);
  return {RejectReason::none, false};
}

detail::WaitEnd AdaptiveLimit::end_wait(detail::LimitWaiter& waiter, detail::WaitEnd end) noexcept {
  std::scoped_lock lock(queue()->mutex);
  if (waiter.end_ == detail::WaitEnd::waiting) {
    end_locked(waiter, end, clock_.ticks());
  } else if (waiter.end_ == detail::WaitEnd::pending) {
    waiter.end_ = end;  // not queued yet: begin_wait() will not queue it
  }
  return waiter.end_;
}

// A synchronous waiter: on the caller's stack, woken through its own condition variable.
class AdaptiveLimit::SyncWaiter final : public detail::LimitWaiter {
 public:
  explicit SyncWaiter(AdaptiveLimit& limit) noexcept : timer_(limit, *this) {}
  void wake() noexcept override {
    // Notified under the waiter's mutex: the waiter cannot return (and leave the stack)
    // before notify_one() has.
    std::scoped_lock lock(mutex_);
    woken_ = true;
    woken_cv_.notify_one();
  }
  void block() {
    std::unique_lock lock(mutex_);
    woken_cv_.wait(lock, [&] { return woken_; });
  }
  TimerTask& timer() noexcept { return timer_; }

 private:
  class Timer final : public TimerTask {
   public:
    Timer(AdaptiveLimit& limit, SyncWaiter& waiter) noexcept : limit_(limit), waiter_(waiter) {}
    void fire() noexcept override { (void)limit_.end_wait(waiter_, detail::WaitEnd::timed_out); }

   private:
    AdaptiveLimit& limit_;
    SyncWaiter& waiter_;
  };
  Timer timer_;
  std::mutex mutex_;
  std::condition_variable woken_cv_;
  bool woken_ = false;
};

Permit AdaptiveLimit::acquire(const Admission& admission, RejectReason* reason) noexcept {
  RejectReason ignored = RejectReason::none;
  RejectReason& why = reason != nullptr ? *reason : ignored;
  why = RejectReason::none;
  if (!waits() || admission.cls == CallClass::bypass) {
    Permit permit = try_acquire(admission.partition, admission.cls);
    if (!permit) why = RejectReason::limit;
    return permit;
  }
  SyncWaiter waiter(*this);
  const WaitStart start = begin_wait(waiter, admission);
  why = start.refused;
  if (why != RejectReason::none) return Permit();
  // Queued: its end may come on another thread as soon as begin_wait() unlocks (perhaps
  // already has: then block() returns at once), so it is read only once woken.
  if (!start.granted) {
    try {
      clock_owner_->schedule(waiter.timer(),
                             std::chrono::nanoseconds(clock_.to_clock_ns(waiter.until)));
    } catch (...) {
      // Not scheduled (std::bad_alloc): the wait ends at once.
      (void)end_wait(waiter, detail::WaitEnd::timed_out);
    }
    {
      std::stop_callback on_stop(
          admission.stop, [&]() noexcept { (void)end_wait(waiter, detail::WaitEnd::cancelled); });
      waiter.block();
    }
    (void)clock_owner_->cancel(waiter.timer());  // returns once its fire() has, if it fired
  }
  if (waiter.end() == detail::WaitEnd::granted) return permit_of(waiter);
  why = reason_of(waiter.end());
  return Permit();
}

// ---- observe mode and live reconfiguration -----------------------------------------------

Permit AdaptiveLimit::over_limit(std::uint8_t partition, bool partitioned) noexcept {
  would_reject_.increment();
  if (partitioned) {
    std::scoped_lock lock(partition_mutex_);
    std::uint32_t tag = 0;
    if (partitions_) {
      const int slot = resolve_partition(partition);
      ++partitions_->in_flight[slot];
      tag = (partition_layout_ << 8) | static_cast<std::uint32_t>(slot + 1);
    }
    const std::int32_t admitted = in_flight_.fetch_add(1, std::memory_order_seq_cst) + 1;
    note_in_flight(admitted);
    return Permit(this, clock_.ticks(), admitted, tag);
  }
  // relaxed: as try_acquire()'s compare-and-swap; the slot is taken past the limit.
  const std::int32_t admitted = in_flight_.fetch_add(1, std::memory_order_relaxed) + 1;
  note_in_flight(admitted);
  return Permit(this, clock_.ticks(), admitted);
}

void AdaptiveLimit::reconfigure(const AdaptiveLimitConfig& first) {
  first.validate();
  if (ListeningTo* listening = ListeningTo::of(this)) {
    listening->ask(first);
    return;
  }
  // A listener of a change this makes may ask for another: applied next, once it returned.
  std::unique_ptr<AdaptiveLimitConfig> asked;
  for (const AdaptiveLimitConfig* pending = &first; pending != nullptr; pending = asked.get()) {
    const std::unique_ptr<AdaptiveLimitConfig> applying = std::move(asked);
    const AdaptiveLimitConfig& next = *pending;
    std::scoped_lock reconfiguring(reconfigure_mutex_);
    // Everything that may throw comes before the closing token is taken.
    const std::int64_t window_ticks = clock_.to_ticks(next.window().count());
    live_config_.replace(next);
    apply_live(next, window_ticks);

    // The closing token: no window closes while the estimator and the window change, and the
    // admission path never looks at either.
    std::int64_t end = window_end_.load(std::memory_order_relaxed);
    for (;;) {
      if (end == kClosing) {
        std::this_thread::yield();  // a close is under way; it is short
        end = window_end_.load(std::memory_order_relaxed);
        continue;
      }
      // acquire: the last close's estimator state happens before this change.
      if (window_end_.compare_exchange_weak(end, kClosing, std::memory_order_acquire,
                                            std::memory_order_relaxed)) {
        break;
      }
    }
    if (end == kEveryCall) end = paced_window_end_;
    const std::int64_t now = clock_.ticks();
    const std::int32_t previous = limit_.load(std::memory_order_relaxed);
    estimator_.retune(next, estimator_.limit());
    window_ticks_ = window_ticks;
    const double fractional = estimator_.fractional_limit();
    const std::int32_t limit =
        paced_limit(estimator_.limit(), previous, fractional, pacing_, share_);
    // The same sequence lock as close_window(): a snapshot sees the change whole.
    const std::uint64_t sequence = stats_sequence_.load(std::memory_order_relaxed);
    stats_sequence_.store(sequence + 1, std::memory_order_relaxed);
    limit_.store(limit, std::memory_order_release);
    long_latency_ns_.store(estimator_.long_latency_ns(), std::memory_order_release);
    fractional_limit_.store(fractional, std::memory_order_release);
    stats_sequence_.store(sequence + 2, std::memory_order_release);
    observe_.store(next.mode() == PolicyMode::observe, std::memory_order_relaxed);

    if (limit != previous && limit_change_listeners_->has_listeners()) {
      ListeningTo listening(this);
      limit_change_listeners_->publish(LimitChangeEvent{
          instance_id_, previous, limit,
          std::chrono::nanoseconds(window_latency_ns_.load(std::memory_order_relaxed)),
          last_window_max_in_flight_.load(std::memory_order_relaxed), false,
          std::chrono::nanoseconds(estimator_.long_latency_ns())});
      asked = listening.asked();
    }
    // The window under way keeps its start and ends no later than the new length allows.
    store_window_end(std::min(end, now + window_ticks_));
    // A raise, larger shares or a new layout may leave room for waiters now.
    if ((flags_.load(std::memory_order_relaxed) & kQueued) &&
        waiting_.load(std::memory_order_seq_cst) != 0)
      grant_waiters(limit > previous);
  }
}

// What the admission path, the release and the wait queue read, from `next`: made (cold)
// before the flags that send calls to it are set, and never freed before the limit.
void AdaptiveLimit::apply_live(const AdaptiveLimitConfig& next, std::int64_t window_ticks) {
  for (int c = 0; c < kLimitedClasses; ++c)
    shares_[c].store(fixed_share(next, c), std::memory_order_relaxed);
  // A new verdict cache for the new dropOn; a call that loaded the old one may still use it.
  verdict_caches_.push_back(std::make_unique<detail::StockVerdicts>());
  drop_verdicts_.store(verdict_caches_.back().get(), std::memory_order_release);

  const bool enabled = next.enabled();
  const bool waits = enabled && next.max_wait().count() > 0;
  const std::uint8_t was = flags_.load(std::memory_order_relaxed);
  if (next.latency_histogram() && (was & kHistogram) == 0) {
    // A fresh histogram: its percentiles describe the calls since it was switched on.
    histograms_.push_back(std::make_unique<detail::LatencyHistogram>(window_ticks, clock_.ticks()));
    latency_.store(histograms_.back().get(), std::memory_order_release);
  }
  if (waits && queue_owner_ == nullptr) {
    auto made = std::make_unique<detail::WaitQueue>();
    make_wait_rejections(*made, instance_id_);
    queue_owner_ = std::move(made);
    queue_.store(queue_owner_.get(), std::memory_order_release);
  }
  detail::WaitQueue* const waiting = queue_owner_.get();
  std::unique_lock<std::mutex> queue_lock;
  if (waiting != nullptr) queue_lock = std::unique_lock<std::mutex>(waiting->mutex);
  apply_partitions(next, window_ticks);

  const std::int64_t now = clock_.ticks();
  max_wait_ticks_.store(waits ? clock_.to_ticks(next.max_wait().count()) : 0,
                        std::memory_order_relaxed);
  if (!enabled && waiting != nullptr) {
    // Switched off: a pass-through admits everyone, the waiters too (their slots uncounted).
    while (detail::LimitWaiter* waiter = waiting->lowest_oldest()) {
      waiter->granted_at = now;
      waiter->admitted = 0;
      waiter->granted_tag = 0;
      waits_granted_.fetch_add(1, std::memory_order_relaxed);
      end_locked(*waiter, detail::WaitEnd::granted, now);
    }
  }
  std::uint8_t flags = 0;
  if (!enabled) flags |= kDisabled;
  if (waits) flags |= kWaits;
  // Releases keep looking for waiters until the last one has gone (end_locked() then clears it).
  if (waits || (waiting != nullptr && waiting->size > 0)) flags |= kQueued;
  if (next.latency_histogram()) flags |= kHistogram;
  if (partitions_) flags |= kPartitioned;
  if (!enabled || waits || partitions_) flags |= kSpecial;
  // release: whoever sees a flag sees what it sends the call to.
  flags_.store(flags, std::memory_order_release);
}

// A new layout of partitions (or none): the counts of the calls in flight and the rejections
// carry over by partition name (a partition it drops: to what no partition reserves), and the
// calls admitted under an earlier layout release into the slot their partition has now.
// Called under the queue's mutex (when there is a queue): waiters resolve their partition
// against the layout that grants them.
void AdaptiveLimit::apply_partitions(const AdaptiveLimitConfig& next, std::int64_t window_ticks) {
  std::unique_ptr<detail::LimitPartitions> layout =
      next.enabled() && !next.partitions().empty()
          ? std::make_unique<detail::LimitPartitions>(next, window_ticks)
          : nullptr;
  std::scoped_lock lock(partition_mutex_);
  if (!layout && !partitions_) return;
  if (layout && partitions_ && same_layout(*layout, *partitions_)) return;  // keep the counts
  if (partitions_) {
    std::array<std::uint8_t, kMaxPartitions + 1> moved;
    moved.fill(kUncounted);
    for (int s = 0; s < partitions_->slots; ++s) {
      if (!layout) continue;
      const int to = layout->slot_of(partitions_->names[s]);
      moved[s] = static_cast<std::uint8_t>(to);
      layout->in_flight[to] += partitions_->in_flight[s];
      layout->rejected[to] += partitions_->rejected[s];
      layout->asked_until[to] = std::max(layout->asked_until[to], partitions_->asked_until[s]);
    }
    for (auto& earlier : partition_remap_) {
      for (std::uint8_t& slot : earlier) {
        if (slot != kUncounted) slot = moved[slot];
      }
    }
    partition_remap_.push_back(moved);  // at index partition_layout_, the layout retired
  }
  partitions_ = std::move(layout);
  if (partitions_) partition_layout_ = static_cast<std::uint32_t>(partition_remap_.size());
}

namespace {

// The four shares are one setter and one getter, taking the class.
template <CallClass kClass>
void apply_share(AdaptiveLimitConfig& config, const detail::SettingValue& value) {
  config.class_share(kClass, value.number);
}
template <CallClass kClass>
detail::SettingValue read_share(const AdaptiveLimitConfig& config) {
  return detail::value_of(config.class_share(kClass));
}

}  // namespace

// The file keys in the documented order (R4C-CFG-003 lists them so).
std::span<const detail::Setting<AdaptiveLimitKind::Config>> AdaptiveLimitKind::settings() noexcept {
  using R = detail::SettingRows<Config>;  // Config: the kind's
  using enum detail::SettingType;
  static constexpr detail::Setting<Config> kSettings[] = {
      R::field<bool, &Config::enabled, &Config::enabled>("enabled", "enabled"),
      R::file_field<PolicyMode, &Config::mode, &Config::mode>("mode", "mode"),
      R::file_field<bool, &Config::latency_histogram, &Config::latency_histogram>(
          "latencyHistogram", "latency_histogram"),
      R::file_field<double, &Config::sample_percentile, &Config::sample_percentile>(
          "samplePercentile", "sample_percentile"),
      R::field<LimitAlgorithm, &Config::algorithm, &Config::algorithm>("algorithm", "algorithm"),
      R::field<int, &Config::initial_limit, &Config::initial_limit>("initialLimit",
                                                                    "initial_limit"),
      R::field<int, &Config::min_limit, &Config::min_limit>("minLimit", "min_limit"),
      R::field<int, &Config::max_limit, &Config::max_limit>("maxLimit", "max_limit"),
      R::field<std::chrono::nanoseconds, &Config::window, &Config::window>("window", "window"),
      R::file_field<int, &Config::min_window_samples, &Config::min_window_samples>(
          "minWindowSamples", "min_window_samples"),
      R::file_field<double, &Config::smoothing, &Config::smoothing>("smoothing", "smoothing"),
      R::file_field<double, &Config::rtt_tolerance, &Config::rtt_tolerance>("rttTolerance",
                                                                            "rtt_tolerance"),
      R::file_field<int, &Config::long_window, &Config::long_window>("longWindow", "long_window"),
      R::file_field<int, &Config::queue_size, &Config::queue_size>("queueSize", "queue_size"),
      R::file_field<double, &Config::backoff_ratio, &Config::backoff_ratio>("backoffRatio",
                                                                            "backoff_ratio"),
      R::file_field<int, &Config::probe_multiplier, &Config::probe_multiplier>("probeMultiplier",
                                                                               "probe_multiplier"),
      R::file_field<int, &Config::alpha, &Config::alpha>("alpha", "alpha"),
      R::file_field<int, &Config::beta, &Config::beta>("beta", "beta"),
      R::field<std::vector<ExceptionType>, &Config::drop_on, &Config::drop_on_types>("dropOn",
                                                                                     "drop_on"),
      R::file_field<std::chrono::nanoseconds, &Config::max_wait, &Config::max_wait>("maxWait",
                                                                                    "max_wait"),
      R::file_field<int, &Config::max_queue, &Config::max_queue>("maxQueue", "max_queue"),
      R::file_field<double, &Config::max_queue_factor, &Config::max_queue_factor>(
          "maxQueueFactor", "max_queue_factor"),
      R::file_field<QueueOrder, &Config::queue_order, &Config::queue_order>("queueOrder",
                                                                            "queue_order"),
      R::file_field<std::chrono::nanoseconds, &Config::codel_target, &Config::codel_target>(
          "codelTarget", "codel_target"),
      R::file_field<std::chrono::nanoseconds, &Config::codel_interval, &Config::codel_interval>(
          "codelInterval", "codel_interval"),
      R::file_only("criticalShare", "critical_share", number, &apply_share<CallClass::critical>,
                   &read_share<CallClass::critical>),
      R::file_only("degradedShare", "degraded_share", number, &apply_share<CallClass::degraded>,
                   &read_share<CallClass::degraded>),
      R::file_only("bestEffortShare", "best_effort_share", number,
                   &apply_share<CallClass::best_effort>, &read_share<CallClass::best_effort>),
      R::file_only("bulkShare", "bulk_share", number, &apply_share<CallClass::bulk>,
                   &read_share<CallClass::bulk>),
      R::file_only(
          "partitions", "partitions", named_numbers,
          [](auto& c, auto& v) {
            std::vector<LimitPartitionShare> partitions;
            for (const auto& pair : v.named_numbers)
              partitions.push_back({pair.first, pair.second});
            c.partitions(std::move(partitions));
          },
          [](const auto& c) {
            std::vector<std::pair<std::string, double>> pairs;
            for (const LimitPartitionShare& p : c.partitions()) pairs.emplace_back(p.name, p.share);
            return detail::value_of(std::move(pairs));
          }),
      R::file_field<bool, &Config::partition_borrow, &Config::partition_borrow>(
          "partitionBorrow", "partition_borrow")};
  return kSettings;
}

void AdaptiveLimitKind::metrics(const Snapshot& s, metrics::Emitter& out) {
  using metrics::count;
  using metrics::seconds;
  out.rejected(s.rejected);
  out.counter("r4c.adaptivelimit.limit.changes", "Windows that changed the adaptive limit.",
              count(s.limit_changes));
  out.gauge("r4c.adaptivelimit.limit", "How many calls the adaptive limit lets run at once.",
            s.limit);
  out.gauge("r4c.adaptivelimit.concurrent.calls", "Calls holding a slot of the adaptive limit.",
            s.in_flight);
  out.gauge("r4c.adaptivelimit.min.limit", "The lowest value the adaptive limit may take.",
            s.min_limit);
  out.gauge("r4c.adaptivelimit.max.limit", "The highest value the adaptive limit may take.",
            s.max_limit);
  out.counter("r4c.adaptivelimit.windows", "Windows that recomputed the adaptive limit.",
              count(s.windows));
  out.gauge("r4c.adaptivelimit.window.latency.seconds",
            "Average latency of the last window that recomputed the adaptive limit.",
            seconds(s.window_latency));
  detail::emit_would_reject(
      out, s, "r4c.adaptivelimit.would.reject",
      "Calls the adaptive limit in observe mode would have rejected and admitted.");
  out.histogram("r4c.adaptivelimit.call.latency.seconds",
                "Latency of the calls the adaptive limit sampled (latencyHistogram on).",
                s.latency);  // nothing unless enabled
  for (const LimitPartitionSnapshot& p : s.partitions) {
    const std::vector<metrics::Label> partition = {{"partition", p.name.empty() ? "none" : p.name}};
    out.gauge("r4c.adaptivelimit.partition.concurrent.calls",
              "Calls holding a slot of the adaptive limit, by partition.", p.in_flight, partition);
    out.gauge("r4c.adaptivelimit.partition.guaranteed.calls",
              "Slots of the adaptive limit a partition is guaranteed now.", p.guaranteed,
              partition);
    out.counter("r4c.adaptivelimit.partition.rejections",
                "Calls the adaptive limit rejected, by partition.", count(p.rejected), partition);
  }
  // Only once waits or classes are in use, so that a plain limit's metrics stay as they were.
  std::uint64_t beyond_plain = s.waits_granted;
  for (int r = 2; r < kRejectReasons; ++r) beyond_plain += s.rejected_by_reason[r];
  for (int c = 1; c < kLimitedClasses; ++c) beyond_plain += s.rejected_by_class[c];
  if (s.max_queue == 0 && beyond_plain == 0) return;
  out.gauge("r4c.adaptivelimit.waiting.calls", "Calls waiting for a slot of the adaptive limit.",
            s.waiting);
  out.counter("r4c.adaptivelimit.waits.granted", "Waits for a slot that ended with the slot.",
              count(s.waits_granted));
  out.counter("r4c.adaptivelimit.wait.seconds", "Total time granted waits waited for their slot.",
              seconds(s.wait_time));
  out.counter("r4c.adaptivelimit.waits.granted.on.raise",
              "Waiters granted a slot by a window that raised the adaptive limit.",
              count(s.granted_on_raise));
  for (int r = 1; r < kRejectReasons; ++r) {
    out.counter("r4c.adaptivelimit.rejections", "Calls the adaptive limit rejected, by reason.",
                count(s.rejected_by_reason[r]),
                {{"reason", std::string(to_string(static_cast<RejectReason>(r)))}});
  }
  for (int c = 0; c < kLimitedClasses; ++c) {
    out.counter("r4c.adaptivelimit.class.rejections",
                "Calls the adaptive limit rejected, by priority class.",
                count(s.rejected_by_class[c]),
                {{"class", std::string(to_string(static_cast<CallClass>(c)))}});
  }
}

}  // namespace r4c
