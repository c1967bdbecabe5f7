// SPDX-License-Identifier: Apache-2.0
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
//
// Operating it (docs/operations.md): `registry.describe()` shows what every policy resolved to and
// where each value came from; `registry.reconfigure(text)` / `reconfigure_file(path)` replace the
// external configuration while calls run, all or nothing, keeping every live policy's state.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "r4c/clock.hpp"
#include "r4c/detail/kinds.hpp"
#include "r4c/events.hpp"
#include "r4c/executor.hpp"

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

namespace detail {
template <class Kind>
using SnapshotMap = std::map<std::string, typename Kind::Snapshot>;
struct RegistryAccess;  // what Pipeline<T>::Builder asks of a registry
}  // namespace detail

/// Where a resolved setting's value came from, lowest level first.
enum class SettingSource : std::uint8_t {
  default_value,     // the built-in default
  builder_defaults,  // Builder::*_defaults in code
  named_config,      // a named config in code (Builder::adaptive_limit(name, ...), ...)
  call_site,         // call-site attributes (an annotated method's)
  instance,          // instance settings in code (a pipeline's own, *_policy's `instance`)
  file               // a line of the external configuration
};

/// One setting as a policy resolved it.
struct ResolvedSetting {
  std::string key;    // the file's key: "maxLimit"
  std::string value;  // as the file writes it: "50", "500ms", "aimd"; "" when it cannot be read
  SettingSource source = SettingSource::default_value;
  /// file: "<path>:<line>" ("config text:3" for text); named_config: the config's name.
  std::string origin;
  /// file: the line's whole key, "instances.orders.adaptiveLimit.maxLimit".
  std::string file_key;
};

/// What one kind's defaults, one named config or one instance resolved to.
struct ResolvedPolicy {
  std::string kind;   // the file's kind: "adaptiveLimit"
  std::string scope;  // the file's scope: "defaults", "configs.<name>" or "instances.<id>"
  std::string id;     // the instance id or the named config's name; "" for defaults
  /// An instance the registry has created; false for one only the file names (resolved over
  /// the defaults: its call site's named config and settings are not known yet).
  bool live = false;
  std::vector<std::string> used_by;  // the method ids (pipelines, call sites) that asked for it
  std::string named_config;          // the named config it was created with ("" for none)
  std::vector<ResolvedSetting> settings;  // every setting of the kind, in the documented order
};

/// The whole resolved configuration of a registry, from `ResilienceRegistry::describe()`.
struct ResolvedConfiguration {
  /// Every kind's defaults, then every named config, then every instance by id (a pipeline's
  /// policies share its id, so they come together).
  std::vector<ResolvedPolicy> policies;

  /// The instances of id `id` (every policy of a pipeline or a generated wrapper of that name).
  std::vector<const ResolvedPolicy*> instance(std::string_view id) const;
  /// In the external file's syntax: a `# kind scope` header per policy, then one
  /// `scope.kind.key = value` line per setting with its source as a comment.
  std::string text() const;
  /// As JSON: {"policies":[{"kind","scope","id","live","usedBy","namedConfig","settings":
  /// [{"key","value","source","origin","fileKey"}]}]}; every value is a string.
  std::string json() const;
};

/// One setting a reconfiguration changed on a live instance.
struct SettingChange {
  std::string kind;       // the file's kind: "adaptiveLimit"
  std::string id;         // the instance id
  std::string key;        // the file's key: "maxLimit"
  std::string old_value;  // as the file writes it: "100"
  std::string new_value;  // "50"
};

/// What one ResilienceRegistry::reconfigure() changed (ResilienceRegistry::on_reconfiguration).
struct ReconfigurationEvent {
  /// Where the new configuration came from: the file's path, or "config text" (what the
  /// listener error hook reports as the instance id). Valid while the listener runs.
  std::string_view instance_id;
  std::uint64_t reconfiguration = 0;  // 1 for the registry's first
  /// Every live instance's every changed setting, by kind (pipeline order) then id; empty
  /// when the new text changes no live instance (defaults, named configs and lines for
  /// instances not created yet still changed). Valid while the listener runs.
  std::span<const SettingChange> changes;
};

/// The name `describe()` gives a source: "default", "builder defaults", "named config",
/// "call site", "instance", "file".
std::string_view to_string(SettingSource source) noexcept;

/// A value copy of every policy's snapshot, safe to keep.
class RegistrySnapshot {
 public:
  /// Every instance of the kind by instance id, e.g. `of<r4c::AdaptiveLimitKind>()`.
  template <class Kind>
  const detail::SnapshotMap<Kind>& of() const noexcept {
    return std::get<detail::kKindIndex<Kind>>(snapshots_);
  }

  /// Every adaptive limit by instance id.
  const std::map<std::string, AdaptiveLimitSnapshot>& adaptive_limits() const noexcept {
    return of<AdaptiveLimitKind>();
  }
  const std::map<std::string, BulkheadSnapshot>& bulkheads() const noexcept {
    return of<BulkheadKind>();
  }
  const std::map<std::string, RateLimiterSnapshot>& rate_limiters() const noexcept {
    return of<RateLimiterKind>();
  }
  const std::map<std::string, TimeoutSnapshot>& timeouts() const noexcept {
    return of<TimeoutKind>();
  }
  const std::map<std::string, RetrySnapshot>& retries() const noexcept { return of<RetryKind>(); }
  const std::map<std::string, CircuitBreakerSnapshot>& circuit_breakers() const noexcept {
    return of<CircuitBreakerKind>();
  }
  const std::map<std::string, HedgeSnapshot>& hedges() const noexcept { return of<HedgeKind>(); }
  const std::map<std::string, ThrottleSnapshot>& throttles() const noexcept {
    return of<ThrottleKind>();
  }

 private:
  friend class ResilienceRegistry;
  detail::AllKinds::Tuple<detail::SnapshotMap> snapshots_;
};

class ConfigFileWatch;

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
  AdaptiveLimitHandle adaptive_limit(std::string_view id) const {
    return handle<AdaptiveLimitKind>(id);
  }

  // The other policies work the same way: `*_policy` creates or finds the instance (its id
  // is `name`, or `method_id` when `name` is ""), with the settings resolved from built-in
  // defaults, registry defaults, the named config `config` and `instance` (each level then
  // the external file); the lookup by id throws R4C-REG-009 for an unknown id.

  Bulkhead& bulkhead_policy(std::string_view method_id, std::string_view name = "",
                            std::string_view config = "",
                            const std::function<void(BulkheadConfig&)>& instance = {}) {
    return policy<BulkheadKind>(method_id, name, config, instance);
  }
  BulkheadHandle bulkhead(std::string_view id) const { return handle<BulkheadKind>(id); }

  RateLimiter& rate_limiter_policy(std::string_view method_id, std::string_view name = "",
                                   std::string_view config = "",
                                   const std::function<void(RateLimiterConfig&)>& instance = {}) {
    return policy<RateLimiterKind>(method_id, name, config, instance);
  }
  RateLimiterHandle rate_limiter(std::string_view id) const { return handle<RateLimiterKind>(id); }

  Timeout& timeout_policy(std::string_view method_id, std::string_view name = "",
                          std::string_view config = "",
                          const std::function<void(TimeoutConfig&)>& instance = {}) {
    return policy<TimeoutKind>(method_id, name, config, instance);
  }
  TimeoutHandle timeout(std::string_view id) const { return handle<TimeoutKind>(id); }

  Retry& retry_policy(std::string_view method_id, std::string_view name = "",
                      std::string_view config = "",
                      const std::function<void(RetryConfig&)>& instance = {}) {
    return policy<RetryKind>(method_id, name, config, instance);
  }
  RetryHandle retry(std::string_view id) const { return handle<RetryKind>(id); }

  CircuitBreaker& circuit_breaker_policy(
      std::string_view method_id, std::string_view name = "", std::string_view config = "",
      const std::function<void(CircuitBreakerConfig&)>& instance = {}) {
    return policy<CircuitBreakerKind>(method_id, name, config, instance);
  }
  CircuitBreakerHandle circuit_breaker(std::string_view id) const {
    return handle<CircuitBreakerKind>(id);
  }

  /// A hedge's attempts run on the registry's executor (see Builder::hedge_executor).
  Hedge& hedge_policy(std::string_view method_id, std::string_view name = "",
                      std::string_view config = "",
                      const std::function<void(HedgeConfig&)>& instance = {}) {
    return policy<HedgeKind>(method_id, name, config, instance);
  }
  HedgeHandle hedge(std::string_view id) const { return handle<HedgeKind>(id); }

  Throttle& throttle_policy(std::string_view method_id, std::string_view name = "",
                            std::string_view config = "",
                            const std::function<void(ThrottleConfig&)>& instance = {}) {
    return policy<ThrottleKind>(method_id, name, config, instance);
  }
  ThrottleHandle throttle(std::string_view id) const { return handle<ThrottleKind>(id); }

  /// Any kind's `*_policy` and lookup, e.g. `policy<r4c::TimeoutKind>("pipeline 'x'", "x")`:
  /// what the named members forward to, and all a kind added later needs.
  template <class Kind>
  typename Kind::Policy& policy(std::string_view method_id, std::string_view name = "",
                                std::string_view config = "",
                                const std::function<void(typename Kind::Config&)>& instance = {}) {
    return *static_cast<typename Kind::Policy*>(
        find_or_create(detail::kKindIndex<Kind>, method_id, name, config, nullptr, &instance));
  }
  template <class Kind>
  typename Kind::Handle handle(std::string_view id) const {
    return static_cast<const typename Kind::Policy*>(find(detail::kKindIndex<Kind>, id))->handle();
  }

  /// A copy of every policy's snapshot.
  RegistrySnapshot snapshot() const;

  /// What every policy resolved to: each kind's defaults, each named config and each instance
  /// (created, or named by the external file), with every setting's value and its source.
  /// Thread safety: may run while calls and reconfigurations do. Allocation: yes (cold).
  ResolvedConfiguration describe() const;

  /// Replaces the external configuration (every file and text the builder read) with `text`,
  /// in the same format, on the running registry: the code's defaults, named configs and call
  /// sites stay, every live instance is resolved again and gets its new settings without
  /// losing its state (docs/operations.md, "Live reconfiguration"). All or nothing: every line
  /// and every live instance is checked first, and any mistake throws one ConfigException
  /// listing every one (as build() does, with file:line and code) and changes nothing. Every
  /// setting of every kind changes live; a live instance whose named config the text no
  /// longer defines is R4C-REG-004. Returns what changed, also
  /// published to on_reconfiguration's listeners after it is applied. Atomic per instance;
  /// calls keep running throughout (a call under way finishes on the config it started with).
  /// Thread safety: serialised with itself and with policy creation. Allocation: yes (cold).
  std::vector<SettingChange> reconfigure(std::string_view text);
  /// The same with the text of the file `path` (R4C-CFG-001 when it cannot be read).
  std::vector<SettingChange> reconfigure_file(const std::filesystem::path& path);
  /// A watch on the file `path`: each ConfigFileWatch::poll() reconfigures the registry from it
  /// when its text has changed since the last poll (the text now is the starting point). The
  /// registry must outlive the watch.
  ConfigFileWatch watch_file(std::filesystem::path path);
  /// Calls `listener` after every successful reconfigure(), on its thread, until the
  /// Subscription ends (see <r4c/events.hpp>; the listener error hook reports kind "registry").
  Subscription on_reconfiguration(std::function<void(const ReconfigurationEvent&)> listener) const;

  /// The clock every policy of this registry reads.
  const std::shared_ptr<Clock>& clock() const noexcept;

 private:
  friend struct detail::RegistryAccess;
  friend class ConfigFileWatch;
  struct State;
  explicit ResilienceRegistry(std::unique_ptr<State> state);

  // The kind-independent core the templates above forward to: `kind` is a position in
  // detail::AllKinds, `site` and `instance` point to std::function<void(Kind::Config&)> (or are
  // null), the result to a Kind::Policy.
  void* find_or_create(std::size_t kind, std::string_view method_id, std::string_view name,
                       std::string_view config, const void* site, const void* instance);
  const void* find(std::size_t kind, std::string_view id) const;

  /// One policy a pipeline asks for: whether it wants the kind, the named config ("" for none)
  /// and its own settings (a std::function<void(Kind::Config&)>, or null).
  struct StageRequest {
    bool wanted = false;
    std::string_view config;
    const void* setup = nullptr;
  };
  using StageRequests = std::array<StageRequest, detail::kKindCount>;
  // Resolves and checks every wanted policy before it creates any: a request that throws
  // leaves the registry as it was. The result holds a Kind::Policy* per kind (null: unwanted).
  std::array<void*, detail::kKindCount> find_or_create_all(std::string_view owner,
                                                           std::string_view id,
                                                           const StageRequests& requests);

  std::vector<SettingChange> reconfigure_with(const std::string& text, const std::string& origin);

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
  Builder& bulkhead_defaults(std::function<void(BulkheadConfig&)> setup) {
    return defaults<BulkheadKind>(std::move(setup));
  }
  Builder& bulkhead(std::string name, std::function<void(BulkheadConfig&)> setup) {
    return named<BulkheadKind>(std::move(name), std::move(setup));
  }
  Builder& rate_limiter_defaults(std::function<void(RateLimiterConfig&)> setup) {
    return defaults<RateLimiterKind>(std::move(setup));
  }
  Builder& rate_limiter(std::string name, std::function<void(RateLimiterConfig&)> setup) {
    return named<RateLimiterKind>(std::move(name), std::move(setup));
  }
  Builder& timeout_defaults(std::function<void(TimeoutConfig&)> setup) {
    return defaults<TimeoutKind>(std::move(setup));
  }
  Builder& timeout(std::string name, std::function<void(TimeoutConfig&)> setup) {
    return named<TimeoutKind>(std::move(name), std::move(setup));
  }
  Builder& retry_defaults(std::function<void(RetryConfig&)> setup) {
    return defaults<RetryKind>(std::move(setup));
  }
  Builder& retry(std::string name, std::function<void(RetryConfig&)> setup) {
    return named<RetryKind>(std::move(name), std::move(setup));
  }
  Builder& circuit_breaker_defaults(std::function<void(CircuitBreakerConfig&)> setup) {
    return defaults<CircuitBreakerKind>(std::move(setup));
  }
  Builder& circuit_breaker(std::string name, std::function<void(CircuitBreakerConfig&)> setup) {
    return named<CircuitBreakerKind>(std::move(name), std::move(setup));
  }
  Builder& hedge_defaults(std::function<void(HedgeConfig&)> setup) {
    return defaults<HedgeKind>(std::move(setup));
  }
  Builder& hedge(std::string name, std::function<void(HedgeConfig&)> setup) {
    return named<HedgeKind>(std::move(name), std::move(setup));
  }
  /// Any kind's defaults and named configs, e.g. `defaults<r4c::TimeoutKind>(...)`: what the
  /// named members forward to.
  template <class Kind>
  Builder& defaults(std::function<void(typename Kind::Config&)> setup) {
    add_setup(detail::kKindIndex<Kind>, nullptr, &setup);
    return *this;
  }
  template <class Kind>
  Builder& named(std::string name, std::function<void(typename Kind::Config&)> setup) {
    add_setup(detail::kKindIndex<Kind>, &name, &setup);
    return *this;
  }
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
  /// BulkheadFullException, RequestNotPermittedException, CallNotPermittedException,
  /// ThrottledException, and their
  /// base RejectedException), with and without "r4c::".
  template <class E>
  Builder& exception_type(std::string name) {
    return exception_type(std::move(name), ExceptionType::of<E>());
  }
  Builder& exception_type(std::string name, ExceptionType type);

  /// Reads the files and validates the defaults, every named config and every line of the
  /// external configuration. Throws ConfigException; a failed build leaves nothing behind.
  ResilienceRegistry build();

 private:
  // `setup` points to a std::function<void(Kind::Config&)> it moves from; `name` is null for
  // the kind's defaults.
  void add_setup(std::size_t kind, std::string* name, void* setup);

  struct Settings;
  std::unique_ptr<Settings> settings_;
};

/// Reloads a registry's configuration when its file changes, polled by the caller: from a
/// thread or a timer of the service's own, at whatever period it likes (r4c starts no thread).
///   auto watch = registry.watch_file("/etc/shop/r4c.properties");
///   every 5 s: try { watch.poll(); } catch (const r4c::ConfigException& e) { log(e.what()); }
/// Thread safety: one poll() at a time per watch; any number of watches per registry.
class ConfigFileWatch {
 public:
  /// Reads the file; when its text differs from the last one seen, reconfigures the registry
  /// with it and returns what changed; nullopt when the text is the same. A bad text throws
  /// the ConfigException reconfigure() throws, changes nothing, and is not tried again until
  /// the file changes again; an unreadable file throws R4C-CFG-001 at every poll.
  std::optional<std::vector<SettingChange>> poll();
  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  friend class ResilienceRegistry;
  ConfigFileWatch(ResilienceRegistry& registry, std::filesystem::path path, std::string text)
      : registry_(&registry), path_(std::move(path)), seen_(std::move(text)) {}
  ResilienceRegistry* registry_;
  std::filesystem::path path_;
  std::string seen_;
};

namespace testing {

/// A builder preset with a manual clock, for tests:
///   auto registry = r4c::testing::registry(clock)
///       .adaptive_limit_defaults([](auto& a) { a.min_window_samples(1); }).build();
ResilienceRegistry::Builder registry(std::shared_ptr<ManualClock> clock);

}  // namespace testing
}  // namespace r4c
