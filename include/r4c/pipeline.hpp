// A pipeline: the policies around one dependency, applied in one fixed order whatever order the
// builder is called in. Outside to inside:
//
//   retry -> circuit breaker -> rate limiter -> adaptive limit -> timeout -> bulkhead -> the call
//
// (The hedge, when it comes, sits between the retry and the circuit breaker.)
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
#include "r4c/rate_limiter.hpp"
#include "r4c/registry.hpp"
#include "r4c/retry.hpp"
#include "r4c/timeout.hpp"

namespace r4c {

/// Calls returning `T` (which may be `void`) through a fixed order of policies. A cheap value:
/// a few pointers to policies the registry owns. Thread safety: execute() may be called from any
/// number of threads. Allocation: none per call when the callable allocates nothing.
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
  /// LimitExceededException, CallTimeoutException, BulkheadFullException).
  template <class F>
  T execute(F&& f) const {
    // Each attempt of the retry passes every inner policy and is measured on its own; the
    // retry's wait holds no slot of theirs.
    if (retry_ != nullptr) return retry_->execute([&]() -> T { return through_breaker(f); });
    return through_breaker(f);
  }

  const std::string& id() const noexcept { return id_; }
  /// The pipeline's policies; nullptr for those it does not have.
  Retry* retry() const noexcept { return retry_; }
  CircuitBreaker* circuit_breaker() const noexcept { return circuit_breaker_; }
  RateLimiter* rate_limiter() const noexcept { return rate_limiter_; }
  AdaptiveLimit* adaptive_limit() const noexcept { return adaptive_limit_; }
  Timeout* timeout() const noexcept { return timeout_; }
  Bulkhead* bulkhead() const noexcept { return bulkhead_; }

 private:
  Pipeline() = default;

  template <class F>
  T through_breaker(F& f) const {
    if (circuit_breaker_ != nullptr) {
      return circuit_breaker_->execute([&]() -> T { return through_limits(f); });
    }
    return through_limits(f);
  }

  template <class F>
  T through_limits(F& f) const {
    if (rate_limiter_ != nullptr) rate_limiter_->acquire();
    if (adaptive_limit_ != nullptr) {
      return adaptive_limit_->execute([&]() -> T { return through_timeout(f); });
    }
    return through_timeout(f);
  }

  template <class F>
  T through_timeout(F& f) const {
    if (timeout_ == nullptr) return through_bulkhead(f, std::stop_token());
    if constexpr (std::is_invocable_v<F&, std::stop_token>) {
      return timeout_->execute(
          [&](std::stop_token stop) -> T { return through_bulkhead(f, stop); });
    } else {
      return timeout_->execute([&]() -> T { return through_bulkhead(f, std::stop_token()); });
    }
  }

  template <class F>
  T through_bulkhead(F& f, std::stop_token stop) const {
    BulkheadPermit permit;
    if (bulkhead_ != nullptr) {
      permit = bulkhead_->try_acquire();
      if (!permit) [[unlikely]]
        bulkhead_->throw_full();
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

  std::string id_;
  Retry* retry_ = nullptr;
  CircuitBreaker* circuit_breaker_ = nullptr;
  RateLimiter* rate_limiter_ = nullptr;
  AdaptiveLimit* adaptive_limit_ = nullptr;
  Timeout* timeout_ = nullptr;
  Bulkhead* bulkhead_ = nullptr;
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

  /// Creates or finds the policies; throws ConfigException for invalid settings.
  Pipeline build() const {
    Pipeline pipeline;
    pipeline.id_ = id_;
    const std::string owner = "pipeline '" + id_ + "'";  // names it in R4C-REG-008 messages
    if (retry_.wanted) pipeline.retry_ = &registry_->retry_policy(owner, id_, "", retry_.setup);
    if (circuit_breaker_.wanted) {
      pipeline.circuit_breaker_ =
          &registry_->circuit_breaker_policy(owner, id_, "", circuit_breaker_.setup);
    }
    if (rate_limiter_.wanted) {
      pipeline.rate_limiter_ = &registry_->rate_limiter_policy(owner, id_, "", rate_limiter_.setup);
    }
    if (adaptive_limit_.wanted) {
      pipeline.adaptive_limit_ =
          &registry_->adaptive_limit_policy(owner, id_, "", {}, adaptive_limit_.setup);
    }
    if (timeout_.wanted) {
      pipeline.timeout_ = &registry_->timeout_policy(owner, id_, "", timeout_.setup);
    }
    if (bulkhead_.wanted) {
      pipeline.bulkhead_ = &registry_->bulkhead_policy(owner, id_, "", bulkhead_.setup);
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
};

}  // namespace r4c
