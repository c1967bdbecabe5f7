// SPDX-License-Identifier: Apache-2.0
// Deadlines on a clock: the one shared timer behind timeouts and waits. Tasks are intrusive
// (the caller owns them, often on its stack), so scheduling allocates nothing once the queue has
// grown to its working size. A SystemClock fires tasks from one timer thread per clock; a
// ManualClock fires them inside the advance() that reaches them, on the advancing thread.
//
// A synchronous call's deadline on the default clock's time (a timeout with a stop token) takes
// no lock and allocates nothing: DeadlineSlots gives every thread a few slots of its own, which
// one process-wide scanner thread reads; see DeadlineSlots.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <stop_token>
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

/// Deadlines of synchronous calls in SystemClock ticks (detail::ClockReader::ticks()), armed and
/// disarmed without a lock or an allocation. Each thread owns a block of kDepth slots used as a
/// stack (nested calls take the next one); one scanner thread, shared by the process (every
/// SystemClock has the same time), reads them and fires a task whose deadline has passed.
///
/// The call's side is plain stores and loads: the scanner pays for the ordering instead, with
/// an asymmetric barrier (Linux membarrier, private expedited) between its writes and its
/// reads, each time it claims a task to fire and each time it goes to sleep with nothing to
/// look for. So a disarm that finds no claim knows the scanner will not fire the task, and one
/// that finds a claim waits until the fire has ended: after disarm() the task is never touched.
/// The scanner looks at the slots at least every kScanPeriod while any were in use in the last
/// kIdleAfter; a call whose deadline comes before the scanner's next look wakes it (a lock,
/// rare: only deadlines shorter than the scan period, or the first call after an idle spell).
/// Where the barrier is unavailable (not Linux, an old kernel) arm() declines and the caller
/// uses Clock::schedule instead.
class DeadlineSlots {
 public:
  static constexpr unsigned kDepth = 8;
  static constexpr std::int64_t kScanPeriodNs = 1'000'000;   // 1 ms
  static constexpr std::int64_t kIdleAfterNs = 100'000'000;  // 100 ms

  // One slot. `armed` is odd while a deadline is armed (a new odd value per arm), even once
  // disarmed; `claimed` and `done` are the scanner's: the arm it took to fire, and the last
  // arm it is done with.
  struct Slot {
    std::atomic<std::uint64_t> armed{0};
    std::atomic<std::int64_t> deadline{0};
    std::atomic<TimerTask*> task{nullptr};
    std::atomic<std::uint64_t> claimed{0};
    std::atomic<std::uint64_t> done{0};
    std::uint64_t seen = 0;  // the scanner's alone: `armed` at its last look
  };
  // The deadline task of a call with a stop token: a slot's own, kept by the thread from call
  // to call, so that a call in time hands the next one its stop state (the standard's is
  // allocated). Empty (no stop state) until first used and after a deadline stopped it.
  struct StopTask final : TimerTask {
    std::stop_source source{std::nostopstate};
    // The source's token, kept: a call that takes it by reference costs no reference count.
    std::stop_token token;
    void fire() noexcept override { source.request_stop(); }
  };
  struct alignas(64) Block {
    Slot slots[kDepth];
    unsigned depth = 0;      // the owning thread's
    std::uint64_t seq = 1;   // the owning thread's: the last arm's odd number
    StopTask stops[kDepth];  // the owning thread's, one per slot
  };

  /// This thread's block (made at its first use), or nullptr when the process has no scanner.
  [[gnu::always_inline]] static Block* block() noexcept {
    Block* block = t_block;
    if (block == nullptr) [[unlikely]]
      block = attach();
    return block;
  }

  /// Arms `task` to fire at `deadline` (ticks) on this thread's next slot; nullptr when this
  /// thread has no free slot or the process no scanner (use Clock::schedule then).
  static Slot* arm(TimerTask& task, std::int64_t deadline) noexcept {
    Block* const block = DeadlineSlots::block();
    if (block == nullptr || block->depth == kDepth) [[unlikely]]
      return nullptr;
    return &arm_next(*block, task, deadline);
  }

  /// arm() on the calling thread's `block` (block()), which has a free slot (depth < kDepth).
  [[gnu::always_inline]] static Slot& arm_next(Block& block, TimerTask& task,
                                               std::int64_t deadline) noexcept {
    Slot& slot = block.slots[block.depth++];
    block.seq += 2;
    // release, with the scanner's acquire: a scanner that reads the new deadline or task reads
    // the last disarm too, so it never takes them for the old arm's.
    slot.deadline.store(deadline, std::memory_order_release);
    slot.task.store(&task, std::memory_order_release);
    slot.armed.store(block.seq, std::memory_order_release);
    // The scanner's barrier stands in for a fence here (see the class comment).
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (deadline < next_look_.load(std::memory_order_relaxed)) [[unlikely]]
      wake_scanner();
    return slot;
  }

  /// Disarms the slot arm() returned last on this thread; when its task is firing, returns
  /// once the fire has ended. Afterwards the scanner no longer touches the task.
  static void disarm(Slot& slot) noexcept { disarm(*t_block, slot); }
  /// disarm() with the calling thread's block at hand.
  [[gnu::always_inline]] static void disarm(Block& block, Slot& slot) noexcept {
    --block.depth;
    const std::uint64_t seq = slot.armed.load(std::memory_order_relaxed);
    slot.armed.store(seq + 1, std::memory_order_release);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (slot.claimed.load(std::memory_order_acquire) == seq) [[unlikely]]
      wait_done(slot, seq);
  }

  /// Arms the next slot of the calling thread's `block` (which has one free) with its own stop
  /// task; returns the token the call gets, stopped at `deadline` unless disarmed first.
  /// Throws std::bad_alloc only when the slot needs a new stop state (its first call, or the
  /// one after a call whose token was stopped).
  [[gnu::always_inline]] static const std::stop_token& arm_stop(Block& block,
                                                                std::int64_t deadline) {
    StopTask& stop = block.stops[block.depth];
    if (!stop.source.stop_possible()) [[unlikely]]
      renew(stop);
    arm_next(block, stop, deadline);
    return stop.token;
  }
  /// Disarms what arm_stop() armed last on this thread; returns whether its token was stopped.
  /// A stopped source is dropped, never handed to another call.
  [[gnu::always_inline]] static bool disarm_stop(Block& block) noexcept {
    const unsigned index = block.depth - 1;
    disarm(block, block.slots[index]);
    StopTask& stop = block.stops[index];
    if (!stop.source.stop_requested()) [[likely]]
      return false;
    drop(stop);
    return true;
  }

 private:
  friend class DeadlineScanner;
  friend struct DeadlineBlockOwner;
  static Block* attach() noexcept;
  static void wake_scanner() noexcept;
  static void wait_done(Slot& slot, std::uint64_t seq) noexcept;
  static void renew(StopTask& stop);
  static void drop(StopTask& stop) noexcept;

  static inline thread_local Block* t_block = nullptr;
  // When the scanner looks at the slots next, in ticks (INT64_MAX: not before it is woken).
  alignas(64) static inline std::atomic<std::int64_t> next_look_{INT64_MAX};
};

}  // namespace r4c::detail
