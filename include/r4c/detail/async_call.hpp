// The machinery every asynchronous r4c call shares: it starts the caller's inner operation with a
// handler of r4c's own and completes the caller's handler exactly once, either when that inner
// operation completes or when the caller cancels.
//
// Who may complete the caller is decided by one atomic: the inner operation's completion and the
// caller's cancellation race for it. The loser does nothing: a late inner completion is ignored
// (never double-counted), a cancellation after the completion is a no-op. The per-call state is
// allocated with the caller handler's associated allocator (Asio's recycling allocator when it
// has none), so a steady stream of calls reuses the same blocks as Asio's own operations do.
#pragma once

#include <asio/associated_allocator.hpp>
#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/bind_allocator.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/dispatch.hpp>
#include <asio/error.hpp>
#include <asio/post.hpp>
#include <asio/recycling_allocator.hpp>
#include <asio/system_error.hpp>
#include <asio/system_executor.hpp>
#include <asio/use_future.hpp>  // its executor, for RunsInline
#include <atomic>
#include <exception>
#include <memory>
#include <optional>
#include <system_error>
#include <type_traits>
#include <utility>

namespace r4c::detail {

/// The completion signature r4c gives every caller: the failure, or none and the result.
template <class T>
struct AsyncSignatureOf {
  using type = void(std::exception_ptr, T);
};
template <>
struct AsyncSignatureOf<void> {
  using type = void(std::exception_ptr);
};
template <class T>
using AsyncSignature = typename AsyncSignatureOf<T>::type;

/// The exception a cancelled call completes with: asio::system_error(operation_aborted).
inline const std::exception_ptr& aborted_exception() {
  static const std::exception_ptr aborted =
      std::make_exception_ptr(asio::system_error(asio::error::operation_aborted));
  return aborted;
}

/// The allocator an asynchronous call's state uses: the handler's own, or Asio's recycling
/// allocator when the handler has none (std::allocator), so that no call mallocs in steady state.
template <class Handler>
auto state_allocator(const Handler& handler) {
  auto associated = asio::get_associated_allocator(handler);
  if constexpr (std::is_same_v<decltype(associated), std::allocator<void>>) {
    return asio::recycling_allocator<void>();
  } else {
    return associated;
  }
}

/// Executors that run a function where they are asked to: the system executor (a handler
/// without an executor of its own) and use_future's, which sets its promise.
template <class Executor>
struct RunsInline : std::false_type {};
template <class Blocking, class Relationship, class Allocator>
struct RunsInline<asio::basic_system_executor<Blocking, Relationship, Allocator>> : std::true_type {
};
template <class T, class Blocking>
struct RunsInline<asio::detail::promise_executor<T, Blocking>> : std::true_type {};

/// Completes `handler` at once with `failure` (and a default result). A handler with an
/// executor of its own (a coroutine's, a strand's) is completed through it, never inside the
/// initiating function, as Asio's rule is; a handler without one (a plain callback,
/// asio::use_future) is completed on this thread before the initiating function returns, so a
/// rejected call's future is ready when async_execute returns.
template <class T, class Handler>
void fail_at_once(Handler handler, std::exception_ptr failure) {
  auto executor = asio::get_associated_executor(handler);
  auto allocator = state_allocator(handler);
  auto complete = [handler = std::move(handler), failure = std::move(failure)]() mutable {
    if constexpr (std::is_void_v<T>) {
      std::move(handler)(failure);
    } else {
      std::move(handler)(failure, T{});
    }
  };
  if constexpr (RunsInline<asio::associated_executor_t<Handler>>::value) {
    asio::dispatch(executor, asio::bind_allocator(allocator, std::move(complete)));
  } else {
    asio::post(executor, asio::bind_allocator(allocator, std::move(complete)));
  }
}

/// How an inner operation ended, as r4c's handler received it.
template <class T>
struct AsyncOutcome {
  std::exception_ptr failure;  // set when it failed; an error code becomes asio::system_error
  std::optional<std::conditional_t<std::is_void_v<T>, char, T>> value;
  const std::error_code* code = nullptr;  // the failing code, when it reported one
};

/// One asynchronous call under a policy. `Policy` ends the call's hold on the policy:
///   void completed(const AsyncOutcome<T>&) noexcept   the inner operation completed first
///   void cancelled() noexcept                           the caller cancelled first, or the inner
///                                                       operation was abandoned
template <class T, class Handler, class Policy>
class AsyncCall {
 public:
  using Allocator = decltype(state_allocator(std::declval<const Handler&>()));
  using CallerExecutor = asio::associated_executor_t<Handler>;

  /// The handler r4c gives the inner operation. It accepts (std::exception_ptr, T) and
  /// (std::error_code, T) (no T for void), carries the caller's executor and allocator, and a
  /// cancellation slot through which r4c forwards the caller's cancellation.
  class InnerHandler {
   public:
    using executor_type = CallerExecutor;
    using allocator_type = Allocator;
    using cancellation_slot_type = asio::cancellation_slot;

    explicit InnerHandler(AsyncCall* call) noexcept : call_(call) {}
    InnerHandler(InnerHandler&& other) noexcept : call_(std::exchange(other.call_, nullptr)) {}
    InnerHandler& operator=(InnerHandler&&) = delete;
    InnerHandler(const InnerHandler&) = delete;
    /// Destroyed without being called: the operation was abandoned (its context shut down).
    ~InnerHandler() {
      if (call_ != nullptr) call_->abandon();
    }

    executor_type get_executor() const noexcept { return call_->executor_; }
    allocator_type get_allocator() const noexcept { return call_->allocator_; }
    cancellation_slot_type get_cancellation_slot() const noexcept {
      return call_->inner_cancel_.slot();
    }

    template <class U = T, std::enable_if_t<!std::is_void_v<U>, int> = 0>
    void operator()(std::exception_ptr failure, U value) {
      AsyncOutcome<T> outcome;
      if (failure) {
        outcome.failure = std::move(failure);
      } else {
        outcome.value.emplace(std::move(value));
      }
      std::exchange(call_, nullptr)->complete(std::move(outcome));
    }
    template <class U = T, std::enable_if_t<!std::is_void_v<U>, int> = 0>
    void operator()(std::error_code code, U value) {
      AsyncOutcome<T> outcome;
      if (code) {
        outcome.failure = std::make_exception_ptr(asio::system_error(code));
        outcome.code = &code;
      } else {
        outcome.value.emplace(std::move(value));
      }
      std::exchange(call_, nullptr)->complete(std::move(outcome));
    }
    template <class U = T, std::enable_if_t<std::is_void_v<U>, int> = 0>
    void operator()(std::exception_ptr failure) {
      AsyncOutcome<T> outcome;
      if (failure) {
        outcome.failure = std::move(failure);
      } else {
        outcome.value.emplace();
      }
      std::exchange(call_, nullptr)->complete(std::move(outcome));
    }
    template <class U = T, std::enable_if_t<std::is_void_v<U>, int> = 0>
    void operator()(std::error_code code) {
      AsyncOutcome<T> outcome;
      if (code) {
        outcome.failure = std::make_exception_ptr(asio::system_error(code));
        outcome.code = &code;
      } else {
        outcome.value.emplace();
      }
      std::exchange(call_, nullptr)->complete(std::move(outcome));
    }

   private:
    AsyncCall* call_;
  };

  /// Starts `op` with r4c's handler; the caller's `handler` is completed exactly once, unless
  /// `op` throws (the exception then leaves start(), the policy's hold is ended, the handler is
  /// destroyed uncalled) or abandons the handler.
  template <class Op>
  static void start(Handler handler, Op& op, Policy policy) {
    Allocator allocator = state_allocator(handler);
    using Rebound = typename std::allocator_traits<Allocator>::template rebind_alloc<AsyncCall>;
    Rebound rebound(allocator);
    AsyncCall* call = std::allocator_traits<Rebound>::allocate(rebound, 1);
    ::new (static_cast<void*>(call)) AsyncCall(std::move(handler), std::move(policy), allocator);
    call->watch_caller();
    op(InnerHandler(call));  // if op throws, the InnerHandler it got was destroyed: abandoned
  }

 private:
  enum Phase : int { kRunning = 0, kCompleted = 1, kCancelled = 2 };

  // Installed on the caller's cancellation slot; valid until finish() clears the slot.
  struct OnCancel {
    AsyncCall* call;
    void operator()(asio::cancellation_type type) const {
      if (type != asio::cancellation_type::none) call->cancel();
    }
  };

  AsyncCall(Handler handler, Policy policy, const Allocator& allocator)
      : handler_(std::move(handler)),
        policy_(std::move(policy)),
        allocator_(allocator),
        executor_(asio::get_associated_executor(handler_)),
        caller_slot_(asio::get_associated_cancellation_slot(handler_)) {}

  void watch_caller() {
    if (caller_slot_.is_connected()) caller_slot_.template emplace<OnCancel>(OnCancel{this});
  }

  bool claim(Phase phase) noexcept {
    int expected = kRunning;
    // acq_rel: the winner's writes to the outcome happen before finish() reads them, and the
    // loser sees the winner's claim.
    return phase_.compare_exchange_strong(expected, phase, std::memory_order_acq_rel,
                                          std::memory_order_acquire);
  }

  void complete(AsyncOutcome<T> outcome) {
    if (claim(kCompleted)) {
      policy_.completed(outcome);
      outcome_.failure = std::move(outcome.failure);
      outcome_.value = std::move(outcome.value);
      // The caller's handler runs on its executor (inline when already there, as dispatch
      // does); the inner reference is handed to that step.
      asio::dispatch(executor_,
                     asio::bind_allocator(allocator_, [this] { finish(/*inner_done=*/true); }));
    } else {
      release();  // cancelled first: the caller has its answer; this late result is dropped
    }
  }

  void cancel() {
    if (!claim(kCancelled)) return;  // already completed: its answer is on its way
    policy_.cancelled();             // frees the hold without a sample
    inner_cancel_.emit(asio::cancellation_type::all);
    outcome_.failure = aborted_exception();
    asio::post(executor_,
               asio::bind_allocator(allocator_, [this] { finish(/*inner_done=*/false); }));
  }

  void abandon() noexcept {
    if (claim(kCancelled)) {
      // No answer will ever come: the caller's handler goes uncalled, as Asio does for
      // operations whose context was destroyed.
      policy_.cancelled();
      if (caller_slot_.is_connected()) caller_slot_.clear();
      release();
    }
    release();
  }

  void finish(bool inner_done) {
    if (caller_slot_.is_connected()) caller_slot_.clear();
    Handler handler = std::move(handler_);
    std::exception_ptr failure = std::move(outcome_.failure);
    if constexpr (std::is_void_v<T>) {
      if (inner_done) release();
      release();
      std::move(handler)(failure);
    } else {
      auto value = std::move(outcome_.value);
      if (inner_done) release();
      release();
      if (value) {
        std::move(handler)(failure, std::move(*value));
      } else {
        std::move(handler)(failure, T{});
      }
    }
  }

  // Two references: r4c's inner handler, and the caller's answer (finish()).
  void release() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    using Rebound = typename std::allocator_traits<Allocator>::template rebind_alloc<AsyncCall>;
    Rebound rebound(allocator_);
    this->~AsyncCall();
    std::allocator_traits<Rebound>::deallocate(rebound, this, 1);
  }

  Handler handler_;
  Policy policy_;
  Allocator allocator_;
  CallerExecutor executor_;
  asio::cancellation_slot caller_slot_;
  asio::cancellation_signal inner_cancel_;
  std::atomic<int> phase_{kRunning};
  std::atomic<int> refs_{2};
  AsyncOutcome<T> outcome_;
};

}  // namespace r4c::detail
