// SPDX-License-Identifier: Apache-2.0
// Latency distributions: an optional histogram of a policy's call latencies.
//
// Off by default (a policy's admitted calls publish nothing unless asked to). Switched on per
// instance, e.g. `adaptiveLimit.latencyHistogram = true` (AdaptiveLimitConfig::latency_histogram),
// every call that ends with a sample records its latency into the calling thread's own stripe:
// a fixed array of HdrHistogram-style log-linear buckets (8 per power of two, so a bucket is at
// most 1/8 of its lower bound wide), updated with a relaxed load and store, no atomic
// read-modify-write, no allocation. Snapshots read the stripes and report p50, p90, p99 and
// p99.9 of the last window and since the start; the metrics expose a Prometheus histogram
// (docs/observability.md, "Latency histograms").
//
//   r4c::AdaptiveLimit limit("orders", r4c::AdaptiveLimitConfig{}.latency_histogram(true));
//   ...
//   r4c::LatencyDistribution latency = limit.snapshot().latency;
//   std::chrono::nanoseconds p99 = latency.total.p99;
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <memory>

#include "r4c/detail/cache_line.hpp"
#include "r4c/detail/thread_slot.hpp"

namespace r4c {

/// Percentiles of a set of latencies. Each is the upper bound of the bucket its rank falls in:
/// never below the true value, at most 1/8 above it (below 8 ns: exact). All 0 while `count`
/// is 0.
struct LatencyPercentiles {
  std::uint64_t count = 0;  // latencies in the set
  std::chrono::nanoseconds p50{0};
  std::chrono::nanoseconds p90{0};
  std::chrono::nanoseconds p99{0};
  std::chrono::nanoseconds p999{0};
  friend bool operator==(const LatencyPercentiles&, const LatencyPercentiles&) = default;
};

/// How many `le` bounds a latency histogram exposes (Prometheus `_bucket`), without +Inf.
inline constexpr int kLatencyBounds = 27;
/// The i-th bound: 2^(10+i) ns, from 1.024 µs to about 68.7 s (exact bucket edges).
constexpr std::chrono::nanoseconds latency_bound(int i) noexcept {
  return std::chrono::nanoseconds(std::int64_t{1} << (10 + i));
}

/// What a policy's latency histogram holds, as a value (in its snapshot).
struct LatencyDistribution {
  /// Whether the policy records a histogram; everything else is 0 when not.
  bool enabled = false;
  /// The last window that ended (the policy's window length, ended by time), and since the
  /// start.
  LatencyPercentiles window;
  LatencyPercentiles total;
  /// The sum of every latency since the start (Prometheus `_sum`).
  std::chrono::nanoseconds sum{0};
  /// buckets[i]: latencies at most latency_bound(i) since the start (Prometheus `_bucket`,
  /// cumulative); total.count is the +Inf bucket.
  std::array<std::uint64_t, kLatencyBounds> buckets{};
};

namespace detail {

/// The histogram itself: per-thread stripes of log-linear buckets, summed on read.
/// Thread safety: record() from any thread (a thread with an exclusive slot is its stripe's
/// only writer; threads beyond detail::kThreadSlots share stripes, and a sample of theirs may
/// then be lost, never invented); distribution() from any thread.
/// Allocation: once, at construction (about 200 KiB); none afterwards.
class LatencyHistogram {
 public:
  static constexpr int kSubBits = 3;  // 8 buckets per power of two
  static constexpr int kSub = 1 << kSubBits;
  static constexpr int kMaxExponent = 40;  // latencies above 2^41 ns (~36 min) land in the last
  static constexpr int kBuckets = kSub + (kMaxExponent - kSubBits + 1) * kSub;

  /// A histogram whose window is `window_ticks` long, ticks as the caller's clock counts them,
  /// the first window ending at `now + window_ticks`.
  LatencyHistogram(std::int64_t window_ticks, std::int64_t now) noexcept;

  /// Records one latency; `now` in the same ticks (ends a window when it is over).
  void record(std::int64_t latency_ns, std::int64_t now) noexcept {
    // A record after the window's end belongs to the next window: the end comes first.
    if (now >= window_end_.load(std::memory_order_relaxed)) [[unlikely]]
      close_window(now);
    const auto value = static_cast<std::uint64_t>(latency_ns > 0 ? latency_ns : 0);
    const ThreadSlot slot = thread_slot();
    Stripe& stripe = stripes_[slot.index];
    if (!slot.exclusive) [[unlikely]] {
      stripe.counts[bucket_of(value)].fetch_add(1, std::memory_order_relaxed);
      stripe.sum.fetch_add(value, std::memory_order_relaxed);
      return;
    }
    // The latency goes into the stripe's ring, whose slot is known before the latency is: no
    // load waits for it, which a bucket's increment would (its address is the latency's
    // bucket), and the next call's atomic read-modify-write waits for every store before it.
    // The fold buckets and sums the ring, so a call stores the latency and its count only.
    // Plain loads and stores: the stripe has one writer (see detail/thread_slot.hpp).
    const std::uint64_t next = stripe.next.load(std::memory_order_relaxed);
    stripe.ring[next % kRing].store(value, std::memory_order_relaxed);
    // release: a reader that sees `next + 1` sees the latency.
    stripe.next.store(next + 1, std::memory_order_release);
    if ((next + 1) % kRing == 0) [[unlikely]]
      fold(stripe);
  }

  /// A picture of the histogram: percentiles of the last window and since the start, and the
  /// sum of every latency recorded (negative ones as 0).
  LatencyDistribution distribution() const noexcept;
  /// The `quantile` (0 < q < 1) of the latencies recorded since the previous call (since the
  /// start, the first time), as the percentiles give it (its bucket's upper bound); 0 when none
  /// were. One caller at a time (an adaptive limit's window closer: samplePercentile).
  std::int64_t quantile_since_last(double quantile) noexcept;

  /// The bucket of a latency in ns: buckets hold (lower, upper] with upper = bucket_bound().
  static constexpr int bucket_of(std::uint64_t value) noexcept {
    // Without a branch: a call's latencies straddle the edges below 8 ns and beyond, and a
    // mispredicted branch would cost more than the rest. (lower, upper]: the Prometheus `le`
    // way, so v is the value less one.
    const std::uint64_t v = value - (value != 0);
    // The power of two of v, at least kSubBits (below 2^kSubBits the buckets are exact); then
    // v's top kSubBits + 1 bits, which already include the kSub of the octaves below.
    const int shift = (63 - kSubBits) - std::countl_zero(v | kSub);
    const auto index = static_cast<std::uint64_t>(shift) * kSub + (v >> shift);
    return static_cast<int>(std::min<std::uint64_t>(index, kBuckets - 1));
  }
  /// The largest latency in ns that bucket `index` holds.
  static constexpr std::uint64_t bucket_bound(int index) noexcept {
    if (index < kSub) return static_cast<std::uint64_t>(index) + 1;
    const int exponent = (index - kSub) / kSub + kSubBits;
    const auto sub = static_cast<std::uint64_t>((index - kSub) % kSub);
    const int shift = exponent - kSubBits;
    return ((kSub + sub) << shift) + (std::uint64_t{1} << shift);
  }

 private:
  using Counts = std::array<std::uint64_t, kBuckets>;
  static constexpr std::uint64_t kRing = 64;  // latencies a stripe holds before it folds them
  struct alignas(kCacheLine) Stripe {
    std::array<std::atomic<std::uint64_t>, kBuckets> counts{};
    // The owner's latencies not in `counts` yet are ring[folded % kRing .. next % kRing);
    // `folded` is a multiple of kRing. `sequence` is odd while the owner folds.
    alignas(kCacheLine) std::atomic<std::uint64_t> next{0};
    std::atomic<std::uint64_t> folded{0};
    std::atomic<std::uint64_t> sequence{0};
    std::atomic<std::uint64_t> sum{0};  // the latencies in `counts`, summed
    alignas(kCacheLine) std::array<std::atomic<std::uint64_t>, kRing> ring{};
  };
  static constexpr std::int64_t kClosing = INT64_MAX;

  // Cold: the first record after the window's end copies the window's counts.
  void close_window(std::int64_t now) noexcept;
  // Cold: the owner's full ring goes into its stripe's buckets.
  static void fold(Stripe& stripe) noexcept;
  // A stripe's counts and sum, its ring's latencies included, as of one moment.
  static void add_stripe(const Stripe& stripe, Counts& out, std::uint64_t& sum) noexcept;
  // Every stripe's; returns the sum.
  std::uint64_t add_totals(Counts& out) const noexcept;

  alignas(kCacheLine) std::atomic<std::int64_t> window_end_;
  const std::int64_t window_ticks_;
  const std::unique_ptr<Stripe[]> stripes_;
  // Touched only by the thread holding the closing token (ordered by window_end_).
  std::unique_ptr<Counts> consumed_;
  // The last window's counts, published under a sequence lock.
  std::atomic<std::uint64_t> window_sequence_{0};
  std::unique_ptr<std::array<std::atomic<std::uint64_t>, kBuckets>> last_window_;
  // quantile_since_last(): the counts at its previous call (its caller's only).
  std::unique_ptr<Counts> marked_;
};

/// The bucket bound at `quantile` of bucket counts that hold `count` latencies (count > 0).
std::int64_t quantile_of(const std::array<std::uint64_t, LatencyHistogram::kBuckets>& counts,
                         std::uint64_t count, double quantile) noexcept;

/// The percentiles of bucket counts (exposed for tests).
LatencyPercentiles percentiles_of(
    const std::array<std::uint64_t, LatencyHistogram::kBuckets>& counts) noexcept;

}  // namespace detail
}  // namespace r4c
