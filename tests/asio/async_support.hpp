// SPDX-License-Identifier: Apache-2.0
// What the async tests share. AsyncBackend, a fake asynchronous backend: its operations stay
// pending until the test completes or fails them, per key, oldest first. It records how often each
// key started and whether a cancellation reached an operation through the slot of the handler r4c
// gave it. Thread-safe: operations may start on any thread.
#pragma once

#include <gtest/gtest.h>

#include "../../src/exception_match.hpp"
#include "../test_seed.hpp"
#include "r4c/clock.hpp"
#include "r4c/registry.hpp"

#include <asio/associated_cancellation_slot.hpp>
#include <asio/awaitable.hpp>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/error.hpp>
#include <asio/io_context.hpp>
#include <asio/system_error.hpp>
#include <asio/use_future.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

namespace r4c::testing {

// How a test ends a fake's pending operation on `key`: with a value, an exception or an error
// code. Fake is the fake backend (CRTP); its take(key) hands over the pending operation.
template <class Fake>
class CompletesByKey {
 public:
  void complete(const std::string& key, std::string value) {
    take(key)->complete(std::exception_ptr(), std::move(value));
  }
  void fail(const std::string& key, std::exception_ptr failure) {
    take(key)->complete(std::move(failure), std::string());
  }
  void fail(const std::string& key, std::error_code code) {
    take(key)->complete(code, std::string());
  }

 private:
  auto take(const std::string& key) { return static_cast<Fake&>(*this).take(key); }
};

class AsyncBackend : public CompletesByKey<AsyncBackend> {
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

  friend CompletesByKey<AsyncBackend>;
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

// Whether `failure` (not null) holds an Exception: the library's own test, so that the tests
// ask of a failure exactly what the hedge and the timeout ask.
using r4c::detail::holds_exception;

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

// That `answer` holds exactly one call, a success with `value`.
inline ::testing::AssertionResult succeeded_with(const Answer& answer, const std::string& value) {
  if (answer.calls != 1) return ::testing::AssertionFailure() << answer.calls << " calls";
  if (answer.failure) return ::testing::AssertionFailure() << "a failure";
  if (answer.value != value) {
    return ::testing::AssertionFailure() << "\"" << answer.value << "\", not \"" << value << "\"";
  }
  return ::testing::AssertionSuccess();
}

// The error code of the asio::system_error `reply` throws; none when it throws nothing (any other
// exception leaves the test).
template <class T>
std::error_code error_code_of(std::future<T>& reply) {
  try {
    reply.get();
  } catch (const asio::system_error& e) {
    return e.code();
  }
  ADD_FAILURE() << "no exception";
  return {};
}

// The exception of type Exception `reply` throws; none, and a failure, when it throws nothing
// (another exception leaves the test).
template <class Exception, class T>
std::optional<Exception> exception_of(std::future<T>& reply) {
  try {
    reply.get();
  } catch (const Exception& e) {
    return e;
  }
  ADD_FAILURE() << "no exception";
  return std::nullopt;
}

// In a coroutine: whether the call `call()` awaits fails with an Exception (another exception
// leaves the coroutine).
template <class Exception, class Call>
asio::awaitable<bool> co_throws(Call call) {
  bool thrown = false;
  try {
    co_await call();
  } catch (const Exception&) {
    thrown = true;
  }
  co_return thrown;
}

// In a coroutine, on a policy with room for 2 calls: the pending calls "a" and "b" fill it, the
// call `third()` awaits is refused with an Exception, then "a" and "b" complete. Whether the
// refusal came.
template <class Exception, class Policy, class Third>
asio::awaitable<bool> refused_when_full(Policy& policy, AsyncBackend& backend, Third third) {
  auto a = policy.template async_execute<std::string>(backend.place("a"), asio::use_future);
  auto b = policy.template async_execute<std::string>(backend.place("b"), asio::use_future);
  const bool refused = co_await co_throws<Exception>(std::move(third));
  backend.complete("a", "a");
  backend.complete("b", "b");
  co_return refused;
}

// A ManualClock that must have nothing left scheduled when the test ends: an async call leaves
// no timer behind.
class ManualClockTest : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_EQ(clock_->pending_tasks(), 0u); }

  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
};

// One policy of type Policy on the ManualClock, made by the `make(clock)` a suite gives, with
// an io_context and the fake backend. The policy outlives both: the backend's pending
// operations, then the io_context's handlers, are destroyed first.
template <class Policy>
class AsyncPolicyTest : public ManualClockTest {
 protected:
  template <class Make>
  explicit AsyncPolicyTest(Make make) : policy_(make(clock_)) {}

  // Runs the handlers ready on io_.
  void poll() { r4c::testing::poll(io_); }
  // A callback on io_ recording into `answer`.
  auto on_io(Answer& answer) { return on(io_, answer); }
  // The same, cancelled through `cancel`.
  auto on_io(Answer& answer, asio::cancellation_signal& cancel) {
    return asio::bind_cancellation_slot(cancel.slot(), on_io(answer));
  }

  // A call on `key` the policy refuses at once with an Exception, its callback bound to io_: it
  // is answered through io_, never inside the call.
  template <class Exception>
  void expect_refused_through_io(const std::string& key) {
    Answer answer;
    policy_.template async_execute<std::string>(backend_.place(key), on_io(answer));
    EXPECT_EQ(answer.calls, 0);
    io_.run();
    ASSERT_EQ(answer.calls, 1);
    EXPECT_TRUE(holds_exception<Exception>(answer.failure));
  }

  // Fails "a" with a Failure and "b" with connection_refused: both reach their callers unchanged.
  template <class Failure>
  void expect_failures_pass_through(std::future<std::string>& a, std::future<std::string>& b) {
    backend_.fail("a", std::make_exception_ptr(Failure()));
    backend_.fail("b", asio::error::make_error_code(asio::error::connection_refused));
    EXPECT_THROW(a.get(), Failure);
    EXPECT_EQ(error_code_of(b), asio::error::connection_refused);
  }

  Policy policy_;
  asio::io_context io_;
  AsyncBackend backend_;
};

// A policy named `name` that waits on the clock (a retry, a rate limiter), held so that a test
// can make another with make(): when the test ends, once the handlers ready have run, nothing
// waits and nothing is scheduled.
template <class Policy, class Config>
class AsyncWaitTest : public AsyncPolicyTest<std::unique_ptr<Policy>> {
 protected:
  AsyncWaitTest(const std::string& name, Config config)
      : AsyncPolicyTest<std::unique_ptr<Policy>>(
            [&](const std::shared_ptr<r4c::ManualClock>& clock) {
              return std::make_unique<Policy>(name, std::move(config), clock);
            }),
        name_(name) {}

  void make(Config config) {
    this->policy_ = std::make_unique<Policy>(name_, std::move(config), this->clock_);
  }

  void TearDown() override {
    this->poll();
    ManualClockTest::TearDown();
    EXPECT_EQ(this->policy_->snapshot().waiting_calls, 0);
  }

  // `cancel` cancels the one call waiting, on the clock's only timer: the timer goes at once,
  // nothing waits, and the caller's callback on io_ gets operation_aborted.
  void cancel_the_wait(asio::cancellation_signal& cancel, const Answer& answer) {
    ASSERT_EQ(this->clock_->pending_tasks(), 1u);
    cancel.emit(asio::cancellation_type::terminal);
    EXPECT_EQ(this->clock_->pending_tasks(), 0u);  // the timer is cancelled at once
    EXPECT_EQ(this->policy_->snapshot().waiting_calls, 0);
    this->poll();
    ASSERT_EQ(answer.calls, 1);
    EXPECT_TRUE(aborted(answer.failure));
  }

 private:
  std::string name_;
};

// A registry on the ManualClock whose adaptive limits need a single sample per window, and the fake
// backend.
class AsyncRegistryTest : public ManualClockTest {
 protected:
  r4c::ResilienceRegistry registry_ =
      r4c::testing::registry(clock_)
          .adaptive_limit_defaults([](r4c::AdaptiveLimitConfig& a) { a.min_window_samples(1); })
          .build();
  AsyncBackend backend_;

  // The end of resilience4cata 0.6.0's ManualClock scenario: the pending calls "a" and "b" took
  // 1 s; their answers arrive and the limit "orders-async" has one window of 1 s.
  void place_a_and_b_after_one_second(std::future<std::string>& a, std::future<std::string>& b) {
    clock_->advance(std::chrono::seconds(1));
    backend_.complete("a", "placed a");  // ends the window
    backend_.complete("b", "placed b");
    EXPECT_EQ(a.get(), "placed a");
    EXPECT_EQ(b.get(), "placed b");
    const r4c::AdaptiveLimitSnapshot snapshot = registry_.adaptive_limit("orders-async").snapshot();
    EXPECT_EQ(snapshot.windows, 1u);
    EXPECT_EQ(snapshot.window_latency, std::chrono::seconds(1));
  }
};

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
