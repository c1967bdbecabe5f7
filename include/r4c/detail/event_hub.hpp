// SPDX-License-Identifier: Apache-2.0
// The listeners of one kind of event of one policy (<r4c/events.hpp>).
//
// Publishing reads one atomic flag when nobody listens. Listeners are kept in an immutable
// list replaced on every subscribe and unsubscribe (rare), so a publication copies one pointer
// under the lock and calls the listeners without it: a listener may subscribe, unsubscribe or
// call the policy.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include "r4c/events.hpp"

namespace r4c::detail {

/// Sends a listener's exception to the listener error hook. Never throws.
void report_listener_error(std::string_view instance_id, std::string_view kind,
                           std::exception_ptr exception) noexcept;

class EventHubBase {
 public:
  virtual ~EventHubBase() = default;
  virtual void unsubscribe(std::uint64_t id) noexcept = 0;

 protected:
  static Subscription make_subscription(std::weak_ptr<EventHubBase> hub, std::uint64_t id) {
    return Subscription(std::move(hub), id);
  }
};

/// Held by its policy through a shared_ptr (subscriptions hold weak ones), created with
/// std::make_shared.
template <class Event>
class EventHub final : public EventHubBase, public std::enable_shared_from_this<EventHub<Event>> {
 public:
  using Listener = std::function<void(const Event&)>;

  /// `kind`: the policy's kind as the error hook reports it; a literal.
  explicit EventHub(std::string_view kind) noexcept : kind_(kind) {}

  /// Throws std::invalid_argument for an empty listener.
  Subscription subscribe(Listener listener) {
    if (!listener) throw std::invalid_argument("r4c: an event listener must not be empty");
    std::lock_guard lock(mutex_);
    auto next = std::make_shared<std::vector<Entry>>();
    if (listeners_) *next = *listeners_;
    const std::uint64_t id = next_id_++;
    next->push_back(Entry{id, std::move(listener)});
    listeners_ = std::move(next);
    any_.store(true, std::memory_order_release);
    return make_subscription(this->weak_from_this(), id);
  }

  void unsubscribe(std::uint64_t id) noexcept override {
    std::lock_guard lock(mutex_);
    if (!listeners_) return;
    try {
      auto next = std::make_shared<std::vector<Entry>>();
      next->reserve(listeners_->size());
      for (const Entry& entry : *listeners_) {
        if (entry.id != id) next->push_back(entry);
      }
      any_.store(!next->empty(), std::memory_order_release);
      listeners_ = next->empty() ? nullptr : std::move(next);
    } catch (...) {
      // Out of memory while copying: the listener stays, which is safe (it may run again).
    }
  }

  /// Whether anyone listens (the one read a policy makes before building an event).
  bool has_listeners() const noexcept { return any_.load(std::memory_order_acquire); }

  /// Calls every listener in subscription order; a throwing one goes to the error hook.
  void publish(const Event& event) const noexcept {
    if (!has_listeners()) return;
    std::shared_ptr<const std::vector<Entry>> listeners;
    {
      std::lock_guard lock(mutex_);
      listeners = listeners_;
    }
    if (!listeners) return;
    for (const Entry& entry : *listeners) {
      try {
        entry.listener(event);
      } catch (...) {
        report_listener_error(event.instance_id, kind_, std::current_exception());
      }
    }
  }

 private:
  struct Entry {
    std::uint64_t id;
    Listener listener;
  };

  mutable std::mutex mutex_;
  std::shared_ptr<const std::vector<Entry>> listeners_;
  std::uint64_t next_id_ = 1;
  std::atomic<bool> any_{false};
  std::string_view kind_;
};

}  // namespace r4c::detail
