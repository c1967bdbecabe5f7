// SPDX-License-Identifier: Apache-2.0
#include "r4c/detail/timer.hpp"

#include <algorithm>
#include <chrono>
#include <memory>

#include "r4c/clock.hpp"

#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

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

namespace {

#if defined(__linux__)
long membarrier(int command) noexcept { return syscall(__NR_membarrier, command, 0, 0); }

bool asymmetric_barrier_ready() noexcept {
  const long commands = membarrier(MEMBARRIER_CMD_QUERY);
  if (commands < 0 || (commands & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
  return membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
}

// Every running thread of the process passes a full memory barrier before this returns: the
// fence the call's side of DeadlineSlots leaves out.
void heavy_barrier() noexcept { membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED); }
#else
bool asymmetric_barrier_ready() noexcept { return false; }
void heavy_barrier() noexcept {}
#endif

}  // namespace

// The one thread that reads every thread's deadline slots. Made once and never destroyed: a
// thread may arm a deadline while the process exits.
class DeadlineScanner {
 public:
  using Slot = DeadlineSlots::Slot;
  using Block = DeadlineSlots::Block;

  /// The scanner, started on first use, or nullptr where the asymmetric barrier is missing.
  static DeadlineScanner* get() noexcept {
    static DeadlineScanner* const scanner = []() noexcept -> DeadlineScanner* {
      if (!asymmetric_barrier_ready()) return nullptr;
      try {
        auto* made = new DeadlineScanner;
        std::thread([made] { made->run(); }).detach();
        return made;
      } catch (...) {
        return nullptr;
      }
    }();
    return scanner;
  }

  void add(Block* block) {
    std::lock_guard<std::mutex> lock(mutex_);
    blocks_.push_back(block);
  }

  void remove(Block* block) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    blocks_.erase(std::find(blocks_.begin(), blocks_.end(), block));
  }

  void wake() noexcept {
    if (poked_.load(std::memory_order_relaxed)) return;  // a wake-up is on its way
    std::lock_guard<std::mutex> lock(mutex_);
    poked_.store(true, std::memory_order_relaxed);
    woken_.notify_one();
  }

 private:
  struct Due {
    Slot* slot;
    TimerTask* task;
    std::uint64_t seq;
  };

  DeadlineScanner()
      : reader_(&clock_),
        period_ticks_(reader_.to_ticks(DeadlineSlots::kScanPeriodNs)),
        idle_ticks_(reader_.to_ticks(DeadlineSlots::kIdleAfterNs)) {
    due_.reserve(64);
    firing_.reserve(64);
  }

  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    std::int64_t last_busy = reader_.ticks();
    for (;;) {
      poked_.store(false, std::memory_order_relaxed);
      const std::int64_t now = reader_.ticks();
      DeadlineSlots::next_look_.store(now + period_ticks_, std::memory_order_relaxed);
      std::int64_t earliest = INT64_MAX;
      bool busy = scan(now, earliest);
      if (busy) last_busy = now;
      if (!busy && now - last_busy >= idle_ticks_) {
        // Nothing to look for: sleep until a call wakes us. A call arming from here on either
        // sees that (and wakes us) or is seen by the scan after the barrier.
        DeadlineSlots::next_look_.store(INT64_MAX, std::memory_order_relaxed);
        heavy_barrier();
        busy = scan(now, earliest);
        if (!busy) {
          woken_.wait(lock, [this] { return poked_.load(std::memory_order_relaxed); });
          last_busy = reader_.ticks();
          continue;
        }
      }
      if (!due_.empty()) {
        fire_due(lock);
        continue;  // the fires took time: look again at once
      }
      const std::int64_t look = std::min(earliest, now + period_ticks_);
      DeadlineSlots::next_look_.store(look, std::memory_order_relaxed);
      woken_.wait_for(lock, std::chrono::nanoseconds(reader_.to_ns(look - now)),
                      [this] { return poked_.load(std::memory_order_relaxed); });
    }
  }

  // Claims every armed slot whose deadline has come; returns whether any slot is armed or was
  // armed since the last look (calls shorter than the scan period are rarely armed when it
  // looks, and each wake-up after a sleep costs a call a lock).
  bool scan(std::int64_t now, std::int64_t& earliest) noexcept {
    bool busy = false;
    for (Block* block : blocks_) {
      for (Slot& slot : block->slots) {
        const std::uint64_t seq = slot.armed.load(std::memory_order_acquire);
        if (seq != slot.seen) {
          slot.seen = seq;
          busy = true;
        }
        if ((seq & 1) == 0) continue;
        const std::int64_t deadline = slot.deadline.load(std::memory_order_acquire);
        TimerTask* task = slot.task.load(std::memory_order_acquire);
        // The deadline and task belong to arm `seq` if it still stands: a later arm's would
        // come with its disarm, which this reading would see (acquire above).
        if (slot.armed.load(std::memory_order_relaxed) != seq) continue;
        busy = true;
        if (slot.claimed.load(std::memory_order_relaxed) == seq) continue;  // fired already
        if (deadline > now) {
          earliest = std::min(earliest, deadline);
        } else if (due_.size() < due_.capacity()) {  // the rest at the next look
          slot.claimed.store(seq, std::memory_order_relaxed);
          due_.push_back(Due{&slot, task, seq});
        } else {
          earliest = now;
        }
      }
    }
    return busy;
  }

  // Fires the claimed tasks whose calls had not disarmed them by the barrier; those calls wait
  // in disarm() until done. A call that disarmed first is told it may go on.
  void fire_due(std::unique_lock<std::mutex>& lock) noexcept {
    heavy_barrier();
    firing_.clear();
    for (const Due& due : due_) {
      if (due.slot->armed.load(std::memory_order_relaxed) == due.seq) {
        firing_.push_back(due);
      } else {
        due.slot->done.store(due.seq, std::memory_order_release);
      }
    }
    due_.clear();
    // Outside the lock: a task may run a stop callback that arms a deadline of its own. The
    // blocks of calls waiting for their fire cannot go away meanwhile.
    lock.unlock();
    for (const Due& due : firing_) {
      due.task->fire();
      due.slot->done.store(due.seq, std::memory_order_release);
    }
    lock.lock();
  }

  std::mutex mutex_;
  std::condition_variable woken_;
  std::atomic<bool> poked_{false};
  std::vector<Block*> blocks_;
  std::vector<Due> due_;     // capacity fixed at 64: the scanner allocates nothing either
  std::vector<Due> firing_;  // the same capacity
  SystemClock clock_;
  ClockReader reader_;
  const std::int64_t period_ticks_;
  const std::int64_t idle_ticks_;
};

// Takes the thread's block off the scanner's list when the thread ends.
struct DeadlineBlockOwner {
  std::unique_ptr<DeadlineSlots::Block> block;
  bool ended = false;
  ~DeadlineBlockOwner() {
    ended = true;
    if (block) DeadlineScanner::get()->remove(block.get());
    DeadlineSlots::t_block = nullptr;
  }
};

namespace {
thread_local DeadlineBlockOwner t_block_owner;
thread_local bool t_no_slots = false;  // this thread gets none: no scanner, or it is ending
}  // namespace

DeadlineSlots::Block* DeadlineSlots::attach() noexcept {
  if (t_no_slots) return nullptr;
  DeadlineScanner* scanner = DeadlineScanner::get();
  if (scanner == nullptr || t_block_owner.ended) {
    t_no_slots = true;
    return nullptr;
  }
  try {
    auto block = std::make_unique<Block>();
    scanner->add(block.get());
    t_block_owner.block = std::move(block);
  } catch (...) {
    t_no_slots = true;
    return nullptr;
  }
  t_block = t_block_owner.block.get();
  return t_block;
}

void DeadlineSlots::wake_scanner() noexcept {
  if (DeadlineScanner* scanner = DeadlineScanner::get()) scanner->wake();
}

void DeadlineSlots::wait_done(Slot& slot, std::uint64_t seq) noexcept {
  // The fire is a request_stop() and its callbacks: short.
  while (slot.done.load(std::memory_order_acquire) != seq) std::this_thread::yield();
}

void DeadlineSlots::renew(StopTask& stop) {
  stop.source = std::stop_source();
  stop.token = stop.source.get_token();
}

void DeadlineSlots::drop(StopTask& stop) noexcept {
  stop.token = std::stop_token();
  stop.source = std::stop_source(std::nostopstate);
}

}  // namespace r4c::detail
