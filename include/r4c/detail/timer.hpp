// SPDX-License-Identifier: Apache-2.0
// Deadlines on a clock: the one shared timer behind timeouts and waits. Tasks are intrusive
// (the caller owns them, often on its stack), so scheduling allocates nothing once the queue has
// grown to its working size. A SystemClock fires tasks from one timer thread per clock; a
// ManualClock fires them inside the advance() that reaches them, on the advancing thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace r4c::detail {

/// Work to run once at a deadline. Its owner must call Clock::cancel (which waits for a fire in
/// progress) before destroying a task that was scheduled.
class TimerTask {
 public:
  TimerTask() = default;
  TimerTask(const TimerTask&) = delete;
  TimerTask& operator=(const TimerTask&) = delete;

  /// Runs on the timer thread or in ManualClock::advance; must not block or cancel itself.
  virtual void fire() noexcept = 0;

 protected:
  ~TimerTask() = default;

 private:
  friend class TimerQueue;
  enum class State : std::uint8_t { idle, scheduled, firing, fired };
  std::int64_t key_ = 0;
  std::size_t index_ = 0;
  State state_ = State::idle;
};

/// A min-heap of tasks by key. Either fire_due() fires them (a manual clock), or a thread of
/// the queue's own, started by the first schedule() that asks for it, fires each task when
/// steady_clock reaches its key.
class TimerQueue {
 public:
  TimerQueue() = default;
  ~TimerQueue();
  TimerQueue(const TimerQueue&) = delete;
  TimerQueue& operator=(const TimerQueue&) = delete;

  /// Keys are steady_clock nanoseconds and the queue's own thread fires the tasks.
  void schedule_threaded(TimerTask& task, std::int64_t key);
  /// Keys are a manual clock's time, `now`; fire_due() fires the tasks. A task already due
  /// fires at once on this thread: the advance that passed its key has already returned.
  void schedule_manual(TimerTask& task, std::int64_t key, const std::atomic<std::int64_t>& now);
  /// Removes the task; when it is firing on another thread, waits until it has fired.
  /// Returns whether it was removed before firing.
  bool cancel(TimerTask& task) noexcept;
  /// Fires, in key order on this thread, every task whose key is <= limit, calling
  /// `advance_to(context, key)` before each and `advance_to(context, limit)` at the end, under
  /// the queue's lock, so that no schedule_manual() falls between the last check and the end.
  void fire_due(std::int64_t limit, void (*advance_to)(void* context, std::int64_t key),
                void* context);
  std::size_t pending() const;

 private:
  void run();
  void fire_now(TimerTask& task, std::unique_lock<std::mutex>& lock);
  void push(TimerTask& task);
  void erase(std::size_t index);
  void sift_up(std::size_t index);
  void sift_down(std::size_t index);
  void place(std::size_t index, TimerTask* task);

  mutable std::mutex mutex_;
  std::condition_variable changed_;  // a new earliest task, a fired task, or stopping
  std::vector<TimerTask*> heap_;
  // The key the thread sleeps until (INT64_MAX: until notified). A task due later needs no
  // wake-up: the thread looks at the heap again when it wakes.
  std::int64_t wake_key_ = INT64_MAX;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace r4c::detail
