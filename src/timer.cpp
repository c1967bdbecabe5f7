// SPDX-License-Identifier: Apache-2.0
#include "r4c/detail/timer.hpp"

#include <chrono>

#include "r4c/clock.hpp"

namespace r4c::detail {

TimerQueue::~TimerQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void TimerQueue::place(std::size_t index, TimerTask* task) {
  heap_[index] = task;
  task->index_ = index;
}

void TimerQueue::sift_up(std::size_t index) {
  TimerTask* task = heap_[index];
  while (index > 0) {
    const std::size_t parent = (index - 1) / 2;
    if (heap_[parent]->key_ <= task->key_) break;
    place(index, heap_[parent]);
    index = parent;
  }
  place(index, task);
}

void TimerQueue::sift_down(std::size_t index) {
  TimerTask* task = heap_[index];
  const std::size_t size = heap_.size();
  for (;;) {
    std::size_t child = 2 * index + 1;
    if (child >= size) break;
    if (child + 1 < size && heap_[child + 1]->key_ < heap_[child]->key_) ++child;
    if (task->key_ <= heap_[child]->key_) break;
    place(index, heap_[child]);
    index = child;
  }
  place(index, task);
}

void TimerQueue::push(TimerTask& task) {
  heap_.push_back(&task);
  sift_up(heap_.size() - 1);
}

void TimerQueue::erase(std::size_t index) {
  TimerTask* last = heap_.back();
  heap_.pop_back();
  if (index == heap_.size()) return;
  place(index, last);
  sift_down(index);
  sift_up(last->index_);
}

void TimerQueue::schedule_threaded(TimerTask& task, std::int64_t key) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    task.key_ = key;
    task.state_ = TimerTask::State::scheduled;
    push(task);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    // Deadlines usually come later than the one the thread sleeps until: no wake-up then.
    wake = key < wake_key_;
    if (wake) wake_key_ = key;
  }
  if (wake) changed_.notify_all();
}

void TimerQueue::schedule_manual(TimerTask& task, std::int64_t key,
                                 const std::atomic<std::int64_t>& now) {
  std::unique_lock<std::mutex> lock(mutex_);
  task.key_ = key;
  if (key <= now.load(std::memory_order_relaxed)) {
    fire_now(task, lock);
    return;
  }
  task.state_ = TimerTask::State::scheduled;
  push(task);
}

// Fires a task that is off the heap, outside the lock; cancel() waits meanwhile.
void TimerQueue::fire_now(TimerTask& task, std::unique_lock<std::mutex>& lock) {
  task.state_ = TimerTask::State::firing;
  lock.unlock();
  task.fire();
  lock.lock();
  task.state_ = TimerTask::State::fired;
  changed_.notify_all();
}

bool TimerQueue::cancel(TimerTask& task) noexcept {
  std::unique_lock<std::mutex> lock(mutex_);
  if (task.state_ == TimerTask::State::scheduled) {
    erase(task.index_);
    task.state_ = TimerTask::State::idle;
    return true;
  }
  changed_.wait(lock, [&] { return task.state_ != TimerTask::State::firing; });
  task.state_ = TimerTask::State::idle;
  return false;
}

std::size_t TimerQueue::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return heap_.size();
}

void TimerQueue::fire_due(std::int64_t limit, void (*advance_to)(void*, std::int64_t),
                          void* context) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!heap_.empty() && heap_.front()->key_ <= limit) {
    TimerTask* task = heap_.front();
    erase(0);
    advance_to(context, task->key_);
    fire_now(*task, lock);
  }
  advance_to(context, limit);
}

void TimerQueue::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (heap_.empty()) {
      wake_key_ = INT64_MAX;
      changed_.wait(lock);
      continue;
    }
    const std::int64_t wait = heap_.front()->key_ - steady_now_ns();
    if (wait > 0) {
      wake_key_ = heap_.front()->key_;
      changed_.wait_for(lock, std::chrono::nanoseconds(wait));
      continue;
    }
    TimerTask* task = heap_.front();
    erase(0);
    fire_now(*task, lock);
  }
}

}  // namespace r4c::detail
