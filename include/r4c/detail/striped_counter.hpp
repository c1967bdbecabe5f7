// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "r4c/detail/cache_line.hpp"
#include "r4c/detail/thread_slot.hpp"

namespace r4c::detail {

/// An exact counter that threads bump without an atomic read-modify-write: each thread with a
/// slot of its own is its stripe's only writer (a plain load and store); threads beyond the
/// slots share one atomic. Summed on read. Costs kThreadSlots cache lines.
class StripedCounter {
 public:
  void increment() noexcept {
    const ThreadSlot slot = thread_slot();
    if (slot.exclusive) [[likely]] {
      std::atomic<std::uint64_t>& value = stripes_[slot.index].value;
      value.store(value.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    } else {
      shared_.fetch_add(1, std::memory_order_relaxed);
    }
  }

  std::uint64_t total() const noexcept {
    std::uint64_t sum = shared_.load(std::memory_order_relaxed);
    for (const Stripe& stripe : stripes_) sum += stripe.value.load(std::memory_order_relaxed);
    return sum;
  }

 private:
  struct alignas(kCacheLine) Stripe {
    std::atomic<std::uint64_t> value{0};
  };
  std::array<Stripe, kThreadSlots> stripes_;
  alignas(kCacheLine) std::atomic<std::uint64_t> shared_{0};
};

}  // namespace r4c::detail
