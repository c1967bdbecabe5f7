// The registry: where policies are declared, configured from code and from an external file,
// shared by name, and found again by id.
//
//   auto registry = r4c::ResilienceRegistry::builder()
//       .adaptive_limit_defaults([](r4c::AdaptiveLimitConfig& a) { a.max_limit(100); })
//       .adaptive_limit("backend", [](r4c::AdaptiveLimitConfig& a) {
//         a.algorithm(r4c::LimitAlgorithm::aimd).backoff_ratio(0.8).min_window_samples(20);
//       })
//       .config_file("r4c.properties")   // operators retune without a rebuild
//       .build();
//   r4c::AdaptiveLimit& limit =
//       registry.adaptive_limit_policy("shop::Orders#place(std::string)", "orders", "backend");
//   r4c::AdaptiveLimitHandle handle = registry.adaptive_limit("orders");
//
// A setting resolves, lowest to highest: built-in default < registry defaults < named config <
// call-site attributes < instance settings; at each level the external file overrides what the
// code says. See docs/configuration.md.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "r4c/adaptive_limit.hpp"
#include "r4c/bulkhead.hpp"
#include "r4c/circuit_breaker.hpp"
#include "r4c/clock.hpp"
#include "r4c/executor.hpp"
#include "r4c/hedge.hpp"
#include "r4c/rate_limiter.hpp"
#include "r4c/retry.hpp"
#include "r4c/timeout.hpp"

namespace r4c {

/// What a call site sets on an adaptive limit (the attributes of an annotated method). Unset
/// members leave the setting to the levels below.
struct AdaptiveLimitAttributes {
  // Default member initializers let callers use designated initializers, e.g.
  // `{.initial_limit = 10}`, without -Wmissing-field-initializers.
  std::optional<LimitAlgorithm> algorithm = std::nullopt;
  std::optional<int> initial_limit = std::nullopt;
  std::optional<int> min_limit = std::nullopt;
  std::optional<int> max_limit = std::nullopt;
  std::optional<std::chrono::nanoseconds> window = std::nullopt;
  std::optional<std::vector<ExceptionType>> drop_on = std::nullopt;
  std::optional<bool> enabled = std::nullopt;

  /// Sets the members that are set; throws ConfigException as the setters do.
  void apply_to(AdaptiveLimitConfig& config) const;
};

/// A value copy of every policy's snapshot, safe to keep.
class RegistrySnapshot {
 public:
  /// Every adaptive limit by instance id.
  const std::map<std::string, AdaptiveLimitSnapshot>& adaptive_limits() const noexcept {
    return adaptive_limits_;
  }
  const std::map<std::string, BulkheadSnapshot>& bulkheads() const noexcept { return bulkheads_; }
  const std::map<std::string, RateLimiterSnapshot>& rate_limiters() const noexcept {
    return rate_limiters_;
  }
  const std::map<std::string, TimeoutSnapshot>& timeouts() const noexcept { return timeouts_; }
  const std::map<std::string, RetrySnapshot>& retries() const noexcept { return retries_; }
  const std::map<std::string, CircuitBreakerSnapshot>& circuit_breakers() const noexcept {
    return circuit_breakers_;
  }
  const std::map<std::string, HedgeSnapshot>& hedges() const noexcept { return hedges_; }

 private:
  friend class ResilienceRegistry;
  std::map<std::string, AdaptiveLimitSnapshot> adaptive_limits_;
  std::map<std::string, BulkheadSnapshot> bulkheads_;
  std::map<std::string, RateLimiterSnapshot> rate_limiters_;
  std::map<std::string, TimeoutSnapshot> timeouts_;
  std::map<std::string, RetrySnapshot> retries_;
  std::map<std::string, CircuitBreakerSnapshot> circuit_breakers_;
  std::map<std::string, HedgeSnapshot> hedges_;
};

/// Owns policies and their configuration. Build one with `builder()`.
/// Thread safety: every member may be called from any number of threads.
class ResilienceRegistry {
 public:
  class Builder;
  static Builder builder();

  /// Threads of the executor hedged attempts run on, unless Builder::hedge_executor says.
  static constexpr int kDefaultExecutorThreads = 4;

  ResilienceRegistry(ResilienceRegistry&&) noexcept;
  ResilienceRegistry& operator=(ResilienceRegistry&&) noexcept;
  ~ResilienceRegistry();

  /// The adaptive limit for a call site, created on first use. Its instance id is `name`, or
  /// `method_id` when `name` is "". `config` names a named config ("" for none; R4C-REG-004
  /// when unknown). Asking again for the same id returns the same limit; if the settings
  /// resolve differently this time, R4C-REG-008 names both method ids and the first setting
  /// that differs. Invalid resolved settings throw their own codes (R4C-ATR-003, ...).
  AdaptiveLimit& adaptive_limit_policy(std::string_view method_id, std::string_view name = "",
                                       std::string_view config = "",
                                       const AdaptiveLimitAttributes& site = {});

  /// The same, with instance settings from code on top of the call site's (the level a
  /// pipeline's own settings take); the file's `instances.<id>` still overrides them.
  AdaptiveLimit& adaptive_limit_policy(std::string_view method_id, std::string_view name,
                                       std::string_view config, const AdaptiveLimitAttributes& site,
                                       const std::function<void(AdaptiveLimitConfig&)>& instance);

  /// A handle on an existing adaptive limit; R4C-REG-009 when no limit has that id.
  AdaptiveLimitHandle adaptive_limit(std::string_view id) const;

  // The other policies work the same way: `*_policy` creates or finds the instance (its id
  // is `name`, or `method_id` when `name` is ""), with the settings resolved from built-in
  // defaults, registry defaults, the named config `config` and `instance` (each level then
  // the external file); the lookup by id throws R4C-REG-009 for an unknown id.

  Bulkhead& bulkhead_policy(std::string_view method_id, std::string_view name = "",
                            std::string_view config = "",
                            const std::function<void(BulkheadConfig&)>& instance = {});
  BulkheadHandle bulkhead(std::string_view id) const;

  RateLimiter& rate_limiter_policy(std::string_view method_id, std::string_view name = "",
                                   std::string_view config = "",
                                   const std::function<void(RateLimiterConfig&)>& instance = {});
  RateLimiterHandle rate_limiter(std::string_view id) const;

  Timeout& timeout_policy(std::string_view method_id, std::string_view name = "",
                          std::string_view config = "",
                          const std::function<void(TimeoutConfig&)>& instance = {});
  TimeoutHandle timeout(std::string_view id) const;

  Retry& retry_policy(std::string_view method_id, std::string_view name = "",
                      std::string_view config = "",
                      const std::function<void(RetryConfig&)>& instance = {});
  RetryHandle retry(std::string_view id) const;

  CircuitBreaker& circuit_breaker_policy(
      std::string_view method_id, std::string_view name = "", std::string_view config = "",
      const std::function<void(CircuitBreakerConfig&)>& instance = {});
  CircuitBreakerHandle circuit_breaker(std::string_view id) const;

  /// A hedge's attempts run on the registry's executor (see Builder::hedge_executor).
  Hedge& hedge_policy(std::string_view method_id, std::string_view name = "",
                      std::string_view config = "",
                      const std::function<void(HedgeConfig&)>& instance = {});
  HedgeHandle hedge(std::string_view id) const;

  /// A copy of every policy's snapshot.
  RegistrySnapshot snapshot() const;

  /// The clock every policy of this registry reads.
  const std::shared_ptr<Clock>& clock() const noexcept;

 private:
  struct State;
  explicit ResilienceRegistry(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

/// Collects a registry's configuration; `build()` validates all of it at once.
class ResilienceRegistry::Builder {
 public:
  using AdaptiveLimitSetup = std::function<void(AdaptiveLimitConfig&)>;

  Builder();
  Builder(Builder&&) noexcept;
  Builder& operator=(Builder&&) noexcept;
  ~Builder();

  /// Settings every adaptive limit of the registry starts from (applied in call order).
  Builder& adaptive_limit_defaults(AdaptiveLimitSetup setup);
  /// A named config, selected by the `config` argument of adaptive_limit_policy.
  Builder& adaptive_limit(std::string name, AdaptiveLimitSetup setup);
  /// The same for the other policies.
  Builder& bulkhead_defaults(std::function<void(BulkheadConfig&)> setup);
  Builder& bulkhead(std::string name, std::function<void(BulkheadConfig&)> setup);
  Builder& rate_limiter_defaults(std::function<void(RateLimiterConfig&)> setup);
  Builder& rate_limiter(std::string name, std::function<void(RateLimiterConfig&)> setup);
  Builder& timeout_defaults(std::function<void(TimeoutConfig&)> setup);
  Builder& timeout(std::string name, std::function<void(TimeoutConfig&)> setup);
  Builder& retry_defaults(std::function<void(RetryConfig&)> setup);
  Builder& retry(std::string name, std::function<void(RetryConfig&)> setup);
  Builder& circuit_breaker_defaults(std::function<void(CircuitBreakerConfig&)> setup);
  Builder& circuit_breaker(std::string name, std::function<void(CircuitBreakerConfig&)> setup);
  Builder& hedge_defaults(std::function<void(HedgeConfig&)> setup);
  Builder& hedge(std::string name, std::function<void(HedgeConfig&)> setup);
  /// Sizes the bounded pool every hedge of the registry runs its attempts on: `threads`
  /// threads (4) and at most `max_queued` waiting attempts (1024); an attempt the full pool
  /// refuses is not launched (a first attempt then runs on the caller's thread). The threads
  /// start with the registry's first hedge; destroying the registry runs the queued attempts
  /// and joins them. Throws ConfigException R4C-ATR-003 below 1.
  Builder& hedge_executor(int threads, int max_queued = Executor::kDefaultMaxQueued);
  /// External configuration from a file (read at build; R4C-CFG-001 when missing).
  Builder& config_file(std::filesystem::path path);
  /// External configuration as text, in the file's format.
  Builder& config_text(std::string text);
  /// The clock every policy reads; a SystemClock by default.
  Builder& clock(std::shared_ptr<Clock> clock);
  /// Names an exception type for `dropOn` in the external file. The built-in types are
  /// registered under their class names (LimitExceededException, CallTimeoutException,
  /// BulkheadFullException, RequestNotPermittedException, CallNotPermittedException), with and
  /// without "r4c::".
  template <class E>
  Builder& exception_type(std::string name) {
    return exception_type(std::move(name), ExceptionType::of<E>());
  }
  Builder& exception_type(std::string name, ExceptionType type);

  /// Reads the files and validates the defaults, every named config and every line of the
  /// external configuration. Throws ConfigException; a failed build leaves nothing behind.
  ResilienceRegistry build();

 private:
  struct Settings;
  std::unique_ptr<Settings> settings_;
};

namespace testing {

/// A builder preset with a manual clock, for tests:
///   auto registry = r4c::testing::registry(clock)
///       .adaptive_limit_defaults([](auto& a) { a.min_window_samples(1); }).build();
ResilienceRegistry::Builder registry(std::shared_ptr<ManualClock> clock);

}  // namespace testing
}  // namespace r4c
