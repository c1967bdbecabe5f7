// SPDX-License-Identifier: Apache-2.0
// The allocator of an asynchronous call's state when the caller's handler has none of its own
// (<r4c/detail/async_call.hpp>): a few blocks kept per thread, reused by the next call.
//
// Asio's recycling allocator keeps its blocks in the running io_context's thread information,
// so a call started outside the io_context (a plain thread, a benchmark's loop, a synchronous
// service handing work to Asio) allocated its state, and the operation it posted, from the heap
// every time: two mallocs per call. This one keeps them on whichever thread frees them.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>

namespace r4c::detail {

/// A block of at least `size` bytes (aligned for any type of fundamental alignment): one the
/// calling thread freed before, or a new one (std::bad_alloc when none can be had).
void* take_call_block(std::size_t size);
/// Keeps `block` (`size`: what it was taken for) for the thread's next take_call_block(). With
/// every slot full, the smaller of it and the smallest kept block is freed; a thread that is
/// ending frees it at once.
void give_call_block(void* block, std::size_t size) noexcept;
/// Frees every block the calling thread keeps (a thread done with async calls for a while; the
/// tests, to start from none). The thread keeps blocks again as calls free them.
void drop_call_blocks() noexcept;

/// A stateless Allocator on take_call_block() and give_call_block(). Thread safety: a block may
/// be freed on any thread (it is then that thread's to reuse). Over-aligned types go to the
/// aligned operator new directly.
template <class T>
class CallAllocator {
 public:
  using value_type = T;
  using is_always_equal = std::true_type;

  CallAllocator() noexcept = default;
  template <class U>
  CallAllocator(const CallAllocator<U>&) noexcept {}  // NOLINT(google-explicit-constructor)

  T* allocate(std::size_t n) {
    if constexpr (alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
      return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{alignof(T)}));
    } else {
      return static_cast<T*>(take_call_block(n * sizeof(T)));
    }
  }
  void deallocate(T* block, std::size_t n) noexcept {
    if constexpr (alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
      ::operator delete (block, std::align_val_t{alignof(T)});
    } else {
      give_call_block(block, n * sizeof(T));
    }
  }

  template <class U>
  bool operator==(const CallAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace r4c::detail
