// SPDX-License-Identifier: Apache-2.0
#include "r4c/executor.hpp"

#include <utility>

#include "config_check.hpp"

namespace r4c {
namespace {

int checked_at_least_one(const char* setting, int value) {
  if (value < 1) {
    detail::fail(detail::kLimitBelowOne, setting, detail::show(value), "an integer >= 1");
  }
  return value;
}

}  // namespace

Executor::Executor(int threads, int max_queued)
    : max_queued_(checked_at_least_one("max_queued", max_queued)) {
  checked_at_least_one("threads", threads);
  workers_.reserve(static_cast<std::size_t>(threads));
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { run(); });
}

Executor::~Executor() { shutdown(); }

void Executor::shutdown() {
  std::lock_guard<std::mutex> joining(joining_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& worker : workers_) {
    if (worker.joinable()) worker.join();
  }
}

bool Executor::try_post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || queue_.size() >= static_cast<std::size_t>(max_queued_)) return false;
    queue_.push_back(std::move(task));
  }
  ready_.notify_one();
  return true;
}

std::size_t Executor::queued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size();
}

void Executor::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    // Stopping drains the queue first: no accepted task is lost.
    if (queue_.empty()) return;
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    try {
      task();
    } catch (...) {
      // A thread must survive its task; the exception has no one to go to.
    }
    task = nullptr;  // the task's captures die before it counts as completed
    completed_.fetch_add(1, std::memory_order_relaxed);
    lock.lock();
  }
}

}  // namespace r4c
