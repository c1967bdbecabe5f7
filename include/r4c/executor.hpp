// SPDX-License-Identifier: Apache-2.0
// A bounded thread pool: the threads that hedged attempts (and other work a policy hands off)
// run on. It never blocks the poster: try_post() refuses work when the queue is full or the
// executor is stopping, so the caller decides what a refusal means.
//
//   auto executor = std::make_shared<r4c::Executor>(4, 256);
//   if (!executor->try_post([] { refresh_cache(); })) refresh_cache();  // full: run it here
//
// The destructor stops accepting work, runs everything already queued, and joins its threads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace r4c {

/// A fixed number of threads taking tasks from one bounded FIFO queue.
/// Thread safety: every member may be called from any thread, including from a task.
class Executor {
 public:
  static constexpr int kDefaultMaxQueued = 1024;

  /// Starts `threads` threads. Throws ConfigException R4C-ATR-003 when `threads` or
  /// `max_queued` is below 1.
  explicit Executor(int threads, int max_queued = kDefaultMaxQueued);
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;
  /// shutdown().
  ~Executor();

  /// Stops accepting tasks, runs every task already queued, and joins the threads; later
  /// try_post() calls return false. Calling it again (or from several threads) is harmless.
  /// Blocking: until the queued tasks have run. Must not run on one of this executor's threads
  /// (so a task must not drop the last reference to its executor).
  void shutdown();

  /// Queues `task` to run on one of the threads. Returns false, without running or keeping it,
  /// when `max_queued` tasks are waiting or the executor is stopping. A task should not throw;
  /// an exception that escapes it is discarded.
  /// Blocking: never waits for room (only for the queue's lock). Allocation: the queue's node;
  /// `task` itself was allocated by the caller.
  [[nodiscard]] bool try_post(std::function<void()> task);

  /// The number of threads.
  int threads() const noexcept { return static_cast<int>(workers_.size()); }
  /// The most tasks that may wait in the queue.
  int max_queued() const noexcept { return max_queued_; }
  /// Tasks waiting in the queue now (not those running).
  std::size_t queued() const;
  /// Tasks that have finished running (an exception counts as finished); exact.
  std::uint64_t completed() const noexcept { return completed_.load(std::memory_order_relaxed); }

 private:
  void run();

  const int max_queued_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;  // a task was queued, or stopping
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::atomic<std::uint64_t> completed_{0};  // relaxed: a statistic, guards nothing
  std::mutex joining_;  // one shutdown() joins the threads; the others wait for it
  std::vector<std::thread> workers_;
};

}  // namespace r4c
