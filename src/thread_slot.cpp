// SPDX-License-Identifier: Apache-2.0
#include "r4c/detail/thread_slot.hpp"

#include <bitset>
#include <mutex>

namespace r4c::detail {
namespace {

struct SlotPool {
  std::mutex mutex;
  std::bitset<kThreadSlots> taken;
  std::uint32_t next_shared = 0;
};

SlotPool& pool() {
  static SlotPool* const instance = new SlotPool;  // never destroyed: threads may exit late
  return *instance;
}

// Returns the thread's exclusive slot at thread exit. The mutex orders the old owner's last
// stripe writes before the next owner's first ones, so each stripe keeps a single writer.
struct SlotReleaser {
  std::uint32_t index = kThreadSlots;
  ~SlotReleaser() {
    if (index == kThreadSlots) return;
    SlotPool& p = pool();
    std::lock_guard<std::mutex> lock(p.mutex);
    p.taken.reset(index);
    // Code that runs later in this thread's exit shares the slot instead of taking a new one.
    tls_thread_slot = (index + 1) | kSharedSlotBit;
  }
};

thread_local SlotReleaser releaser;

}  // namespace

std::uint32_t assign_thread_slot() noexcept {
  SlotPool& p = pool();
  std::uint32_t raw = 0;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    for (std::uint32_t i = 0; i < kThreadSlots; ++i) {
      if (!p.taken.test(i)) {
        p.taken.set(i);
        raw = i + 1;
        break;
      }
    }
    if (raw == 0) raw = ((p.next_shared++ % kThreadSlots) + 1) | kSharedSlotBit;
  }
  if ((raw & kSharedSlotBit) == 0) releaser.index = raw - 1;
  tls_thread_slot = raw;
  return raw;
}

std::uint32_t exclusive_thread_slots_in_use() noexcept {
  SlotPool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  return static_cast<std::uint32_t>(p.taken.count());
}

}  // namespace r4c::detail
