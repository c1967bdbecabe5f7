// A pipeline: the policies around one dependency, applied in one fixed order whatever order the
// builder is called in. Outside to inside:
//
//   retry -> hedge -> circuit breaker -> rate limiter -> adaptive limit -> timeout -> bulkhead
//   -> the call
//
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
#include <functional>
#include <stop_token>
#include <string>
#include <type_traits>
#include <utility>

#include "r4c/adaptive_limit.hpp"
#include "r4c/bulkhead.hpp"
#include "r4c/circuit_breaker.hpp"
#include "r4c/hedge.hpp"
#include "r4c/rate_limiter.hpp"
#include "r4c/registry.hpp"
#include "r4c/retry.hpp"
#include "r4c/timeout.hpp"

namespace r4c {

namespace detail {

// The policy pointers of a pipeline, without its id: what a hedged attempt copies (attempts
// may outlive the call; the policies live in the registry).
template <class T>
struct PipelineStages {
  Retry* retry = nullptr;
  Hedge* hedge = nullptr;
  CircuitBreaker* circuit_breaker = nullptr;
  RateLimiter* rate_limiter = nullptr;
  AdaptiveLimit* adaptive_limit = nullptr;
  Timeout* timeout = nullptr;
  Bulkhead* bulkhead = nullptr;

  template <class F>
  T through_hedge(F& f) const {
    if (hedge == nullptr) return through_breaker(f, std::stop_token());
    using Fn = std::decay_t<F>;
    if constexpr (std::is_constructible_v<Fn, F&>) {
      // Every attempt runs the inner policies on its own copy of the stages, with the hedge's
      // token for the attempt; a loser may still run after this call returned.
      return static_cast<T>(
          hedge->execute([stages = *this, fn = Fn(f)](std::stop_token stop) mutable -> T {
            return stages.through_breaker(fn, std::move(stop));
          }));
    } else {
      detail::throw_hedge_needs_copyable(hedge->instance_id());
    }
  }

  template <class F>
  T through_breaker(F& f, std::stop_token stop) const {
    if (circuit_breaker != nullptr) {
      return circuit_breaker->execute([&]() -> T { return through_limits(f, std::move(stop)); });
    }
    return through_limits(f, std::move(stop));
  }

  template <class F>
  T through_limits(F& f, std::stop_token stop) const {
    if (rate_limiter != nullptr) rate_limiter->acquire();
    if (adaptive_limit != nullptr) {
      return adaptive_limit->execute([&]() -> T { return through_timeout(f, std::move(stop)); });
    }
    return through_timeout(f, std::move(stop));
  }

  template <class F>
  T through_timeout(F& f, std::stop_token outer) const {
    if (timeout == nullptr) return through_bulkhead(f, std::move(outer));
    if constexpr (std::is_invocable_v<F&, std::stop_token>) {
      return timeout->execute([&](std::stop_token deadline) -> T {
        if (!outer.stop_possible()) return through_bulkhead(f, std::move(deadline));
        // A hedged attempt inside a timeout: its token stops at the deadline or when another
        // attempt won, whichever comes first.
        std::stop_source either;
        auto request = [&either]() noexcept { either.request_stop(); };
        std::stop_callback<decltype(request)> on_deadline(deadline, request);
        std::stop_callback<decltype(request)> on_loss(outer, request);
        return through_bulkhead(f, either.get_token());
      });
    } else {
      return timeout->execute([&]() -> T { return through_bulkhead(f, std::stop_token()); });
    }
  }

  template <class F>
  T through_bulkhead(F& f, std::stop_token stop) const {
    BulkheadPermit permit;
    if (bulkhead != nullptr) {
      permit = bulkhead->try_acquire();
      if (!permit) [[unlikely]]
        bulkhead->throw_full();
    }
    return call(f, std::move(stop));
  }

  template <class F>
  static T call(F& f, std::stop_token stop) {
    if constexpr (std::is_invocable_v<F&, std::stop_token>) {
      return static_cast<T>(std::invoke(f, std::move(stop)));
    } else {
      return static_cast<T>(std::invoke(f));
    }
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
  /// CallNotPermittedException).
  ///
  /// With a hedge, `f` is copied (moved when it is an rvalue) once per call into state its
  /// attempts share; they run on the registry's executor, may run at once and may outlive this
  /// call, so what `f` refers to must outlive them (capture by value or shared_ptr) and `f`
  /// must be callable from several threads at once. The token an attempt gets is stopped at
  /// the timeout's deadline or when another attempt won. A callable that cannot be copied
  /// throws std::invalid_argument there.
  template <class F>
  T execute(F&& f) const {
    // Each attempt of the retry passes every inner policy and is measured on its own; the
    // retry's wait holds no slot of theirs.
    if (stages_.retry != nullptr) {
      return stages_.retry->execute([&]() -> T { return stages_.through_hedge(f); });
    }
    return stages_.through_hedge(f);
  }

  /// Runs the asynchronous operation `op` (an Asio initiation: a callable taking a completion
  /// handler) through every policy, completing `token` with `void(std::exception_ptr, T)`.
  /// Defined in <r4c/asio.hpp>, which must be included to call it; see docs/async.md.
  template <class Op, class Token>
  auto async_execute(Op&& op, Token&& token) const;
  /// Runs the coroutine `f()` returns (an asio::awaitable<T>) through every policy; returns
  /// an asio::awaitable<T>. `f` is called once per attempt. Defined in <r4c/asio.hpp>.
  template <class F>
  auto co_execute(F f) const;

  const std::string& id() const noexcept { return id_; }
  /// The pipeline's policies; nullptr for those it does not have.
  Retry* retry() const noexcept { return stages_.retry; }
  Hedge* hedge() const noexcept { return stages_.hedge; }
  CircuitBreaker* circuit_breaker() const noexcept { return stages_.circuit_breaker; }
  RateLimiter* rate_limiter() const noexcept { return stages_.rate_limiter; }
  AdaptiveLimit* adaptive_limit() const noexcept { return stages_.adaptive_limit; }
  Timeout* timeout() const noexcept { return stages_.timeout; }
  Bulkhead* bulkhead() const noexcept { return stages_.bulkhead; }

 private:
  Pipeline() = default;

  std::string id_;
  detail::PipelineStages<T> stages_;
};

/// Chooses a pipeline's policies and their settings. The settings given here are the
/// instances' own (above named configs and defaults; the external file's `instances.<id>` lines
/// still override them). Each policy is created in the registry by build(), or reused if the id
/// already has one with the same settings (R4C-REG-008 otherwise).
template <class T>
class Pipeline<T>::Builder {
 public:
  Builder(ResilienceRegistry& registry, std::string id)
      : registry_(&registry), id_(std::move(id)) {}

  Builder& adaptive_limit(std::function<void(AdaptiveLimitConfig&)> setup = {}) {
    adaptive_limit_ = Stage<AdaptiveLimitConfig>{true, std::move(setup)};
    return *this;
  }
  Builder& timeout(std::function<void(TimeoutConfig&)> setup = {}) {
    timeout_ = Stage<TimeoutConfig>{true, std::move(setup)};
    return *this;
  }
  Builder& bulkhead(std::function<void(BulkheadConfig&)> setup = {}) {
    bulkhead_ = Stage<BulkheadConfig>{true, std::move(setup)};
    return *this;
  }
  Builder& rate_limiter(std::function<void(RateLimiterConfig&)> setup = {}) {
    rate_limiter_ = Stage<RateLimiterConfig>{true, std::move(setup)};
    return *this;
  }
  Builder& retry(std::function<void(RetryConfig&)> setup = {}) {
    retry_ = Stage<RetryConfig>{true, std::move(setup)};
    return *this;
  }
  Builder& circuit_breaker(std::function<void(CircuitBreakerConfig&)> setup = {}) {
    circuit_breaker_ = Stage<CircuitBreakerConfig>{true, std::move(setup)};
    return *this;
  }
  Builder& hedge(std::function<void(HedgeConfig&)> setup = {}) {
    hedge_ = Stage<HedgeConfig>{true, std::move(setup)};
    return *this;
  }

  /// Creates or finds the policies; throws ConfigException for invalid settings.
  Pipeline build() const {
    Pipeline pipeline;
    pipeline.id_ = id_;
    detail::PipelineStages<T>& stages = pipeline.stages_;
    const std::string owner = "pipeline '" + id_ + "'";  // names it in R4C-REG-008 messages
    if (retry_.wanted) stages.retry = &registry_->retry_policy(owner, id_, "", retry_.setup);
    if (hedge_.wanted) stages.hedge = &registry_->hedge_policy(owner, id_, "", hedge_.setup);
    if (circuit_breaker_.wanted) {
      stages.circuit_breaker =
          &registry_->circuit_breaker_policy(owner, id_, "", circuit_breaker_.setup);
    }
    if (rate_limiter_.wanted) {
      stages.rate_limiter = &registry_->rate_limiter_policy(owner, id_, "", rate_limiter_.setup);
    }
    if (adaptive_limit_.wanted) {
      stages.adaptive_limit =
          &registry_->adaptive_limit_policy(owner, id_, "", {}, adaptive_limit_.setup);
    }
    if (timeout_.wanted)
      stages.timeout = &registry_->timeout_policy(owner, id_, "", timeout_.setup);
    if (bulkhead_.wanted) {
      stages.bulkhead = &registry_->bulkhead_policy(owner, id_, "", bulkhead_.setup);
    }
    return pipeline;
  }

 private:
  template <class Config>
  struct Stage {
    bool wanted = false;
    std::function<void(Config&)> setup;
  };

  ResilienceRegistry* registry_;
  std::string id_;
  Stage<AdaptiveLimitConfig> adaptive_limit_;
  Stage<TimeoutConfig> timeout_;
  Stage<BulkheadConfig> bulkhead_;
  Stage<RateLimiterConfig> rate_limiter_;
  Stage<RetryConfig> retry_;
  Stage<CircuitBreakerConfig> circuit_breaker_;
  Stage<HedgeConfig> hedge_;
};

}  // namespace r4c
