#include "r4c/registry.hpp"

#include <algorithm>
#include <array>
#include <mutex>

#include "r4c/detail/config_file.hpp"

namespace r4c {
namespace {

using detail::ConfigEntry;
using detail::ConfigScope;

constexpr std::string_view kAdaptiveLimitKind = "adaptiveLimit";
constexpr std::array<std::string_view, 13> kAdaptiveLimitKeys = {
    "enabled",   "algorithm",        "initialLimit", "minLimit",     "maxLimit",
    "window",    "minWindowSamples", "smoothing",    "rttTolerance", "longWindow",
    "queueSize", "backoffRatio",     "dropOn"};
const std::array<detail::KindKeys, 1> kKinds = {
    detail::KindKeys{kAdaptiveLimitKind, kAdaptiveLimitKeys}};

using ExceptionCatalog = std::map<std::string, ExceptionType, std::less<>>;

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

// Applies one line of the file to an adaptive limit's config: the value's type is checked here,
// its range by the config's setter, whose message gains the file, line and key.
void apply_adaptive_limit_entry(const ConfigEntry& entry, AdaptiveLimitConfig& config,
                                const ExceptionCatalog& catalog) {
  const std::string where = entry.where();
  const std::string_view key = entry.key;
  const std::string_view value = entry.value;
  using detail::parse_double;
  using detail::parse_int;
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
    const double number = parse_double(value, where);
    with_context(where, [&] {
      if (key == "smoothing") config.smoothing(number);
      if (key == "rttTolerance") config.rtt_tolerance(number);
      if (key == "backoffRatio") config.backoff_ratio(number);
    });
  } else {
    const int number = parse_int(value, where);
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

ExceptionCatalog built_in_exception_types() {
  ExceptionCatalog catalog;
  auto add = [&](std::string name, ExceptionType type) {
    catalog.emplace("r4c::" + name, type);
    catalog.emplace(std::move(name), type);
  };
  add("LimitExceededException", ExceptionType::of<LimitExceededException>());
  add("CallTimeoutException", ExceptionType::of<CallTimeoutException>());
  add("BulkheadFullException", ExceptionType::of<BulkheadFullException>());
  return catalog;
}

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
  std::vector<AdaptiveLimitSetup> adaptive_limit_defaults;
  std::map<std::string, std::vector<AdaptiveLimitSetup>, std::less<>> adaptive_limit_configs;
  std::vector<Source> sources;
  ExceptionCatalog exception_types = built_in_exception_types();
};

// Everything a built registry knows; immutable after build but for the instances.
struct ResilienceRegistry::State {
  struct Instance {
    std::unique_ptr<AdaptiveLimit> limit;
    std::string method_id;
  };

  std::shared_ptr<Clock> clock;
  std::vector<Builder::AdaptiveLimitSetup> adaptive_limit_defaults;
  std::map<std::string, std::vector<Builder::AdaptiveLimitSetup>, std::less<>>
      adaptive_limit_configs;
  std::vector<ConfigEntry> entries;
  ExceptionCatalog exception_types;

  mutable std::mutex mutex;  // guards adaptive_limits (cold: creation and lookup only)
  std::map<std::string, Instance, std::less<>> adaptive_limits;

  void apply_file(ConfigScope scope, std::string_view scope_name,
                  AdaptiveLimitConfig& config) const {
    for (const ConfigEntry& entry : entries) {
      if (entry.scope == scope && entry.scope_name == scope_name &&
          entry.kind == kAdaptiveLimitKind) {
        apply_adaptive_limit_entry(entry, config, exception_types);
      }
    }
  }

  bool has_named_config(std::string_view name) const {
    if (adaptive_limit_configs.count(name)) return true;
    return std::any_of(entries.begin(), entries.end(), [&](const ConfigEntry& e) {
      return e.scope == ConfigScope::named && e.scope_name == name && e.kind == kAdaptiveLimitKind;
    });
  }

  std::vector<std::string> named_configs() const {
    std::vector<std::string> names;
    for (const auto& [name, setups] : adaptive_limit_configs) names.push_back(name);
    for (const ConfigEntry& e : entries) {
      if (e.scope == ConfigScope::named && e.kind == kAdaptiveLimitKind &&
          std::find(names.begin(), names.end(), e.scope_name) == names.end()) {
        names.push_back(e.scope_name);
      }
    }
    return names;
  }

  // Built-in defaults < registry defaults < named config < call site < instance; at each
  // level the file after the code.
  AdaptiveLimitConfig resolve(std::string_view named, const AdaptiveLimitAttributes* site,
                              const Builder::AdaptiveLimitSetup* instance,
                              std::string_view instance_id) const {
    AdaptiveLimitConfig config;
    with_context("adaptive limit defaults", [&] {
      for (const auto& setup : adaptive_limit_defaults) setup(config);
    });
    apply_file(ConfigScope::defaults, "", config);
    if (!named.empty()) {
      with_context("named config '" + std::string(named) + "'", [&] {
        if (const auto found = adaptive_limit_configs.find(named);
            found != adaptive_limit_configs.end()) {
          for (const auto& setup : found->second) setup(config);
        }
      });
      apply_file(ConfigScope::named, named, config);
    }
    const std::string id_context = "adaptive limit '" + std::string(instance_id) + "'";
    if (site) with_context(id_context + ", call-site attributes", [&] { site->apply_to(config); });
    if (instance && *instance) {
      with_context(id_context + ", instance settings", [&] { (*instance)(config); });
    }
    if (!instance_id.empty()) apply_file(ConfigScope::instance, instance_id, config);
    return config;
  }
};

ResilienceRegistry::Builder::Builder() : settings_(std::make_unique<Settings>()) {}
ResilienceRegistry::Builder::Builder(Builder&&) noexcept = default;
ResilienceRegistry::Builder& ResilienceRegistry::Builder::operator=(Builder&&) noexcept = default;
ResilienceRegistry::Builder::~Builder() = default;

ResilienceRegistry::Builder& ResilienceRegistry::Builder::adaptive_limit_defaults(
    AdaptiveLimitSetup setup) {
  settings_->adaptive_limit_defaults.push_back(std::move(setup));
  return *this;
}

ResilienceRegistry::Builder& ResilienceRegistry::Builder::adaptive_limit(std::string name,
                                                                         AdaptiveLimitSetup setup) {
  settings_->adaptive_limit_configs[std::move(name)].push_back(std::move(setup));
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
  auto state = std::make_unique<State>();
  state->adaptive_limit_defaults = settings_->adaptive_limit_defaults;
  state->adaptive_limit_configs = settings_->adaptive_limit_configs;
  state->exception_types = settings_->exception_types;
  for (const Settings::Source& source : settings_->sources) {
    const std::string text = source.file ? detail::read_config_file(*source.file) : source.text;
    const std::string origin = source.file ? source.file->string() : std::string("config text");
    auto entries = detail::parse_config(text, origin, kKinds);
    state->entries.insert(state->entries.end(), std::make_move_iterator(entries.begin()),
                          std::make_move_iterator(entries.end()));
  }
  // Every line's value on its own (instances included), then every complete config.
  for (const ConfigEntry& entry : state->entries) {
    AdaptiveLimitConfig scratch;
    apply_adaptive_limit_entry(entry, scratch, state->exception_types);
  }
  with_context("adaptive limit defaults",
               [&] { state->resolve("", nullptr, nullptr, "").validate(); });
  for (const std::string& name : state->named_configs()) {
    const AdaptiveLimitConfig config = state->resolve(name, nullptr, nullptr, "");
    with_context("named config '" + name + "'", [&] { config.validate(); });
  }
  state->clock = settings_->clock ? settings_->clock : std::make_shared<SystemClock>();
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
  const std::string id(name.empty() ? method_id : name);
  if (!config.empty() && !state_->has_named_config(config)) {
    const std::vector<std::string> known = state_->named_configs();
    std::vector<std::string_view> names(known.begin(), known.end());
    std::string message = "unknown named config '" + std::string(config) + "', asked for by " +
                          std::string(method_id);
    message += names.empty()
                   ? std::string("; no named config is defined")
                   : "; did you mean '" + std::string(detail::closest(config, names)) + "'?";
    throw ConfigException("R4C-REG-004", message);
  }
  AdaptiveLimitConfig resolved = state_->resolve(config, &site, &instance, id);
  with_context("adaptive limit '" + id + "'", [&] { resolved.validate(); });

  std::lock_guard<std::mutex> lock(state_->mutex);
  if (const auto found = state_->adaptive_limits.find(id); found != state_->adaptive_limits.end()) {
    const State::Instance& existing = found->second;
    if (const auto difference = first_difference(existing.limit->config(), resolved)) {
      throw ConfigException("R4C-REG-008",
                            "adaptive limit '" + id + "' is shared by " + existing.method_id +
                                " and " + std::string(method_id) +
                                ", whose settings differ: " + difference->setting + " is " +
                                difference->first + " for the first and " + difference->second +
                                " for the second; give them the same settings or different names");
    }
    return *existing.limit;
  }
  auto limit = std::make_unique<AdaptiveLimit>(id, std::move(resolved), state_->clock);
  AdaptiveLimit& created = *limit;
  state_->adaptive_limits.emplace(id, State::Instance{std::move(limit), std::string(method_id)});
  return created;
}

AdaptiveLimitHandle ResilienceRegistry::adaptive_limit(std::string_view id) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const auto found = state_->adaptive_limits.find(id);
  if (found == state_->adaptive_limits.end()) {
    std::vector<std::string_view> ids;
    for (const auto& [known, instance] : state_->adaptive_limits) ids.push_back(known);
    std::string message = "no adaptive limit has the id '" + std::string(id) + "'";
    message += ids.empty() ? std::string("; none exists yet")
                           : "; did you mean '" + std::string(detail::closest(id, ids)) + "'?";
    message +=
        " (a limit exists once its pipeline is built, its interface wrapped, or "
        "adaptive_limit_policy is called)";
    throw ConfigException("R4C-REG-009", message);
  }
  return found->second.limit->handle();
}

RegistrySnapshot ResilienceRegistry::snapshot() const {
  RegistrySnapshot snapshot;
  std::lock_guard<std::mutex> lock(state_->mutex);
  for (const auto& [id, instance] : state_->adaptive_limits) {
    snapshot.adaptive_limits_.emplace(id, instance.limit->snapshot());
  }
  return snapshot;
}

const std::shared_ptr<Clock>& ResilienceRegistry::clock() const noexcept { return state_->clock; }

namespace testing {

ResilienceRegistry::Builder registry(std::shared_ptr<ManualClock> clock) {
  ResilienceRegistry::Builder builder = ResilienceRegistry::builder();
  builder.clock(std::move(clock));
  return builder;
}

}  // namespace testing
}  // namespace r4c
