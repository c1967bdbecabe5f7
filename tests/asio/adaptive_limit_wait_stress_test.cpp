// SPDX-License-Identifier: Apache-2.0
// Randomised asynchronous waits on one adaptive limit: callers on 4 io_context threads, their
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
  std::atomic<std::uint64_t> rejected{0};         // LimitExceededException
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

void stress(bool changing_limit) {
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit(
      "async-stress",
      r4c::test::stress_limit(changing_limit, kLimit, 6, 200us, changing_limit ? 6 : 3), clock);
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
  auto covered = [&] {
    const r4c::AdaptiveLimitSnapshot now = limit.snapshot();
    auto seen = [&now](r4c::RejectReason reason) {
      return now.rejected_by_reason[static_cast<int>(reason)] > 0;
    };
    return now.waits_granted > 0 && seen(r4c::RejectReason::wait_timeout) &&
           seen(r4c::RejectReason::queue_full) && seen(r4c::RejectReason::evicted) &&
           seen(r4c::RejectReason::cancelled) &&
           (changing_limit || tally.aborted_running.load() > 0);
  };
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
    const auto cls = static_cast<r4c::CallClass>(random() % r4c::kLimitedClasses);
    const int completes_on = static_cast<int>(random() % kContexts);
    const bool drop = changing_limit && random() % 2 == 0;
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
        try {
          std::rethrow_exception(failure);
        } catch (const r4c::LimitExceededException&) {
          tally.rejected.fetch_add(1);
        } catch (const r4c::CallTimeoutException&) {
          tally.succeeded.fetch_add(1);  // the operation's own failure, passed through
        } catch (...) {
          tally.other.fetch_add(1);
        }
      }
      tally.answered.fetch_add(1);
    };
    asio::io_context& home = contexts[caller->context];
    asio::post(home, [&limit, &home, caller, cls, op = std::move(op),
                      answer = std::move(answer)]() mutable {
      limit.async_execute<int>(
          cls, std::move(op),
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
  const r4c::AdaptiveLimitSnapshot snapshot = limit.snapshot();
  EXPECT_EQ(snapshot.in_flight, 0);  // every slot free
  EXPECT_EQ(snapshot.waiting, 0);    // every waiter answered
  EXPECT_EQ(clock->pending_tasks(), 0u);
  const std::uint64_t cancelled =
      snapshot.rejected_by_reason[static_cast<int>(r4c::RejectReason::cancelled)];
  // Each rejection answered once and counted once, as it was answered: a caller cancelled
  // before its operation ran is answered operation_aborted and counted `cancelled`, however
  // its wait ended in the queue (granted: its slot given back unused; timed out, evicted).
  EXPECT_EQ(snapshot.rejected, tally.rejected + tally.aborted_waiting);
  EXPECT_EQ(cancelled, tally.aborted_waiting.load());
  EXPECT_EQ(snapshot.rejected_by_reason[static_cast<int>(r4c::RejectReason::limit)], 0u);
  if (!changing_limit) {
    EXPECT_LE(tally.most_running.load(), kLimit);
  }
  // The mix really exercised every way a wait ends.
  EXPECT_GT(snapshot.waits_granted, 0u);
  EXPECT_GT(snapshot.rejected_by_reason[static_cast<int>(r4c::RejectReason::wait_timeout)], 0u);
  EXPECT_GT(snapshot.rejected_by_reason[static_cast<int>(r4c::RejectReason::queue_full)], 0u);
  EXPECT_GT(snapshot.rejected_by_reason[static_cast<int>(r4c::RejectReason::evicted)], 0u);
  EXPECT_GT(cancelled, 0u) << "aborted waiting " << tally.aborted_waiting << ", running "
                           << tally.aborted_running << ", rejected " << tally.rejected
                           << ", succeeded " << tally.succeeded;
  if (changing_limit) {
    EXPECT_GT(snapshot.limit_changes, 0u);
  } else {
    // With the limit at 4 (not cut to 1 by drops), cancellations reach running operations too.
    EXPECT_GT(tally.aborted_running.load(), 0u);
  }
}

TEST(AsyncLimitWaitStressTest, AFixedLimitIsNeverExceededAndEveryCallerIsAnsweredOnce) {
  stress(false);
}

TEST(AsyncLimitWaitStressTest, AMovingLimitLeavesEverySlotFreeAndEveryCallerAnswered) {
  stress(true);
}

}  // namespace
