// SPDX-License-Identifier: Apache-2.0
// The counting allocator (see alloc_counter.hpp). Blocks come from glibc's own allocator
// (__libc_malloc and friends), so every pointer stays valid for every free(); under a sanitizer,
// from the sanitizer's malloc, which must stay the one that hands out and checks blocks.
#include "alloc_counter.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <new>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define R4C_ALLOC_COUNTER_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define R4C_ALLOC_COUNTER_SANITIZED 1
#endif
#endif

#ifndef R4C_ALLOC_COUNTER_SANITIZED
extern "C" {
void* __libc_malloc(std::size_t size) noexcept;
void* __libc_calloc(std::size_t count, std::size_t size) noexcept;
void* __libc_realloc(void* block, std::size_t size) noexcept;
void* __libc_memalign(std::size_t alignment, std::size_t size) noexcept;
void __libc_free(void* block) noexcept;
}
#endif

namespace {

// constinit and trivially destructible: the executable's static TLS, reached with one
// %fs-relative access that never allocates (malloc may run before or inside thread setup).
constinit thread_local r4c::bench::AllocCount tls_count;

// Read on every operator new, written only by ProcessWideCount: a read-shared line while no test
// counts, so benchmarks pay no contention for it.
constinit std::atomic<bool> counting_every_thread{false};
constinit std::atomic<std::uint64_t> every_thread_news{0};

void count_new(std::size_t size) noexcept {
  ++tls_count.news;
  tls_count.new_bytes += size;
  if (counting_every_thread.load(std::memory_order_relaxed)) [[unlikely]] {
    every_thread_news.fetch_add(1, std::memory_order_relaxed);
  }
}

void* checked(void* block) {
  if (block == nullptr) throw std::bad_alloc();
  return block;
}

void* counted_new(std::size_t size) {
  count_new(size);
  return checked(std::malloc(size != 0 ? size : 1));  // counted once more as a malloc
}

void* counted_aligned_new(std::size_t size, std::align_val_t alignment) {
  count_new(size);
  const auto align = static_cast<std::size_t>(alignment);
#ifdef R4C_ALLOC_COUNTER_SANITIZED
  // aligned_alloc wants a size that is a multiple of the alignment.
  return checked(std::aligned_alloc(align, (size + align - 1) / align * align));
#else
  ++tls_count.mallocs;  // __libc_memalign bypasses the malloc below
  return checked(__libc_memalign(align, size != 0 ? size : 1));
#endif
}

}  // namespace

namespace r4c::bench {

AllocCount thread_alloc_count() noexcept { return tls_count; }

// seq_cst on the flag: the count must cover every allocation sequenced after the constructor in
// the counting thread and the destructor must stop it before the test inspects the result.
ProcessWideCount::ProcessWideCount() noexcept {
  every_thread_news.store(0, std::memory_order_relaxed);
  counting_every_thread.store(true);
}

ProcessWideCount::~ProcessWideCount() { counting_every_thread.store(false); }

std::uint64_t ProcessWideCount::news() const noexcept {
  return every_thread_news.load(std::memory_order_relaxed);
}

}  // namespace r4c::bench

#ifndef R4C_ALLOC_COUNTER_SANITIZED
// glibc supports replacing malloc by defining these four in the executable.
extern "C" void* malloc(std::size_t size) noexcept {
  ++tls_count.mallocs;
  return __libc_malloc(size);
}

extern "C" void* calloc(std::size_t count, std::size_t size) noexcept {
  ++tls_count.mallocs;
  return __libc_calloc(count, size);
}

extern "C" void* realloc(void* block, std::size_t size) noexcept {
  ++tls_count.mallocs;
  return __libc_realloc(block, size);
}

extern "C" void free(void* block) noexcept { __libc_free(block); }

// And the aligned forms, which glibc lets an executable replace too: Asio allocates its
// operations with std::aligned_alloc, which the four above never see.
extern "C" void* aligned_alloc(std::size_t alignment, std::size_t size) noexcept {
  ++tls_count.mallocs;
  return __libc_memalign(alignment, size);
}

extern "C" void* memalign(std::size_t alignment, std::size_t size) noexcept {
  ++tls_count.mallocs;
  return __libc_memalign(alignment, size);
}

extern "C" int posix_memalign(void** block, std::size_t alignment, std::size_t size) noexcept {
  // What POSIX asks of the alignment: a power of two, a multiple of sizeof(void*).
  if (alignment % sizeof(void*) != 0 || (alignment & (alignment - 1)) != 0) return EINVAL;
  ++tls_count.mallocs;
  void* aligned = __libc_memalign(alignment, size);
  if (aligned == nullptr) return ENOMEM;
  *block = aligned;
  return 0;
}

extern "C" void* valloc(std::size_t size) noexcept {
  ++tls_count.mallocs;
  return __libc_memalign(static_cast<std::size_t>(sysconf(_SC_PAGESIZE)), size);
}
#endif

void* operator new(std::size_t size) { return counted_new(size); }
void* operator new[](std::size_t size) { return counted_new(size); }
void* operator new(std::size_t size, std::align_val_t alignment) {
  return counted_aligned_new(size, alignment);
}
void* operator new[](std::size_t size, std::align_val_t alignment) {
  return counted_aligned_new(size, alignment);
}
// libstdc++'s nothrow forms call the ones above, so they are counted too.

void operator delete(void* block) noexcept { std::free(block); }
void operator delete[](void* block) noexcept { std::free(block); }
void operator delete(void* block, std::size_t) noexcept { std::free(block); }
void operator delete[](void* block, std::size_t) noexcept { std::free(block); }
void operator delete(void* block, std::align_val_t) noexcept { std::free(block); }
void operator delete[](void* block, std::align_val_t) noexcept { std::free(block); }
void operator delete(void* block, std::size_t, std::align_val_t) noexcept { std::free(block); }
void operator delete[](void* block, std::size_t, std::align_val_t) noexcept { std::free(block); }
