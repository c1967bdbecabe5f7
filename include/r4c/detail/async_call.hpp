// SPDX-License-Identifier: Apache-2.0
// The machinery every asynchronous r4c call shares (<r4c/asio.hpp>).
//
// AsyncCallBase is the caller's side of one call: the caller's completion handler, completed
// exactly once, either with the call's outcome or, when the caller cancels through the handler's
// cancellation slot, at once with operation_aborted. InnerHandler is the handler r4c gives an
// inner operation (an attempt): it carries the caller's executor and allocator and a
// cancellation slot of r4c's own, through which a caller's cancellation is forwarded. Who
// completes the caller is decided by one atomic, so an inner completion after a cancellation is
// ignored (never double-counted) and a cancellation after a completion does nothing.
//
// GuardedCall is the common case, one inner operation under one policy's hold (a limit's permit,
// a bulkhead's slot, a breaker's permission, a timeout's deadline). The retry and the hedge,
// which start several inner operations, build on AsyncCallBase directly.
//
// Every policy's async_execute is initiate() with its initiation: AdmitInitiation for a policy
// that admits or refuses a call at once (the circuit breaker, the throttle), StartInitiation
// for one whose call is a state type of its own (the retry, the hedge, the timeout), or an
// initiation of the policy's own (the adaptive limit, the bulkhead, the rate limiter).
//
// The state of a call is allocated with the caller handler's associated allocator, or r4c's
// CallAllocator when the handler has none, so a steady stream of calls reuses blocks, whether
// it starts inside an io_context or outside one.
#pragma once

#include <asio/associated_allocator.hpp>
#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/bind_allocator.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/dispatch.hpp>
#include <asio/error.hpp>
#include <asio/execution/outstanding_work.hpp>
#include <asio/post.hpp>
#include <asio/prefer.hpp>
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

#include "r4c/detail/async_signal.hpp"
#include "r4c/detail/call_allocator.hpp"

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

/// The allocator an asynchronous call's state uses: the handler's own, or a CallAllocator when
/// the handler has none (std::allocator). Asio's recycling allocator recycles only inside a
/// running io_context; a CallAllocator on any thread.
template <class Handler>
auto state_allocator(const Handler& handler) {
  auto associated = asio::get_associated_allocator(handler);
  if constexpr (std::is_same_v<decltype(associated), std::allocator<void>>) {
    return CallAllocator<void>();
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

/// Calls `handler` with `failure` (no failure: `value`, or a default T when there is none).
template <class T, class Handler, class Value>
void invoke_handler(Handler& handler, std::exception_ptr failure, Value& value) {
  if constexpr (std::is_void_v<T>) {
    std::move(handler)(std::move(failure));
  } else if (value) {
    std::move(handler)(std::move(failure), std::move(*value));
  } else {
    std::move(handler)(std::move(failure), T{});
  }
}

/// Completes `handler` at once with `failure` (and a default result), for a call refused before
/// anything started. A handler with an executor of its own (a coroutine's, a strand's) is
/// completed through it, never inside the initiating function, as Asio's rule is; a handler
/// without one (a plain callback, asio::use_future) is completed on this thread before the
/// initiating function returns, so a refused call's future is ready when async_execute returns.
template <class T, class Handler>
void fail_at_once(Handler handler, std::exception_ptr failure) {
  auto executor = asio::get_associated_executor(handler);
  auto allocator = state_allocator(handler);
  auto complete = [handler = std::move(handler), failure = std::move(failure)]() mutable {
    std::optional<char> none;
    if constexpr (std::is_void_v<T>) {
      invoke_handler<T>(handler, failure, none);
    } else {
      std::optional<T> no_value;
      invoke_handler<T>(handler, failure, no_value);
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
  const std::error_code* code = nullptr;  // the failing code while the handler runs, if any
};

/// The handler r4c gives an inner operation. It accepts (std::exception_ptr, T) and
/// (std::error_code, T) (no T for void) and reports to `Owner::inner_completed(tag, outcome)`;
/// destroyed uncalled (its context shut down) it reports `Owner::inner_abandoned(tag)`. It
/// carries the caller's executor and allocator, and `Owner::inner_slot(tag)` as its
/// cancellation slot.
///
/// Its type depends on the caller's executor and allocator only, not on the call it reports
/// to (which it reaches through a table of three functions): policies nested in a pipeline
/// then all see one handler type, instead of a type that grows with each layer and doubles
/// the instantiations per optional layer.
template <class T, class Executor, class Allocator>
class ErasedInnerHandler {
 public:
  using executor_type = Executor;
  using allocator_type = Allocator;
  using cancellation_slot_type = GuardedSlot;

  template <class Owner>
  ErasedInnerHandler(Owner* owner, int tag)
      : owner_(owner),
        tag_(tag),
        ops_(&kOps<Owner>),
        executor_(owner->caller_executor()),
        allocator_(owner->allocator()) {}
  ErasedInnerHandler(ErasedInnerHandler&& other) noexcept
      : owner_(std::exchange(other.owner_, nullptr)),
        tag_(other.tag_),
        ops_(other.ops_),
        executor_(other.executor_),
        allocator_(other.allocator_) {}
  ErasedInnerHandler& operator=(ErasedInnerHandler&&) = delete;
  ErasedInnerHandler(const ErasedInnerHandler&) = delete;
  ~ErasedInnerHandler() {
    if (owner_ != nullptr) ops_->abandoned(owner_, tag_);
  }

  executor_type get_executor() const noexcept { return executor_; }
  allocator_type get_allocator() const noexcept { return allocator_; }
  cancellation_slot_type get_cancellation_slot() const noexcept { return ops_->slot(owner_, tag_); }

  template <class U = T, std::enable_if_t<!std::is_void_v<U>, int> = 0>
  void operator()(std::exception_ptr failure, U value) {
    AsyncOutcome<T> outcome;
    if (failure) {
      outcome.failure = std::move(failure);
    } else {
      outcome.value.emplace(std::move(value));
    }
    report(std::move(outcome));
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
    report(std::move(outcome));
  }
  template <class U = T, std::enable_if_t<std::is_void_v<U>, int> = 0>
  void operator()(std::exception_ptr failure) {
    AsyncOutcome<T> outcome;
    if (failure) {
      outcome.failure = std::move(failure);
    } else {
      outcome.value.emplace();
    }
    report(std::move(outcome));
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
    report(std::move(outcome));
  }

 private:
  struct Ops {
    void (*completed)(void* owner, int tag, AsyncOutcome<T>&& outcome);
    void (*abandoned)(void* owner, int tag) noexcept;
    GuardedSlot (*slot)(void* owner, int tag) noexcept;
  };
  template <class Owner>
  static constexpr Ops kOps = {
      [](void* owner, int tag, AsyncOutcome<T>&& outcome) {
        static_cast<Owner*>(owner)->inner_completed(tag, std::move(outcome));
      },
      [](void* owner, int tag) noexcept { static_cast<Owner*>(owner)->inner_abandoned(tag); },
      [](void* owner, int tag) noexcept -> GuardedSlot {
        return static_cast<Owner*>(owner)->inner_slot(tag);
      }};

  // By reference down to the owner: the outcome is built once, on this frame, and not copied
  // through each layer's stack (a move of it cost store-forwarding stalls, not a few bytes).
  void report(AsyncOutcome<T>&& outcome) {
    ops_->completed(std::exchange(owner_, nullptr), tag_, std::move(outcome));
  }

  // tag_ between the two pointers: adjacent, GCC moved them as one 16-byte load of what the
  // constructor had stored as two 8-byte halves, which stalls on store forwarding (a tenth of
  // an async call, BM_AsyncExecute).
  void* owner_;
  int tag_;
  const Ops* ops_;
  Executor executor_;
  Allocator allocator_;
};

/// The handler `Owner` gives its inner operation: `InnerHandler<Owner, T>(owner, tag)`.
template <class Owner, class T>
using InnerHandler =
    ErasedInnerHandler<T, typename Owner::CallerExecutor, typename Owner::Allocator>;

/// The caller's side of one asynchronous call (CRTP: `Derived` is the final state type). The
/// derived class implements `void on_cancel()`: the caller cancelled and this base has already
/// claimed the answer; it ends its holds, forwards the cancellation, and calls
/// `answer(aborted)`.
///
/// Lifetime: reference counted. The caller's answer holds one reference until the handler has
/// been called; each inner operation or timer the derived class starts takes one with
/// add_ref() and gives it back with release().
template <class Derived, class T, class Handler>
class AsyncCallBase {
 public:
  using Allocator = decltype(state_allocator(std::declval<const Handler&>()));
  using CallerExecutor = asio::associated_executor_t<Handler>;
  /// The caller's executor, tracking outstanding work.
  using Work = std::decay_t<decltype(asio::prefer(std::declval<const CallerExecutor&>(),
                                                  asio::execution::outstanding_work.tracked))>;

  const CallerExecutor& caller_executor() const noexcept { return executor_; }
  const Allocator& allocator() const noexcept { return allocator_; }

  void add_ref() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() noexcept {
    // A count of 1 is ours alone: nobody else can take a reference, so no read-modify-write
    // is needed (the common last release). acquire/acq_rel: every other user's writes happen
    // before the destruction.
    if (refs_.load(std::memory_order_acquire) != 1 &&
        refs_.fetch_sub(1, std::memory_order_acq_rel) != 1) {
      return;
    }
    Derived* self = static_cast<Derived*>(this);
    using Rebound = typename std::allocator_traits<Allocator>::template rebind_alloc<Derived>;
    Rebound rebound(allocator_);
    self->~Derived();
    std::allocator_traits<Rebound>::deallocate(rebound, self, 1);
  }

  /// Allocates and constructs a `Derived` with the handler's allocator.
  template <class... Args>
  static Derived* create(Handler handler, Args&&... args) {
    Allocator allocator = state_allocator(handler);
    using Rebound = typename std::allocator_traits<Allocator>::template rebind_alloc<Derived>;
    Rebound rebound(allocator);
    Derived* call = std::allocator_traits<Rebound>::allocate(rebound, 1);
    try {
      ::new (static_cast<void*>(call)) Derived(std::move(handler), std::forward<Args>(args)...);
    } catch (...) {
      std::allocator_traits<Rebound>::deallocate(rebound, call, 1);
      throw;
    }
    return call;
  }

 protected:
  explicit AsyncCallBase(Handler handler)
      : handler_(std::move(handler)),
        allocator_(state_allocator(handler_)),
        executor_(asio::get_associated_executor(handler_)),
        work_(asio::prefer(executor_, asio::execution::outstanding_work.tracked)),
        caller_slot_(asio::get_associated_cancellation_slot(handler_)) {}
  ~AsyncCallBase() = default;

  /// Starts listening to the caller's cancellation slot (after construction, before anything
  /// that may complete the call).
  /// Returns whether the caller can cancel.
  bool watch_caller() {
    if (!caller_slot_.is_connected()) return false;
    caller_slot_.template emplace<OnCancel>(OnCancel{this});
    return true;
  }

  /// Whether this thread may answer the caller: true once per call.
  bool claim() noexcept {
    bool expected = false;
    // acq_rel: the winner's writes before answering happen before the answer is read, and a
    // loser sees that the call is answered.
    return answered_.compare_exchange_strong(expected, true, std::memory_order_acq_rel,
                                             std::memory_order_acquire);
  }
  bool answered() const noexcept { return answered_.load(std::memory_order_acquire); }

  /// Answers the caller (after claim() returned true): runs its handler on its executor,
  /// inline when already there (dispatch), and drops the answer's reference.
  void answer(std::exception_ptr failure,
              std::optional<std::conditional_t<std::is_void_v<T>, char, T>> value = {}) {
    failure_ = std::move(failure);
    value_ = std::move(value);
    asio::dispatch(executor_, asio::bind_allocator(allocator_, Step(this, std::move(work_))));
  }
  /// The same, always through a post: for answers given from inside the initiating function
  /// or from a cancellation handler.
  void answer_later(std::exception_ptr failure) {
    failure_ = std::move(failure);
    asio::post(executor_, asio::bind_allocator(allocator_, Step(this, std::move(work_))));
  }

  /// A step run later on the caller's executor, holding a reference: run, it calls finish()
  /// (which takes over the reference); destroyed unrun (its context shut down), it gives the
  /// reference back, so the call's state is freed either way. It carries the call's work on
  /// the caller's executor, given up once it has run (as Asio's own operations do). No
  /// pointer to a member function: Asio moves a step several times before it runs, and each
  /// 16-byte copy of one, written in two 8-byte halves, stalled on store forwarding (about
  /// 10 ns per call, BM_AsyncExecute).
  struct Step {
    AsyncCallBase* call;
    std::optional<typename AsyncCallBase::Work> work;
    Step(AsyncCallBase* c, std::optional<typename AsyncCallBase::Work> w) noexcept
        : call(c), work(std::move(w)) {}
    Step(Step&& other) noexcept
        : call(std::exchange(other.call, nullptr)), work(std::move(other.work)) {}
    Step& operator=(Step&&) = delete;
    // Asio destroys four or five moved-from steps per answer: inlined, each costs a test. With
    // the unrun path in its body GCC kept the destructor out of line (31 instructions a call).
    ~Step() {
      if (call != nullptr) [[unlikely]]
        destroyed_unrun(call);
    }
    void operator()() { std::exchange(call, nullptr)->finish(); }

   private:
    // No answer will come: the caller's handler is destroyed uncalled.
    [[gnu::noinline]] static void destroyed_unrun(AsyncCallBase* call) noexcept {
      call->stop_watching_caller();
      call->release();
    }
  };

  /// The caller's cancellation slot, disconnected from this call; only where the caller's
  /// emissions cannot run (its context shut down).
  void stop_watching_caller() noexcept {
    if (caller_slot_.is_connected()) caller_slot_.clear();
    work_.reset();
  }

 private:
  struct OnCancel {
    AsyncCallBase* call;
    void operator()(asio::cancellation_type type) const {
      if (type != asio::cancellation_type::none && call->claim()) {
        static_cast<Derived*>(call)->on_cancel();
      }
    }
  };

  void finish() {
    if (caller_slot_.is_connected()) caller_slot_.clear();
    Handler handler = std::move(handler_);
    std::exception_ptr failure = std::move(failure_);
    auto value = std::move(value_);
    release();  // the handler may start a new call that reuses this block
    invoke_handler<T>(handler, std::move(failure), value);
  }

  Handler handler_;
  Allocator allocator_;
  CallerExecutor executor_;
  // Outstanding work on the caller's executor until the call is answered, as an Asio
  // operation keeps it: an io_context's run() does not return while a call waits on r4c's
  // clock (a retry's wait, a deadline) with nothing of Asio's pending.
  std::optional<Work> work_;
  asio::associated_cancellation_slot_t<Handler> caller_slot_;
  std::atomic<bool> answered_{false};
  std::atomic<int> refs_{1};  // the answer's
  std::exception_ptr failure_;
  std::optional<std::conditional_t<std::is_void_v<T>, char, T>> value_;
};

/// One inner operation under one policy's hold. `Policy` provides
///   void completed(const AsyncOutcome<T>&) noexcept   the operation completed first
///   void cancelled() noexcept                           the caller cancelled or the policy
///                                                       interrupted first, or the operation
///                                                       was abandoned
/// and optionally `void started(GuardedCall&)`, called before the operation starts (a timeout
/// arms its deadline there). The policy may call interrupt(reason) from then on, from any
/// thread, while it holds a reference (add_ref()).
template <class T, class Handler, class Policy>
class GuardedCall final : public AsyncCallBase<GuardedCall<T, Handler, Policy>, T, Handler> {
  using Base = AsyncCallBase<GuardedCall, T, Handler>;

 public:
  GuardedCall(Handler handler, Policy policy)
      : Base(std::move(handler)), policy_(std::move(policy)) {}

  /// Starts `op` with r4c's handler. If `op` throws, the exception leaves start(), the
  /// policy's hold is ended and the caller's handler is destroyed uncalled.
  template <class Op>
  static void start(Handler handler, Op& op, Policy policy) {
    GuardedCall* call = Base::create(std::move(handler), std::move(policy));
    // Only the inner operation can end a call that neither the caller nor the policy can
    // interrupt: it then owns the call alone and answers without any atomic read-modify-write
    // (its reference becomes the answer's).
    call->shared_ = call->watch_caller() || kPolicyInterrupts;
    if (call->shared_) call->add_ref();  // the inner operation's
    if constexpr (kPolicyInterrupts) {
      try {
        call->policy_.started(*call);
      } catch (...) {
        call->inner_abandoned(0);  // as if the operation had been dropped before it started
        throw;
      }
    }
    op(InnerHandler<GuardedCall, T>(call, 0));  // a throwing op destroyed it: abandoned
  }

  /// Ends the call with `reason` (the policy's own failure, e.g. a timeout) unless it ended
  /// first: on the caller's executor (so that the cancellation forwarded to the inner
  /// operation runs where its completions do), the caller is answered, the inner operation is
  /// asked to cancel through its slot, and its late completion is ignored. Any thread.
  void interrupt(std::exception_ptr reason) {
    this->add_ref();  // the posted step's
    asio::post(this->caller_executor(),
               asio::bind_allocator(this->allocator(), InterruptStep(this, std::move(reason))));
  }

  void on_cancel() {
    policy_.cancelled();
    inner_cancel_.emit(asio::cancellation_type::all);
    this->answer_later(aborted_exception());
  }

  void inner_completed(int, AsyncOutcome<T>&& outcome) {
    if (!shared_) {
      policy_.completed(outcome);
      this->answer(std::move(outcome.failure), std::move(outcome.value));
      return;
    }
    if (this->claim()) {
      policy_.completed(outcome);
      this->answer(std::move(outcome.failure), std::move(outcome.value));
    }
    this->release();  // the inner operation's
  }

  void inner_abandoned(int) noexcept {
    if (!shared_) {
      policy_.cancelled();
      this->stop_watching_caller();
      this->release();  // the only one
      return;
    }
    if (this->claim()) {
      // No answer will come: the caller's handler is destroyed uncalled, as Asio does for
      // operations whose context was destroyed.
      policy_.cancelled();
      this->stop_watching_caller();
      this->release();  // the answer's
    }
    this->release();  // the inner operation's
  }

  GuardedSlot inner_slot(int) noexcept { return inner_cancel_.slot(); }

 private:
  // interrupt()'s posted step; destroyed unrun (its context shut down) it gives its reference
  // back.
  struct InterruptStep {
    GuardedCall* call;
    std::exception_ptr reason;
    InterruptStep(GuardedCall* c, std::exception_ptr r) noexcept : call(c), reason(std::move(r)) {}
    InterruptStep(InterruptStep&& other) noexcept
        : call(std::exchange(other.call, nullptr)), reason(std::move(other.reason)) {}
    InterruptStep& operator=(InterruptStep&&) = delete;
    ~InterruptStep() {
      if (call != nullptr) call->release();
    }
    void operator()() {
      GuardedCall* self = std::exchange(call, nullptr);
      if (self->claim()) {
        self->policy_.cancelled();
        self->inner_cancel_.emit(asio::cancellation_type::all);
        self->answer(std::move(reason));
      }
      self->release();
    }
  };

  static constexpr bool kPolicyInterrupts = requires(Policy & policy, GuardedCall& call) {
    policy.started(call);
  };

  Policy policy_;
  GuardedSignal inner_cancel_;
  bool shared_ = true;  // set once by start(), before the inner operation exists
};

/// A step posted to a call's caller's executor with one of the call's references (a timer's
/// end, a hedge's launch). Run, it hands the reference to `(call->*kRun)()`; destroyed unrun
/// (its context shut down), to `(call->*kUnrun)()`.
template <class Call, void (Call::*kRun)(), void (Call::*kUnrun)() noexcept>
class PostedStep {
 public:
  explicit PostedStep(Call* call) noexcept : call_(call) {}
  PostedStep(PostedStep&& other) noexcept : call_(std::exchange(other.call_, nullptr)) {}
  PostedStep& operator=(PostedStep&&) = delete;
  ~PostedStep() {
    if (call_ != nullptr) (call_->*kUnrun)();
  }
  void operator()() { (std::exchange(call_, nullptr)->*kRun)(); }

 private:
  Call* call_;
};

/// An initiation for a policy that admits a call at once or refuses it: `policy->try_acquire()`
/// gives the permit (counting a refusal), an empty one completes the caller at once with
/// `policy->rejection()`, and the operation runs in a GuardedCall under
/// `Hold::of(*policy, permit)`.
template <class T, class Policy, class Hold>
struct AdmitInitiation {
  Policy* policy;

  template <class Handler, class Op>
  void operator()(Handler handler, Op op) const {
    auto permit = policy->try_acquire();
    if (!permit) [[unlikely]] {
      fail_at_once<T>(std::move(handler), policy->rejection());
      return;
    }
    GuardedCall<T, Handler, Hold>::start(std::move(handler), op,
                                         Hold::of(*policy, std::move(permit)));
  }
};

/// An initiation for a policy whose call is a state type of its own: starts
/// `Call<T, Handler, Op>` with the caller's handler, the operation (decay-copied into the
/// call's state or invoked at once, as the call decides) and the policy.
template <template <class, class, class> class Call, class T, class Policy>
struct StartInitiation {
  Policy* policy;

  template <class Handler, class Op>
  void operator()(Handler handler, Op&& op) const {
    Call<T, Handler, std::decay_t<Op>>::start(std::move(handler), std::forward<Op>(op), *policy);
  }
};

/// What every async_execute returns: `initiation` started with the handler `token` stands for
/// and the operation, the caller completed with AsyncSignature<T>.
template <class T, class Initiation, class Token, class Op>
auto initiate(Initiation&& initiation, Token&& token, Op&& op) {
  return asio::async_initiate<Token, AsyncSignature<T>>(std::forward<Initiation>(initiation), token,
                                                        std::forward<Op>(op));
}

}  // namespace r4c::detail
