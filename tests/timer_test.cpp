// SPDX-License-Identifier: Apache-2.0
// The clocks' timers: what timeouts and waits are built on.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <set>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "r4c/clock.hpp"
#include "r4c/errors.hpp"
#include "r4c/retry.hpp"
#include "r4c/timeout.hpp"

namespace {

using namespace std::chrono_literals;

// Records the time its clock showed when it fired.
struct Recorder final : r4c::detail::TimerTask {
  Recorder(const r4c::Clock& clock, std::vector<std::int64_t>& log) : clock(clock), log(log) {}
  void fire() noexcept override {
    log.push_back(clock.now().count());
    fired.store(true);
  }
  const r4c::Clock& clock;
  std::vector<std::int64_t>& log;
  std::atomic<bool> fired{false};
};

TEST(ManualClockTimerTest, AdvanceFiresEveryDeadlineItReachesInOrderAtItsTime) {
  r4c::ManualClock clock;
  std::vector<std::int64_t> log;
  Recorder late(clock, log), early(clock, log), exact(clock, log), beyond(clock, log);
  clock.schedule(late, 300ns);
  clock.schedule(early, 100ns);
  clock.schedule(exact, 500ns);
  clock.schedule(beyond, 501ns);
  EXPECT_EQ(clock.pending_tasks(), 4u);
  clock.advance(500ns);
  EXPECT_EQ(log, (std::vector<std::int64_t>{100, 300, 500}));
  EXPECT_EQ(clock.now(), 500ns);
  EXPECT_EQ(clock.pending_tasks(), 1u);
  clock.cancel(late);
  clock.cancel(early);
  clock.cancel(exact);
  EXPECT_TRUE(clock.cancel(beyond));
  EXPECT_EQ(clock.pending_tasks(), 0u);
}

TEST(ManualClockTimerTest, ACancelledTaskNeverFires) {
  r4c::ManualClock clock;
  std::vector<std::int64_t> log;
  Recorder task(clock, log);
  clock.schedule(task, 1s);
  EXPECT_TRUE(clock.cancel(task));
  EXPECT_FALSE(clock.cancel(task));  // no longer scheduled
  clock.advance(2s);
  EXPECT_TRUE(log.empty());
}

TEST(ManualClockTimerTest, ATaskMayBeScheduledAgainAfterItFired) {
  r4c::ManualClock clock;
  std::vector<std::int64_t> log;
  Recorder task(clock, log);
  clock.schedule(task, 1s);
  clock.advance(1s);
  clock.cancel(task);
  clock.schedule(task, 3s);
  clock.advance(5s);
  clock.cancel(task);
  EXPECT_EQ(log, (std::vector<std::int64_t>{1'000'000'000, 3'000'000'000}));
}

// An advance that has passed a deadline has returned: a task scheduled for it fires at once,
// rather than waiting for an advance that may never come.
TEST(ManualClockTimerTest, ATaskAlreadyDueFiresAtOnceOnTheSchedulingThread) {
  r4c::ManualClock clock;
  std::vector<std::int64_t> log;
  Recorder task(clock, log);
  clock.advance(2s);
  clock.schedule(task, 1s);
  EXPECT_EQ(log, (std::vector<std::int64_t>{2'000'000'000}));
  EXPECT_EQ(clock.pending_tasks(), 0u);
  EXPECT_FALSE(clock.cancel(task));
}

// A sleeper racing an advance past its deadline never misses it.
TEST(ManualClockTimerTest, SleepersRacingAnAdvanceAllWake) {
  for (int round = 0; round < 200; ++round) {
    r4c::ManualClock clock;
    std::atomic<bool> woke{false};
    std::thread sleeper([&] {
      clock.sleep_until(1ms);
      woke.store(true);
    });
    clock.advance(1ms);
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    while (!woke.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
    if (!woke.load()) {
      // Joining would hang: the sleeper's wake-up was lost.
      std::fprintf(stderr, "round %d: a sleeper missed the advance past its deadline\n", round);
      std::_Exit(1);
    }
    sleeper.join();
    EXPECT_EQ(clock.pending_tasks(), 0u);
  }
}

TEST(ManualClockTimerTest, SleepUntilEndsWhenAnotherThreadAdvancesTheClock) {
  r4c::ManualClock clock;
  std::atomic<bool> woke{false};
  std::thread sleeper([&] {
    clock.sleep_until(2s);
    woke.store(true);
  });
  while (clock.pending_tasks() == 0) std::this_thread::yield();
  clock.advance(1s);
  EXPECT_FALSE(woke.load());
  clock.advance(1s);
  sleeper.join();
  EXPECT_TRUE(woke.load());
  EXPECT_EQ(clock.pending_tasks(), 0u);
}

TEST(ManualClockTimerTest, SleepUntilThePastReturnsAtOnce) {
  r4c::ManualClock clock(5s);
  clock.sleep_until(5s);
  clock.sleep_until(1s);
  EXPECT_EQ(clock.pending_tasks(), 0u);
}

TEST(ManualClockTimerTest, ManyTasksKeepHeapOrder) {
  r4c::ManualClock clock;
  std::vector<std::int64_t> log;
  std::vector<std::unique_ptr<Recorder>> tasks;
  for (int i = 0; i < 200; ++i) {
    tasks.push_back(std::make_unique<Recorder>(clock, log));
    clock.schedule(*tasks.back(), std::chrono::nanoseconds((i * 7919) % 1000 + 1));
  }
  for (int i = 0; i < 200; i += 3) clock.cancel(*tasks[static_cast<std::size_t>(i)]);
  clock.advance(1000ns);
  EXPECT_EQ(log.size(), 200u - 67u);
  EXPECT_TRUE(std::is_sorted(log.begin(), log.end()));
  for (auto& task : tasks) clock.cancel(*task);
}

// Real time on purpose: the SystemClock's timer thread waits in steady_clock time.
TEST(SystemClockTimerTest, ATimerThreadFiresTasksAtTheirDeadline) {
  r4c::SystemClock clock;
  std::vector<std::int64_t> log;
  Recorder task(clock, log);
  const auto deadline = clock.now() + 20ms;
  clock.schedule(task, deadline);
  while (!task.fired.load()) std::this_thread::sleep_for(1ms);
  clock.cancel(task);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_GE(log[0], deadline.count());
  EXPECT_EQ(clock.pending_tasks(), 0u);
}

TEST(SystemClockTimerTest, SleepUntilSleeps) {
  r4c::SystemClock clock;
  const auto start = clock.now();
  clock.sleep_until(start + 15ms);
  EXPECT_GE(clock.now() - start, 15ms);
}

// A task firing on the timer thread holds up cancel() until it has fired, so the owner may
// destroy it as soon as cancel() returns.
struct SlowTask final : r4c::detail::TimerTask {
  void fire() noexcept override {
    started.store(true);
    while (!release.load()) std::this_thread::yield();
    finished.store(true);
  }
  std::atomic<bool> started{false}, release{false}, finished{false};
};

TEST(SystemClockTimerTest, CancelWaitsForAFireInProgress) {
  r4c::SystemClock clock;
  SlowTask task;
  clock.schedule(task, clock.now());
  while (!task.started.load()) std::this_thread::yield();
  std::thread releaser([&] {
    std::this_thread::sleep_for(10ms);
    task.release.store(true);
  });
  EXPECT_FALSE(clock.cancel(task));
  EXPECT_TRUE(task.finished.load());
  releaser.join();
}

// The deadline slots of synchronous calls on the default clock's time (a timeout with a token).
// Real time on purpose: their scanner thread reads steady time. Where the process has no
// scanner (no membarrier) arm() declines; the tests then check only that.
struct CountingTask final : r4c::detail::TimerTask {
  void fire() noexcept override { fires.fetch_add(1); }
  std::atomic<int> fires{0};
};

std::int64_t ticks_from_now(std::chrono::nanoseconds span) {
  static r4c::SystemClock clock;
  const r4c::detail::ClockReader reader(&clock);
  return reader.ticks() + reader.to_ticks(span.count());
}

using Slots = r4c::detail::DeadlineSlots;

TEST(DeadlineSlotsTest, APassedDeadlineFiresOnceOnTheScanner) {
  CountingTask task;
  Slots::Slot* slot = Slots::arm(task, ticks_from_now(2ms));
  if (slot == nullptr) GTEST_SKIP() << "no asymmetric barrier here: timeouts use the queue";
  while (task.fires.load() == 0) std::this_thread::sleep_for(1ms);
  Slots::disarm(*slot);
  std::this_thread::sleep_for(5ms);  // several scans: a fired arm is not fired again
  EXPECT_EQ(task.fires.load(), 1);
}

TEST(DeadlineSlotsTest, ADisarmedDeadlineNeverFires) {
  CountingTask task;
  Slots::Slot* slot = Slots::arm(task, ticks_from_now(3ms));
  if (slot == nullptr) GTEST_SKIP() << "no asymmetric barrier here";
  Slots::disarm(*slot);
  std::this_thread::sleep_for(10ms);
  EXPECT_EQ(task.fires.load(), 0);
}

TEST(DeadlineSlotsTest, NestedCallsTakeTheNextSlotUntilTheyRunOut) {
  CountingTask tasks[Slots::kDepth + 1];
  std::vector<Slots::Slot*> armed;
  for (unsigned i = 0; i < Slots::kDepth; ++i) {
    armed.push_back(Slots::arm(tasks[i], ticks_from_now(1h)));
    if (armed.back() == nullptr) GTEST_SKIP() << "no asymmetric barrier here";
  }
  std::set<Slots::Slot*> distinct(armed.begin(), armed.end());
  EXPECT_EQ(distinct.size(), Slots::kDepth);
  EXPECT_EQ(Slots::arm(tasks[Slots::kDepth], ticks_from_now(1h)), nullptr);
  while (!armed.empty()) {
    Slots::disarm(*armed.back());
    armed.pop_back();
  }
  // Free again once the nested ones ended.
  Slots::Slot* again = Slots::arm(tasks[0], ticks_from_now(1h));
  ASSERT_NE(again, nullptr);
  Slots::disarm(*again);
  for (const CountingTask& task : tasks) EXPECT_EQ(task.fires.load(), 0);
}

TEST(DeadlineSlotsTest, DisarmWaitsForAFireInProgress) {
  SlowTask task;
  Slots::Slot* slot = Slots::arm(task, ticks_from_now(0ns));
  if (slot == nullptr) GTEST_SKIP() << "no asymmetric barrier here";
  while (!task.started.load()) std::this_thread::yield();
  std::thread releaser([&] {
    std::this_thread::sleep_for(10ms);
    task.release.store(true);
  });
  Slots::disarm(*slot);
  EXPECT_TRUE(task.finished.load());
  releaser.join();
}

// A deadline shorter than the scanner's period wakes it: the token stops near its deadline, not
// at the scanner's next look.
TEST(DeadlineSlotsTest, AShortDeadlineWakesTheScanner) {
  r4c::Timeout timeout("short", r4c::TimeoutConfig().timeout(200us));
  for (int i = 0; i < 20; ++i) {  // the scanner sleeps between the calls, or not
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THROW(timeout.execute([](std::stop_token stop) {
      while (!stop.stop_requested()) std::this_thread::yield();
    }),
                 r4c::CallTimeoutException);
    EXPECT_GE(std::chrono::steady_clock::now() - start, 200us);
  }
  EXPECT_EQ(timeout.snapshot().timed_out, 20u);
}

// A slot's own stop task: its source is stopped at a passed deadline, dropped at the disarm that
// finds it stopped, and a fresh one is armed next; a source disarmed in time is armed again.
TEST(DeadlineSlotsTest, AStoppedSlotSourceIsReplacedAndAnUnstoppedOneKept) {
  Slots::Block* block = Slots::block();
  if (block == nullptr) GTEST_SKIP() << "no asymmetric barrier here";
  const std::stop_token kept = Slots::arm_stop(*block, ticks_from_now(1h));
  EXPECT_TRUE(kept.stop_possible());
  EXPECT_FALSE(Slots::disarm_stop(*block));
  const std::stop_token& again = Slots::arm_stop(*block, ticks_from_now(0ns));
  EXPECT_TRUE(again == kept);  // the same slot, the same state
  while (!kept.stop_requested()) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(again.stop_requested());
  EXPECT_TRUE(Slots::disarm_stop(*block));
  const std::stop_token& fresh = Slots::arm_stop(*block, ticks_from_now(1h));
  EXPECT_TRUE(fresh.stop_possible());
  EXPECT_FALSE(fresh.stop_requested());
  EXPECT_FALSE(fresh == kept);
  EXPECT_FALSE(Slots::disarm_stop(*block));
  EXPECT_EQ(block->depth, 0u);
}

// Threads arming and disarming at once, with deadlines passed and far: a task fires at most
// once, never after its disarm returned, and each passed deadline not disarmed in time fires.
TEST(DeadlineSlotsTest, ManyThreadsArmAndDisarmAtOnce) {
  constexpr int kThreads = 4;
  constexpr int kCalls = 2000;
  std::atomic<int> late_fires{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        struct Task final : r4c::detail::TimerTask {
          void fire() noexcept override {
            if (disarmed.load()) late->fetch_add(1);
            fires.fetch_add(1);
          }
          std::atomic<bool> disarmed{false};
          std::atomic<int> fires{0};
          std::atomic<int>* late = nullptr;
        } task;
        task.late = &late_fires;
        const bool passed = (i + t) % 3 == 0;
        Slots::Slot* slot = Slots::arm(task, ticks_from_now(passed ? 0ns : 1h));
        if (slot == nullptr) return;
        if (passed && i % 50 == 0) {
          while (task.fires.load() == 0) std::this_thread::yield();
        }
        Slots::disarm(*slot);
        task.disarmed.store(true);
        EXPECT_LE(task.fires.load(), passed ? 1 : 0);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(late_fires.load(), 0);
}

// Deeper than the slots go, a timeout's deadline goes to the clock's queue; both kinds stop
// their token and leave nothing behind.
TEST(DeadlineSlotsTest, TimeoutsNestedDeeperThanTheSlotsStillStopTheirTokens) {
  constexpr int kLevels = static_cast<int>(Slots::kDepth) + 3;
  std::vector<std::unique_ptr<r4c::Timeout>> timeouts;
  for (int i = 0; i < kLevels; ++i) {
    timeouts.push_back(std::make_unique<r4c::Timeout>(
        "level" + std::to_string(i), r4c::TimeoutConfig().timeout(i == kLevels - 1 ? 5ms : 1h)));
  }
  std::function<int(int, std::stop_token)> level = [&](int i, std::stop_token) -> int {
    if (i == kLevels) return 0;
    return timeouts[i]->execute([&, i](std::stop_token stop) {
      if (i == kLevels - 1) {
        while (!stop.stop_requested()) std::this_thread::yield();
        return 1;
      }
      return level(i + 1, stop);
    });
  };
  EXPECT_THROW(level(0, {}), r4c::CallTimeoutException);
  EXPECT_EQ(timeouts.back()->snapshot().timed_out, 1u);
  EXPECT_EQ(timeouts.front()->snapshot().timed_out, 0u);
  for (const auto& timeout : timeouts) EXPECT_EQ(timeout->clock()->pending_tasks(), 0u);
  // Nothing left armed: the thread's slots are all free again.
  std::vector<Slots::Slot*> armed;
  CountingTask tasks[Slots::kDepth];
  for (CountingTask& task : tasks) armed.push_back(Slots::arm(task, ticks_from_now(1h)));
  for (auto it = armed.rbegin(); it != armed.rend(); ++it) {
    if (*it != nullptr) Slots::disarm(**it);
  }
  if (armed.front() != nullptr) {
    EXPECT_NE(armed.back(), nullptr);
  }
}

// A clock of the user's own, not a ManualClock: its time moves only by step(), and it fires
// its deadlines itself. Policies find its timers through the Clock interface alone.
class SteppedClock final : public r4c::Clock {
 public:
  std::chrono::nanoseconds now() const noexcept override {
    return std::chrono::nanoseconds(now_.load(std::memory_order_relaxed));
  }
  void schedule(r4c::TimerTask& task, std::chrono::nanoseconds deadline) override {
    scheduled.fetch_add(1, std::memory_order_relaxed);
    timers().schedule_manual(task, deadline.count(), now_);
  }
  void step(std::chrono::nanoseconds by) {
    timers().fire_due(
        now_.load(std::memory_order_relaxed) + by.count(),
        [](void* self, std::int64_t time) {
          static_cast<SteppedClock*>(self)->now_.store(time, std::memory_order_relaxed);
        },
        this);
  }
  // Steps by `by` once some task is pending (the other thread has scheduled its deadline).
  void step_when_pending(std::chrono::nanoseconds by) {
    while (pending_tasks() == 0) std::this_thread::yield();
    step(by);
  }
  std::atomic<int> scheduled{0};

 private:
  std::atomic<std::int64_t> now_{0};
};

TEST(UserClockTimerTest, ATimeoutsDeadlineFollowsTheUsersClock) {
  auto clock = std::make_shared<SteppedClock>();
  r4c::Timeout timeout("search", r4c::TimeoutConfig().timeout(1s), clock);
  auto call = std::async(std::launch::async, [&] {
    return timeout.execute([](std::stop_token stop) {
      while (!stop.stop_requested()) std::this_thread::yield();
      return 1;
    });
  });
  clock->step_when_pending(999ms);
  EXPECT_EQ(clock->pending_tasks(), 1u);  // the deadline is still ahead
  clock->step(1ms);
  EXPECT_THROW(call.get(), r4c::CallTimeoutException);
  EXPECT_EQ(clock->scheduled.load(), 1);
  EXPECT_EQ(clock->pending_tasks(), 0u);
}

TEST(UserClockTimerTest, ARetrysWaitEndsWhenTheUsersClockReachesIt) {
  auto clock = std::make_shared<SteppedClock>();
  r4c::Retry retry("orders", r4c::RetryConfig().max_attempts(2).wait(500ms), clock);
  std::vector<std::chrono::nanoseconds> attempts;
  auto call = std::async(std::launch::async, [&] {
    return retry.execute([&] {
      attempts.push_back(clock->now());
      if (attempts.size() == 1) throw std::runtime_error("busy");
      return 7;
    });
  });
  clock->step_when_pending(499ms);
  EXPECT_EQ(clock->pending_tasks(), 1u);  // still waiting
  clock->step(1ms);
  EXPECT_EQ(call.get(), 7);
  EXPECT_EQ(attempts, (std::vector<std::chrono::nanoseconds>{0ns, 500ms}));
  EXPECT_EQ(clock->scheduled.load(), 1);
}

TEST(UserClockTimerTest, SleepUntilUsesTheUsersTimers) {
  SteppedClock clock;
  std::thread sleeper([&] { clock.sleep_until(2s); });
  clock.step_when_pending(2s);
  sleeper.join();
  EXPECT_EQ(clock.scheduled.load(), 1);
  EXPECT_EQ(clock.now(), 2s);
}

}  // namespace
