// SPDX-License-Identifier: Apache-2.0
// Waiters of an adaptive limit on threads of their own, for the wait and live-reconfiguration
// tests: a waiting caller blocks its thread, so each waiter starts on one and start() yields
// until the limit reports it queued (or it was answered).
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "r4c/adaptive_limit.hpp"

namespace r4c::test {

// Waiters on their own threads; each records how it ended and gives its slot back at once, so
// that a chain of grants shows the order.
class Waiters {
 public:
  // keep: the granted keep their slots (in kept()) instead of giving them back.
  explicit Waiters(r4c::AdaptiveLimit& limit, bool keep = false) : limit_(limit), keep_(keep) {}
  ~Waiters() { join(); }

  // Starts a waiter and returns once it is queued (or already answered).
  void start(std::string name, r4c::Admission admission = {}) {
    const int before = limit_.snapshot().waiting;
    const std::size_t answered = answers();
    threads_.emplace_back([this, name, admission] {
      r4c::RejectReason reason = r4c::RejectReason::limit;
      r4c::Permit permit = limit_.acquire(admission, &reason);
      {
        std::scoped_lock lock(mutex_);
        ended_.push_back(permit ? name : name + ":" + std::string(r4c::to_string(reason)));
        if (keep_ && permit) kept_.push_back(std::move(permit));
      }
      permit.on_ignore();
    });
    while (limit_.snapshot().waiting == before && answers() == answered) std::this_thread::yield();
  }
  void join() {
    for (std::thread& thread : threads_) thread.join();
    threads_.clear();
  }
  std::size_t answers() {
    std::scoped_lock lock(mutex_);
    return ended_.size();
  }
  std::vector<std::string> ended() {
    join();
    std::scoped_lock lock(mutex_);
    return ended_;
  }
  std::vector<r4c::Permit>& kept() { return kept_; }

 private:
  r4c::AdaptiveLimit& limit_;
  const bool keep_;
  std::vector<r4c::Permit> kept_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::vector<std::string> ended_;
};

}  // namespace r4c::test
