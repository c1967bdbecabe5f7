// SPDX-License-Identifier: Apache-2.0
#include "r4c/detail/call_allocator.hpp"

#include <array>
#include <cstddef>
#include <new>

namespace r4c::detail {
namespace {

// A call holds two blocks at once (its state and the operation it posted); a few more cover a
// retry's or a hedge's attempts and the completions they post.
constexpr int kKept = 4;
// Sizes rounded up to this, so that a block freed by one call fits the next call of a slightly
// different type.
constexpr std::size_t kGrain = 64;

std::size_t rounded(std::size_t size) noexcept { return (size + kGrain - 1) / kGrain * kGrain; }

struct Kept {
  std::array<void*, kKept> blocks{};
  std::array<std::size_t, kKept> sizes{};
  bool reaper_armed = false;
  bool ending = false;  // the thread's reaper has run: a block freed after it is freed at once
};

// constinit and trivially destructible: reached with one %fs-relative access and no guard. The
// blocks it keeps are freed by a reaper armed the first time it keeps one.
constinit thread_local Kept kept;

struct Reaper {
  Reaper() = default;
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;
  ~Reaper() {
    drop_call_blocks();
    kept.ending = true;
  }
};

void arm_reaper() noexcept {
  thread_local Reaper reaper;  // constructed here, the first time; destroyed at the thread's end
  kept.reaper_armed = true;
}

}  // namespace

void* take_call_block(std::size_t size) {
  for (int i = 0; i < kKept; ++i) {
    if (kept.blocks[i] != nullptr && kept.sizes[i] >= size) {
      void* const block = kept.blocks[i];
      kept.blocks[i] = nullptr;
      return block;
    }
  }
  return ::operator new(rounded(size));
}

void give_call_block(void* block, std::size_t size) noexcept {
  if (kept.ending) [[unlikely]] {
    ::operator delete(block);
    return;
  }
  if (!kept.reaper_armed) [[unlikely]]
    arm_reaper();
  // Every block is made a multiple of kGrain long and at least `size`: so it holds `size`
  // rounded up (it may hold more, when a smaller call reused it).
  size = rounded(size);
  int smallest = 0;
  for (int i = 0; i < kKept; ++i) {
    if (kept.blocks[i] == nullptr) {
      smallest = i;
      break;
    }
    if (kept.sizes[i] < kept.sizes[smallest]) smallest = i;
  }
  // Every slot full: the larger block stays, so that a thread whose calls grew past what it
  // keeps reuses their blocks from the next call on, instead of missing on every call.
  if (kept.blocks[smallest] != nullptr) {
    if (kept.sizes[smallest] >= size) {
      ::operator delete(block);
      return;
    }
    ::operator delete(kept.blocks[smallest]);
  }
  kept.blocks[smallest] = block;
  kept.sizes[smallest] = size;
}

void drop_call_blocks() noexcept {
  for (void*& block : kept.blocks) {
    ::operator delete(block);
    block = nullptr;
  }
}

}  // namespace r4c::detail
