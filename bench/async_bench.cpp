// SPDX-License-Identifier: Apache-2.0
// The adaptive limit's asynchronous face against what an async call needs anyway:
//
//   BM_AsyncBaseline     the synchronous AdaptiveLimit::execute of the same work, plus the bare
//                        asio::post (and its run on the thread's io_context) the operation
//                        makes to complete (the baseline)
//   BM_AsyncExecute      AdaptiveLimit::async_execute with a callback token: the operation posts
//                        its completion to the io_context, which runs it and, through r4c's
//                        handler, the callback
//   BM_AsyncRejected     async_execute on a full limit: the callback runs at once
//
// Each thread has its own io_context; the threads share the limit.
#include <benchmark/benchmark.h>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <exception>
#include <system_error>

#include "alloc_counter.hpp"
#include "r4c/asio.hpp"
#include "threads.hpp"

namespace {

using r4c::bench::AllocCount;
using r4c::bench::report_allocations;
using r4c::bench::thread_alloc_count;

r4c::AdaptiveLimit& roomy_limit() {
  static r4c::AdaptiveLimit limit("bench-async",
                                  r4c::AdaptiveLimitConfig().initial_limit(100).max_limit(1000));
  return limit;
}

// The operation: completes through one post to the io_context, as a socket read would.
struct PostedOperation {
  asio::io_context* io;
  template <class Handler>
  void operator()(Handler handler) const {
    asio::post(*io, [handler = std::move(handler)]() mutable {
      std::move(handler)(std::error_code(), 42);
    });
  }
};

void BM_AsyncBaseline(benchmark::State& state) {
  r4c::AdaptiveLimit& limit = roomy_limit();
  asio::io_context io(1);
  auto keep_running = asio::make_work_guard(io);  // poll_one() on an idle context stops it
  int sink = 0;
  auto one_call = [&] {
    sink += limit.execute([] { return 42; });
    asio::post(io, [&sink] { ++sink; });
    io.poll_one();
  };
  one_call();  // warm: the thread's stripe, Asio's recycled handler memory
  const AllocCount start = thread_alloc_count();
  const int before = sink;
  for (auto _ : state) one_call();
  benchmark::DoNotOptimize(sink);
  report_allocations(state, start);
  // 1 when every posted handler ran within its iteration.
  state.counters["posts_run_per_call"] = benchmark::Counter(
      static_cast<double>(sink - before) / 43.0, benchmark::Counter::kAvgIterations);
}

void BM_AsyncExecute(benchmark::State& state) {
  r4c::AdaptiveLimit& limit = roomy_limit();
  asio::io_context io(1);
  auto keep_running = asio::make_work_guard(io);
  int sink = 0;
  auto one_call = [&] {
    limit.async_execute<int>(PostedOperation{&io},
                             [&sink](std::exception_ptr, int result) { sink += result; });
    io.poll_one();
  };
  one_call();
  const AllocCount start = thread_alloc_count();
  const int before = sink;
  for (auto _ : state) one_call();
  benchmark::DoNotOptimize(sink);
  report_allocations(state, start);
  // 1 when every call completed with its result (not a rejection) within its iteration.
  state.counters["results_per_call"] = benchmark::Counter(static_cast<double>(sink - before) / 42.0,
                                                          benchmark::Counter::kAvgIterations);
}

void BM_AsyncRejected(benchmark::State& state) {
  static r4c::AdaptiveLimit full("bench-async-full",
                                 r4c::AdaptiveLimitConfig().initial_limit(1).max_limit(1));
  static r4c::Permit held = full.try_acquire();
  asio::io_context io(1);
  int rejected = 0;
  auto one_call = [&] {
    full.async_execute<int>(PostedOperation{&io},
                            [&rejected](std::exception_ptr e, int) { rejected += e ? 1 : 0; });
  };
  one_call();
  const AllocCount start = thread_alloc_count();
  for (auto _ : state) one_call();
  benchmark::DoNotOptimize(rejected);
  report_allocations(state, start);
}

using r4c::bench::on_1_2_4_threads;

BENCHMARK(BM_AsyncBaseline)->Apply(on_1_2_4_threads);
BENCHMARK(BM_AsyncExecute)->Apply(on_1_2_4_threads);
BENCHMARK(BM_AsyncRejected)->Apply(on_1_2_4_threads);

}  // namespace
