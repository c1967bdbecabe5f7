// SPDX-License-Identifier: Apache-2.0
// Randomised asynchronous waits on one adaptive limit, and on one bulkhead with max_wait (the
// same run, its policy-specific parts in LimitSubject and BulkheadSubject): callers on 4
// io_context threads, their
// operations completing (and so releasing slots) on another context's thread, a thread that
// moves the ManualClock (timeouts fire there) and one that cancels callers (on their own
// context, as Asio asks), all racing. Every caller must be answered exactly once, every slot,
// wait and timer given back, and a fixed limit never exceeded. Meant for TSan (label
// "concurrency"): a grant on one thread and the start of the wait on another touch the same
// waiter, and only the queue's mutex may order them.
#include <gtest/gtest.h>

#include <array>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "../test_seed.hpp"
#include "../wait_stress_support.hpp"
#include "async_support.hpp"
#include "r4c/asio.hpp"

namespace {

using namespace std::chrono_literals;

constexpr int kCalls = r4c::test::kSanitized ? 50'000 : 200'000;
constexpr int kContexts = 4;
constexpr int kLimit = 4;
constexpr int kOutstanding = 64;  // callers launched and not yet answered, at most
constexpr int kRecent = 32;       // the callers the cancelling thread picks from

// One caller: its cancellation signal lives on its context's thread, as Asio asks.
struct Caller {
  int context = 0;
  asio::cancellation_signal signal;
  std::atomic<int> answers{0};
  std::atomic<bool> started{false};  // its operation ran
  // Its operation's end of the count, on its context: a cancellation frees the slot before it
  // reaches the operation, so whoever cancels counts the operation out first.
  std::function<void()> let_go;

  void cancel(asio::cancellation_type type) {
    if (let_go) let_go();
    signal.emit(type);
  }
};

struct Tally {
  std::atomic<std::uint64_t> succeeded{0};
  std::atomic<std::uint64_t> rejected{0};  // the policy's refusal (LimitExceededException, ...)
  std::atomic<std::uint64_t> aborted_waiting{0};  // cancelled before its operation ran
  std::atomic<std::uint64_t> aborted_running{0};  // cancelled while its operation ran
  std::atomic<std::uint64_t> other{0};            // anything else: a defect
  std::atomic<int> answered{0};
  std::atomic<int> twice{0};  // callers answered more than once
  std::atomic<int> started{0};
  std::atomic<int> live_ops{0};  // operations not yet completed
  std::atomic<int> running{0};
  std::atomic<int> most_running{0};
};

// The adaptive limit under stress: callers of the 4 classes, a queue of 3 (6 when the limit
// moves), every way a wait ends (granted, timed out, queue full, evicted, cancelled).
struct LimitSubject {
  r4c::AdaptiveLimit policy;
  bool changing_limit;

  LimitSubject(std::shared_ptr<r4c::ManualClock> clock, bool changing)
      : policy("async-stress",
               r4c::test::stress_limit(changing, kLimit, 6, 200us, changing ? 6 : 3),
               std::move(clock)),
        changing_limit(changing) {}
  template <class Op, class Token>
  void call(std::mt19937_64& random, Op op, Token token) {
    const auto cls = static_cast<r4c::CallClass>(random() % r4c::kLimitedClasses);
    policy.async_execute<int>(cls, std::move(op), std::move(token));
  }
  bool drops() const { return changing_limit; }
  using Refusal = r4c::LimitExceededException;  // what a refused caller is answered
  std::uint64_t by(r4c::RejectReason reason) const {
    return policy.snapshot().rejected_by_reason[static_cast<int>(reason)];
  }
  bool covered(const Tally& tally) const {
    using enum r4c::RejectReason;
    return policy.snapshot().waits_granted > 0 && by(wait_timeout) > 0 && by(queue_full) > 0 &&
           by(evicted) > 0 && by(cancelled) > 0 &&
           (changing_limit || tally.aborted_running.load() > 0);
  }
  void check(const Tally& tally) const {
    const r4c::AdaptiveLimitSnapshot snapshot = policy.snapshot();
    EXPECT_EQ(snapshot.in_flight, 0);  // every slot free
    EXPECT_EQ(snapshot.waiting, 0);    // every waiter answered
    // Each rejection answered once and counted once, as it was answered: a caller cancelled
    // before its operation ran is answered operation_aborted and counted `cancelled`, however
    // its wait ended in the queue (granted: its slot given back unused; timed out, evicted).
    EXPECT_EQ(snapshot.rejected, tally.rejected + tally.aborted_waiting);
    EXPECT_EQ(by(r4c::RejectReason::cancelled), tally.aborted_waiting.load());
    EXPECT_EQ(by(r4c::RejectReason::limit), 0u);
    // The mix really exercised every way a wait ends.
    EXPECT_GT(snapshot.waits_granted, 0u);
    EXPECT_GT(by(r4c::RejectReason::wait_timeout), 0u);
    EXPECT_GT(by(r4c::RejectReason::queue_full), 0u);
    EXPECT_GT(by(r4c::RejectReason::evicted), 0u);
    EXPECT_GT(by(r4c::RejectReason::cancelled), 0u)
        << "aborted waiting " << tally.aborted_waiting << ", running " << tally.aborted_running
        << ", rejected " << tally.rejected << ", succeeded " << tally.succeeded;
    if (changing_limit) {
      EXPECT_GT(snapshot.limit_changes, 0u);
    }
  }
};

// The bulkhead with max_wait under stress: 4 slots, FIFO waiters without a bound, granted,
// timed out or cancelled.
struct BulkheadSubject {
  r4c::Bulkhead policy;

  BulkheadSubject(std::shared_ptr<r4c::ManualClock> clock, bool)
      : policy("async-stress", r4c::BulkheadConfig().max_concurrent(kLimit).max_wait(200us),
               std::move(clock)) {}
  template <class Op, class Token>
  void call(std::mt19937_64&, Op op, Token token) {
    policy.async_execute<int>(std::move(op), std::move(token));
  }
  static bool drops() { return false; }
  using Refusal = r4c::BulkheadFullException;  // what a refused caller is answered
  std::uint64_t by(r4c::BulkheadRejectReason reason) const {
    return policy.snapshot().rejected_by_reason[static_cast<int>(reason)];
  }
  bool covered(const Tally& tally) const {
    return policy.snapshot().waits_granted > 0 && by(r4c::BulkheadRejectReason::wait_timeout) > 0 &&
           by(r4c::BulkheadRejectReason::cancelled) > 0 && tally.aborted_running.load() > 0;
  }
  void check(const Tally& tally) const {
    const r4c::BulkheadSnapshot snapshot = policy.snapshot();
    EXPECT_EQ(snapshot.in_flight, 0);
    EXPECT_EQ(snapshot.waiting, 0);
    EXPECT_EQ(snapshot.rejected, tally.rejected + tally.aborted_waiting);
    EXPECT_EQ(by(r4c::BulkheadRejectReason::cancelled), tally.aborted_waiting.load());
    EXPECT_EQ(by(r4c::BulkheadRejectReason::full), 0u);  // every refusal came after a wait
    EXPECT_GT(snapshot.waits_granted, 0u);
    EXPECT_GT(by(r4c::BulkheadRejectReason::wait_timeout), 0u);
    EXPECT_GT(by(r4c::BulkheadRejectReason::cancelled), 0u);
  }
};

template <class Subject>
void stress(bool changing_limit) {
  auto clock = std::make_shared<r4c::ManualClock>();
  Subject subject(clock, changing_limit);
  const std::uint64_t seed = r4c::test::test_seed(1717);

  std::array<asio::io_context, kContexts> contexts;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  for (asio::io_context& context : contexts) {
    work.push_back(asio::make_work_guard(context));
    threads.emplace_back([&context] { context.run(); });
  }
  Tally tally;
  std::mutex recent_mutex;  // guards recent
  std::array<std::shared_ptr<Caller>, kRecent> recent;
  std::atomic<bool> done{false};
  std::mutex parked_mutex;  // guards parked
  // Completions of slow operations, posted after the clock's next step.
  std::vector<std::function<void()>> parked;

  // The clock moves (timing waits out on this thread; now and then past every wait), slow
  // operations complete, and callers are cancelled, until done.
  std::thread mover([&] {
    std::mt19937_64 random(seed + 1);
    while (!done.load()) {
      clock->advance(random() % 8 == 0 ? 250us : std::chrono::microseconds(random() % 60));
      std::vector<std::function<void()>> due;
      {
        std::scoped_lock lock(parked_mutex);
        due.swap(parked);
      }
      for (const std::function<void()>& complete : due) complete();
      if (random() % 3 == 0) {
        std::shared_ptr<Caller> victim;
        {
          std::scoped_lock lock(recent_mutex);
          victim = recent[random() % kRecent];
        }
        if (victim) {
          const auto type = random() % 2 == 0 ? asio::cancellation_type::terminal
                                              : asio::cancellation_type::partial;
          asio::post(contexts[victim->context], [victim, type] { victim->cancel(type); });
        }
      }
      std::this_thread::yield();
    }
  });

  // Whether the run has ended a wait in every way yet: if the schedule has not (a 2-core
  // machine may run the mover rarely), callers go on past kCalls, for kCoverageCap at most.
  auto covered = [&] { return subject.covered(tally); };
  const auto give_up = std::chrono::steady_clock::now() + r4c::test::kCoverageCap;
  std::mt19937_64 random(seed);
  int launched = 0;
  for (int i = 0;
       i < kCalls || ((i % 1024 != 0 || !covered()) && std::chrono::steady_clock::now() < give_up);
       ++i) {
    ++launched;
    while (i - tally.answered.load() >= kOutstanding) std::this_thread::yield();
    auto caller = std::make_shared<Caller>();
    caller->context = static_cast<int>(random() % kContexts);
    const int completes_on = static_cast<int>(random() % kContexts);
    const bool drop = subject.drops() && random() % 2 == 0;
    const bool slow = random() % 4 == 0;  // completes after the clock's next step
    {
      std::scoped_lock lock(recent_mutex);
      recent[random() % kRecent] = caller;
    }
    // The operation: counted while it holds its slot (until it completes, or until its caller
    // is cancelled: the slot may be freed then), completed on another context's thread (a
    // slow one after the clock's next step).
    auto op = [&, caller, completes_on, drop, slow](auto handler) {
      caller->started.store(true);
      tally.started.fetch_add(1);
      tally.live_ops.fetch_add(1);
      auto holds = std::make_shared<std::atomic<bool>>(true);
      auto let_go = [&tally, holds] {
        if (holds->exchange(false)) tally.running.fetch_sub(1);
      };
      const int now = tally.running.fetch_add(1) + 1;
      int seen = tally.most_running.load();
      while (now > seen && !tally.most_running.compare_exchange_weak(seen, now)) {
      }
      caller->let_go = let_go;
      auto finish = [&tally, drop, let_go, h = std::move(handler)]() mutable {
        let_go();
        if (drop) {
          std::move(h)(std::make_exception_ptr(r4c::CallTimeoutException("slow")), 0);
        } else {
          std::move(h)(std::exception_ptr(), 1);
        }
        tally.live_ops.fetch_sub(1);
      };
      if (!slow) {
        asio::post(contexts[completes_on], std::move(finish));
        return;
      }
      auto boxed = std::make_shared<decltype(finish)>(std::move(finish));
      std::scoped_lock lock(parked_mutex);
      parked.push_back([&contexts, completes_on, boxed] {
        asio::post(contexts[completes_on], [boxed] { (*boxed)(); });
      });
    };
    auto answer = [&tally, caller](std::exception_ptr failure, int) {
      if (caller->answers.fetch_add(1) != 0) tally.twice.fetch_add(1);
      if (!failure) {
        tally.succeeded.fetch_add(1);
      } else if (r4c::testing::aborted(failure)) {
        (caller->started.load() ? tally.aborted_running : tally.aborted_waiting).fetch_add(1);
      } else {
        if (r4c::testing::holds_exception<typename Subject::Refusal>(failure)) {
          tally.rejected.fetch_add(1);
          tally.answered.fetch_add(1);
          return;
        }
        try {
          std::rethrow_exception(failure);
        } catch (const r4c::CallTimeoutException&) {
          tally.succeeded.fetch_add(1);  // the operation's own failure, passed through
        } catch (...) {
          tally.other.fetch_add(1);
        }
      }
      tally.answered.fetch_add(1);
    };
    asio::io_context& home = contexts[caller->context];
    const std::uint64_t draw = random();
    asio::post(home, [&subject, &home, caller, draw, op = std::move(op),
                      answer = std::move(answer)]() mutable {
      std::mt19937_64 own(draw);  // this call's draws (its class), on its own thread
      subject.call(own, std::move(op),
                   asio::bind_cancellation_slot(caller->signal.slot(),
                                                asio::bind_executor(home, std::move(answer))));
    });
    if (random() % 16 == 0) {
      // Cancelled right after it starts, on its own context: often while it waits.
      asio::post(home, [caller] { caller->cancel(asio::cancellation_type::terminal); });
    }
  }
  // Pending waits time out as the clock keeps moving.
  while (tally.answered.load() < launched || tally.live_ops.load() > 0) std::this_thread::yield();
  done.store(true);
  mover.join();
  {
    std::scoped_lock lock(recent_mutex);
    recent.fill(nullptr);
  }
  work.clear();
  for (std::thread& thread : threads) thread.join();

  EXPECT_EQ(tally.twice.load(), 0);
  EXPECT_EQ(tally.other.load(), 0u);
  EXPECT_EQ(tally.succeeded + tally.aborted_running, static_cast<std::uint64_t>(tally.started));
  subject.check(tally);
  EXPECT_EQ(clock->pending_tasks(), 0u);
  if (!changing_limit) {
    EXPECT_LE(tally.most_running.load(), kLimit);
    // With the limit at 4 (not cut to 1 by drops), cancellations reach running operations too.
    EXPECT_GT(tally.aborted_running.load(), 0u);
  }
}

TEST(AsyncLimitWaitStressTest, AFixedLimitIsNeverExceededAndEveryCallerIsAnsweredOnce) {
  stress<LimitSubject>(false);
}

TEST(AsyncLimitWaitStressTest, AMovingLimitLeavesEverySlotFreeAndEveryCallerAnswered) {
  stress<LimitSubject>(true);
}

TEST(AsyncBulkheadWaitStressTest, ABulkheadIsNeverExceededAndEveryWaitingCallerIsAnsweredOnce) {
  stress<BulkheadSubject>(false);
}

}  // namespace
