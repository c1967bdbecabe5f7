// SPDX-License-Identifier: Apache-2.0
#include "r4c/registry.hpp"

#include <algorithm>
#include <array>
#include <mutex>
#include <tuple>

#include "r4c/detail/config_file.hpp"
#include "r4c/detail/event_hub.hpp"
#include "thread_frames.hpp"

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

// The exception types a line names, looked up in the registry's catalog.
std::vector<ExceptionType> resolve_exception_types(const std::vector<std::string>& names,
                                                   const std::string& where,
                                                   const ExceptionCatalog& catalog) {
  std::vector<ExceptionType> types;
  std::vector<std::string_view> known;
  for (const auto& [name, type] : catalog) known.push_back(name);
  for (const std::string& name : names) {
    const auto found = catalog.find(name);
    if (found == catalog.end()) {
      throw ConfigException("R4C-CFG-003",
                            where + ": unknown exception type " + detail::quote(name) +
                                "; did you mean '" + std::string(text::closest(name, known)) +
                                "'? register it with builder.exception_type<T>(\"" + name + "\")");
    }
    types.push_back(found->second);
  }
  return types;
}

// Applies one line to a config of its kind: the value's type is checked here, its range by the
// config's setter, whose message gains the file, line and key.
template <class Kind>
void apply_entry(const ConfigEntry& entry, typename Kind::Config& config,
                 const ExceptionCatalog& catalog) {
  const std::string where = entry.where();
  const auto settings = Kind::settings();
  const auto setting = std::find_if(settings.begin(), settings.end(),
                                    [&](const auto& s) { return s.key == entry.key; });
  // parse_config let only the kind's keys through.
  if (setting == settings.end()) return;
  detail::SettingValue value = detail::parse_setting(*setting, entry.value, where);
  if (value.type == detail::SettingType::exception_types) {
    value.types = resolve_exception_types(value.type_names, where, catalog);
  }
  with_context(where, [&] { setting->apply(config, value); });
}

// Every kind's file name and keys, for parse_config.
std::span<const detail::KindKeys> file_kinds() {
  static const auto kinds = [] {
    struct Tables {
      std::array<std::vector<std::string_view>, detail::kKindCount> keys;
      std::array<detail::KindKeys, detail::kKindCount> kinds;
    } tables;
    std::size_t i = 0;
    detail::for_each_kind([&]<class Kind>(std::type_identity<Kind>) {
      for (const auto& setting : Kind::settings()) tables.keys[i].push_back(setting.key);
      tables.kinds[i] = detail::KindKeys{Kind::kNames.file, tables.keys[i]};
      ++i;
    });
    return tables;
  }();
  return kinds.kinds;
}

// The exception types every file may name: each kind's own, and the base of every refusal,
// under their class names with and without "r4c::".
ExceptionCatalog built_in_exception_types() {
  ExceptionCatalog catalog;
  auto add = [&](ExceptionType type) {
    std::string name = type.name();
    constexpr std::string_view kNamespace = "r4c::";
    if (name.starts_with(kNamespace)) catalog.emplace(name.substr(kNamespace.size()), type);
    catalog.emplace(std::move(name), type);
  };
  detail::for_each_kind([&]<class Kind>(std::type_identity<Kind>) {
    if constexpr (!std::is_void_v<typename Kind::Exception>) {
      add(ExceptionType::of<typename Kind::Exception>());
    }
  });
  add(ExceptionType::of<RejectedException>());
  return catalog;
}

// What code says about one kind: defaults and named configs.
template <class Kind>
struct CodeSettings {
  using Setup = std::function<void(typename Kind::Config&)>;
  std::vector<Setup> defaults;
  std::map<std::string, std::vector<Setup>, std::less<>> named;
};

using AllCodeSettings = detail::AllKinds::Tuple<CodeSettings>;

// What goes wrong while a configuration is checked, collected so that every mistake is
// reported at once.
using Errors = std::vector<ConfigError>;

template <class F>
bool collect(Errors& errors, F&& action) {
  try {
    action();
    return true;
  } catch (const ConfigException& e) {
    errors.insert(errors.end(), e.errors().begin(), e.errors().end());
    return false;
  }
}

// "<path>:<line>", for a source.
std::string line_of(const ConfigEntry& entry) {
  return entry.origin + ":" + std::to_string(entry.line);
}

std::string scope_key(ConfigScope scope, std::string_view name) {
  switch (scope) {
    case ConfigScope::defaults:
      return "defaults";
    case ConfigScope::named:
      return "configs." + std::string(name);
    case ConfigScope::instance:
      return "instances." + std::string(name);
  }
  return {};
}

// The name the file knows an exception type by: the shortest registered one, else its C++ name.
std::string file_name_of(const ExceptionType& type, const ExceptionCatalog& catalog) {
  std::string best;
  for (const auto& [name, known] : catalog) {
    if (known == type && (best.empty() || name.size() < best.size())) best = name;
  }
  return best.empty() ? type.name() : best;
}

// A setting's value in `config`, as the file writes it (exception types by their file names).
template <class Setting, class Config>
std::string formatted(const Setting& setting, const Config& config,
                      const ExceptionCatalog& catalog) {
  detail::SettingValue value = setting.read(config);
  if (value.type == detail::SettingType::exception_types) {
    for (const ExceptionType& type : value.types) {
      value.type_names.push_back(file_name_of(type, catalog));
    }
  }
  return detail::format_value(value, setting.choice_name);
}

// What code levels a registry cannot run again did to a policy (call-site attributes and
// instance settings, whose functions belong to the caller): the settings they changed.
using Delta = std::vector<std::pair<std::size_t, detail::SettingValue>>;

// One code level of a resolution: a function to run (at creation), or what it did (later).
template <class Config>
struct CodeLevel {
  const std::function<void(Config&)>* setup = nullptr;
  const Delta* delta = nullptr;
};

// Where every setting of one resolution came from, and what its untouchable levels did.
struct Trace {
  std::vector<ResolvedSetting> settings;
  Delta site;
  Delta instance;
};

// What one kind's configuration says: the code's defaults and named configs, and the external
// file's lines of that kind. Copied for a reconfiguration, which checks a new one in full before
// the registry takes it.
template <class Kind>
struct Layers {
  using Config = typename Kind::Config;
  using Setup = std::function<void(Config&)>;

  const CodeSettings<Kind>* code = nullptr;
  const ExceptionCatalog* catalog = nullptr;
  std::vector<ConfigEntry> entries;

  static std::string label() { return std::string(Kind::kNames.display); }

  // Every line's value on its own (a bad line is dropped, so that each mistake is reported
  // once), then every complete config: the defaults, each named config, and each instance the
  // file names (over the defaults). In the order build() always checked them.
  void validate(Errors& errors) {
    std::erase_if(entries, [&](const ConfigEntry& entry) {
      Config scratch;
      return !collect(errors, [&] { apply_entry<Kind>(entry, scratch, *catalog); });
    });
    collect(errors, [&] {
      const Config defaults = resolve("", {}, {}, "", nullptr);
      with_context(scope_context(ConfigScope::defaults, "", label() + " defaults"),
                   [&] { defaults.validate(); });
    });
    for (const std::string& name : named_configs()) {
      collect(errors, [&] {
        const Config config = resolve(name, {}, {}, "", nullptr);
        with_context(scope_context(ConfigScope::named, name, named_context(name)),
                     [&] { config.validate(); });
      });
    }
    for (const std::string& id : file_instances()) {
      collect(errors, [&] {
        const Config config = resolve("", {}, {}, id, nullptr);
        with_context(scope_context(ConfigScope::instance, id,
                                   label() + " '" + id + "' (instances." + id + "." +
                                       std::string(Kind::kNames.file) + ")"),
                     [&] { config.validate(); });
      });
    }
  }

  // A complete config's context, named after the scope's first line in the file: that is where
  // an operator looks.
  std::string scope_context(ConfigScope scope, std::string_view name, std::string what) const {
    for (const ConfigEntry& entry : entries) {
      if (entry.scope == scope && entry.scope_name == name) return line_of(entry) + ": " + what;
    }
    return what;
  }

  std::string named_context(std::string_view name) const {
    return "named config '" + std::string(name) + "' of " + label();
  }

  bool has_named_config(std::string_view name) const {
    if (code->named.count(name)) return true;
    return std::any_of(entries.begin(), entries.end(), [&](const ConfigEntry& e) {
      return e.scope == ConfigScope::named && e.scope_name == name;
    });
  }

  std::vector<std::string> named_configs() const {
    std::vector<std::string> names;
    for (const auto& [name, setups] : code->named) names.push_back(name);
    for (const ConfigEntry& e : entries) {
      if (e.scope == ConfigScope::named &&
          std::find(names.begin(), names.end(), e.scope_name) == names.end()) {
        names.push_back(e.scope_name);
      }
    }
    return names;
  }

  // The instance ids the file names, in file order.
  std::vector<std::string> file_instances() const {
    std::vector<std::string> ids;
    for (const ConfigEntry& e : entries) {
      if (e.scope == ConfigScope::instance &&
          std::find(ids.begin(), ids.end(), e.scope_name) == ids.end()) {
        ids.push_back(e.scope_name);
      }
    }
    return ids;
  }

  [[noreturn]] void unknown_named_config(std::string_view name, std::string_view method_id) const {
    const std::vector<std::string> known = named_configs();
    const std::vector<std::string_view> names(known.begin(), known.end());
    std::string message = "unknown named config " + detail::quote(name) + " of " + label() +
                          ", asked for by " + std::string(method_id);
    message += names.empty() ? std::string("; no named config is defined")
                             : "; did you mean '" + std::string(text::closest(name, names)) + "'?";
    throw ConfigException("R4C-REG-004", message);
  }

  // Built-in defaults < registry defaults < named config < call site < instance; at each
  // level the file after the code. With a trace, also where each setting came from.
  Config resolve(std::string_view named, CodeLevel<Config> site, CodeLevel<Config> instance,
                 std::string_view id, Trace* trace) const {
    const auto settings = Kind::settings();
    Config config;
    std::vector<std::optional<detail::SettingValue>> before;
    auto read_all = [&] {
      before.clear();
      for (const auto& setting : settings) {
        before.push_back(setting.read ? std::optional(setting.read(config)) : std::nullopt);
      }
    };
    // Marks what a code level changed as its own (a level that sets a value the levels below
    // gave already leaves it theirs: code cannot be asked what it set).
    auto mark_code = [&](SettingSource source, std::string_view origin, Delta* delta) {
      if (trace == nullptr) return;
      for (std::size_t i = 0; i < settings.size(); ++i) {
        if (!settings[i].read) continue;
        detail::SettingValue now = settings[i].read(config);
        if (before[i] && detail::same_value(*before[i], now)) continue;
        trace->settings[i].source = source;
        trace->settings[i].origin = std::string(origin);
        trace->settings[i].file_key.clear();
        if (delta != nullptr) delta->emplace_back(i, std::move(now));
      }
    };
    auto apply_file = [&](ConfigScope scope, std::string_view scope_name) {
      for (const ConfigEntry& entry : entries) {
        if (entry.scope != scope || entry.scope_name != scope_name) continue;
        apply_entry<Kind>(entry, config, *catalog);
        if (trace == nullptr) continue;
        for (std::size_t i = 0; i < settings.size(); ++i) {
          if (settings[i].key != entry.key) continue;
          trace->settings[i].source = SettingSource::file;
          trace->settings[i].origin = line_of(entry);
          trace->settings[i].file_key =
              scope_key(scope, scope_name) + "." + entry.kind + "." + entry.key;
        }
      }
    };
    auto run_code = [&](const CodeLevel<Config>& level, SettingSource source,
                        const std::string& context, Delta* delta) {
      if (trace != nullptr) read_all();
      if (level.setup && *level.setup) with_context(context, [&] { (*level.setup)(config); });
      if (level.delta) {
        for (const auto& entry : *level.delta) {
          // Not a structured binding: clang before 16 cannot capture one in a lambda.
          with_context(context, [&] { settings[entry.first].apply(config, entry.second); });
        }
      }
      mark_code(source, "", delta);
    };
    if (trace != nullptr) {
      trace->settings.assign(settings.size(), ResolvedSetting{});
      for (std::size_t i = 0; i < settings.size(); ++i) {
        trace->settings[i].key = std::string(settings[i].key);
      }
    }

    if (trace != nullptr) read_all();
    with_context(label() + " defaults", [&] {
      for (const auto& setup : code->defaults) setup(config);
    });
    mark_code(SettingSource::builder_defaults, "", nullptr);
    apply_file(ConfigScope::defaults, "");
    if (!named.empty()) {
      if (trace != nullptr) read_all();
      with_context(named_context(named), [&] {
        if (const auto found = code->named.find(named); found != code->named.end()) {
          for (const auto& setup : found->second) setup(config);
        }
      });
      mark_code(SettingSource::named_config, named, nullptr);
      apply_file(ConfigScope::named, named);
    }
    const std::string context = label() + " '" + std::string(id) + "'";
    run_code(site, SettingSource::call_site, context + ", call-site attributes",
             trace ? &trace->site : nullptr);
    run_code(instance, SettingSource::instance, context + ", instance settings",
             trace ? &trace->instance : nullptr);
    if (!id.empty()) apply_file(ConfigScope::instance, id);

    if (trace != nullptr) {
      for (std::size_t i = 0; i < settings.size(); ++i) {
        if (settings[i].read) trace->settings[i].value = formatted(settings[i], config, *catalog);
      }
    }
    return config;
  }
};

// One kind's configuration and instances in a built registry.
template <class Kind>
class PolicyTable {
 public:
  using Config = typename Kind::Config;
  using Policy = typename Kind::Policy;
  using Setup = std::function<void(Config&)>;

  // A policy resolved and checked, not yet created (`existing` when the id has one already).
  struct Prepared {
    std::string id;
    Config config;
    Policy* existing = nullptr;
    std::string named;
    Trace trace;
  };

  void configure(CodeSettings<Kind> code, const std::vector<ConfigEntry>& entries,
                 const ExceptionCatalog& catalog) {
    code_ = std::move(code);
    layers_ = layers_for(entries, catalog);
  }

  // This kind's lines of `entries`, over the code's settings.
  Layers<Kind> layers_for(const std::vector<ConfigEntry>& entries,
                          const ExceptionCatalog& catalog) const {
    Layers<Kind> layers{&code_, &catalog, {}};
    for (const ConfigEntry& entry : entries) {
      if (entry.kind == Kind::kNames.file) layers.entries.push_back(entry);
    }
    return layers;
  }

  void validate(Errors& errors) { layers_.validate(errors); }

  // Resolves and checks a policy without creating it: throws for an unknown named config,
  // invalid settings, or an id whose policy has other settings.
  Prepared prepare(std::string_view method_id, std::string_view name, std::string_view named,
                   const Setup* site, const Setup* instance) const {
    std::string id(name.empty() ? method_id : name);
    if (!named.empty() && !layers_.has_named_config(named)) {
      layers_.unknown_named_config(named, method_id);
    }
    Trace trace;
    Config resolved = layers_.resolve(named, {site, nullptr}, {instance, nullptr}, id, &trace);
    const std::string context = label() + " '" + id + "'";
    with_context(context, [&] { resolved.validate(); });

    std::lock_guard<std::mutex> lock(mutex_);
    Policy* existing = nullptr;
    if (const auto found = instances_.find(id); found != instances_.end()) {
      const Instance& instance_found = found->second;
      if (const auto difference = first_difference(instance_found.policy->config(), resolved)) {
        throw ConfigException(
            "R4C-REG-008", context + " is shared by " + instance_found.used_by.front() + " and " +
                               std::string(method_id) +
                               ", whose settings differ: " + difference->setting + " is " +
                               difference->first + " for the first and " + difference->second +
                               " for the second; give them the same settings or different names");
      }
      existing = instance_found.policy.get();
    }
    return Prepared{std::move(id), std::move(resolved), existing, std::string(named),
                    std::move(trace)};
  }

  // Creates what prepare() found missing; the caller holds the registry's creation mutex, so
  // nothing was created in between.
  Policy& commit(Prepared prepared, std::string_view method_id, Resources& resources) {
    if (prepared.existing != nullptr) {
      std::lock_guard<std::mutex> lock(mutex_);
      auto& users = instances_.find(prepared.id)->second.used_by;
      if (std::find(users.begin(), users.end(), method_id) == users.end()) {
        users.emplace_back(method_id);
      }
      return *prepared.existing;
    }
    auto policy = Kind::make(prepared.id, std::move(prepared.config), resources);
    Policy& created = *policy;
    std::lock_guard<std::mutex> lock(mutex_);
    instances_.emplace(std::move(prepared.id), Instance{std::move(policy),
                                                        {std::string(method_id)},
                                                        std::move(prepared.named),
                                                        std::move(prepared.trace.site),
                                                        std::move(prepared.trace.instance)});
    return created;
  }

  // A reconfiguration of this kind, checked in full and not applied yet: the new file lines,
  // and each live instance whose settings change with its new config.
  // Every setting of every kind changes on a live instance, so a reconfiguration refuses only
  // bad lines: a kind whose policy cannot take a new config would need refusals again.
  static_assert(
      requires(Policy & p, const Config& c) { p.reconfigure(c); },
      "every policy kind takes a new config live: give it reconfigure()");

  struct Plan {
    Layers<Kind> layers;
    std::vector<std::pair<Policy*, Config>> updates;
  };

  // Checks the new file lines (each bad one reported and dropped, as build() does) and
  // resolves every live instance over them; appends every mistake to `errors` and every
  // changed setting of a live instance to `changes`. Changes nothing.
  Plan plan(const std::vector<ConfigEntry>& entries, const ExceptionCatalog& catalog,
            Errors& errors, std::vector<SettingChange>& changes) const {
    Plan plan{layers_for(entries, catalog), {}};
    plan.layers.validate(errors);
    const auto settings = Kind::settings();
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& entry : instances_) {
      // Named references, not a structured binding: clang before 16 cannot capture one.
      const std::string& id = entry.first;
      const Instance& instance = entry.second;
      const std::string context = label() + " '" + id + "'";
      if (!instance.named.empty() && !plan.layers.has_named_config(instance.named)) {
        errors.push_back(
            ConfigException("R4C-REG-004", context + " was created with named config '" +
                                               instance.named +
                                               "', which the new configuration no longer "
                                               "defines; valid: keep that config's lines")
                .errors()
                .front());
        continue;
      }
      const Config& current = instance.policy->config();
      // The current config with every setting of the kind's table taken from the new
      // resolution: what code alone can set (functions, predicates, from any level) stays.
      Config next = current;
      if (!collect(errors, [&] {
            const Config resolved = plan.layers.resolve(instance.named, {nullptr, &instance.site},
                                                        {nullptr, &instance.instance}, id, nullptr);
            with_context(context, [&] {
              resolved.validate();
              for (const auto& setting : settings) {
                if (setting.read) setting.apply(next, setting.read(resolved));
              }
              next.validate();
            });
          })) {
        continue;
      }
      std::vector<SettingChange> changed;
      for (std::size_t i = 0; i < settings.size(); ++i) {
        if (!settings[i].read) continue;
        if (detail::same_value(settings[i].read(current), settings[i].read(next))) continue;
        SettingChange change{std::string(Kind::kNames.file), id, std::string(settings[i].key),
                             formatted(settings[i], current, catalog),
                             formatted(settings[i], next, catalog)};
        changed.push_back(std::move(change));
      }
      if (changed.empty()) continue;
      changes.insert(changes.end(), std::make_move_iterator(changed.begin()),
                     std::make_move_iterator(changed.end()));
      plan.updates.emplace_back(instance.policy.get(), std::move(next));
    }
    return plan;
  }

  // Applies a plan every kind's check passed; the caller holds the registry's creation mutex.
  void apply(Plan& plan) {
    layers_ = std::move(plan.layers);
    for (auto& update : plan.updates) update.first->reconfigure(update.second);
  }

  // Undoes a commit() of a transaction that failed later.
  void discard(std::string_view id) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (const auto found = instances_.find(id); found != instances_.end()) instances_.erase(found);
  }

  const Policy& find(std::string_view id) const {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto found = instances_.find(id);
    if (found == instances_.end()) {
      std::vector<std::string_view> ids;
      for (const auto& [known, instance] : instances_) ids.push_back(known);
      std::string message = "no " + label() + " has the id " + detail::quote(id);
      message += ids.empty() ? std::string("; none exists yet")
                             : "; did you mean '" + std::string(text::closest(id, ids)) + "'?";
      message +=
          " (a policy exists once its pipeline is built, its interface wrapped, or its "
          "*_policy function is called)";
      throw ConfigException("R4C-REG-009", message);
    }
    return *found->second.policy;
  }

  void snapshot_into(detail::SnapshotMap<Kind>& snapshots) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [id, instance] : instances_)
      snapshots.emplace(id, instance.policy->snapshot());
  }

  // describe(): the defaults, each named config, each instance (created or named by the
  // file). The caller holds the registry's creation mutex, so layers_ stays.
  void describe_into(std::vector<ResolvedPolicy>& defaults, std::vector<ResolvedPolicy>& named,
                     std::vector<ResolvedPolicy>& instances) const {
    auto resolved = [&](std::string scope, std::string id, auto&& resolve) {
      ResolvedPolicy policy;
      policy.kind = std::string(Kind::kNames.file);
      policy.scope = std::move(scope);
      policy.id = std::move(id);
      Trace trace;
      // A level that throws has been reported by build(); what came before it still shows.
      try {
        resolve(trace);
      } catch (const ConfigException&) {
      }
      policy.settings = std::move(trace.settings);
      return policy;
    };
    defaults.push_back(resolved(
        "defaults", "", [&](Trace& trace) { (void)layers_.resolve("", {}, {}, "", &trace); }));
    for (const std::string& name : layers_.named_configs()) {
      named.push_back(resolved("configs." + name, name, [&](Trace& trace) {
        (void)layers_.resolve(name, {}, {}, "", &trace);
      }));
    }
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& entry : instances_) {
      // Named references, not a structured binding: clang before 16 cannot capture one.
      const std::string& id = entry.first;
      const auto& instance = entry.second;
      ResolvedPolicy policy = resolved("instances." + id, id, [&](Trace& trace) {
        (void)layers_.resolve(instance.named, {nullptr, &instance.site},
                              {nullptr, &instance.instance}, id, &trace);
      });
      policy.live = true;
      policy.used_by = instance.used_by;
      policy.named_config = instance.named;
      instances.push_back(std::move(policy));
    }
    for (const std::string& id : layers_.file_instances()) {
      if (instances_.count(id)) continue;
      instances.push_back(resolved("instances." + id, id, [&](Trace& trace) {
        (void)layers_.resolve("", {}, {}, id, &trace);
      }));
    }
  }

 private:
  struct Instance {
    std::unique_ptr<Policy> policy;
    std::vector<std::string> used_by;  // the creator first
    std::string named;                 // its named config ("" for none)
    Delta site;                        // what its call-site attributes set
    Delta instance;                    // what its instance settings from code set
  };

  static std::string label() { return std::string(Kind::kNames.display); }

  CodeSettings<Kind> code_;
  Layers<Kind> layers_;
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
      : exception_types(std::move(catalog)), resources(std::move(options)) {
    detail::for_each_kind([&]<class Kind>(std::type_identity<Kind>) {
      table<Kind>().configure(std::move(std::get<CodeSettings<Kind>>(code)), entries,
                              exception_types);
    });
  }

  template <class Kind>
  PolicyTable<Kind>& table() noexcept {
    return std::get<PolicyTable<Kind>>(tables);
  }

  ExceptionCatalog exception_types;
  detail::AllKinds::Tuple<PolicyTable> tables;
  // Held while policies are resolved and created (cold), so that a pipeline's checks still
  // hold when it creates its policies.
  std::mutex creation_mutex;
  std::uint64_t reconfigurations = 0;  // under creation_mutex
  const std::shared_ptr<detail::EventHub<ReconfigurationEvent>> reconfigured =
      std::make_shared<detail::EventHub<ReconfigurationEvent>>("registry");
  // Last, so destroyed first: its executor finishes every attempt (which may call any policy
  // above) before a policy goes.
  Resources resources;
};

ResilienceRegistry::Builder::Builder() : settings_(std::make_unique<Settings>()) {}
ResilienceRegistry::Builder::Builder(Builder&&) noexcept = default;
ResilienceRegistry::Builder& ResilienceRegistry::Builder::operator=(Builder&&) noexcept = default;
ResilienceRegistry::Builder::~Builder() = default;

void ResilienceRegistry::Builder::add_setup(std::size_t kind, std::string* name, void* setup) {
  detail::visit_kind(kind, [&]<class Kind>(std::type_identity<Kind>) {
    auto& function = *static_cast<std::function<void(typename Kind::Config&)>*>(setup);
    auto& code = std::get<CodeSettings<Kind>>(settings_->code);
    if (name == nullptr) {
      code.defaults.push_back(std::move(function));
    } else {
      code.named[std::move(*name)].push_back(std::move(function));
    }
  });
}

ResilienceRegistry::Builder& ResilienceRegistry::Builder::adaptive_limit_defaults(
    AdaptiveLimitSetup setup) {
  return defaults<AdaptiveLimitKind>(std::move(setup));
}

ResilienceRegistry::Builder& ResilienceRegistry::Builder::adaptive_limit(std::string name,
                                                                         AdaptiveLimitSetup setup) {
  return named<AdaptiveLimitKind>(std::move(name), std::move(setup));
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
  Errors errors;
  for (const Settings::Source& source : settings_->sources) {
    const std::string text = source.file ? detail::read_config_file(*source.file) : source.text;
    const std::string origin = source.file ? source.file->string() : std::string("config text");
    auto parsed = detail::parse_config(text, origin, file_kinds(), errors);
    entries.insert(entries.end(), std::make_move_iterator(parsed.begin()),
                   std::make_move_iterator(parsed.end()));
  }
  Resources::Options options{settings_->clock ? settings_->clock : std::make_shared<SystemClock>(),
                             settings_->executor_threads, settings_->executor_queue};
  auto state = std::make_unique<State>(std::move(options), settings_->exception_types,
                                       settings_->code, entries);
  // Every mistake at once: the exception's code and first line are the first one's, as when
  // build() stopped there; errors() lists them all.
  detail::for_each_kind(
      [&]<class Kind>(std::type_identity<Kind>) { state->table<Kind>().validate(errors); });
  if (!errors.empty()) throw ConfigException(std::move(errors));
  return ResilienceRegistry(std::move(state));
}

// ---- registry ----------------------------------------------------------------------------

ResilienceRegistry::Builder ResilienceRegistry::builder() { return Builder(); }

ResilienceRegistry::ResilienceRegistry(std::unique_ptr<State> state) : state_(std::move(state)) {}
ResilienceRegistry::ResilienceRegistry(ResilienceRegistry&&) noexcept = default;
ResilienceRegistry& ResilienceRegistry::operator=(ResilienceRegistry&&) noexcept = default;
ResilienceRegistry::~ResilienceRegistry() = default;

void* ResilienceRegistry::find_or_create(std::size_t kind, std::string_view method_id,
                                         std::string_view name, std::string_view config,
                                         const void* site, const void* instance) {
  return detail::visit_kind(kind, [&]<class Kind>(std::type_identity<Kind>) -> void* {
    using Setup = std::function<void(typename Kind::Config&)>;
    PolicyTable<Kind>& table = state_->table<Kind>();
    std::lock_guard<std::mutex> lock(state_->creation_mutex);
    auto prepared = table.prepare(method_id, name, config, static_cast<const Setup*>(site),
                                  static_cast<const Setup*>(instance));
    return &table.commit(std::move(prepared), method_id, state_->resources);
  });
}

const void* ResilienceRegistry::find(std::size_t kind, std::string_view id) const {
  return detail::visit_kind(kind, [&]<class Kind>(std::type_identity<Kind>) -> const void* {
    return &state_->table<Kind>().find(id);
  });
}

std::array<void*, detail::kKindCount> ResilienceRegistry::find_or_create_all(
    std::string_view owner, std::string_view id, const StageRequests& requests) {
  std::array<void*, detail::kKindCount> policies{};
  std::lock_guard<std::mutex> lock(state_->creation_mutex);
  // Every check first: nothing is created unless every policy can be.
  auto prepared = [&]<std::size_t... I>(std::index_sequence<I...>) {
    return std::make_tuple([&] {
      using Kind = detail::KindAt<I>;
      using Setup = std::function<void(typename Kind::Config&)>;
      using Prepared = typename PolicyTable<Kind>::Prepared;
      const StageRequest& request = requests[I];
      if (!request.wanted) return std::optional<Prepared>();
      return std::optional<Prepared>(state_->table<Kind>().prepare(
          owner, id, request.config, nullptr, static_cast<const Setup*>(request.setup)));
    }()...);
  }
  (std::make_index_sequence<detail::kKindCount>{});
  // Then every creation; one that fails (out of memory, no thread for the executor) takes the
  // ones before it back with it.
  std::vector<std::size_t> created;
  try {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (
          [&] {
            using Kind = detail::KindAt<I>;
            auto& slot = std::get<I>(prepared);
            if (!slot) return;
            const bool fresh = slot->existing == nullptr;
            policies[I] = &state_->table<Kind>().commit(std::move(*slot), owner, state_->resources);
            if (fresh) created.push_back(I);
          }(),
          ...);
    }
    (std::make_index_sequence<detail::kKindCount>{});
  } catch (...) {
    for (std::size_t kind : created) {
      detail::visit_kind(
          kind, [&]<class Kind>(std::type_identity<Kind>) { state_->table<Kind>().discard(id); });
    }
    throw;
  }
  return policies;
}

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
  return *static_cast<AdaptiveLimit*>(find_or_create(
      detail::kKindIndex<AdaptiveLimitKind>, method_id, name, config, &apply_site, &instance));
}

RegistrySnapshot ResilienceRegistry::snapshot() const {
  RegistrySnapshot snapshot;
  detail::for_each_kind([&]<class Kind>(std::type_identity<Kind>) {
    state_->table<Kind>().snapshot_into(std::get<detail::kKindIndex<Kind>>(snapshot.snapshots_));
  });
  return snapshot;
}

ResolvedConfiguration ResilienceRegistry::describe() const {
  std::vector<ResolvedPolicy> defaults;
  std::vector<ResolvedPolicy> named;
  std::vector<ResolvedPolicy> instances;
  {
    std::lock_guard<std::mutex> lock(state_->creation_mutex);
    detail::for_each_kind([&]<class Kind>(std::type_identity<Kind>) {
      state_->table<Kind>().describe_into(defaults, named, instances);
    });
  }
  // By id, each id's policies in pipeline order (the kinds' order, kept by a stable sort).
  std::stable_sort(instances.begin(), instances.end(),
                   [](const ResolvedPolicy& a, const ResolvedPolicy& b) { return a.id < b.id; });
  ResolvedConfiguration resolved;
  resolved.policies = std::move(defaults);
  for (auto* group : {&named, &instances}) {
    resolved.policies.insert(resolved.policies.end(), std::make_move_iterator(group->begin()),
                             std::make_move_iterator(group->end()));
  }
  return resolved;
}

std::string_view to_string(SettingSource source) noexcept {
  // In SettingSource's order.
  static constexpr std::string_view kNames[] = {"default",   "builder defaults", "named config",
                                                "call site", "instance",         "file"};
  const auto index = static_cast<std::size_t>(source);
  return index < std::size(kNames) ? kNames[index] : kNames[0];
}

std::vector<const ResolvedPolicy*> ResolvedConfiguration::instance(std::string_view id) const {
  std::vector<const ResolvedPolicy*> found;
  for (const ResolvedPolicy& policy : policies) {
    if (policy.scope.starts_with("instances.") && policy.id == id) found.push_back(&policy);
  }
  return found;
}

namespace {

std::string source_text(const ResolvedSetting& setting) {
  switch (setting.source) {
    case SettingSource::file:
      return setting.origin + " " + setting.file_key;
    case SettingSource::named_config:
      return "named config '" + setting.origin + "' (code)";
    case SettingSource::builder_defaults:
    case SettingSource::call_site:
    case SettingSource::instance:
      return std::string(to_string(setting.source)) + " (code)";
    case SettingSource::default_value:
      break;
  }
  return "default";
}

void json_string(std::string& out, std::string_view text) {
  constexpr std::string_view kHex = "0123456789abcdef";
  out += '"';
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (byte < 0x20) {
      out += "\\u00";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    } else {
      out += c;
    }
  }
  out += '"';
}

}  // namespace

std::string ResolvedConfiguration::text() const {
  std::string out;
  for (const ResolvedPolicy& policy : policies) {
    if (!out.empty()) out += '\n';
    out += "# " + policy.kind + " " + policy.scope;
    if (policy.scope.starts_with("instances.")) {
      out += policy.live ? ": live" : ": not created yet (resolved over the defaults)";
      if (!policy.used_by.empty()) {
        out += ", used by ";
        for (std::size_t i = 0; i < policy.used_by.size(); ++i) {
          out += (i ? ", " : "") + policy.used_by[i];
        }
      }
      if (!policy.named_config.empty()) out += ", named config '" + policy.named_config + "'";
    }
    out += '\n';
    std::vector<std::string> lines;
    std::size_t width = 0;
    for (const ResolvedSetting& setting : policy.settings) {
      lines.push_back(policy.scope + "." + policy.kind + "." + setting.key + " = " + setting.value);
      width = std::max(width, lines.back().size());
    }
    for (std::size_t i = 0; i < lines.size(); ++i) {
      out += lines[i] + std::string(width - lines[i].size(), ' ') + "  # " +
             source_text(policy.settings[i]) + '\n';
    }
  }
  return out;
}

std::string ResolvedConfiguration::json() const {
  // `"name":"value"` after a comma unless it is the object's first member.
  auto member = [](std::string& out, std::string_view name, std::string_view value) {
    if (out.back() != '{') out += ',';
    json_string(out, name);
    out += ':';
    json_string(out, value);
  };
  std::string out = "{\"policies\":[";
  for (std::size_t p = 0; p < policies.size(); ++p) {
    const ResolvedPolicy& policy = policies[p];
    out += p ? ",\n{" : "\n{";
    member(out, "kind", policy.kind);
    member(out, "scope", policy.scope);
    member(out, "id", policy.id);
    out += policy.live ? ",\"live\":true" : ",\"live\":false";
    out += ",\"usedBy\":[";
    for (std::size_t i = 0; i < policy.used_by.size(); ++i) {
      if (i) out += ',';
      json_string(out, policy.used_by[i]);
    }
    out += ']';
    member(out, "namedConfig", policy.named_config);
    out += ",\"settings\":[";
    for (std::size_t i = 0; i < policy.settings.size(); ++i) {
      const ResolvedSetting& setting = policy.settings[i];
      out += i ? ",{" : "{";
      member(out, "key", setting.key);
      member(out, "value", setting.value);
      member(out, "source", to_string(setting.source));
      member(out, "origin", setting.origin);
      member(out, "fileKey", setting.file_key);
      out += '}';
    }
    out += "]}";
  }
  out += "\n]}\n";
  return out;
}

std::vector<SettingChange> ResilienceRegistry::reconfigure(std::string_view text) {
  return reconfigure_with(std::string(text), "config text");
}

std::vector<SettingChange> ResilienceRegistry::reconfigure_file(const std::filesystem::path& path) {
  return reconfigure_with(detail::read_config_file(path), path.string());
}

ConfigFileWatch ResilienceRegistry::watch_file(std::filesystem::path path) {
  std::string text = detail::read_config_file(path);
  return ConfigFileWatch(*this, std::move(path), std::move(text));
}

std::optional<std::vector<SettingChange>> ConfigFileWatch::poll() {
  std::string text = detail::read_config_file(path_);
  if (text == seen_) return std::nullopt;
  seen_ = std::move(text);  // a bad text is reported once, not at every poll
  return registry_->reconfigure_with(seen_, path_.string());
}

Subscription ResilienceRegistry::on_reconfiguration(
    std::function<void(const ReconfigurationEvent&)> listener) const {
  return state_->reconfigured->subscribe(std::move(listener));
}

namespace {
// The registries whose reconfigurations this thread runs, innermost first: a limit-change
// listener one of them calls that reconfigures any of them would wait for a creation lock
// this thread holds (registry A's listener may reconfigure B, whose listener then reconfigures
// A: a chain, not just the innermost).
class Reconfiguring : public detail::ThreadFrame<Reconfiguring> {
 public:
  explicit Reconfiguring(const void* registry) noexcept : ThreadFrame(registry) {}
};
}  // namespace

std::vector<SettingChange> ResilienceRegistry::reconfigure_with(const std::string& text,
                                                                const std::string& origin) {
  if (Reconfiguring::of(state_.get()) != nullptr) {
    throw ConfigException("R4C-REG-013",
                          "reconfigure() of " + origin +
                              " was called while this thread reconfigures the same registry "
                              "(from a listener of a policy it changes); valid: reconfigure "
                              "from on_reconfiguration's listener, which runs once it is done");
  }
  Errors errors;
  const std::vector<ConfigEntry> entries = detail::parse_config(text, origin, file_kinds(), errors);
  std::vector<SettingChange> changes;
  std::uint64_t reconfiguration = 0;
  {
    // No policy is created, and no other reconfiguration runs, between the check and the end.
    std::lock_guard<std::mutex> lock(state_->creation_mutex);
    const Reconfiguring reconfiguring(state_.get());
    auto plans = [&]<std::size_t... I>(std::index_sequence<I...>) {
      // A braced list: every kind is checked in pipeline order, as build() does.
      return std::tuple<typename PolicyTable<detail::KindAt<I>>::Plan...>{
          state_->table<detail::KindAt<I>>().plan(entries, state_->exception_types, errors,
                                                  changes)...};
    }
    (std::make_index_sequence<detail::kKindCount>{});
    if (!errors.empty()) throw ConfigException(std::move(errors));
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (state_->table<detail::KindAt<I>>().apply(std::get<I>(plans)), ...);
    }
    (std::make_index_sequence<detail::kKindCount>{});
    reconfiguration = ++state_->reconfigurations;
  }
  // Without the lock: a listener may call the registry.
  state_->reconfigured->publish(ReconfigurationEvent{origin, reconfiguration, changes});
  return changes;
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
