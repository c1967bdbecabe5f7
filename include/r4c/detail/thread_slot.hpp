// SPDX-License-Identifier: Apache-2.0
// Per-thread stripe indices. Each thread that records into a limit gets a slot of its own while
// fewer than kThreadSlots threads hold one, so every limit's stripe for that slot has a single
// writer and can be updated with a plain load and store instead of an atomic read-modify-write.
// A slot returns to the pool when its thread exits. Threads beyond the pool share slots: their
// samples may then race and be lost (never invented), and their exact counters use atomic adds.
#pragma once

#include <cstdint>

namespace r4c::detail {

inline constexpr std::uint32_t kThreadSlots = 64;

struct ThreadSlot {
  std::uint32_t index;  // in [0, kThreadSlots)
  bool exclusive;       // whether this thread is the slot's only writer
};

// 0 until the thread takes a slot; else (index + 1), with kSharedSlotBit for a shared slot.
// Constant-initialised and trivially destructible, so reading it needs no TLS wrapper call.
inline thread_local std::uint32_t tls_thread_slot = 0;
inline constexpr std::uint32_t kSharedSlotBit = 0x8000'0000u;

/// Takes a slot for the calling thread (cold: once per thread).
std::uint32_t assign_thread_slot() noexcept;

/// The calling thread's slot.
inline ThreadSlot thread_slot() noexcept {
  std::uint32_t raw = tls_thread_slot;
  if (raw == 0) [[unlikely]]
    raw = assign_thread_slot();
  return {(raw & ~kSharedSlotBit) - 1, (raw & kSharedSlotBit) == 0};
}

/// How many slots are held exclusively right now (for tests).
std::uint32_t exclusive_thread_slots_in_use() noexcept;

}  // namespace r4c::detail
