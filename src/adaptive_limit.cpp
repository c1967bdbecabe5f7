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

std::array<std::uint32_t, kLimitedClasses> fixed_shares(const AdaptiveLimitConfig& config) {
  std::array<std::uint32_t, kLimitedClasses> shares{};
  for (int c = 0; c < kLimitedClasses; ++c) {
    shares[c] = static_cast<std::uint32_t>(config.class_share(static_cast<CallClass>(c)) * 65536.0);
  }
  return shares;
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
      enabled_(config.enabled()),
      waits_(config.enabled() && config.max_wait().count() > 0),
      special_(!enabled_ || waits_ || !config.partitions().empty()),
      observe_(config.mode() == PolicyMode::observe),
      shares_(fixed_shares(config)),
      clock_(detail::or_system_clock(clock)),
      window_end_(0),
      window_ticks_(clock_.to_ticks(config.window().count())),
      latency_(config.latency_histogram()
                   ? std::make_unique<detail::LatencyHistogram>(window_ticks_, clock_.ticks())
                   : nullptr),
      queue_(waits_ ? std::make_unique<detail::WaitQueue>() : nullptr),
      partitions_(config.enabled() && !config.partitions().empty()
                      ? std::make_unique<detail::LimitPartitions>(config, window_ticks_)
                      : nullptr),
      max_wait_ticks_(clock_.to_ticks(config.max_wait().count())),
      instance_id_(std::move(instance_id)),
      config_(std::move(config)),
      clock_owner_(std::move(clock)),
      rejection_(std::make_exception_ptr(LimitExceededException(
          instance_id_,
          "adaptive limit '" + instance_id_ + "' is full: the call was rejected without running"))),
      limit_change_listeners_(
          std::make_shared<detail::EventHub<LimitChangeEvent>>(AdaptiveLimitKind::kNames.metrics)),
      estimator_(config_),
      live_config_(config_) {
  window_end_.store(clock_.ticks() + window_ticks_, std::memory_order_relaxed);
  fractional_limit_.store(limit_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  if (queue_) make_wait_rejections(*queue_, instance_id_);
}

AdaptiveLimit::~AdaptiveLimit() = default;

Subscription AdaptiveLimit::on_limit_change(
    std::function<void(const LimitChangeEvent&)> listener) const {
  return limit_change_listeners_->subscribe(std::move(listener));
}

std::uint8_t AdaptiveLimit::partition_slot(LimitPartition partition) const noexcept {
  if (!partitions_) return 0;
  const int slot = partition.index() + 1;
  return static_cast<std::uint8_t>((slot < partitions_->slots ? slot : 0) + 1);
}

LimitPartition AdaptiveLimit::partition(std::string_view name) const {
  if (const std::optional<int> index = config_.partition_index(name))
    return LimitPartition::at(*index);
  std::string names;
  for (const LimitPartitionShare& known : config_.partitions())
    names += (names.empty() ? "" : ", ") + known.name;
  throw ConfigException("R4C-REG-012", "adaptive limit '" + instance_id_ + "' has no partition '" +
                                           std::string(name) + "'; valid: " +
                                           (names.empty() ? "none (it has no partitions)" : names));
}

void AdaptiveLimit::throw_rejected(RejectReason reason) const {
  std::rethrow_exception(rejection(reason));
}

const std::exception_ptr& AdaptiveLimit::rejection(RejectReason reason) const noexcept {
  if (queue_ == nullptr) return rejection_;
  const std::exception_ptr& special = queue_->rejections[static_cast<int>(reason)];
  return special ? special : rejection_;
}

bool AdaptiveLimit::is_drop(const std::exception_ptr& failure) const noexcept {
  if (!failure) return false;
  return detail::ask_rethrown<&AdaptiveLimit::is_drop_current>(*this, failure);
}

bool AdaptiveLimit::is_drop(const std::error_code& code) const noexcept {
  const auto& predicate = config_.drop_on_error();
  try {
    return code && predicate && predicate(code);
  } catch (...) {
    return false;  // a predicate that throws decides nothing
  }
}

bool AdaptiveLimit::is_drop_current() const noexcept {
  for (const ExceptionType& type : config_.drop_on_types()) {
    if (type.matches_current()) return true;
  }
  if (!config_.drop_on_error()) return false;
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
  if (const double percentile = live_config_->sample_percentile(); percentile > 0.0 && latency_) {
    if (const std::int64_t at = latency_->quantile_since_last(percentile); at > 0) sample_ns = at;
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
  if (waits_ && next > previous && waiting_.load(std::memory_order_seq_cst) != 0)
    granted = grant_waiters(true);

  // Before the window reopens, so that events come in window order; a listener's snapshot
  // shows this window.
  if (next != previous && limit_change_listeners_->has_listeners()) [[unlikely]] {
    limit_change_listeners_->publish(LimitChangeEvent{
        instance_id_, previous, next, std::chrono::nanoseconds(aggregate.avg_latency_ns),
        max_in_flight, aggregate.dropped, std::chrono::nanoseconds(estimator_.long_latency_ns()),
        granted});
  }

  // The new window starts now.
  store_window_end(now + window_ticks_);
}

AdaptiveLimitSnapshot AdaptiveLimit::snapshot() const {
  AdaptiveLimitSnapshot snap;
  const AdaptiveLimitConfig& config = live_config_.get();
  snap.min_limit = config.min_limit();
  snap.max_limit = config.max_limit();
  snap.algorithm = config.algorithm();
  snap.mode = config.mode();
  snap.would_have_rejected = would_reject_.total();
  snap.enabled = enabled_;
  snap.in_flight = in_flight_.load(std::memory_order_relaxed);
  if (latency_) {
    // The histogram's sum is the one the stripes keep for the windows (since the start).
    std::uint64_t sum_ns = 0;
    for (const Stripe& stripe : stripes_) {
      sum_ns += stripe.latency_sum_ns.load(std::memory_order_relaxed);
    }
    snap.latency = latency_->distribution(std::chrono::nanoseconds(sum_ns));
  }
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
  if (waits_) {
    snap.waiting = waiting_.load(std::memory_order_relaxed);
    snap.max_queue = queue_bound();
    snap.waits_granted = waits_granted_.load(std::memory_order_relaxed);
    snap.wait_time = std::chrono::nanoseconds(wait_time_ns_.load(std::memory_order_relaxed));
    snap.granted_on_raise = granted_on_raise_.load(std::memory_order_relaxed);
  }
  if (partitions_) {
    std::array<std::int32_t, kMaxPartitions + 1> in_flight{};
    {
      std::scoped_lock lock(partitions_->mutex);
      in_flight = partitions_->in_flight;
    }
    // The config's partitions in order, then what none reserves (slot 0).
    for (int i = 1; i <= partitions_->slots; ++i) {
      const int slot = i % partitions_->slots;
      LimitPartitionSnapshot part;
      part.name = slot == 0 ? "" : config_.partitions()[static_cast<std::size_t>(slot - 1)].name;
      part.share = partitions_->shares[slot];
      part.guaranteed = partitions_->guaranteed(slot, snap.limit);
      part.in_flight = in_flight[slot];
      part.rejected = partitions_->rejected[slot].load(std::memory_order_relaxed);
      snap.partitions.push_back(std::move(part));
    }
  }
  return snap;
}

// ---- admission beyond the plain path ----------------------------------------------------

void AdaptiveLimit::count_rejection(CallClass cls, RejectReason reason,
                                    std::uint8_t partition) noexcept {
  if (partition != 0) partitions_->rejected[partition - 1].fetch_add(1, std::memory_order_relaxed);
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

std::int32_t AdaptiveLimit::take(CallClass cls, std::uint8_t partition) noexcept {
  if (partition != 0) return take_partitioned(cls, partition);
  const std::uint64_t share = shares_[static_cast<int>(cls)];
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
std::int32_t AdaptiveLimit::take_partitioned(CallClass cls, std::uint8_t partition) noexcept {
  const int slot = partition - 1;
  std::scoped_lock lock(partitions_->mutex);
  const std::int32_t limit = open_limit();
  const auto allowed = static_cast<std::int32_t>(
      (static_cast<std::uint64_t>(limit) * shares_[static_cast<int>(cls)]) >> kShareShift);
  // seq_cst: as take()'s compare-and-swap, against release_slot()'s look for waiters.
  const std::int32_t running = in_flight_.load(std::memory_order_seq_cst);
  if (!partitions_->allows(slot, limit, clock_.ticks()) || running >= allowed) return 0;
  in_flight_.fetch_add(1, std::memory_order_seq_cst);
  ++partitions_->in_flight[slot];
  note_in_flight(running + 1);
  return running + 1;
}

void AdaptiveLimit::release_partitioned(std::uint8_t partition) noexcept {
  {
    std::scoped_lock lock(partitions_->mutex);
    --partitions_->in_flight[partition - 1];
    // seq_cst: as release_slot(), against begin_wait()'s increment of waiting_.
    in_flight_.fetch_sub(1, std::memory_order_seq_cst);
  }
  if (waits_ && waiting_.load(std::memory_order_seq_cst) != 0) grant_waiters(false);
}

Permit AdaptiveLimit::admit_now(CallClass cls, std::uint8_t partition) noexcept {
  if (!enabled_ || cls == CallClass::bypass) return Permit(this, 0, 0);
  // waits_: a newcomer may not pass a waiter of its class or a higher one. With partitions,
  // the waiters are served first (each a slot its partition may take); whoever is left
  // waiting could not use what the newcomer may take.
  if (waits_ && waiting_.load(std::memory_order_seq_cst) != 0) {
    std::scoped_lock lock(queue_->mutex);
    if (partition != 0) {
      grant_locked(clock_.ticks(), false);
    } else if (queue_->waits_at_or_above(cls)) {
      return Permit();
    }
  }
  if (const std::int32_t admitted = take(cls, partition))
    return Permit(this, clock_.ticks(), admitted, partition);
  return Permit();
}

Permit AdaptiveLimit::try_acquire_special(CallClass cls, std::uint8_t partition) noexcept {
  Permit permit = admit_now(cls, partition);
  if (!permit) {
    // observe mode with partitions (no wait: validate() refuses observe with max_wait).
    if (partition != 0 && observe_.load(std::memory_order_relaxed)) return over_limit(partition);
    count_rejection(cls, RejectReason::limit, partition);
  }
  return permit;
}

int AdaptiveLimit::queue_bound() const noexcept {
  const double factor = config_.max_queue_factor();
  if (factor <= 0.0) return config_.max_queue();
  const double bound = std::ceil(factor * limit_.load(std::memory_order_relaxed));
  return std::max(1, static_cast<int>(std::min(bound, double{AdaptiveLimitConfig::kMaxMaxQueue})));
}

void AdaptiveLimit::end_locked(detail::LimitWaiter& waiter, detail::WaitEnd end,
                               std::int64_t now) noexcept {
  queue_->remove(waiter, now);
  waiter.end_ = end;
  waiting_.fetch_sub(1, std::memory_order_seq_cst);
  if (end != detail::WaitEnd::granted && !waiter.counted_by_caller)
    count_rejection(waiter.cls, reason_of(end), waiter.partition);
  waiter.wake();
}

int AdaptiveLimit::grant_locked(std::int64_t now, bool raise) noexcept {
  const QueueOrder order = config_.queue_order();
  bool newest_first = order == QueueOrder::lifo;
  if (order == QueueOrder::adaptive_lifo && queue_->size > 0 &&
      now - queue_->last_empty > clock_.to_ticks(config_.codel_interval().count())) {
    // A standing queue: newest first, and nobody waits past the CoDel target any more.
    newest_first = true;
    const std::int64_t oldest_allowed = now - clock_.to_ticks(config_.codel_target().count());
    for (detail::WaitList& list : queue_->lists) {
      while (!list.empty() && list.oldest()->since < oldest_allowed) {
        end_locked(*list.oldest(), detail::WaitEnd::timed_out, now);
      }
    }
  }
  int granted = 0;
  for (;;) {
    std::int32_t admitted = 0;
    detail::LimitWaiter* waiter = partitions_ ? partition_waiter(newest_first, admitted)
                                              : class_waiter(newest_first, admitted);
    if (waiter == nullptr) break;
    waiter->granted_at = clock_.ticks();
    waiter->admitted = admitted;
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

detail::LimitWaiter* AdaptiveLimit::class_waiter(bool newest_first,
                                                 std::int32_t& admitted) noexcept {
  detail::WaitList* list = queue_->highest();
  if (list == nullptr) return nullptr;
  detail::LimitWaiter* waiter = newest_first ? list->newest() : list->oldest();
  // Shares never grow towards lower classes: when the highest class waiting finds no room,
  // nobody below it would.
  admitted = take(waiter->cls);
  return admitted != 0 ? waiter : nullptr;
}

// The highest class first, and in it the queue's order; a waiter whose partition may not take
// the slot is passed over (it keeps its place), and so is the rest of its partition: its lower
// classes have smaller shares and the same partition rule.
detail::LimitWaiter* AdaptiveLimit::partition_waiter(bool newest_first,
                                                     std::int32_t& admitted) noexcept {
  std::uint32_t stuck = 0;  // partitions whose waiters found no room, by slot
  for (detail::WaitList& list : queue_->lists) {
    for (detail::LimitWaiter* waiter = newest_first ? list.newest() : list.oldest();
         waiter != nullptr; waiter = newest_first ? waiter->prev : waiter->next) {
      const std::uint32_t bit = 1u << waiter->partition;
      if ((stuck & bit) != 0) continue;
      admitted = take(waiter->cls, waiter->partition);
      if (admitted != 0) return waiter;
      stuck |= bit;
    }
  }
  return nullptr;
}

int AdaptiveLimit::grant_waiters(bool raise) noexcept {
  std::scoped_lock lock(queue_->mutex);
  return grant_locked(clock_.ticks(), raise);
}

AdaptiveLimit::WaitStart AdaptiveLimit::begin_wait(detail::LimitWaiter& waiter,
                                                   const Admission& admission) noexcept {
  const CallClass cls = admission.cls;
  std::scoped_lock lock(queue_->mutex);
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
  // With partitions the waiters are served first, as in admit_now().
  if (waiter.partition != 0 && waiting_.load(std::memory_order_relaxed) != 0)
    grant_locked(now, false);
  if (waiter.partition != 0 || !queue_->waits_at_or_above(cls)) {
    if (const std::int32_t admitted = take(cls, waiter.partition)) {
      waiter.granted_at = clock_.ticks();
      waiter.admitted = admitted;
      waiter.end_ = detail::WaitEnd::granted;
      return {RejectReason::none, true};
    }
  }
  RejectReason refused = RejectReason::none;
  std::int64_t until = now + max_wait_ticks_;
  if (admission.stop.stop_requested()) {
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
  if (refused == RejectReason::none && queue_->size >= queue_bound()) {
    detail::LimitWaiter* victim = queue_->lowest_oldest();
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
  if (queue_->size == 0) queue_->last_empty = now;
  queue_->push(waiter);
  waiting_.fetch_add(1, std::memory_order_seq_cst);
  // A release between the failed take() and the increment saw nobody waiting: look again.
  grant_locked(now, false);
  return {RejectReason::none, false};
}

detail::WaitEnd AdaptiveLimit::end_wait(detail::LimitWaiter& waiter, detail::WaitEnd end) noexcept {
  std::scoped_lock lock(queue_->mutex);
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
  if (!waits_ || admission.cls == CallClass::bypass) {
    Permit permit = try_acquire(admission.cls);
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

Permit AdaptiveLimit::over_limit(std::uint8_t partition) noexcept {
  would_reject_.increment();
  if (partition != 0) {
    std::scoped_lock lock(partitions_->mutex);
    ++partitions_->in_flight[partition - 1];
    const std::int32_t admitted = in_flight_.fetch_add(1, std::memory_order_seq_cst) + 1;
    note_in_flight(admitted);
    return Permit(this, clock_.ticks(), admitted, partition);
  }
  // relaxed: as try_acquire()'s compare-and-swap; the slot is taken past the limit.
  const std::int32_t admitted = in_flight_.fetch_add(1, std::memory_order_relaxed) + 1;
  note_in_flight(admitted);
  return Permit(this, clock_.ticks(), admitted);
}

bool AdaptiveLimit::live_setting(std::string_view key) noexcept {
  // What the admission path or the wait queue holds as constants, built once.
  static constexpr std::string_view kFixed[] = {
      "enabled",         "dropOn",      "maxWait",       "maxQueue",        "maxQueueFactor",
      "queueOrder",      "codelTarget", "codelInterval", "criticalShare",   "degradedShare",
      "bestEffortShare", "bulkShare",   "partitions",    "partitionBorrow", "latencyHistogram"};
  return std::find(std::begin(kFixed), std::end(kFixed), key) == std::end(kFixed);
}

void AdaptiveLimit::reconfigure(const AdaptiveLimitConfig& next) {
  next.validate();
  detail::check_fixed_settings<AdaptiveLimitKind>(live_config_.get(), next, instance_id_);
  // Everything that may throw comes before the closing token is taken.
  const std::int64_t window_ticks = clock_.to_ticks(next.window().count());
  live_config_.replace(next);

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
  const std::int32_t limit = paced_limit(estimator_.limit(), previous, fractional, pacing_, share_);
  // The same sequence lock as close_window(): a snapshot sees the change whole.
  const std::uint64_t sequence = stats_sequence_.load(std::memory_order_relaxed);
  stats_sequence_.store(sequence + 1, std::memory_order_relaxed);
  limit_.store(limit, std::memory_order_release);
  long_latency_ns_.store(estimator_.long_latency_ns(), std::memory_order_release);
  fractional_limit_.store(fractional, std::memory_order_release);
  stats_sequence_.store(sequence + 2, std::memory_order_release);
  observe_.store(next.mode() == PolicyMode::observe, std::memory_order_relaxed);

  if (limit != previous && limit_change_listeners_->has_listeners()) {
    limit_change_listeners_->publish(LimitChangeEvent{
        instance_id_, previous, limit,
        std::chrono::nanoseconds(window_latency_ns_.load(std::memory_order_relaxed)),
        last_window_max_in_flight_.load(std::memory_order_relaxed), false,
        std::chrono::nanoseconds(estimator_.long_latency_ns())});
  }
  if (waits_ && limit > previous && waiting_.load(std::memory_order_seq_cst) != 0)
    grant_waiters(true);
  // The window under way keeps its start and ends no later than the new length allows.
  store_window_end(std::min(end, now + window_ticks_));
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
