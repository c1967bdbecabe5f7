// The counting allocator of r4c_bench (see alloc_counter.hpp). Blocks come from glibc's own
// allocator (__libc_malloc and friends), so every pointer stays valid for every free().
#include "alloc_counter.hpp"

#include <cstddef>
#include <cstdlib>
#include <new>

extern "C" {
void* __libc_malloc(std::size_t size) noexcept;
void* __libc_calloc(std::size_t count, std::size_t size) noexcept;
void* __libc_realloc(void* block, std::size_t size) noexcept;
void* __libc_memalign(std::size_t alignment, std::size_t size) noexcept;
void __libc_free(void* block) noexcept;
}

namespace {

// constinit and trivially destructible: the executable's static TLS, reached with one
// %fs-relative access that never allocates (malloc may run before or inside thread setup).
constinit thread_local r4c::bench::AllocCount tls_count;

void* checked(void* block) {
  if (block == nullptr) throw std::bad_alloc();
  return block;
}

void* counted_new(std::size_t size) {
  ++tls_count.news;
  tls_count.new_bytes += size;
  return checked(std::malloc(size != 0 ? size : 1));  // counted once more as a malloc
}

void* counted_aligned_new(std::size_t size, std::align_val_t alignment) {
  ++tls_count.news;
  ++tls_count.mallocs;  // __libc_memalign bypasses the malloc below
  tls_count.new_bytes += size;
  return checked(__libc_memalign(static_cast<std::size_t>(alignment), size != 0 ? size : 1));
}

}  // namespace

namespace r4c::bench {

AllocCount thread_alloc_count() noexcept { return tls_count; }

}  // namespace r4c::bench

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
