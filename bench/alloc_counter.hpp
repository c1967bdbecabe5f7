// Counts the calling thread's heap allocations, so a benchmark can report allocations per call.
//
// alloc_counter.cpp replaces the global operator new/delete of the r4c_bench binary (what the
// C++ side allocates) and interposes malloc/calloc/realloc (what the C++ runtime allocates
// itself, for instance the header std::rethrow_exception puts around a stored exception).
// Counters are per thread, so counting adds no shared cache line to a multi-threaded benchmark.
#pragma once

#include <cstdint>

namespace r4c::bench {

struct AllocCount {
  std::uint64_t news = 0;       // operator new calls, every form
  std::uint64_t new_bytes = 0;  // bytes asked of operator new
  std::uint64_t mallocs = 0;    // malloc, calloc and realloc calls, operator new's included
};

/// What the calling thread has allocated since it started.
AllocCount thread_alloc_count() noexcept;

}  // namespace r4c::bench
