#include "r4c/registry.hpp"

#include <algorithm>
#include <array>
#include <mutex>
#include <tuple>

#include "r4c/detail/config_file.hpp"

namespace r4c {
namespace {

using detail::ConfigEntry;
using detail::ConfigScope;
using ExceptionCatalog = std::map<std::string, ExceptionType, std::less<>>;

// What a registry gives the policies it makes: its clock, and the executor hedged attempts run
// on, started with the first hedge (a registry without hedges starts no thread).
class Resources {
 public:
  struct Options {
    std::shared_ptr<Clock> clock;
    int executor_threads;
    int executor_queue;
  };
  explicit Resources(Options options)
      : clock_(std::move(options.clock)),
        executor_threads_(options.executor_threads),
        executor_queue_(options.executor_queue) {}
  // Runs the queued attempts and joins the executor's threads while every policy they may
  // call still lives.
  ~Resources() {
    if (executor_) executor_->shutdown();
  }

  const std::shared_ptr<Clock>& clock() const noexcept { return clock_; }
  const std::shared_ptr<Executor>& executor() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!executor_) executor_ = std::make_shared<Executor>(executor_threads_, executor_queue_);
    return executor_;
  }

 private:
  const std::shared_ptr<Clock> clock_;
  const int executor_threads_;
  const int executor_queue_;
  std::mutex mutex_;  // guards the executor's creation (cold)
  std::shared_ptr<Executor> executor_;
};

// The part of a ConfigException's message after its code.
std::string detail_of(const ConfigException& e) {
  const std::string_view what = e.what();
  const std::size_t skip = e.code().empty() ? 0 : e.code().size() + 2;  // "CODE: "
  return std::string(what.substr(std::min(skip, what.size())));
}

// Runs `action`, prefixing any ConfigException's detail with where it came from.
template <class F>
void with_context(const std::string& context, F&& action) {
  try {
    action();
  } catch (const ConfigException& e) {
    throw ConfigException(e.code().empty() ? std::string_view("R4C-REG-001") : e.code(),
                          context + ": " + detail_of(e));
  }
}

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

std::vector<ExceptionType> parse_exception_list(std::string_view value, const std::string& where,
                                                const ExceptionCatalog& catalog) {
  std::vector<ExceptionType> types;
  std::vector<std::string_view> names;
  for (const auto& [name, type] : catalog) names.push_back(name);
  while (!trim(value).empty()) {
    const auto comma = value.find(',');
    const std::string_view name = trim(value.substr(0, comma));
    const auto found = catalog.find(name);
    if (found == catalog.end()) {
      throw ConfigException("R4C-CFG-003", where + ": unknown exception type '" +
                                               std::string(name) + "'; did you mean '" +
                                               std::string(detail::closest(name, names)) +
                                               "'? register it with builder.exception_type<T>(\"" +
                                               std::string(name) + "\")");
    }
    types.push_back(found->second);
    if (comma == std::string_view::npos) break;
    value = value.substr(comma + 1);
  }
  return types;
}

LimitAlgorithm parse_algorithm(std::string_view value, const std::string& where) {
  std::string lower(value);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "gradient2") return LimitAlgorithm::gradient2;
  if (lower == "aimd") return LimitAlgorithm::aimd;
  throw ConfigException("R4C-CFG-004",
                        where + " is '" + std::string(value) + "'; expected gradient2 or aimd");
}

// ---- one traits struct per policy kind -----------------------------------------------------
// Each says what the kind is called, which keys its file lines take and how a line applies to
// its config (the value's type is checked here, its range by the config's setter, whose
// message gains the file, line and key), and how an instance is made.

struct AdaptiveLimitKind {
  using Config = AdaptiveLimitConfig;
  using Policy = AdaptiveLimit;
  static constexpr std::string_view kFileName = "adaptiveLimit";
  static constexpr std::string_view kLabel = "adaptive limit";
  static constexpr std::array<std::string_view, 13> kKeys = {
      "enabled",   "algorithm",        "initialLimit", "minLimit",     "maxLimit",
      "window",    "minWindowSamples", "smoothing",    "rttTolerance", "longWindow",
      "queueSize", "backoffRatio",     "dropOn"};

  static void apply(const ConfigEntry& entry, Config& config, const ExceptionCatalog& catalog) {
    const std::string where = entry.where();
    const std::string_view key = entry.key;
    const std::string_view value = entry.value;
    if (key == "enabled") {
      config.enabled(detail::parse_bool(value, where));
    } else if (key == "algorithm") {
      const LimitAlgorithm algorithm = parse_algorithm(value, where);
      with_context(where, [&] { config.algorithm(algorithm); });
    } else if (key == "window") {
      const auto window = detail::parse_duration(value, where);
      with_context(where, [&] { config.window(window); });
    } else if (key == "dropOn") {
      config.drop_on(parse_exception_list(value, where, catalog));
    } else if (key == "smoothing" || key == "rttTolerance" || key == "backoffRatio") {
      const double number = detail::parse_double(value, where);
      with_context(where, [&] {
        if (key == "smoothing") config.smoothing(number);
        if (key == "rttTolerance") config.rtt_tolerance(number);
        if (key == "backoffRatio") config.backoff_ratio(number);
      });
    } else {
      const int number = detail::parse_int(value, where);
      with_context(where, [&] {
        if (key == "initialLimit") config.initial_limit(number);
        if (key == "minLimit") config.min_limit(number);
        if (key == "maxLimit") config.max_limit(number);
        if (key == "minWindowSamples") config.min_window_samples(number);
        if (key == "longWindow") config.long_window(number);
        if (key == "queueSize") config.queue_size(number);
      });
    }
  }
  static std::unique_ptr<Policy> make(const std::string& id, Config config, Resources& resources) {
    return std::make_unique<Policy>(id, std::move(config), resources.clock());
  }
};

struct BulkheadKind {
  using Config = BulkheadConfig;
  using Policy = Bulkhead;
  static constexpr std::string_view kFileName = "bulkhead";
  static constexpr std::string_view kLabel = "bulkhead";
  static constexpr std::array<std::string_view, 1> kKeys = {"maxConcurrent"};

  static void apply(const ConfigEntry& entry, Config& config, const ExceptionCatalog&) {
    const int number = detail::parse_int(entry.value, entry.where());
    with_context(entry.where(), [&] { config.max_concurrent(number); });
  }
  static std::unique_ptr<Policy> make(const std::string& id, Config config, Resources&) {
    return std::make_unique<Policy>(id, std::move(config));
  }
};

struct RateLimiterKind {
  using Config = RateLimiterConfig;
  using Policy = RateLimiter;
  static constexpr std::string_view kFileName = "rateLimiter";
  static constexpr std::string_view kLabel = "rate limiter";
  static constexpr std::array<std::string_view, 3> kKeys = {"limitForPeriod", "refreshPeriod",
                                                            "timeoutDuration"};

  static void apply(const ConfigEntry& entry, Config& config, const ExceptionCatalog&) {
    const std::string where = entry.where();
    if (entry.key == "limitForPeriod") {
      const int number = detail::parse_int(entry.value, where);
      with_context(where, [&] { config.limit_for_period(number); });
    } else {
      const auto duration = detail::parse_duration(entry.value, where);
      with_context(where, [&] {
        if (entry.key == "refreshPeriod") config.refresh_period(duration);
        if (entry.key == "timeoutDuration") config.timeout_duration(duration);
      });
    }
  }
  static std::unique_ptr<Policy> make(const std::string& id, Config config, Resources& resources) {
    return std::make_unique<Policy>(id, std::move(config), resources.clock());
  }
};

struct TimeoutKind {
  using Config = TimeoutConfig;
  using Policy = Timeout;
  static constexpr std::string_view kFileName = "timeout";
  static constexpr std::string_view kLabel = "timeout";
  static constexpr std::array<std::string_view, 1> kKeys = {"timeout"};

  static void apply(const ConfigEntry& entry, Config& config, const ExceptionCatalog&) {
    const auto duration = detail::parse_duration(entry.value, entry.where());
    with_context(entry.where(), [&] { config.timeout(duration); });
  }
  static std::unique_ptr<Policy> make(const std::string& id, Config config, Resources& resources) {
    return std::make_unique<Policy>(id, std::move(config), resources.clock());
  }
};

struct RetryKind {
  using Config = RetryConfig;
  using Policy = Retry;
  static constexpr std::string_view kFileName = "retry";
  static constexpr std::string_view kLabel = "retry";
  static constexpr std::array<std::string_view, 7> kKeys = {
      "maxAttempts", "wait",   "exponentialBackoffMultiplier", "maxWait", "randomizedWait",
      "retryOn",     "abortOn"};

  static void apply(const ConfigEntry& entry, Config& config, const ExceptionCatalog& catalog) {
    const std::string where = entry.where();
    const std::string_view key = entry.key;
    if (key == "maxAttempts") {
      const int number = detail::parse_int(entry.value, where);
      with_context(where, [&] { config.max_attempts(number); });
    } else if (key == "wait") {
      const auto duration = detail::parse_duration(entry.value, where);
      with_context(where, [&] { config.wait(duration); });
    } else if (key == "exponentialBackoffMultiplier") {
      const double multiplier = detail::parse_double(entry.value, where);
      // Without a maxWait line the backoff is capped only by the longest wait (1 h).
      const auto cap = config.exponential_backoff() ? config.max_wait() : RetryConfig::kLongestWait;
      with_context(where, [&] { config.exponential_backoff(multiplier, cap); });
    } else if (key == "maxWait") {
      const auto duration = detail::parse_duration(entry.value, where);
      with_context(where,
                   [&] { config.exponential_backoff(config.backoff_multiplier(), duration); });
    } else if (key == "randomizedWait") {
      const double jitter = detail::parse_double(entry.value, where);
      with_context(where, [&] { config.randomized_wait(jitter); });
    } else if (key == "retryOn") {
      config.retry_on(parse_exception_list(entry.value, where, catalog));
    } else {
      config.abort_on(parse_exception_list(entry.value, where, catalog));
    }
  }
  static std::unique_ptr<Policy> make(const std::string& id, Config config, Resources& resources) {
    return std::make_unique<Policy>(id, std::move(config), resources.clock());
  }
};

SlidingWindowType parse_window_type(std::string_view value, const std::string& where) {
  std::string lower(value);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "count_based" || lower == "countbased") return SlidingWindowType::count_based;
  if (lower == "time_based" || lower == "timebased") return SlidingWindowType::time_based;
  throw ConfigException("R4C-CFG-004", where + " is '" + std::string(value) +
                                           "'; expected count_based or time_based");
}

struct CircuitBreakerKind {
  using Config = CircuitBreakerConfig;
  using Policy = CircuitBreaker;
  static constexpr std::string_view kFileName = "circuitBreaker";
  static constexpr std::string_view kLabel = "circuit breaker";
  static constexpr std::array<std::string_view, 10> kKeys = {"failureRateThreshold",
                                                             "slowCallRateThreshold",
                                                             "slowCallDuration",
                                                             "slidingWindowType",
                                                             "slidingWindowSize",
                                                             "minimumNumberOfCalls",
                                                             "waitInOpen",
                                                             "permittedCallsInHalfOpen",
                                                             "recordOn",
                                                             "ignoreOn"};

  static void apply(const ConfigEntry& entry, Config& config, const ExceptionCatalog& catalog) {
    const std::string where = entry.where();
    const std::string_view key = entry.key;
    if (key == "failureRateThreshold" || key == "slowCallRateThreshold") {
      const double rate = detail::parse_double(entry.value, where);
      with_context(where, [&] {
        if (key == "failureRateThreshold") config.failure_rate_threshold(rate);
        if (key == "slowCallRateThreshold") config.slow_call_rate_threshold(rate);
      });
    } else if (key == "slowCallDuration" || key == "waitInOpen") {
      const auto duration = detail::parse_duration(entry.value, where);
      with_context(where, [&] {
        if (key == "slowCallDuration") config.slow_call_duration(duration);
        if (key == "waitInOpen") config.wait_in_open(duration);
      });
    } else if (key == "slidingWindowType") {
      config.sliding_window_type(parse_window_type(entry.value, where));
    } else if (key == "recordOn") {
      config.record_on(parse_exception_list(entry.value, where, catalog));
    } else if (key == "ignoreOn") {
      config.ignore_on(parse_exception_list(entry.value, where, catalog));
    } else {
      const int number = detail::parse_int(entry.value, where);
      with_context(where, [&] {
        if (key == "slidingWindowSize") config.sliding_window_size(number);
        if (key == "minimumNumberOfCalls") config.minimum_number_of_calls(number);
        if (key == "permittedCallsInHalfOpen") config.permitted_calls_in_half_open(number);
      });
    }
  }
  static std::unique_ptr<Policy> make(const std::string& id, Config config, Resources& resources) {
    return std::make_unique<Policy>(id, std::move(config), resources.clock());
  }
};

struct HedgeKind {
  using Config = HedgeConfig;
  using Policy = Hedge;
  static constexpr std::string_view kFileName = "hedge";
  static constexpr std::string_view kLabel = "hedge";
  static constexpr std::array<std::string_view, 2> kKeys = {"delay", "maxAttempts"};

  static void apply(const ConfigEntry& entry, Config& config, const ExceptionCatalog&) {
    const std::string where = entry.where();
    if (entry.key == "delay") {
      const auto duration = detail::parse_duration(entry.value, where);
      with_context(where, [&] { config.delay(duration); });
    } else {
      const int number = detail::parse_int(entry.value, where);
      with_context(where, [&] { config.max_attempts(number); });
    }
  }
  static std::unique_ptr<Policy> make(const std::string& id, Config config, Resources& resources) {
    return std::make_unique<Policy>(id, std::move(config), resources.clock(), resources.executor());
  }
};

const std::array<detail::KindKeys, 7> kKinds = {
    detail::KindKeys{AdaptiveLimitKind::kFileName, AdaptiveLimitKind::kKeys},
    detail::KindKeys{BulkheadKind::kFileName, BulkheadKind::kKeys},
    detail::KindKeys{RateLimiterKind::kFileName, RateLimiterKind::kKeys},
    detail::KindKeys{TimeoutKind::kFileName, TimeoutKind::kKeys},
    detail::KindKeys{RetryKind::kFileName, RetryKind::kKeys},
    detail::KindKeys{CircuitBreakerKind::kFileName, CircuitBreakerKind::kKeys},
    detail::KindKeys{HedgeKind::kFileName, HedgeKind::kKeys}};

ExceptionCatalog built_in_exception_types() {
  ExceptionCatalog catalog;
  auto add = [&](std::string name, ExceptionType type) {
    catalog.emplace("r4c::" + name, type);
    catalog.emplace(std::move(name), type);
  };
  add("LimitExceededException", ExceptionType::of<LimitExceededException>());
  add("CallTimeoutException", ExceptionType::of<CallTimeoutException>());
  add("BulkheadFullException", ExceptionType::of<BulkheadFullException>());
  add("RequestNotPermittedException", ExceptionType::of<RequestNotPermittedException>());
  add("CallNotPermittedException", ExceptionType::of<CallNotPermittedException>());
  return catalog;
}

// What code says about one kind: defaults and named configs.
template <class Kind>
struct CodeSettings {
  using Setup = std::function<void(typename Kind::Config&)>;
  std::vector<Setup> defaults;
  std::map<std::string, std::vector<Setup>, std::less<>> named;
};

using AllCodeSettings =
    std::tuple<CodeSettings<AdaptiveLimitKind>, CodeSettings<BulkheadKind>,
               CodeSettings<RateLimiterKind>, CodeSettings<TimeoutKind>, CodeSettings<RetryKind>,
               CodeSettings<CircuitBreakerKind>, CodeSettings<HedgeKind>>;

// One kind's configuration and instances in a built registry.
template <class Kind>
class PolicyTable {
 public:
  using Config = typename Kind::Config;
  using Policy = typename Kind::Policy;
  using Setup = std::function<void(Config&)>;

  PolicyTable(CodeSettings<Kind> code, const std::vector<ConfigEntry>& entries,
              const ExceptionCatalog& catalog)
      : code_(std::move(code)), catalog_(&catalog) {
    for (const ConfigEntry& entry : entries) {
      if (entry.kind == Kind::kFileName) entries_.push_back(entry);
    }
  }

  // build(): every line's value on its own (instances included), then every complete config.
  void validate() const {
    for (const ConfigEntry& entry : entries_) {
      Config scratch;
      Kind::apply(entry, scratch, *catalog_);
    }
    const std::string label(Kind::kLabel);
    const Config defaults = resolve("", nullptr, nullptr, "");
    with_context(label + " defaults", [&] { defaults.validate(); });
    for (const std::string& name : named_configs()) {
      const Config config = resolve(name, nullptr, nullptr, "");
      with_context(named_context(name), [&] { config.validate(); });
    }
  }

  Policy& get_or_create(std::string_view method_id, std::string_view name, std::string_view named,
                        const Setup* site, const Setup* instance, Resources& resources) {
    const std::string id(name.empty() ? method_id : name);
    if (!named.empty() && !has_named_config(named)) unknown_named_config(named, method_id);
    Config resolved = resolve(named, site, instance, id);
    const std::string context = std::string(Kind::kLabel) + " '" + id + "'";
    with_context(context, [&] { resolved.validate(); });

    std::lock_guard<std::mutex> lock(mutex_);
    if (const auto found = instances_.find(id); found != instances_.end()) {
      const Instance& existing = found->second;
      if (const auto difference = first_difference(existing.policy->config(), resolved)) {
        throw ConfigException(
            "R4C-REG-008", context + " is shared by " + existing.method_id + " and " +
                               std::string(method_id) +
                               ", whose settings differ: " + difference->setting + " is " +
                               difference->first + " for the first and " + difference->second +
                               " for the second; give them the same settings or different names");
      }
      return *existing.policy;
    }
    auto policy = Kind::make(id, std::move(resolved), resources);
    Policy& created = *policy;
    instances_.emplace(id, Instance{std::move(policy), std::string(method_id)});
    return created;
  }

  const Policy& find(std::string_view id) const {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto found = instances_.find(id);
    if (found == instances_.end()) {
      std::vector<std::string_view> ids;
      for (const auto& [known, instance] : instances_) ids.push_back(known);
      std::string message =
          "no " + std::string(Kind::kLabel) + " has the id '" + std::string(id) + "'";
      message += ids.empty() ? std::string("; none exists yet")
                             : "; did you mean '" + std::string(detail::closest(id, ids)) + "'?";
      message +=
          " (a policy exists once its pipeline is built, its interface wrapped, or its "
          "*_policy function is called)";
      throw ConfigException("R4C-REG-009", message);
    }
    return *found->second.policy;
  }

  template <class Snapshots>
  void snapshot_into(Snapshots& snapshots) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [id, instance] : instances_)
      snapshots.emplace(id, instance.policy->snapshot());
  }

 private:
  struct Instance {
    std::unique_ptr<Policy> policy;
    std::string method_id;
  };

  void apply_file(ConfigScope scope, std::string_view scope_name, Config& config) const {
    for (const ConfigEntry& entry : entries_) {
      if (entry.scope == scope && entry.scope_name == scope_name) {
        Kind::apply(entry, config, *catalog_);
      }
    }
  }

  std::string named_context(std::string_view name) const {
    return "named config '" + std::string(name) + "' of " + std::string(Kind::kLabel);
  }

  bool has_named_config(std::string_view name) const {
    if (code_.named.count(name)) return true;
    return std::any_of(entries_.begin(), entries_.end(), [&](const ConfigEntry& e) {
      return e.scope == ConfigScope::named && e.scope_name == name;
    });
  }

  std::vector<std::string> named_configs() const {
    std::vector<std::string> names;
    for (const auto& [name, setups] : code_.named) names.push_back(name);
    for (const ConfigEntry& e : entries_) {
      if (e.scope == ConfigScope::named &&
          std::find(names.begin(), names.end(), e.scope_name) == names.end()) {
        names.push_back(e.scope_name);
      }
    }
    return names;
  }

  [[noreturn]] void unknown_named_config(std::string_view name, std::string_view method_id) const {
    const std::vector<std::string> known = named_configs();
    const std::vector<std::string_view> names(known.begin(), known.end());
    std::string message = "unknown named config '" + std::string(name) + "' of " +
                          std::string(Kind::kLabel) + ", asked for by " + std::string(method_id);
    message += names.empty()
                   ? std::string("; no named config is defined")
                   : "; did you mean '" + std::string(detail::closest(name, names)) + "'?";
    throw ConfigException("R4C-REG-004", message);
  }

  // Built-in defaults < registry defaults < named config < call site < instance; at each
  // level the file after the code.
  Config resolve(std::string_view named, const Setup* site, const Setup* instance,
                 std::string_view id) const {
    Config config;
    with_context(std::string(Kind::kLabel) + " defaults", [&] {
      for (const auto& setup : code_.defaults) setup(config);
    });
    apply_file(ConfigScope::defaults, "", config);
    if (!named.empty()) {
      with_context(named_context(named), [&] {
        if (const auto found = code_.named.find(named); found != code_.named.end()) {
          for (const auto& setup : found->second) setup(config);
        }
      });
      apply_file(ConfigScope::named, named, config);
    }
    const std::string context = std::string(Kind::kLabel) + " '" + std::string(id) + "'";
    if (site && *site) with_context(context + ", call-site attributes", [&] { (*site)(config); });
    if (instance && *instance) {
      with_context(context + ", instance settings", [&] { (*instance)(config); });
    }
    if (!id.empty()) apply_file(ConfigScope::instance, id, config);
    return config;
  }

  const CodeSettings<Kind> code_;
  const ExceptionCatalog* catalog_;
  std::vector<ConfigEntry> entries_;
  mutable std::mutex mutex_;  // guards instances_ (cold: creation, lookup, snapshots)
  std::map<std::string, Instance, std::less<>> instances_;
};

}  // namespace

void AdaptiveLimitAttributes::apply_to(AdaptiveLimitConfig& config) const {
  if (algorithm) config.algorithm(*algorithm);
  if (initial_limit) config.initial_limit(*initial_limit);
  if (min_limit) config.min_limit(*min_limit);
  if (max_limit) config.max_limit(*max_limit);
  if (window) config.window(*window);
  if (drop_on) config.drop_on(*drop_on);
  if (enabled) config.enabled(*enabled);
}

// ---- builder -----------------------------------------------------------------------------

struct ResilienceRegistry::Builder::Settings {
  struct Source {
    std::optional<std::filesystem::path> file;
    std::string text;
  };
  std::shared_ptr<Clock> clock;
  AllCodeSettings code;
  std::vector<Source> sources;
  ExceptionCatalog exception_types = built_in_exception_types();
  int executor_threads = ResilienceRegistry::kDefaultExecutorThreads;
  int executor_queue = Executor::kDefaultMaxQueued;
};

struct ResilienceRegistry::State {
  State(Resources::Options options, ExceptionCatalog catalog, AllCodeSettings code,
        const std::vector<ConfigEntry>& entries)
      : exception_types(std::move(catalog)),
        adaptive_limits(std::move(std::get<0>(code)), entries, exception_types),
        bulkheads(std::move(std::get<1>(code)), entries, exception_types),
        rate_limiters(std::move(std::get<2>(code)), entries, exception_types),
        timeouts(std::move(std::get<3>(code)), entries, exception_types),
        retries(std::move(std::get<4>(code)), entries, exception_types),
        circuit_breakers(std::move(std::get<5>(code)), entries, exception_types),
        hedges(std::move(std::get<6>(code)), entries, exception_types),
        resources(std::move(options)) {}

  ExceptionCatalog exception_types;
  PolicyTable<AdaptiveLimitKind> adaptive_limits;
  PolicyTable<BulkheadKind> bulkheads;
  PolicyTable<RateLimiterKind> rate_limiters;
  PolicyTable<TimeoutKind> timeouts;
  PolicyTable<RetryKind> retries;
  PolicyTable<CircuitBreakerKind> circuit_breakers;
  PolicyTable<HedgeKind> hedges;
  // Last, so destroyed first: its executor finishes every attempt (which may call any policy
  // above) before a policy goes.
  Resources resources;
};

ResilienceRegistry::Builder::Builder() : settings_(std::make_unique<Settings>()) {}
ResilienceRegistry::Builder::Builder(Builder&&) noexcept = default;
ResilienceRegistry::Builder& ResilienceRegistry::Builder::operator=(Builder&&) noexcept = default;
ResilienceRegistry::Builder::~Builder() = default;

namespace {
template <class Kind, class Setup>
void add_defaults(AllCodeSettings& code, Setup setup) {
  std::get<CodeSettings<Kind>>(code).defaults.push_back(std::move(setup));
}
template <class Kind, class Setup>
void add_named(AllCodeSettings& code, std::string name, Setup setup) {
  std::get<CodeSettings<Kind>>(code).named[std::move(name)].push_back(std::move(setup));
}
}  // namespace

ResilienceRegistry::Builder& ResilienceRegistry::Builder::adaptive_limit_defaults(
    AdaptiveLimitSetup setup) {
  add_defaults<AdaptiveLimitKind>(settings_->code, std::move(setup));
  return *this;
}

ResilienceRegistry::Builder& ResilienceRegistry::Builder::adaptive_limit(std::string name,
                                                                         AdaptiveLimitSetup setup) {
  add_named<AdaptiveLimitKind>(settings_->code, std::move(name), std::move(setup));
  return *this;
}

ResilienceRegistry::Builder& ResilienceRegistry::Builder::bulkhead_defaults(
    std::function<void(BulkheadConfig&)> setup) {
  add_defaults<BulkheadKind>(settings_->code, std::move(setup));
  return *this;
}

ResilienceRegistry::Builder& ResilienceRegistry::Builder::bulkhead(
    std::string name, std::function<void(BulkheadConfig&)> setup) {
  add_named<BulkheadKind>(settings_->code, std::move(name), std::move(setup));
  return *this;
}

ResilienceRegistry::Builder& ResilienceRegistry::Builder::rate_limiter_defaults(
    std::function<void(RateLimiterConfig&)> setup) {
  add_defaults<RateLimiterKind>(settings_->code, std::move(setup));
  return *this;
}

ResilienceRegistry::Builder& ResilienceRegistry::Builder::rate_limiter(
    std::string name, std::function<void(RateLimiterConfig&)> setup) {
  add_named<RateLimiterKind>(settings_->code, std::move(name), std::move(setup));
  return *this;
}

ResilienceRegistry::Builder& ResilienceRegistry::Builder::timeout_defaults(
    std::function<void(TimeoutConfig&)> setup) {
  add_defaults<TimeoutKind>(settings_->code, std::move(setup));
  return *this;
}

ResilienceRegistry::Builder& ResilienceRegistry::Builder::timeout(
    std::string name, std::function<void(TimeoutConfig&)> setup) {
  add_named<TimeoutKind>(settings_->code, std::move(name), std::move(setup));
  return *this;
}

ResilienceRegistry::Builder& ResilienceRegistry::Builder::retry_defaults(
    std::function<void(RetryConfig&)> setup) {
  add_defaults<RetryKind>(settings_->code, std::move(setup));
  return *this;
}

ResilienceRegistry::Builder& ResilienceRegistry::Builder::retry(
    std::string name, std::function<void(RetryConfig&)> setup) {
  add_named<RetryKind>(settings_->code, std::move(name), std::move(setup));
  return *this;
}

ResilienceRegistry::Builder& ResilienceRegistry::Builder::circuit_breaker_defaults(
    std::function<void(CircuitBreakerConfig&)> setup) {
  add_defaults<CircuitBreakerKind>(settings_->code, std::move(setup));
  return *this;
}

ResilienceRegistry::Builder& ResilienceRegistry::Builder::circuit_breaker(
    std::string name, std::function<void(CircuitBreakerConfig&)> setup) {
  add_named<CircuitBreakerKind>(settings_->code, std::move(name), std::move(setup));
  return *this;
}

ResilienceRegistry::Builder& ResilienceRegistry::Builder::hedge_defaults(
    std::function<void(HedgeConfig&)> setup) {
  add_defaults<HedgeKind>(settings_->code, std::move(setup));
  return *this;
}

ResilienceRegistry::Builder& ResilienceRegistry::Builder::hedge(
    std::string name, std::function<void(HedgeConfig&)> setup) {
  add_named<HedgeKind>(settings_->code, std::move(name), std::move(setup));
  return *this;
}

ResilienceRegistry::Builder& ResilienceRegistry::Builder::hedge_executor(int threads,
                                                                         int max_queued) {
  // Checked here, before anything else, so the message names the setting; the threads start
  // with the registry's first hedge.
  if (threads < 1) {
    throw ConfigException("R4C-ATR-003", "hedge_executor threads is " + std::to_string(threads) +
                                             "; valid: an integer >= 1");
  }
  if (max_queued < 1) {
    throw ConfigException(
        "R4C-ATR-003",
        "hedge_executor max_queued is " + std::to_string(max_queued) + "; valid: an integer >= 1");
  }
  settings_->executor_threads = threads;
  settings_->executor_queue = max_queued;
  return *this;
}

ResilienceRegistry::Builder& ResilienceRegistry::Builder::config_file(std::filesystem::path path) {
  settings_->sources.push_back({std::move(path), {}});
  return *this;
}

ResilienceRegistry::Builder& ResilienceRegistry::Builder::config_text(std::string text) {
  settings_->sources.push_back({std::nullopt, std::move(text)});
  return *this;
}

ResilienceRegistry::Builder& ResilienceRegistry::Builder::clock(std::shared_ptr<Clock> clock) {
  settings_->clock = std::move(clock);
  return *this;
}

ResilienceRegistry::Builder& ResilienceRegistry::Builder::exception_type(std::string name,
                                                                         ExceptionType type) {
  settings_->exception_types.insert_or_assign(std::move(name), type);
  return *this;
}

ResilienceRegistry ResilienceRegistry::Builder::build() {
  std::vector<ConfigEntry> entries;
  for (const Settings::Source& source : settings_->sources) {
    const std::string text = source.file ? detail::read_config_file(*source.file) : source.text;
    const std::string origin = source.file ? source.file->string() : std::string("config text");
    auto parsed = detail::parse_config(text, origin, kKinds);
    entries.insert(entries.end(), std::make_move_iterator(parsed.begin()),
                   std::make_move_iterator(parsed.end()));
  }
  Resources::Options options{settings_->clock ? settings_->clock : std::make_shared<SystemClock>(),
                             settings_->executor_threads, settings_->executor_queue};
  auto state = std::make_unique<State>(std::move(options), settings_->exception_types,
                                       settings_->code, entries);
  state->adaptive_limits.validate();
  state->bulkheads.validate();
  state->rate_limiters.validate();
  state->timeouts.validate();
  state->retries.validate();
  state->circuit_breakers.validate();
  state->hedges.validate();
  return ResilienceRegistry(std::move(state));
}

// ---- registry ----------------------------------------------------------------------------

ResilienceRegistry::Builder ResilienceRegistry::builder() { return Builder(); }

ResilienceRegistry::ResilienceRegistry(std::unique_ptr<State> state) : state_(std::move(state)) {}
ResilienceRegistry::ResilienceRegistry(ResilienceRegistry&&) noexcept = default;
ResilienceRegistry& ResilienceRegistry::operator=(ResilienceRegistry&&) noexcept = default;
ResilienceRegistry::~ResilienceRegistry() = default;

AdaptiveLimit& ResilienceRegistry::adaptive_limit_policy(std::string_view method_id,
                                                         std::string_view name,
                                                         std::string_view config,
                                                         const AdaptiveLimitAttributes& site) {
  return adaptive_limit_policy(method_id, name, config, site, {});
}

AdaptiveLimit& ResilienceRegistry::adaptive_limit_policy(
    std::string_view method_id, std::string_view name, std::string_view config,
    const AdaptiveLimitAttributes& site,
    const std::function<void(AdaptiveLimitConfig&)>& instance) {
  const std::function<void(AdaptiveLimitConfig&)> apply_site = [&site](AdaptiveLimitConfig& c) {
    site.apply_to(c);
  };
  return state_->adaptive_limits.get_or_create(method_id, name, config, &apply_site, &instance,
                                               state_->resources);
}

AdaptiveLimitHandle ResilienceRegistry::adaptive_limit(std::string_view id) const {
  return state_->adaptive_limits.find(id).handle();
}

Bulkhead& ResilienceRegistry::bulkhead_policy(
    std::string_view method_id, std::string_view name, std::string_view config,
    const std::function<void(BulkheadConfig&)>& instance) {
  return state_->bulkheads.get_or_create(method_id, name, config, nullptr, &instance,
                                         state_->resources);
}

BulkheadHandle ResilienceRegistry::bulkhead(std::string_view id) const {
  return state_->bulkheads.find(id).handle();
}

RateLimiter& ResilienceRegistry::rate_limiter_policy(
    std::string_view method_id, std::string_view name, std::string_view config,
    const std::function<void(RateLimiterConfig&)>& instance) {
  return state_->rate_limiters.get_or_create(method_id, name, config, nullptr, &instance,
                                             state_->resources);
}

RateLimiterHandle ResilienceRegistry::rate_limiter(std::string_view id) const {
  return state_->rate_limiters.find(id).handle();
}

Timeout& ResilienceRegistry::timeout_policy(std::string_view method_id, std::string_view name,
                                            std::string_view config,
                                            const std::function<void(TimeoutConfig&)>& instance) {
  return state_->timeouts.get_or_create(method_id, name, config, nullptr, &instance,
                                        state_->resources);
}

TimeoutHandle ResilienceRegistry::timeout(std::string_view id) const {
  return state_->timeouts.find(id).handle();
}

Retry& ResilienceRegistry::retry_policy(std::string_view method_id, std::string_view name,
                                        std::string_view config,
                                        const std::function<void(RetryConfig&)>& instance) {
  return state_->retries.get_or_create(method_id, name, config, nullptr, &instance,
                                       state_->resources);
}

RetryHandle ResilienceRegistry::retry(std::string_view id) const {
  return state_->retries.find(id).handle();
}

CircuitBreaker& ResilienceRegistry::circuit_breaker_policy(
    std::string_view method_id, std::string_view name, std::string_view config,
    const std::function<void(CircuitBreakerConfig&)>& instance) {
  return state_->circuit_breakers.get_or_create(method_id, name, config, nullptr, &instance,
                                                state_->resources);
}

CircuitBreakerHandle ResilienceRegistry::circuit_breaker(std::string_view id) const {
  return state_->circuit_breakers.find(id).handle();
}

Hedge& ResilienceRegistry::hedge_policy(std::string_view method_id, std::string_view name,
                                        std::string_view config,
                                        const std::function<void(HedgeConfig&)>& instance) {
  return state_->hedges.get_or_create(method_id, name, config, nullptr, &instance,
                                      state_->resources);
}

HedgeHandle ResilienceRegistry::hedge(std::string_view id) const {
  return state_->hedges.find(id).handle();
}

RegistrySnapshot ResilienceRegistry::snapshot() const {
  RegistrySnapshot snapshot;
  state_->adaptive_limits.snapshot_into(snapshot.adaptive_limits_);
  state_->bulkheads.snapshot_into(snapshot.bulkheads_);
  state_->rate_limiters.snapshot_into(snapshot.rate_limiters_);
  state_->timeouts.snapshot_into(snapshot.timeouts_);
  state_->retries.snapshot_into(snapshot.retries_);
  state_->circuit_breakers.snapshot_into(snapshot.circuit_breakers_);
  state_->hedges.snapshot_into(snapshot.hedges_);
  return snapshot;
}

const std::shared_ptr<Clock>& ResilienceRegistry::clock() const noexcept {
  return state_->resources.clock();
}

namespace testing {

ResilienceRegistry::Builder registry(std::shared_ptr<ManualClock> clock) {
  ResilienceRegistry::Builder builder = ResilienceRegistry::builder();
  builder.clock(std::move(clock));
  return builder;
}

}  // namespace testing
}  // namespace r4c
