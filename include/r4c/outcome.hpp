// SPDX-License-Identifier: Apache-2.0
// An outcome: how a call through r4c ended, as a value. One of
//
//   - a result (of type T; nothing for void),
//   - a refusal: a policy did not run the call (the facts RejectedException carries: the
//     refusing kind and instance id, and the policy's preallocated exception), or
//   - the call's own failure, or a policy's failure of a call that ran (a timeout), as an
//     std::exception_ptr, or as an std::error_code the call returned.
//
// `try_execute(f)` on a pipeline or a policy returns one and throws nothing to say no: a
// refusal passes through every policy as a value, and a shed call costs no C++ throw:
//
//   r4c::Outcome<Reply> outcome = pipeline.try_execute([&] { return backend.get(key); });
//   if (outcome) return std::move(outcome).value();
//   if (outcome.refused()) return shed(outcome.refusal().kind(), outcome.refusal().instance_id());
//   std::rethrow_exception(outcome.error());
//
// A callable may report its own failure without throwing by returning an Outcome, e.g.
// `return r4c::Outcome<Reply>::failure(std::make_exception_ptr(NotFound(key)));`; the policies
// classify it as they classify what a callable throws. A failure as an error code costs neither
// a throw nor an allocation: `return r4c::Outcome<Reply>::failure(std::errc::timed_out);`, or, for
// a call with no result, return the std::error_code itself (empty: success). The adaptive limit
// classifies a code by `drop_on_error`, the breaker records it as a failure, the retry retries
// it as `retry_on_error_code` says; no exception exists until error() or get() asks for one.
// `get()` turns an outcome back into what execute() does: the result, or one throw of the
// refusal's or failure's exception (std::system_error for a code).
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>

namespace r4c {

/// A policy's refusal of a call it did not run: the facts of its RejectedException, without a
/// throw. Refers to the refusing policy (its id and its preallocated exception), so it is
/// valid while that policy lives, as the policies of a registry live as long as the registry.
class Refusal {
 public:
  /// `exception` is the policy's preallocated exception, `kind` its kind's metrics name (its
  /// KindNames::metrics); all three must outlive the refusal.
  Refusal(const std::exception_ptr& exception, std::string_view kind,
          const std::string& instance_id) noexcept
      : exception_(&exception), kind_(kind), instance_id_(&instance_id) {}

  /// The refusing kind as metrics and events name it: "adaptivelimit", "bulkhead",
  /// "ratelimiter", "circuitbreaker", "throttle" (RejectedException::kind()).
  std::string_view kind() const noexcept { return kind_; }
  /// The refusing policy's instance id (RejectedException::instance_id()).
  const std::string& instance_id() const noexcept { return *instance_id_; }
  /// The exception execute() throws for this refusal: the policy's one preallocated object.
  const std::exception_ptr& exception() const noexcept { return *exception_; }

 private:
  const std::exception_ptr* exception_;
  std::string_view kind_;
  const std::string* instance_id_;
};

/// How a call ended: a result, a refusal or a failure. Move-only when T is; T is a value type,
/// a reference (a pipeline whose calls return one: the outcome refers to the referent) or void.
/// Allocation: none of its own.
template <class T>
class [[nodiscard]] Outcome {
 public:
  /// How the call ended.
  enum class State : std::uint8_t { value, refused, failed };
  using Value = T;

  /// A result (for void: Outcome<void>::success()).
  // Not deduced: a reference T must bind to the caller's referent, never to a copy.
  template <class U = T>
  requires(!std::is_void_v<U>) static Outcome success(std::type_identity_t<U> value) {
    Outcome outcome(State::value);
    outcome.value_.emplace(std::forward<U>(value));
    return outcome;
  }
  static Outcome success() requires std::is_void_v<T> { return Outcome(State::value); }
  /// A refusal.
  static Outcome refused(const Refusal& refusal) noexcept {
    Outcome outcome(State::refused);
    outcome.refusal_.emplace(refusal);
    return outcome;
  }
  /// A failure: `error` must not be null.
  static Outcome failure(std::exception_ptr error) noexcept {
    Outcome outcome(State::failed);
    outcome.error_ = std::move(error);
    return outcome;
  }
  /// A failure the call reported as an error code, kept as a value (no exception, no
  /// allocation): `code` must be an error (not empty). error() and get() make it a
  /// std::system_error(code) only when asked.
  static Outcome failure(std::error_code code) noexcept {
    Outcome outcome(State::failed);
    outcome.code_value_ = code.value();
    outcome.code_category_ = &code.category();
    return outcome;
  }
  /// The same from an error code enumerator: `Outcome<int>::failure(std::errc::timed_out)`.
  template <class E>
  requires std::is_error_code_enum_v<E> || std::is_same_v<E, std::errc>
  static Outcome failure(E code) noexcept {
    using std::make_error_code;
    return failure(std::error_code(make_error_code(code)));
  }
  /// A failure with a policy's preallocated exception (a timeout): refers to `error`, which
  /// must outlive the outcome, and lets the policies that classify it remember their verdict.
  static Outcome stock_failure(const std::exception_ptr& error) noexcept {
    Outcome outcome(State::failed);
    outcome.stock_ = &error;
    return outcome;
  }
  State state() const noexcept { return state_; }
  /// Whether the call returned a result.
  bool has_value() const noexcept { return state_ == State::value; }
  explicit operator bool() const noexcept { return has_value(); }
  /// Whether a policy refused the call (it did not run).
  bool refused() const noexcept { return state_ == State::refused; }
  /// Whether the call ran and failed (its own failure, or a policy's: a timeout).
  bool failed() const noexcept { return state_ == State::failed; }
  /// Whether the call failed with an error code (failure(std::error_code)).
  bool has_code() const noexcept { return code_value_ != 0; }
  /// The failure's error code; empty unless has_code().
  std::error_code code() const noexcept {
    if (code_category_ == nullptr) return {};
    return std::error_code(code_value_, *code_category_);
  }

  /// The result. Precondition: has_value().
  template <class U = T>
  requires(!std::is_void_v<U>) U& value() & noexcept { return *value_; }
  template <class U = T>
  requires(!std::is_void_v<U>) const U& value() const& noexcept { return *value_; }
  template <class U = T>
  requires(!std::is_void_v<U>) U value() && {
    return std::move(*value_);
  }
  /// The refusal. Precondition: refused().
  const Refusal& refusal() const noexcept { return *refusal_; }
  /// The exception of a refusal or a failure (what execute() throws); null for a result. For a
  /// code failure: a std::system_error(code()), made at the first call (one allocation) and
  /// kept, so the policies never ask for it on their paths; that first call writes the
  /// outcome, so it is not made by two threads at once on one outcome.
  const std::exception_ptr& error() const noexcept {
    if (refusal_) return refusal_->exception();
    if (stock_ != nullptr) return *stock_;
    if (has_code() && !error_) [[unlikely]]
      error_ = std::make_exception_ptr(std::system_error(code()));
    return error_;
  }
  /// Whether error() is a policy's preallocated exception (a refusal's, a timeout's): the same
  /// object every time, which a classifying policy may decide once.
  bool stock() const noexcept { return refusal_.has_value() || stock_ != nullptr; }

  /// What execute() does: returns the result, or throws error() (the same object; one throw):
  /// for a code failure a std::system_error(code()), thrown here.
  T get() && {
    if (state_ != State::value) [[unlikely]] {
      if (has_code() && !error_) throw std::system_error(code());
      std::rethrow_exception(error());
    }
    if constexpr (!std::is_void_v<T>) return std::move(*value_);
  }

 private:
  explicit Outcome(State state) noexcept : state_(state) {}

  using Stored =
      std::conditional_t<std::is_void_v<T>, bool,
                         std::conditional_t<std::is_reference_v<T>,
                                            std::reference_wrapper<std::remove_reference_t<T>>, T>>;
  std::optional<Stored> value_;
  std::optional<Refusal> refusal_;
  const std::exception_ptr* stock_ = nullptr;
  mutable std::exception_ptr error_;  // for a code failure: made by error() when asked
  // The code as its two parts: a default std::error_code calls system_category(), out of line,
  // in every outcome's constructor; these start as zeros.
  const std::error_category* code_category_ = nullptr;
  int code_value_ = 0;
  State state_;
};

namespace detail {

template <class R>
struct IsOutcome : std::false_type {};
template <class T>
struct IsOutcome<Outcome<T>> : std::true_type {};

/// The Outcome a callable `F` (called as an lvalue, with `Args`) gives: its own Outcome if it
/// returns one, Outcome<void> if it returns an std::error_code (its failure, or success when
/// empty), else Outcome of its result without reference and const.
template <class R>
struct OutcomeFor {
  using type = Outcome<std::remove_cvref_t<R>>;
};
template <class R>
requires std::is_same_v<std::remove_cvref_t<R>, std::error_code>
struct OutcomeFor<R> {
  using type = Outcome<void>;
};
template <class R>
requires IsOutcome<std::remove_cvref_t<R>>::value struct OutcomeFor<R> {
  using type = std::remove_cvref_t<R>;
};
template <class F, class... Args>
using OutcomeOf = typename OutcomeFor<std::invoke_result_t<F&, Args...>>::type;

/// Calls `f(args...)` and returns how it ended; what it throws becomes a failure (caught here,
/// once, so that no policy around it catches).
template <class F, class... Args>
OutcomeOf<F, Args...> invoke_outcome(F& f, Args&&... args) noexcept {
  using Result = std::invoke_result_t<F&, Args...>;
  using Out = OutcomeOf<F, Args...>;
  try {
    if constexpr (IsOutcome<std::remove_cvref_t<Result>>::value) {
      return std::invoke(f, std::forward<Args>(args)...);
    } else if constexpr (std::is_same_v<std::remove_cvref_t<Result>, std::error_code>) {
      const std::error_code code = std::invoke(f, std::forward<Args>(args)...);
      return code ? Out::failure(code) : Out::success();
    } else if constexpr (std::is_void_v<Result>) {
      std::invoke(f, std::forward<Args>(args)...);
      return Out::success();
    } else {
      return Out::success(std::invoke(f, std::forward<Args>(args)...));
    }
  } catch (...) {
    return Out::failure(std::current_exception());
  }
}

/// A classifying policy's verdicts on the preallocated exceptions of other policies (their
/// refusals, a timeout's failure): each is the same object every time, so it is classified by
/// the policy's types and predicates once (one rethrow) and its verdict kept. A few entries: a
/// pipeline has at most one of each kind inside a policy; past them, every call classifies.
/// A verdict is kept with the config it was decided on (its address): after reconfigure()
/// replaces the config, a lookup with the new one misses and the exception is classified
/// again, once, by the new lists (the config outlives the policy's calls, so its address is
/// never another config's). Without a config (nullptr) verdicts are kept for good.
/// Thread safety: lookups take no lock; a remembered entry is published with a release store.
class StockVerdicts {
 public:
  /// The verdict remembered for `error` under `config`, or -1.
  int find(const std::exception_ptr& error, const void* config = nullptr) const noexcept {
    // acquire: pairs with remember()'s release, so the entry's error is seen written.
    const int count = count_.load(std::memory_order_acquire);
    for (int i = 0; i < count; ++i) {
      if (entries_[i].error != error) continue;
      // relaxed: the stamp is the whole verdict, it guards no other data.
      const std::uintptr_t stamp = entries_[i].stamp.load(std::memory_order_relaxed);
      if ((stamp & ~kVerdictMask) != tag(config)) return -1;
      return static_cast<int>(stamp & kVerdictMask);
    }
    return -1;
  }
  /// Keeps `verdict` (0 to 3) for `error` under `config`, replacing what another config
  /// decided (a copy of the pointer keeps the object, so its address is never reused for
  /// another exception while remembered). Full or busy: remembers nothing.
  void remember(const std::exception_ptr& error, int verdict,
                const void* config = nullptr) noexcept {
    if (busy_.exchange(true, std::memory_order_acquire)) return;
    const std::uintptr_t stamp = tag(config) | static_cast<std::uintptr_t>(verdict);
    const int count = count_.load(std::memory_order_relaxed);
    bool known = false;
    for (int i = 0; i < count && !known; ++i) {
      if (entries_[i].error != error) continue;
      known = true;
      entries_[i].stamp.store(stamp, std::memory_order_relaxed);
    }
    if (!known && count < kEntries) {
      entries_[count].error = error;
      entries_[count].stamp.store(stamp, std::memory_order_relaxed);
      count_.store(count + 1, std::memory_order_release);
    }
    busy_.store(false, std::memory_order_release);
  }

  /// `classify(error)` once per stock exception and config, remembered; every time for the
  /// others.
  template <class Classify>
  int verdict(const std::exception_ptr& error, bool stock, Classify&& classify,
              const void* config = nullptr) noexcept {
    if (!stock) return classify(error);
    const int known = find(error, config);
    if (known >= 0) [[likely]]
      return known;
    const int decided = classify(error);
    remember(error, decided, config);
    return decided;
  }
  /// The verdict on a failed or refused `outcome`: `classify(outcome.code())` for a code
  /// failure (so `classify` takes an std::error_code too: no exception is made, none thrown),
  /// else verdict(outcome.error(), outcome.stock(), classify, config). `classify` must decide
  /// by `config` when one is given.
  template <class Out, class Classify>
  int verdict_of(const Out& outcome, Classify&& classify, const void* config = nullptr) noexcept {
    if (outcome.has_code()) return classify(outcome.code());
    return verdict(outcome.error(), outcome.stock(), classify, config);
  }

 private:
  static constexpr int kEntries = 6;
  // A verdict shares a word with its config's address, whose low bits alignment keeps 0.
  static constexpr std::uintptr_t kVerdictMask = 3;
  // (Callers pass configs, classes holding pointers: alignment 8.)
  static std::uintptr_t tag(const void* config) noexcept {
    return reinterpret_cast<std::uintptr_t>(config);
  }
  struct Entry {
    std::exception_ptr error;  // set once, before count_ publishes the entry
    std::atomic<std::uintptr_t> stamp{0};
  };
  Entry entries_[kEntries];
  std::atomic<int> count_{0};
  std::atomic<bool> busy_{false};
};

}  // namespace detail
}  // namespace r4c
