// SPDX-License-Identifier: Apache-2.0
// Events: what a policy publishes when its state changes. Admitted calls publish nothing, a
// window that keeps the limit publishes nothing, and rejections are counted (see
// <r4c/metrics.hpp>), never published one by one. The bulkhead is the one exception, as in
// resilience4j: it publishes each call's permission, rejection and end, to those who listen
// for them (on_call_permitted, ...); while nobody listens for a type its calls pay one load.
//
//   r4c::Subscription s = registry.adaptive_limit("orders").on_limit_change(
//       [](const r4c::LimitChangeEvent& e) { log("{}: {} -> {}", e.instance_id, e.old_limit,
//                                                 e.new_limit); });
//
// A listener runs on the thread whose call made the change, after the change is visible (a
// snapshot taken inside the listener shows it). It may call the policy that published, even
// the same handle; it should be quick, as a call is waiting. A listener that throws is
// isolated: the exception goes to the listener error hook (set_listener_error_hook; by default
// one line on standard error), the other listeners still run, and the call goes on unharmed.
//
// Subscribing costs nothing on the admitted path: a policy checks for listeners only when its
// state changes. A Subscription ends its listener when destroyed or reset; a publication
// already under way on another thread may still call it once.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string_view>
#include <utility>

namespace r4c {

enum class CircuitBreakerState : std::uint8_t;

/// An adaptive limit's window changed its limit.
struct LimitChangeEvent {
  std::string_view instance_id;  // valid while the listener runs
  int old_limit = 0;
  int new_limit = 0;
  std::chrono::nanoseconds window_latency{0};  // the window's average latency
  int max_in_flight = 0;                       // the most calls in flight during the window
  bool dropped = false;                        // whether any call of the window was a drop
  std::chrono::nanoseconds long_latency{0};    // gradient2's long-term average; 0 for aimd
  int waiters_granted = 0;  // waiters a raise handed a slot to (max_wait set), before this event
};

/// A circuit breaker moved from one state to another.
struct CircuitBreakerTransitionEvent {
  std::string_view instance_id;  // valid while the listener runs
  CircuitBreakerState from;
  CircuitBreakerState to;
  double failure_rate = -1;    // percent over the calls that decided it; -1 when none did
  double slow_call_rate = -1;  // likewise
  /// The breaker's transition count with this one (CircuitBreakerSnapshot::transitions): 1 for
  /// the first. Consecutive events differ by 1 unless the listeners fell so far behind that
  /// the oldest transitions were dropped (see CircuitBreaker::on_state_transition).
  std::uint64_t transition = 0;
};

/// A retried call gave up: it failed after at least one retry (out of attempts, or a failure
/// that is not retried), or kept an unwanted result at its last attempt.
struct RetryGiveUpEvent {
  std::string_view instance_id;  // valid while the listener runs
  int attempts = 0;              // attempts made, >= 2
};

/// One attempt of a retried call ended (Retry::on_attempt): published for every attempt,
/// after the retry decided what follows and before any wait.
struct RetryAttemptEvent {
  std::string_view instance_id;  // valid while the listener runs
  int attempt = 0;               // 1 for the first
  /// Whether the attempt failed (threw, or completed with an error); else it returned, and
  /// `retrying` says whether the result predicate asked for another attempt.
  bool failed = false;
  bool retrying = false;             // another attempt follows, after `wait`
  std::chrono::nanoseconds wait{0};  // the wait before the next attempt; 0 when none follows
  std::exception_ptr failure;        // the attempt's failure, when it failed
};

/// What a bulkhead did with one call (resilience4j's BulkheadOnCallPermittedEvent,
/// BulkheadOnCallRejectedEvent, BulkheadOnCallFinishedEvent).
enum class BulkheadEventType : std::uint8_t {
  call_permitted,  // the call took a slot
  call_rejected,   // the bulkhead was full
  call_finished,   // a permitted call gave its slot back
};

/// One call's passage through a bulkhead.
struct BulkheadEvent {
  std::string_view instance_id;  // valid while the listener runs
  BulkheadEventType type = BulkheadEventType::call_permitted;
  int in_flight = 0;       // calls holding a slot once the event happened
  int max_concurrent = 0;  // the bulkhead's slots
};

namespace detail {
class EventHubBase;
template <class Event>
class EventHub;  // a policy's listeners of one event type (<r4c/detail/event_hub.hpp>)
}  // namespace detail

/// The owner of one listener; ends it when destroyed or reset. Movable, not copyable. An empty
/// Subscription (default-constructed, moved from or reset) owns nothing.
class Subscription {
 public:
  Subscription() noexcept = default;
  Subscription(Subscription&&) noexcept = default;
  Subscription& operator=(Subscription&& other) noexcept;
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;
  ~Subscription();

  /// Ends the listener now (the policy may already be gone).
  void reset() noexcept;
  /// Whether it still owns a listener of a living policy.
  explicit operator bool() const noexcept { return !hub_.expired(); }

 private:
  friend class detail::EventHubBase;
  Subscription(std::weak_ptr<detail::EventHubBase> hub, std::uint64_t id) noexcept
      : hub_(std::move(hub)), id_(id) {}
  std::weak_ptr<detail::EventHubBase> hub_;
  std::uint64_t id_ = 0;
};

/// What the listener error hook receives: the policy's id and kind ("adaptivelimit",
/// "circuitbreaker", "retry", "bulkhead") and the listener's exception.
struct ListenerError {
  std::string_view instance_id;
  std::string_view kind;
  std::exception_ptr exception;
};

/// Replaces the hook that receives the exceptions listeners throw (process-wide); an empty
/// function restores the default, which writes one line to standard error. The hook must not
/// throw (what it throws is swallowed). Thread-safe.
void set_listener_error_hook(std::function<void(const ListenerError&)> hook);

}  // namespace r4c
