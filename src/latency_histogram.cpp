// SPDX-License-Identifier: Apache-2.0
// The latency histogram's cold half: window ends and reading.
//
// Stripes are cumulative and never reset, so each keeps a single writer; the thread that ends
// a window (the first record after its end, elected by taking window_end_ as a token, as the
// adaptive limit closes its windows) subtracts what it saw at the previous end and publishes
// the difference under a sequence lock.
#include "r4c/latency_histogram.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

namespace r4c::detail {

LatencyHistogram::LatencyHistogram(std::int64_t window_ticks, std::int64_t now) noexcept
    : window_end_(now + std::max<std::int64_t>(window_ticks, 1)),
      window_ticks_(std::max<std::int64_t>(window_ticks, 1)),
      stripes_(std::make_unique<Stripe[]>(kThreadSlots)),
      consumed_(std::make_unique<Counts>()),
      last_window_(std::make_unique<std::array<std::atomic<std::uint64_t>, kBuckets>>()),
      marked_(std::make_unique<Counts>()) {
  consumed_->fill(0);
  marked_->fill(0);
  for (std::atomic<std::uint64_t>& count : *last_window_) count.store(0, std::memory_order_relaxed);
}

namespace {

// bucket_of() in fewer instructions, for fold(), which was over half of what a histogram adds
// to a call (perf, docs/performance.md target 19): 63 ^ countl_zero compiles to the bit scan
// alone where 63 - countl_zero takes three more, and unsigned arithmetic needs no sign
// extension.
constexpr std::uint64_t fold_bucket(std::uint64_t value) noexcept {
  using H = LatencyHistogram;
  const std::uint64_t v = value - (value != 0);
  const auto shift = (63u ^ static_cast<unsigned>(std::countl_zero(v | H::kSub))) - H::kSubBits;
  const std::uint64_t index = shift * H::kSub + (v >> shift);
  return index < H::kBuckets - 1 ? index : H::kBuckets - 1;
}

// Both agree at every bucket's edges, where an off-by-one would show.
consteval bool fold_bucket_is_bucket_of() {
  using H = LatencyHistogram;
  for (int b = 0; b < H::kBuckets; ++b) {
    const std::uint64_t bound = H::bucket_bound(b);
    for (const std::uint64_t v : {bound - 1, bound, bound + 1}) {
      if (fold_bucket(v) != static_cast<std::uint64_t>(H::bucket_of(v))) return false;
    }
  }
  return fold_bucket(0) == 0 && fold_bucket(UINT64_MAX) == H::kBuckets - 1;
}
static_assert(fold_bucket_is_bucket_of());

}  // namespace

void LatencyHistogram::fold(Stripe& stripe) noexcept {
  const std::uint64_t end = stripe.next.load(std::memory_order_relaxed);  // the owner's own
  const std::uint64_t odd = stripe.sequence.load(std::memory_order_relaxed) + 1;
  stripe.sequence.store(odd, std::memory_order_relaxed);
  // release fence: a reader that sees a count below also sees the odd sequence.
  std::atomic_thread_fence(std::memory_order_release);
  // record() folds each ring as it fills (end - begin == kRing, begin a multiple of it): the
  // ring's slots in order, a loop of fixed length the compiler unrolls.
  std::uint64_t sum = stripe.sum.load(std::memory_order_relaxed);
#pragma GCC unroll 8
  for (std::uint64_t i = 0; i < kRing; ++i) {
    const std::uint64_t value = stripe.ring[i].load(std::memory_order_relaxed);
    std::atomic<std::uint64_t>& bucket = stripe.counts[fold_bucket(value)];
    bucket.store(bucket.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    sum += value;
  }
  stripe.sum.store(sum, std::memory_order_relaxed);
  stripe.folded.store(end, std::memory_order_relaxed);
  // release: the counts and `folded` above happen before the even sequence.
  stripe.sequence.store(odd + 1, std::memory_order_release);
}

void LatencyHistogram::add_stripe(const Stripe& stripe, Counts& out, std::uint64_t& sum) noexcept {
  Counts counts;
  std::uint64_t stripe_sum = 0;
  for (;;) {
    const std::uint64_t before = stripe.sequence.load(std::memory_order_acquire);
    if (before & 1) continue;  // the owner is folding 64 latencies; it is short
    for (int b = 0; b < kBuckets; ++b) counts[b] = stripe.counts[b].load(std::memory_order_relaxed);
    stripe_sum = stripe.sum.load(std::memory_order_relaxed);
    const std::uint64_t folded = stripe.folded.load(std::memory_order_relaxed);
    // acquire: the ring's latencies below `next` are there.
    const std::uint64_t next = stripe.next.load(std::memory_order_acquire);
    // The ring's slots [folded, next) are not written again before the next fold, which
    // changes the sequence: this reading is then retried.
    for (std::uint64_t p = folded; p < next && p - folded < kRing; ++p) {
      const std::uint64_t value = stripe.ring[p % kRing].load(std::memory_order_relaxed);
      ++counts[bucket_of(value)];
      stripe_sum += value;
    }
    // acquire fence: a value from a fold under way brings its sequence change along.
    std::atomic_thread_fence(std::memory_order_acquire);
    if (stripe.sequence.load(std::memory_order_relaxed) == before) break;
  }
  for (int b = 0; b < kBuckets; ++b) out[b] += counts[b];
  sum += stripe_sum;
}

std::uint64_t LatencyHistogram::add_totals(Counts& out) const noexcept {
  std::uint64_t sum = 0;
  for (std::uint32_t s = 0; s < kThreadSlots; ++s) add_stripe(stripes_[s], out, sum);
  return sum;
}

void LatencyHistogram::close_window(std::int64_t now) noexcept {
  std::int64_t end = window_end_.load(std::memory_order_relaxed);
  // acquire: the previous close's consumed_ happens before this one's.
  if (end == kClosing || now < end ||
      !window_end_.compare_exchange_strong(end, kClosing, std::memory_order_acquire,
                                           std::memory_order_relaxed)) {
    return;  // another thread ends this window
  }
  Counts totals{};
  add_totals(totals);
  // A sample another thread records while we read may be counted in this window or the next,
  // never twice: consumed_ only grows to what was seen.
  const std::uint64_t odd = window_sequence_.load(std::memory_order_relaxed) + 1;
  window_sequence_.store(odd, std::memory_order_relaxed);
  // release fence: a reader that sees a count below also sees the odd sequence.
  std::atomic_thread_fence(std::memory_order_release);
  for (int b = 0; b < kBuckets; ++b) {
    const std::uint64_t seen = std::max(totals[b], (*consumed_)[b]);
    (*last_window_)[b].store(seen - (*consumed_)[b], std::memory_order_relaxed);
    (*consumed_)[b] = seen;
  }
  // release: the counts above happen before the even sequence.
  window_sequence_.store(odd + 1, std::memory_order_release);
  // A window ended by a late record starts at that record: a pause leaves no empty windows.
  // release: this close's consumed_ happens before the next close's acquire.
  window_end_.store(std::max(end + window_ticks_, now + 1), std::memory_order_release);
}

std::int64_t quantile_of(const std::array<std::uint64_t, LatencyHistogram::kBuckets>& counts,
                         std::uint64_t count, double quantile) noexcept {
  // The rank of the quantile (1-based, at least 1), then the bucket that holds it.
  const auto rank = std::max<std::uint64_t>(
      1, static_cast<std::uint64_t>(std::ceil(quantile * static_cast<double>(count))));
  std::uint64_t seen = 0;
  for (int b = 0; b < LatencyHistogram::kBuckets; ++b) {
    seen += counts[b];
    if (seen >= rank) return static_cast<std::int64_t>(LatencyHistogram::bucket_bound(b));
  }
  return static_cast<std::int64_t>(LatencyHistogram::bucket_bound(LatencyHistogram::kBuckets - 1));
}

LatencyPercentiles percentiles_of(
    const std::array<std::uint64_t, LatencyHistogram::kBuckets>& counts) noexcept {
  LatencyPercentiles out;
  for (std::uint64_t c : counts) out.count += c;
  if (out.count == 0) return out;
  const auto at = [&](double q) {
    return std::chrono::nanoseconds(quantile_of(counts, out.count, q));
  };
  out.p50 = at(0.5);
  out.p90 = at(0.9);
  out.p99 = at(0.99);
  out.p999 = at(0.999);
  return out;
}

std::int64_t LatencyHistogram::quantile_since_last(double quantile) noexcept {
  Counts now{};
  add_totals(now);
  std::uint64_t count = 0;
  for (int b = 0; b < kBuckets; ++b) {
    // Counts only grow; a reading that lost a shared stripe's racing sample is not below 0.
    const std::uint64_t before = (*marked_)[b];
    (*marked_)[b] = std::max(before, now[b]);
    now[b] = now[b] > before ? now[b] - before : 0;
    count += now[b];
  }
  return count == 0 ? 0 : quantile_of(now, count, quantile);
}

LatencyDistribution LatencyHistogram::distribution() const noexcept {
  LatencyDistribution out;
  out.enabled = true;
  Counts totals{};
  out.sum = std::chrono::nanoseconds(static_cast<std::int64_t>(add_totals(totals)));
  out.total = percentiles_of(totals);
  std::uint64_t below = 0;
  int b = 0;
  for (int i = 0; i < kLatencyBounds; ++i) {
    const auto bound = static_cast<std::uint64_t>(latency_bound(i).count());
    for (; b < kBuckets && bucket_bound(b) <= bound; ++b) below += totals[b];
    out.buckets[i] = below;
  }
  Counts window{};
  for (;;) {
    const std::uint64_t before = window_sequence_.load(std::memory_order_acquire);
    if (before & 1) continue;  // a window end is writing; it is short
    for (int i = 0; i < kBuckets; ++i)
      window[i] = (*last_window_)[i].load(std::memory_order_relaxed);
    // acquire fence: a count from a close under way brings its sequence change along.
    std::atomic_thread_fence(std::memory_order_acquire);
    if (window_sequence_.load(std::memory_order_relaxed) == before) break;
  }
  out.window = percentiles_of(window);
  return out;
}

}  // namespace r4c::detail
