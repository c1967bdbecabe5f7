// SPDX-License-Identifier: Apache-2.0
// A stack of frames per thread, one per object whose callbacks the thread is running: what lets
// a callback that calls back into one of those objects be recognised instead of deadlocking on
// a lock its own thread holds. Internal to src/.
#pragma once

namespace r4c::detail {

/// A frame of type `Derived` for one object (`key`), on this thread's stack of `Derived`
/// frames from construction to destruction (frames end in reverse order: they are locals).
template <class Derived>
class ThreadFrame {
 public:
  ThreadFrame(const ThreadFrame&) = delete;
  ThreadFrame& operator=(const ThreadFrame&) = delete;

  /// The innermost frame of this thread for `key`; nullptr when there is none. Every frame is
  /// looked at, not just the innermost: A's callback may call into B, whose callback then calls
  /// into A.
  static Derived* of(const void* key) noexcept {
    for (ThreadFrame* frame = innermost_; frame != nullptr; frame = frame->outer_) {
      if (frame->key_ == key) return static_cast<Derived*>(frame);
    }
    return nullptr;
  }

 protected:
  explicit ThreadFrame(const void* key) noexcept : key_(key), outer_(innermost_) {
    innermost_ = this;
  }
  ~ThreadFrame() { innermost_ = outer_; }

 private:
  static inline thread_local ThreadFrame* innermost_ = nullptr;
  const void* key_;
  ThreadFrame* outer_;
};

}  // namespace r4c::detail
