// SPDX-License-Identifier: Apache-2.0
// What the async tests share. AsyncBackend, a fake asynchronous backend: its operations stay
// pending until the test completes or fails them, per key, oldest first. It records how often each
// key started and whether a cancellation reached an operation through the slot of the handler r4c
// gave it. Thread-safe: operations may start on any thread.
#pragma once

#include "../test_seed.hpp"

#include <asio/associated_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/system_error.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

namespace r4c::testing {

class AsyncBackend {
 public:
  // An Asio initiation for an operation on `key` completing with a std::string.
  auto place(std::string key) {
    return [this, key](auto handler) {
      auto pending = std::make_unique<Stored<decltype(handler)>>(std::move(handler));
      auto slot = asio::get_associated_cancellation_slot(pending->handler);
      if (slot.is_connected()) {
        slot.assign([flag = pending->cancelled](asio::cancellation_type) { flag->store(true); });
      }
      std::lock_guard<std::mutex> lock(mutex_);
      ++started_[key];
      ++started_total_;
      pending_[key].push_back(std::move(pending));
      changed_.notify_all();
    };
  }

  void complete(const std::string& key, std::string value) {
    take(key)->complete(std::exception_ptr(), std::move(value));
  }
  void fail(const std::string& key, std::exception_ptr failure) {
    take(key)->complete(std::move(failure), std::string());
  }
  void fail(const std::string& key, std::error_code code) {
    take(key)->complete(code, std::string());
  }
  // Whether a cancellation reached the oldest pending operation on `key`.
  bool cancelled(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    return pending_.at(key).front()->cancelled->load();
  }
  bool has(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    return !pending_[key].empty();
  }
  int started(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    return started_[key];
  }
  int started() {
    std::lock_guard<std::mutex> lock(mutex_);
    return started_total_;
  }
  // Waits (a bounded real time) until `key` has started `count` times on some thread.
  bool wait_started(const std::string& key, int count) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(10),
                             [&] { return started_[key] >= count; });
  }

 private:
  struct Pending {
    virtual ~Pending() = default;
    virtual void complete(std::exception_ptr failure, std::string value) = 0;
    virtual void complete(std::error_code code, std::string value) = 0;
    std::shared_ptr<std::atomic<bool>> cancelled = std::make_shared<std::atomic<bool>>(false);
  };
  template <class Handler>
  struct Stored final : Pending {
    explicit Stored(Handler h) : handler(std::move(h)) {}
    void complete(std::exception_ptr failure, std::string value) override {
      std::move(handler)(std::move(failure), std::move(value));
    }
    void complete(std::error_code code, std::string value) override {
      std::move(handler)(code, std::move(value));
    }
    Handler handler;
  };

  // Completed outside the lock: the completion may start another operation.
  std::unique_ptr<Pending> take(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& queue = pending_.at(key);
    auto pending = std::move(queue.front());
    queue.pop_front();
    return pending;
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::deque<std::unique_ptr<Pending>>> pending_;
  std::map<std::string, int> started_;
  int started_total_ = 0;
};

struct NotFound : std::runtime_error {
  NotFound() : std::runtime_error("not found") {}
};

// The caller's view of one callback call.
struct Answer {
  int calls = 0;
  std::exception_ptr failure;
  std::string value;

  auto handler() {
    return [this](std::exception_ptr e, std::string r) {
      ++calls;
      failure = std::move(e);
      value = std::move(r);
    };
  }
};

// A callback on `io` recording into `answer`.
template <class Context>
auto on(Context& io, Answer& answer) {
  return asio::bind_executor(io, answer.handler());
}

// Runs the handlers ready on `io`, restarted first: a context that ran out of work stops.
inline void poll(asio::io_context& io) {
  io.restart();
  io.poll();
}

// Whether `failure` holds an Exception.
template <class Exception>
bool holds(const std::exception_ptr& failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const Exception&) {
    return true;
  } catch (...) {
    return false;
  }
}

// Whether `failure` is the operation_aborted a cancelled call completes with.
inline bool aborted(const std::exception_ptr& failure) {
  if (!failure) return false;
  try {
    std::rethrow_exception(failure);
  } catch (const asio::system_error& e) {
    return e.code() == asio::error::operation_aborted;
  } catch (...) {
    return false;
  }
}

// Starts the coroutine `body` on `io`, detached: the test then runs `io` and checks what the
// coroutine left in its captures.
template <class Executor, class Body>
void spawn(Executor&& io, Body body) {
  asio::co_spawn(std::forward<Executor>(io), std::move(body), asio::detached);
}

// The async suites were sized with this seed; R4C_TEST_SEED picks another (test_seed.hpp).
inline std::uint64_t test_seed() { return r4c::test::test_seed(20261201); }

// A count from the environment variable `name` (a positive number), else `fallback`: CI runs the
// modest default, a soak run asks for more.
inline long count_from_env(const char* name, long fallback) {
  if (const char* chosen = std::getenv(name); chosen != nullptr) {
    const long count = std::strtol(chosen, nullptr, 10);
    if (count > 0) return count;
  }
  return fallback;
}

}  // namespace r4c::testing
