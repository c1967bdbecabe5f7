// SPDX-License-Identifier: Apache-2.0
// The blocks an asynchronous call's state is allocated from when its handler has no allocator
// (<r4c/detail/call_allocator.hpp>), and what that makes an async call allocate.
#include "r4c/detail/call_allocator.hpp"

#include <gtest/gtest.h>

#include <asio/associated_allocator.hpp>
#include <asio/bind_allocator.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <cstdint>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

#include "alloc_counter.hpp"
#include "r4c/asio.hpp"

namespace {

using r4c::detail::drop_call_blocks;
using r4c::detail::give_call_block;
using r4c::detail::take_call_block;

// Each test starts with the thread keeping no block, whatever ran before it in the process.
class CallAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override { drop_call_blocks(); }
  void TearDown() override { drop_call_blocks(); }
};

// The calling thread's operator new calls while `f` runs.
template <class F>
std::uint64_t news_during(F f) {
  const std::uint64_t before = r4c::bench::thread_alloc_count().news;
  f();
  return r4c::bench::thread_alloc_count().news - before;
}

TEST_F(CallAllocatorTest, AThreadTakesBackTheBlockItGaveWhenItFits) {
  void* block = take_call_block(100);
  give_call_block(block, 100);
  void* again = nullptr;
  EXPECT_EQ(news_during([&] { again = take_call_block(80); }), 0u);
  EXPECT_EQ(again, block);
  give_call_block(again, 80);
  // 80 bytes came from a block made for 100: the block still holds 100, rounded up to 64 bytes.
  void* larger = nullptr;
  EXPECT_EQ(news_during([&] { larger = take_call_block(128); }), 0u);
  EXPECT_EQ(larger, block);
  void* too_large = nullptr;
  EXPECT_EQ(news_during([&] { too_large = take_call_block(129); }), 1u);
  EXPECT_NE(too_large, block);
  give_call_block(larger, 128);
  give_call_block(too_large, 129);
}

TEST_F(CallAllocatorTest, DroppingTheKeptBlocksFreesThem) {
  give_call_block(take_call_block(64), 64);
  drop_call_blocks();
  void* block = nullptr;
  EXPECT_EQ(news_during([&] { block = take_call_block(64); }), 1u);
  give_call_block(block, 64);
}

TEST_F(CallAllocatorTest, KeepsFourBlocksPerThreadAndFreesTheRest) {
  std::vector<void*> blocks;
  for (int i = 0; i < 5; ++i) blocks.push_back(take_call_block(64));
  for (void* block : blocks) give_call_block(block, 64);
  blocks.clear();
  EXPECT_EQ(news_during([&] {
              for (int i = 0; i < 5; ++i) blocks.push_back(take_call_block(64));
            }),
            1u);  // four kept, one made
  for (void* block : blocks) give_call_block(block, 64);
}

// Four small blocks kept, then calls of a larger size: the first makes its block, which takes
// the smallest kept one's place when it comes back, so that every call after it reuses it.
TEST_F(CallAllocatorTest, MakesRoomForALargerSizeWhenNoKeptBlockFits) {
  std::vector<void*> small;
  for (int i = 0; i < 4; ++i) small.push_back(take_call_block(64));
  for (void* block : small) give_call_block(block, 64);
  void* large = nullptr;
  EXPECT_EQ(news_during([&] { large = take_call_block(500); }), 1u);
  give_call_block(large, 500);
  EXPECT_EQ(news_during([&] {
              for (int i = 0; i < 10; ++i) give_call_block(take_call_block(500), 500);
            }),
            0u);
  // Three small ones are still kept.
  EXPECT_EQ(news_during([&] {
              small.clear();
              for (int i = 0; i < 3; ++i) small.push_back(take_call_block(64));
            }),
            0u);
  for (void* block : small) give_call_block(block, 64);
}

TEST_F(CallAllocatorTest, ABlockFreedOnAnotherThreadIsThatThreadsToReuse) {
  void* block = take_call_block(256);
  void* reused_there = nullptr;
  std::thread([&] {
    give_call_block(block, 256);
    reused_there = take_call_block(256);
    give_call_block(reused_there, 256);  // kept until the thread ends, then freed (LSan)
  }).join();
  EXPECT_EQ(reused_there, block);
  void* here = nullptr;
  EXPECT_EQ(news_during([&] { here = take_call_block(256); }), 1u);  // this thread never had it
  give_call_block(here, 256);
}

// Over-aligned types skip the kept blocks (those are aligned for fundamental types only).
TEST_F(CallAllocatorTest, AnOverAlignedTypeGetsItsAlignment) {
  struct alignas(128) Wide {
    char bytes[128];
  };
  r4c::detail::CallAllocator<Wide> allocator;
  Wide* wide = allocator.allocate(2);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(wide) % 128, 0u);
  allocator.deallocate(wide, 2);
  EXPECT_TRUE(allocator == r4c::detail::CallAllocator<char>());
}

// Operations that complete through one post: one posts a lambda of its own; the other
// allocates that post with its handler's allocator, as Asio's own operations do.
struct PostsTheHandler {
  asio::io_context* io;
  template <class Handler>
  void operator()(Handler handler) const {
    asio::post(*io, [handler = std::move(handler)]() mutable {
      std::move(handler)(std::error_code(), 7);
    });
  }
};
struct PostsTheHandlerItself {
  asio::io_context* io;
  template <class Handler>
  void operator()(Handler handler) const {
    auto allocator = asio::get_associated_allocator(handler);
    asio::post(*io, asio::bind_allocator(allocator, [handler = std::move(handler)]() mutable {
      std::move(handler)(std::error_code(), 7);
    }));
  }
};

// Started outside the io_context, where Asio's recycling allocator keeps nothing: after the
// first call, a call's state and its posted handler come from the thread's kept blocks.
TEST_F(CallAllocatorTest, AnAsyncCallStartedOutsideAnIoContextAllocatesNothingOnceWarm) {
  r4c::AdaptiveLimit limit("allocator", r4c::AdaptiveLimitConfig().initial_limit(10));
  asio::io_context io(1);
  auto keep_running = asio::make_work_guard(io);
  int sum = 0;
  auto one_call = [&] {
    limit.async_execute<int>(PostsTheHandlerItself{&io},
                             [&sum](std::exception_ptr failure, int result) {
                               if (!failure) sum += result;
                             });
    io.poll_one();
  };
  one_call();
  const r4c::bench::AllocCount before = r4c::bench::thread_alloc_count();
  for (int i = 0; i < 100; ++i) one_call();
  const r4c::bench::AllocCount after = r4c::bench::thread_alloc_count();
  EXPECT_EQ(sum, 7 * 101);
  EXPECT_EQ(after.news - before.news, 0u);
  // malloc-family calls (Asio's aligned_alloc among them) are seen outside sanitizer builds.
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  EXPECT_EQ(after.mallocs - before.mallocs, 0u);
#endif
  // An operation that posts a lambda of its own allocates that lambda's operation where Asio
  // puts it (the heap, outside the io_context), and nothing more: r4c's state is kept.
  const r4c::bench::AllocCount lambda_before = r4c::bench::thread_alloc_count();
  for (int i = 0; i < 100; ++i) {
    limit.async_execute<int>(PostsTheHandler{&io}, [&sum](std::exception_ptr, int) { ++sum; });
    io.poll_one();
  }
  const r4c::bench::AllocCount lambda_after = r4c::bench::thread_alloc_count();
  EXPECT_EQ(lambda_after.news - lambda_before.news, 0u);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  EXPECT_EQ(lambda_after.mallocs - lambda_before.mallocs, 100u);
#endif
}

}  // namespace
