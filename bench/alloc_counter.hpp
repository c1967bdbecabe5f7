// SPDX-License-Identifier: Apache-2.0
// Counts heap allocations, for the benchmarks (allocations per call) and the allocation tests
// (none per call). The one counting allocator of r4c's test and benchmark binaries.
//
// alloc_counter.cpp replaces the global operator new/delete of the binary it is linked into
// (target r4c_alloc_counter), and outside sanitizer builds also interposes malloc, calloc,
// realloc and the aligned forms (aligned_alloc, memalign, posix_memalign, valloc): what the C++
// runtime allocates itself, for instance the header std::rethrow_exception puts around a stored
// exception, and what Asio allocates its operations with (std::aligned_alloc). Sanitizers own
// malloc, so there `mallocs` stays 0.
//
// Two ways to count:
// - per thread (thread_alloc_count): no shared cache line, so a multi-threaded benchmark is
//   measured as it runs;
// - every thread at once (allocations_during): what a test wants, since an allocation on any
//   other thread during the call (a timer's, an executor's) counts too. Only while a
//   ProcessWideCount lives does operator new touch the shared counter.
#pragma once

#include <cstdint>

namespace r4c::bench {

struct AllocCount {
  std::uint64_t news = 0;       // operator new calls, every form
  std::uint64_t new_bytes = 0;  // bytes asked of operator new
  std::uint64_t mallocs = 0;    // malloc-family calls (aligned ones too), operator new's included
};

/// What the calling thread has allocated since it started.
AllocCount thread_alloc_count() noexcept;

/// Counts the operator new calls of every thread from construction to `news()`. One at a time.
class ProcessWideCount {
 public:
  ProcessWideCount() noexcept;
  ~ProcessWideCount();
  ProcessWideCount(const ProcessWideCount&) = delete;
  ProcessWideCount& operator=(const ProcessWideCount&) = delete;

  /// Operator new calls so far, by any thread.
  std::uint64_t news() const noexcept;
};

/// The operator new calls of every thread while `f` runs.
template <class F>
std::uint64_t allocations_during(F&& f) {
  ProcessWideCount count;
  f();
  return count.news();
}

}  // namespace r4c::bench
