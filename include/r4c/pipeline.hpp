// SPDX-License-Identifier: Apache-2.0
// A pipeline: the policies around one dependency, applied in one fixed order whatever order the
// builder is called in. Outside to inside:
//
//   retry -> hedge -> throttle -> circuit breaker -> rate limiter -> adaptive limit -> timeout
//   -> bulkhead -> the call
//
// The throttle answers a backend that refuses: the calls it sheds take no permit, no slot and
// no breaker trial.
// The rate limiter paces callers before they take a slot; the adaptive limit measures each
// attempt and sees the timeout and the bulkhead inside it as overload signals (their exceptions
// are drops by default). See docs/pipeline.md.
//
//   auto search = r4c::Pipeline<std::string>::builder(registry, "search")
//       .adaptive_limit([](r4c::AdaptiveLimitConfig& a) { a.max_limit(100); })
//       .timeout([](r4c::TimeoutConfig& t) { t.timeout(std::chrono::seconds(2)); })
//       .build();
//   std::string hits = search.execute([&](std::stop_token stop) { return backend.search(q, stop);
//   });
//
// The pipeline's id is the instance id of each of its policies in the registry, which owns them:
// registry.adaptive_limit("search") is the pipeline's limit.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stop_token>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <utility>

#include "r4c/adaptive_limit.hpp"
#include "r4c/bulkhead.hpp"
#include "r4c/circuit_breaker.hpp"
#include "r4c/detail/kinds.hpp"
#include "r4c/hedge.hpp"
#include "r4c/outcome.hpp"
#include "r4c/rate_limiter.hpp"
#include "r4c/registry.hpp"
#include "r4c/retry.hpp"
#include "r4c/throttle.hpp"
#include "r4c/timeout.hpp"

namespace r4c {

namespace detail {

template <class Kind>
using PolicyPointer = typename Kind::Policy*;

// How one kind's policy runs the rest of a pipeline: `stages.template try_through<I + 1>(f,
// stop, readings)` is everything inside it, and every stage passes refusals and failures as
// values (the policy's try_execute around the rest). A timed policy takes its clock readings
// from `readings` (see SharedReadings). This one suits a policy whose try_execute(f) runs `f`
// at most once; the kinds that do something else say so below.
template <class Kind>
struct PipelineStage {
  template <class T, std::size_t I, class Stages, class F>
  static Outcome<T> try_run(typename Kind::Policy& policy, const Stages& stages, F& f,
                            std::stop_token stop, SharedReadings& readings) {
    auto rest = [&]() -> Outcome<T> {
      return stages.template try_through<I + 1>(f, std::move(stop), readings);
    };
    if constexpr (requires { policy.try_execute(readings, rest); }) {
      return policy.try_execute(readings, rest);
    } else {
      return policy.try_execute(rest);
    }
  }
};

// Each attempt of the retry passes every inner policy and is measured on its own, with readings
// of its own; the retry's wait holds no slot of theirs.
template <>
struct PipelineStage<RetryKind> {
  template <class T, std::size_t I, class Stages, class F>
  static Outcome<T> try_run(Retry& retry, const Stages& stages, F& f, std::stop_token stop,
                            SharedReadings&) {
    return retry.try_execute([&]() -> Outcome<T> {
      SharedReadings attempt;
      return stages.template try_through<I + 1>(f, stop, attempt);
    });
  }
};

// A code failure crossing a hedged attempt, whose end is an exception: the hedge's stage makes
// it a code failure again.
struct HedgedCodeFailure : std::system_error {
  using std::system_error::system_error;
};

// The hedge's attempts run on the executor and end with an exception, as the hedge needs them
// to: inside an attempt every policy passes values and the attempt throws once, at its end;
// what the hedge throws becomes this stage's failure (a refusal arrives as a failure holding
// the RejectedException; a code failure leaves the stage as the same code).
template <>
struct PipelineStage<HedgeKind> {
  template <class T, std::size_t I, class Stages, class F>
  static Outcome<T> try_run(Hedge& hedge, const Stages& stages, F& f, std::stop_token,
                            SharedReadings&) {
    using Fn = std::decay_t<F>;
    try {
      if constexpr (std::is_constructible_v<Fn, F&>) {
        // Every attempt runs the inner policies on its own copy of the stages, with the hedge's
        // token for the attempt; a loser may still run after this call returned.
        auto attempts = [stages, fn = Fn(f)](std::stop_token stop) mutable -> T {
          SharedReadings readings;
          Outcome<T> outcome = stages.template try_through<I + 1>(fn, std::move(stop), readings);
          if (outcome.has_code()) throw HedgedCodeFailure(outcome.code());
          return std::move(outcome).get();
        };
        if constexpr (std::is_void_v<T>) {
          hedge.execute(std::move(attempts));
          return Outcome<T>::success();
        } else {
          return Outcome<T>::success(static_cast<T>(hedge.execute(std::move(attempts))));
        }
      } else {
        detail::throw_hedge_needs_copyable(hedge.instance_id());
      }
    } catch (const HedgedCodeFailure& failure) {
      return Outcome<T>::failure(failure.code());
    } catch (...) {
      return Outcome<T>::failure(std::current_exception());
    }
  }
};

// A synchronous call saying its class (Pipeline::execute(cls, f)): the callable, held by value,
// and the class. The adaptive limit's stage reads the class; every other stage, and the call
// at the end, sees the callable. The type says it, so a call without a class compiles to the
// limit's plain path.
template <class F>
struct ClassedCall {
  F f;
  CallClass cls;
  LimitPartition partition = {};  // and its partition (Pipeline::execute(cls, partition, f))

  template <class... A>
  requires std::is_invocable_v<F&, A...>
  decltype(auto) operator()(A&&... a) { return std::invoke(f, std::forward<A>(a)...); }
};
template <class F>
inline constexpr bool kIsClassedCall = false;
template <class F>
inline constexpr bool kIsClassedCall<ClassedCall<F>> = true;

// The adaptive limit admits a ClassedCall by its class. It shares its readings when another
// policy does: the breaker or the rate limiter around it (their start, the limit's end) or the
// timeout inside it (the limit's start, the timeout's end). Shared for nothing, they cost
// BM_PipelineLimit 2.5 ns.
template <>
struct PipelineStage<AdaptiveLimitKind> {
  template <class T, std::size_t I, class Stages, class F>
  static Outcome<T> try_run(AdaptiveLimit& limit, const Stages& stages, F& f, std::stop_token stop,
                            SharedReadings& readings) {
    // One branch for the three: none of them is the common case.
    if ((reinterpret_cast<std::uintptr_t>(stages.template get<TimeoutKind>()) |
         reinterpret_cast<std::uintptr_t>(stages.template get<CircuitBreakerKind>()) |
         reinterpret_cast<std::uintptr_t>(stages.template get<RateLimiterKind>())) != 0) {
      return run_sharing<T, I>(limit, stages, f, stop, readings);
    }
    // One call site per lambda: with two, GCC made the lambda a call of its own (1.3 ns).
    auto rest = [&]() -> Outcome<T> {
      return stages.template try_through<I + 1>(f, std::move(stop), readings);
    };
    if constexpr (kIsClassedCall<std::remove_cv_t<F>>) {
      return limit.try_execute(f.cls, f.partition, rest);
    } else {
      return limit.try_execute(rest);
    }
  }

 private:
  // Out of line, so that the limit's stage stays as short as it was without readings.
  template <class T, std::size_t I, class Stages, class F>
  [[gnu::noinline]] static Outcome<T> run_sharing(AdaptiveLimit& limit, const Stages& stages, F& f,
                                                  std::stop_token& stop, SharedReadings& readings) {
    auto rest = [&]() -> Outcome<T> {
      return stages.template try_through<I + 1>(f, std::move(stop), readings);
    };
    if constexpr (kIsClassedCall<std::remove_cv_t<F>>) {
      return limit.try_execute(readings, f.cls, f.partition, rest);
    } else {
      return limit.try_execute(readings, CallClass::critical, LimitPartition{}, rest);
    }
  }
};

// The rate limiter paces: it waits for a permit, and holds nothing while the call runs (the
// generic stage: its try_execute takes the permit, then runs the rest).

template <>
struct PipelineStage<TimeoutKind> {
  template <class T, std::size_t I, class Stages, class F>
  static Outcome<T> try_run(Timeout& timeout, const Stages& stages, F& f, std::stop_token outer,
                            SharedReadings& readings) {
    if constexpr (std::is_invocable_v<F&, std::stop_token>) {
      return timeout.try_execute(readings, [&](std::stop_token deadline) -> Outcome<T> {
        if (!outer.stop_possible())
          return stages.template try_through<I + 1>(f, std::move(deadline), readings);
        // A hedged attempt inside a timeout: its token stops at the deadline or when another
        // attempt won, whichever comes first.
        std::stop_source either;
        auto request = [&either]() noexcept { either.request_stop(); };
        std::stop_callback<decltype(request)> on_deadline(deadline, request);
        std::stop_callback<decltype(request)> on_loss(outer, request);
        return stages.template try_through<I + 1>(f, either.get_token(), readings);
      });
    } else {
      return timeout.try_execute(readings, [&]() -> Outcome<T> {
        return stages.template try_through<I + 1>(f, std::stop_token(), readings);
      });
    }
  }
};

// The policy pointers of a pipeline, one per kind in detail::AllKinds's order (null: the
// pipeline has none), without its id: what a hedged attempt copies (attempts may outlive the
// call; the policies live in the registry).
template <class T>
struct PipelineStages {
  AllKinds::Tuple<PolicyPointer> policies{};
  // The calls' class, for the adaptive limit: read by the asynchronous layers and by a
  // generated wrapper's call_through (a synchronous call says it as a ClassedCall).
  CallClass cls = CallClass::critical;
  LimitPartition partition = {};  // the calls' partition, beside their class

  template <class Kind>
  typename Kind::Policy* get() const noexcept {
    return std::get<kKindIndex<Kind>>(policies);
  }

  /// Runs `f` through the stages at positions I and after, then calls it (try_call()).
  // always_inline: each kind adds a level, present or not; past GCC's inlining budget the
  // levels became calls (each moving the stop_token), so an absent stage cost a call. Inlined,
  // an absent stage costs its pointer test.
  template <std::size_t I, class F>
  [[gnu::always_inline]] Outcome<T> try_through(F& f, std::stop_token stop,
                                                SharedReadings& readings) const {
    if constexpr (I == kKindCount) {
      return try_call(f, std::move(stop));
    } else {
      auto* const policy = std::get<I>(policies);
      if (policy == nullptr) return try_through<I + 1>(f, std::move(stop), readings);
      return PipelineStage<KindAt<I>>::template try_run<T, I>(*policy, *this, f, std::move(stop),
                                                              readings);
    }
  }

  /// What execute() runs: the outcome path, one throw at the end.
  template <class F>
  T execute(F& f) const {
    return try_execute(f).get();
  }

  template <class F>
  Outcome<T> try_execute(F& f) const {
    SharedReadings readings;
    return try_through<0>(f, std::stop_token(), readings);
  }

  // The call, its result or what it throws as an Outcome; a call returning an Outcome<T> passes
  // it on as it is, a call of a Pipeline<void> returning an std::error_code fails with it
  // (empty: success).
  template <class F>
  static Outcome<T> try_call(F& f, std::stop_token stop) noexcept {
    using Raw = std::remove_cvref_t<decltype(call_raw(f, stop))>;
    try {
      if constexpr (std::is_same_v<Raw, Outcome<T>>) {
        return call_raw(f, std::move(stop));
      } else if constexpr (std::is_void_v<T> && std::is_same_v<Raw, std::error_code>) {
        const std::error_code code = call_raw(f, std::move(stop));
        return code ? Outcome<T>::failure(code) : Outcome<T>::success();
      } else if constexpr (std::is_void_v<T>) {
        call_raw(f, std::move(stop));
        return Outcome<T>::success();
      } else {
        return Outcome<T>::success(static_cast<T>(call_raw(f, std::move(stop))));
      }
    } catch (...) {
      return Outcome<T>::failure(std::current_exception());
    }
  }

  template <class F>
  static decltype(auto) call_raw(F& f, std::stop_token stop) {
    if constexpr (std::is_invocable_v<F&, std::stop_token>) {
      return std::invoke(f, std::move(stop));
    } else {
      return std::invoke(f);
    }
  }
};

/// Stages from policy pointers of distinct kinds, in any order (what a generated wrapper's
/// constructor builds): `make_stages<T>(&registry.retry_policy(...),
/// &registry.timeout_policy(...))`.
template <class T, class... Policies>
PipelineStages<T> make_stages(Policies*... policies) {
  PipelineStages<T> stages;
  ((std::get<kKindIndex<KindOf<Policies>>>(stages.policies) = policies), ...);
  return stages;
}

/// The stages saying the call's class `cls` to their adaptive limit (what a generated wrapper's
/// [[r4c::adaptive_limit(call_class = ...)]] builds, and Pipeline::execute(cls, f) runs).
template <class T>
PipelineStages<T> with_call_class(PipelineStages<T> stages, CallClass cls) noexcept {
  stages.cls = cls;
  return stages;
}

// What Pipeline<T>::Builder asks of a registry: every policy of a pipeline, all or none.
struct RegistryAccess {
  template <class T, class Stages>
  static PipelineStages<T> find_or_create_all(ResilienceRegistry& registry, std::string_view owner,
                                              std::string_view id, const Stages& wanted) {
    ResilienceRegistry::StageRequests requests{};
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((requests[I] =
            ResilienceRegistry::StageRequest{std::get<I>(wanted).wanted, std::get<I>(wanted).config,
                                             &std::get<I>(wanted).setup}),
       ...);
    }
    (std::make_index_sequence<kKindCount>{});
    const auto created = registry.find_or_create_all(owner, id, requests);
    PipelineStages<T> stages;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((std::get<I>(stages.policies) = static_cast<typename KindAt<I>::Policy*>(created[I])), ...);
    }
    (std::make_index_sequence<kKindCount>{});
    return stages;
  }
};

}  // namespace detail

/// Calls returning `T` (which may be `void`) through a fixed order of policies. A cheap value:
/// a few pointers to policies the registry owns. Thread safety: execute() may be called from any
/// number of threads. Allocation: none per call when the callable allocates nothing and the
/// pipeline has no hedge.
template <class T>
class Pipeline {
 public:
  class Builder;

  /// Starts a pipeline whose policies get the instance id `id` in `registry`.
  static Builder builder(ResilienceRegistry& registry, std::string id) {
    return Builder(registry, std::move(id));
  }

  /// Runs `f()` or `f(std::stop_token)` through every policy and returns its result. What `f`
  /// throws reaches the caller unchanged (the same object) after every policy recorded it; a
  /// policy that refuses the call throws its own exception (RequestNotPermittedException,
  /// LimitExceededException, CallTimeoutException, BulkheadFullException,
  /// CallNotPermittedException, ThrottledException).
  ///
  /// With a hedge, `f` is copied (moved when it is an rvalue) once per call into state its
  /// attempts share; they run on the registry's executor, may run at once and may outlive this
  /// call, so what `f` refers to must outlive them (capture by value or shared_ptr) and `f`
  /// must be callable from several threads at once. The token an attempt gets is stopped at
  /// the timeout's deadline or when another attempt won. A callable that cannot be copied
  /// throws std::invalid_argument there.
  template <class F>
  T execute(F&& f) const {
    return stages_.execute(f);
  }
  /// execute() without a throw to say no (<r4c/outcome.hpp>): returns the result, a policy's
  /// refusal (kind, instance id, its preallocated exception), or the failure execute() would
  /// throw. Every policy passes a refusal as a value: the retry retries it or gives up as it
  /// does the exception, the circuit breaker records or ignores it, the adaptive limit
  /// classifies it by drop_on, the timeout replaces it when late. `f` may return an
  /// Outcome<T> to report its own failure without throwing, as an exception_ptr or as an
  /// std::error_code (Outcome<T>::failure(code); for a Pipeline<void>, `f` may return the
  /// std::error_code itself, empty for success): a code failure passes every policy as a value
  /// (the limit classifies it by drop_on_error, the breaker records it as a failure, the retry
  /// decides it by retry_on_error_code), and execute() throws it as one std::system_error at the
  /// end. What `f` throws is caught once, around the call. execute() is this, then
  /// Outcome::get(). Allocation: none per call when
  /// `f` allocates nothing and the pipeline has no hedge; a pipeline with a hedge passes
  /// through the hedge's exceptions (see docs/pipeline.md).
  template <class F>
  Outcome<T> try_execute(F&& f) const {
    return stages_.try_execute(f);
  }
  /// execute(f) for a call of class `cls`: the pipeline's adaptive limit admits it below its
  /// class's share and queues it by class (see AdaptiveLimit::try_acquire(CallClass)); the
  /// other policies treat every class alike. `critical` is execute(f); `bypass` passes the
  /// limit unlimited and uncounted. `f` is moved (copied when an lvalue) into the call.
  template <class F>
  T execute(CallClass cls, F&& f) const {
    detail::ClassedCall<std::decay_t<F>> call{std::forward<F>(f), cls};
    return stages_.execute(call);
  }
  /// try_execute(f) for a call of class `cls`, as execute(cls, f).
  template <class F>
  Outcome<T> try_execute(CallClass cls, F&& f) const {
    detail::ClassedCall<std::decay_t<F>> call{std::forward<F>(f), cls};
    return stages_.try_execute(call);
  }
  /// execute(cls, f) for a call of the limit's partition `partition` too
  /// (adaptive_limit()->partition("user"); see AdaptiveLimit::try_acquire(LimitPartition)).
  template <class F>
  T execute(CallClass cls, LimitPartition partition, F&& f) const {
    detail::ClassedCall<std::decay_t<F>> call{std::forward<F>(f), cls, partition};
    return stages_.execute(call);
  }
  /// try_execute(cls, f) for a call of partition `partition` too.
  template <class F>
  Outcome<T> try_execute(CallClass cls, LimitPartition partition, F&& f) const {
    detail::ClassedCall<std::decay_t<F>> call{std::forward<F>(f), cls, partition};
    return stages_.try_execute(call);
  }

  /// Runs the asynchronous operation `op` (an Asio initiation: a callable taking a completion
  /// handler) through every policy, completing `token` with `void(std::exception_ptr, T)`.
  /// Defined in <r4c/asio.hpp>, which must be included to call it; see docs/async.md.
  template <class Op, class Token>
  auto async_execute(Op&& op, Token&& token) const;
  /// async_execute(op, token) for a call of class `cls`, as execute(cls, f).
  template <class Op, class Token>
  auto async_execute(CallClass cls, Op&& op, Token&& token) const;
  /// async_execute(cls, op, token) for a call of partition `partition` too.
  template <class Op, class Token>
  auto async_execute(CallClass cls, LimitPartition partition, Op&& op, Token&& token) const;
  /// Runs the coroutine `f()` returns (an asio::awaitable<T>) through every policy; returns
  /// an asio::awaitable<T>. `f` is called once per attempt. Defined in <r4c/asio.hpp>.
  template <class F>
  auto co_execute(F f) const;

  const std::string& id() const noexcept { return id_; }
  /// The pipeline's policies; nullptr for those it does not have.
  template <class Kind>
  typename Kind::Policy* policy() const noexcept {
    return stages_.template get<Kind>();
  }
  Retry* retry() const noexcept { return policy<RetryKind>(); }
  Hedge* hedge() const noexcept { return policy<HedgeKind>(); }
  Throttle* throttle() const noexcept { return policy<ThrottleKind>(); }
  CircuitBreaker* circuit_breaker() const noexcept { return policy<CircuitBreakerKind>(); }
  RateLimiter* rate_limiter() const noexcept { return policy<RateLimiterKind>(); }
  AdaptiveLimit* adaptive_limit() const noexcept { return policy<AdaptiveLimitKind>(); }
  Timeout* timeout() const noexcept { return policy<TimeoutKind>(); }
  Bulkhead* bulkhead() const noexcept { return policy<BulkheadKind>(); }

 private:
  Pipeline() = default;
  // A copy of the stages (a few pointers) saying the call's class.
  detail::PipelineStages<T> with_class(CallClass cls,
                                       LimitPartition partition = {}) const noexcept {
    detail::PipelineStages<T> stages = detail::with_call_class(stages_, cls);
    stages.partition = partition;
    return stages;
  }

  std::string id_;
  detail::PipelineStages<T> stages_;
};

/// Chooses a pipeline's policies and their settings. The settings given here are the
/// instances' own (above named configs and defaults; the external file's `instances.<id>` lines
/// still override them); `config` names a named config of the registry for the policy, as
/// `*_policy(..., config)` does. build() creates each policy in the registry, or reuses the
/// id's policy if it has the same settings (R4C-REG-008 otherwise).
template <class T>
class Pipeline<T>::Builder {
 public:
  Builder(ResilienceRegistry& registry, std::string id)
      : registry_(&registry), id_(std::move(id)) {}

  /// Any kind, e.g. `with<r4c::TimeoutKind>(setup, "backend")`: what the members below forward
  /// to. Asking for a kind again replaces what was asked before.
  template <class Kind>
  Builder& with(std::function<void(typename Kind::Config&)> setup = {}, std::string config = "") {
    std::get<detail::kKindIndex<Kind>>(stages_) =
        Stage<Kind>{true, std::move(config), std::move(setup)};
    return *this;
  }

  Builder& adaptive_limit(std::function<void(AdaptiveLimitConfig&)> setup = {}) {
    return with<AdaptiveLimitKind>(std::move(setup));
  }
  /// An adaptive limit resolved from the named config `config` (R4C-REG-004 at build() when the
  /// registry has none of that name), then `setup`. The other kinds take a config the same way.
  Builder& adaptive_limit(std::string config,
                          std::function<void(AdaptiveLimitConfig&)> setup = {}) {
    return with<AdaptiveLimitKind>(std::move(setup), std::move(config));
  }
  Builder& timeout(std::function<void(TimeoutConfig&)> setup = {}) {
    return with<TimeoutKind>(std::move(setup));
  }
  Builder& timeout(std::string config, std::function<void(TimeoutConfig&)> setup = {}) {
    return with<TimeoutKind>(std::move(setup), std::move(config));
  }
  Builder& bulkhead(std::function<void(BulkheadConfig&)> setup = {}) {
    return with<BulkheadKind>(std::move(setup));
  }
  Builder& bulkhead(std::string config, std::function<void(BulkheadConfig&)> setup = {}) {
    return with<BulkheadKind>(std::move(setup), std::move(config));
  }
  Builder& rate_limiter(std::function<void(RateLimiterConfig&)> setup = {}) {
    return with<RateLimiterKind>(std::move(setup));
  }
  Builder& rate_limiter(std::string config, std::function<void(RateLimiterConfig&)> setup = {}) {
    return with<RateLimiterKind>(std::move(setup), std::move(config));
  }
  Builder& retry(std::function<void(RetryConfig&)> setup = {}) {
    return with<RetryKind>(std::move(setup));
  }
  Builder& retry(std::string config, std::function<void(RetryConfig&)> setup = {}) {
    return with<RetryKind>(std::move(setup), std::move(config));
  }
  Builder& circuit_breaker(std::function<void(CircuitBreakerConfig&)> setup = {}) {
    return with<CircuitBreakerKind>(std::move(setup));
  }
  Builder& circuit_breaker(std::string config,
                           std::function<void(CircuitBreakerConfig&)> setup = {}) {
    return with<CircuitBreakerKind>(std::move(setup), std::move(config));
  }
  Builder& hedge(std::function<void(HedgeConfig&)> setup = {}) {
    return with<HedgeKind>(std::move(setup));
  }
  Builder& hedge(std::string config, std::function<void(HedgeConfig&)> setup = {}) {
    return with<HedgeKind>(std::move(setup), std::move(config));
  }
  Builder& throttle(std::function<void(ThrottleConfig&)> setup = {}) {
    return with<ThrottleKind>(std::move(setup));
  }
  Builder& throttle(std::string config, std::function<void(ThrottleConfig&)> setup = {}) {
    return with<ThrottleKind>(std::move(setup), std::move(config));
  }

  /// Creates or finds the policies, all or none: every one is resolved and checked before any
  /// is created, so a build() that throws ConfigException leaves the registry as it was.
  Pipeline build() const {
    Pipeline pipeline;
    pipeline.id_ = id_;
    const std::string owner = "pipeline '" + id_ + "'";  // names it in R4C-REG-008 messages
    pipeline.stages_ =
        detail::RegistryAccess::find_or_create_all<T>(*registry_, owner, id_, stages_);
    return pipeline;
  }

 private:
  template <class Kind>
  struct Stage {
    bool wanted = false;
    std::string config;
    std::function<void(typename Kind::Config&)> setup;
  };

  ResilienceRegistry* registry_;
  std::string id_;
  detail::AllKinds::Tuple<Stage> stages_;
};

}  // namespace r4c
