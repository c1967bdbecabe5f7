// SPDX-License-Identifier: Apache-2.0
#include "scenario.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <sstream>
#include <system_error>

#include "common.hpp"
#include "r4c/adaptive_limit.hpp"
#include "r4c/bulkhead.hpp"
#include "r4c/detail/config_file.hpp"
#include "r4c/errors.hpp"
#include "r4c/text.hpp"
#include "r4c/throttle.hpp"
#include "r4c/timeout.hpp"

namespace r4c::sim {

// ---- the model ---------------------------------------------------------------------------------

ServerState ServerSpec::state_at(Nanos t) const {
  ServerState state{workers, 1.0, Nanos(0)};
  for (const ServerChange& change : changes) {
    if (change.at > t) break;
    if (change.workers) state.workers = *change.workers;
    if (change.service_scale) state.service_scale = *change.service_scale;
    if (change.extra_latency) state.extra_latency = *change.extra_latency;
  }
  return state;
}

double ServerSpec::contention_at(int busy) const noexcept {
  if (knee <= 0 || busy <= knee) return 1.0;
  return 1.0 + contention * static_cast<double>(busy - knee);
}

double ServerSpec::capacity_at(Nanos t) const {
  const ServerState state = state_at(t);
  const double service_s = std::chrono::duration<double>(service.mean).count() *
                           state.service_scale * service.tail_mean();
  const int best = right_concurrency_at(t);
  return static_cast<double>(best) / (service_s * contention_at(best));
}

int ServerSpec::right_concurrency_at(Nanos t) const {
  const int workers_now = state_at(t).workers;
  if (knee <= 0) return workers_now;
  // Calls in service n serve n / contention_at(n) calls per mean service time; the best n.
  int best = 1;
  double best_rate = 0.0;
  for (int n = 1; n <= workers_now; ++n) {
    const double rate = static_cast<double>(n) / contention_at(n);
    if (rate > best_rate * (1.0 + 1e-12)) {
      best = n;
      best_rate = rate;
    }
  }
  return best;
}

namespace {
constexpr std::string_view kNoPolicyName = "none";
}  // namespace

std::string_view GroupSpec::policy_name() const noexcept {
  if (policy == kAdaptiveLimit) return to_string(limit.algorithm());
  if (policy >= detail::kKindCount) return kNoPolicyName;
  return detail::AllKinds::names[policy].cpp;
}

double GroupSpec::rate_at(Nanos t) const {
  double current = rate;
  for (const RateChange& change : changes) {
    if (change.at > t) break;
    current = change.rate;
  }
  return current;
}

std::vector<Nanos> Scenario::change_times() const {
  std::vector<Nanos> times;
  for (const ServerChange& change : server.changes) times.push_back(change.at);
  for (const GroupSpec& group : groups) {
    for (const RateChange& change : group.changes) times.push_back(change.at);
  }
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  times.erase(std::remove_if(times.begin(), times.end(), [](Nanos t) { return t <= Nanos(0); }),
              times.end());
  return times;
}

double Scenario::load_on_server_of(int group, Nanos t) const {
  double load = 0.0;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (server_of(static_cast<int>(g)) == server_of(group)) load += groups[g].rate_at(t);
  }
  return load;
}

// ---- reading the file --------------------------------------------------------------------------

namespace {

constexpr std::string_view kDurationForm = R"(a duration such as "250ms" or "2m")";
constexpr Nanos kMaxDuration = std::chrono::hours(24);

// A node's value as it would be written in the file.
std::string show(const toml::node& node) {
  if (const auto* s = node.as_string()) return "\"" + s->get() + "\"";
  if (const auto* i = node.as_integer()) return std::to_string(i->get());
  if (const auto* f = node.as_floating_point()) return shortest(f->get());
  if (const auto* b = node.as_boolean()) return b->get() ? "true" : "false";
  if (node.is_table()) return "a table";
  if (node.is_array()) return "an array";
  return "a date or time";
}

std::string join(const std::vector<std::string_view>& names) {
  std::string text;
  for (std::string_view name : names) {
    if (!text.empty()) text += ", ";
    text += name;
  }
  return text;
}

// Collects every mistake with its line; the scenario is usable only when there is none.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  void error(const toml::source_region& where, const std::string& message) {
    errors_.push_back(
        {where.begin.line, source_ + ":" + std::to_string(where.begin.line) + ": " + message});
  }
  void bad(const toml::node& node, const std::string& key, std::string_view expected) {
    error(node.source(), key + " is " + show(node) + "; expected " + std::string(expected));
  }
  bool ok() const noexcept { return errors_.empty(); }
  // In the file's order (a table's keys are read in their name's order).
  [[noreturn]] void throw_errors() {
    std::stable_sort(errors_.begin(), errors_.end(),
                     [](const Error& a, const Error& b) { return a.line < b.line; });
    std::string text;
    for (const Error& e : errors_) {
      if (!text.empty()) text += "\n";
      text += e.message;
    }
    throw InputError(text);
  }

  // A field of a table: its key and what reads it.
  struct Field {
    std::string_view key;
    std::function<void(const toml::node&, const std::string& path)> read;
  };

  // Reads every key of `table` with its field; a key no field has is reported with the closest.
  void read_table(const toml::table& table, const std::string& path,
                  const std::vector<Field>& fields) {
    for (auto&& [key, node] : table) {
      const std::string name(key.str());
      const std::string full = path.empty() ? name : path + "." + name;
      auto field =
          std::find_if(fields.begin(), fields.end(), [&](const Field& f) { return f.key == name; });
      if (field != fields.end()) {
        field->read(node, full);
        continue;
      }
      std::vector<std::string_view> valid;
      for (const Field& f : fields) valid.push_back(f.key);
      const std::string where = path.empty() ? "at the top level" : "in " + path;
      error(key.source(), "unknown key \"" + name + "\" " + where + "; did you mean \"" +
                              std::string(r4c::text::closest(name, valid)) +
                              "\"? (valid: " + join(valid) + ")");
    }
  }

  void missing(const toml::node& table, const std::string& path, std::string_view key,
               std::string_view expected) {
    const std::string where = path.empty() ? "the file" : path;
    error(table.source(),
          where + " has no " + std::string(key) + "; expected " + std::string(expected));
  }

  std::optional<std::int64_t> integer(const toml::node& node, const std::string& key,
                                      std::int64_t min, std::int64_t max) {
    const auto* value = node.as_integer();
    if (value == nullptr || value->get() < min || value->get() > max) {
      bad(node, key, "an integer from " + std::to_string(min) + " to " + std::to_string(max));
      return std::nullopt;
    }
    return value->get();
  }

  // A field whose value is an integer in [min, max] (an int's worth), read into `into`.
  Field int_field(std::string_view key, std::int64_t min, std::int64_t max, int& into) {
    return {key, [this, min, max, &into](const toml::node& node, const std::string& path) {
              if (auto n = integer(node, path, min, max)) into = static_cast<int>(*n);
            }};
  }

  // A number (integer or float) in [min, max], or (min, max] when min_open.
  std::optional<double> number(const toml::node& node, const std::string& key, double min,
                               double max, bool min_open, std::string_view expected) {
    double x = 0.0;
    if (const auto* i = node.as_integer()) {
      x = static_cast<double>(i->get());
    } else if (const auto* f = node.as_floating_point()) {
      x = f->get();
    } else {
      bad(node, key, expected);
      return std::nullopt;
    }
    if (!std::isfinite(x) || x > max || x < min || (min_open && x == min)) {
      bad(node, key, expected);
      return std::nullopt;
    }
    return x;
  }

  // The library's duration grammar and its message (R4C-ATR-001): "1.5s" is as wrong here as
  // in a config file. A value that is no string is handed over as written, which never parses
  // (a TOML number has no unit), so it gets the same message.
  std::optional<Nanos> duration(const toml::node& node, const std::string& key) {
    const auto* text = node.as_string();
    try {
      return r4c::detail::parse_duration(text != nullptr ? text->get() : show(node), key);
    } catch (const ConfigException& e) {
      error(node.source(), e.what());
      return std::nullopt;
    }
  }

  // A duration in [min, max]: the bounds are the simulator's own.
  std::optional<Nanos> duration(const toml::node& node, const std::string& key, Nanos min,
                                Nanos max) {
    const std::optional<Nanos> value = duration(node, key);
    if (value && (*value < min || *value > max)) {
      bad(node, key,
          "a duration from " + text::format_duration(min) + " to " + text::format_duration(max));
      return std::nullopt;
    }
    return value;
  }

  std::optional<std::string> string(const toml::node& node, const std::string& key,
                                    std::string_view expected) {
    const auto* text = node.as_string();
    if (text == nullptr) {
      bad(node, key, expected);
      return std::nullopt;
    }
    return text->get();
  }

  // A value of an enum of the vocabulary, by name (r4c::from_string: case ignored).
  template <NamedEnum E>
  std::optional<E> choice(const toml::node& node, const std::string& key) {
    if (const auto* text = node.as_string()) {
      if (const std::optional<E> value = from_string<E>(text->get())) return value;
    }
    std::vector<std::string_view> names;
    for (const EnumName<E>& entry : enum_names(E{})) names.push_back(entry.name);
    bad(node, key, "one of " + join(names));
    return std::nullopt;
  }

  std::optional<bool> boolean(const toml::node& node, const std::string& key) {
    const auto* value = node.as_boolean();
    if (value == nullptr) {
      bad(node, key, "true or false");
      return std::nullopt;
    }
    return value->get();
  }

  const toml::table* table(const toml::node& node, const std::string& key) {
    const auto* t = node.as_table();
    if (t == nullptr) bad(node, key, "a table");
    return t;
  }

  // An array of tables ([[key]]); each element is passed to `each` with its path.
  void tables(const toml::node& node, const std::string& key,
              const std::function<void(const toml::table&, const std::string&)>& each) {
    const auto* array = node.as_array();
    if (array == nullptr) {
      bad(node, key, "an array of tables ([[" + key + "]])");
      return;
    }
    std::size_t index = 0;
    for (const toml::node& element : *array) {
      ++index;
      const std::string path = key + "[" + std::to_string(index) + "]";
      if (const auto* t = element.as_table()) {
        each(*t, path);
      } else {
        bad(element, path, "a table");
      }
    }
  }

 private:
  struct Error {
    std::uint32_t line;
    std::string message;
  };
  std::string source_;
  std::vector<Error> errors_;
};

// A name that can go into a CSV field, a file name and a gnuplot title as it is.
bool is_plain_name(std::string_view name) {
  return !name.empty() && name.size() <= 64 && name != "." && name != ".." &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '_' || c == '.';
         });
}

// Sets `name` to the plain name (see is_plain_name) at `key`, or leaves it once what is wrong is
// reported; `use` says in the message what the name is for.
void read_plain_name(Reader& reader, const toml::node& node, const std::string& key,
                     std::string_view example, std::string_view use, std::string& name) {
  std::optional<std::string> text = reader.string(node, key, example);
  if (text && !is_plain_name(*text)) {
    reader.bad(node, key, "1 to 64 letters, digits, '-', '_' or '.' (" + std::string(use) + ")");
  } else if (text) {
    name = std::move(*text);
  }
}

// A field whose value is a plain name, read into `name` (see read_plain_name).
Reader::Field plain_name_field(Reader& reader, std::string_view key, std::string_view example,
                               std::string_view use, std::string& name) {
  return {key, [&reader, example, use, &name](const toml::node& node, const std::string& path) {
            read_plain_name(reader, node, path, example, use, name);
          }};
}

constexpr std::int64_t kMaxWorkers = 100000;
constexpr double kMaxRate = 1e6;
constexpr double kMaxScale = 1000.0;
constexpr std::int64_t kMaxClients = 1000;

// The settings a group's policy decides itself, which its limit table does not take: the
// algorithm (the policy names it), the drops (the simulator's timeouts) and `enabled`.
constexpr std::string_view kSetByThePolicy[] = {"algorithm", "drop_on", "enabled"};

// The algorithms a limit-table key tunes, when not all of them.
// WORKAROUND (remove when the adaptive limit's descriptor says which algorithm a setting
// tunes): the library applies them whatever the algorithm, but a key the algorithm ignores is
// a mistake in a scenario worth reporting.
std::vector<LimitAlgorithm> algorithms_of(std::string_view key) {
  using enum LimitAlgorithm;
  if (key == "smoothing") return {gradient2, vegas};
  if (key == "rtt_tolerance" || key == "long_window" || key == "queue_size") return {gradient2};
  if (key == "backoff_ratio") return {aimd, delay_target};  // the cut after a drop
  if (key == "probe_multiplier" || key == "alpha" || key == "beta") return {vegas};
  return {};
}

std::string join_algorithms(const std::vector<LimitAlgorithm>& algorithms) {
  std::string text;
  for (std::size_t i = 0; i < algorithms.size(); ++i) {
    if (i > 0) text += i + 1 == algorithms.size() ? " and " : ", ";
    text += to_string(algorithms[i]);
  }
  return text;
}

// A TOML value as the text the library's parser reads, when its TOML type suits the setting's
// type (a duration is a string, a number an integer or a float, ...).
std::optional<std::string> setting_text(const toml::node& node, detail::SettingType type) {
  switch (type) {
    case detail::SettingType::integer:
      if (const auto* i = node.as_integer()) return std::to_string(i->get());
      return std::nullopt;
    case detail::SettingType::number:
      if (const auto* i = node.as_integer()) return std::to_string(i->get());
      if (const auto* f = node.as_floating_point()) return shortest(f->get());
      return std::nullopt;
    case detail::SettingType::boolean:
      if (const auto* b = node.as_boolean()) return b->get() ? "true" : "false";
      return std::nullopt;
    case detail::SettingType::duration:
    case detail::SettingType::choice:
    case detail::SettingType::exception_types:
    case detail::SettingType::named_numbers:
      if (const auto* text = node.as_string()) return text->get();
      return std::nullopt;
  }
  return std::nullopt;
}

// A policy's table (`limit`, `throttle`): every setting of the kind's descriptor but `skipped`,
// parsed by the library's vocabulary and applied by the library's setter, so the library
// judges every value and its message (with its R4C code) is what the user reads. `check` may
// refuse a key for the group (returns false after reporting); `types` resolves the exception
// names of an exception_types setting (returns false after reporting).
template <class Kind>
void read_settings(
    Reader& reader, const toml::table& table, const std::string& path,
    typename Kind::Config& config, std::span<const std::string_view> skipped,
    const std::function<bool(std::string_view name, const toml::node&, const std::string&)>& check,
    const std::function<bool(detail::SettingValue&, const toml::node&, const std::string&)>&
        types) {
  std::vector<Reader::Field> fields;
  for (const auto& setting : Kind::settings()) {
    if (std::find(skipped.begin(), skipped.end(), setting.name) != skipped.end()) continue;
    fields.push_back(Reader::Field{
        setting.name, [&reader, &config, &setting, &check, &types](const toml::node& node,
                                                                   const std::string& key) {
          const std::optional<std::string> text = setting_text(node, setting.type);
          std::optional<detail::SettingValue> value =
              text ? detail::parse(setting, *text) : std::nullopt;
          if (!value) {
            if (setting.type == detail::SettingType::duration && text) {
              reader.duration(node, key);  // the library's grammar and message
            } else {
              reader.bad(node, key, detail::expected(setting));
            }
            return;
          }
          if (check && !check(setting.name, node, key)) return;
          if (setting.type == detail::SettingType::exception_types && !types(*value, node, key))
            return;
          try {
            setting.apply(config, *value);
          } catch (const ConfigException& e) {
            reader.error(node.source(), key + ": " + e.what());
          }
        }});
  }
  reader.read_table(table, path, fields);
}

// The limit table: the adaptive limit's settings but those the policy sets.
void read_limit(Reader& reader, const toml::table& table, const std::string& path, GroupSpec& group,
                const std::string& policy) {
  read_settings<AdaptiveLimitKind>(
      reader, table, path, group.limit, kSetByThePolicy,
      [&reader, &group, &policy](std::string_view name, const toml::node& node,
                                 const std::string& key) {
        const std::vector<LimitAlgorithm> only = algorithms_of(name);
        if (only.empty() ||
            std::find(only.begin(), only.end(), group.limit.algorithm()) != only.end()) {
          return true;
        }
        reader.error(node.source(), key + " applies to " + join_algorithms(only) +
                                        " only (this group's policy is " + policy + ")");
        return false;
      },
      {});
}

// The failures a scenario's calls end with, by the names a throttle's refused_on takes: the
// server's refusal past queue_limit (a 503, std::system_error) and the group's timeout.
struct RefusalOutcome {
  std::string_view name;
  ExceptionType type;
};
const std::array<RefusalOutcome, 2>& refusal_outcomes() {
  static const std::array<RefusalOutcome, 2> kOutcomes = {
      RefusalOutcome{"refused", ExceptionType::of<std::system_error>()},
      RefusalOutcome{"timeout", ExceptionType::of<CallTimeoutException>()}};
  return kOutcomes;
}

// The throttle table: the throttle's settings (k, window, refused_on, seed), refused_on naming
// the outcomes above.
void read_throttle(Reader& reader, const toml::table& table, const std::string& path,
                   GroupSpec& group) {
  read_settings<ThrottleKind>(
      reader, table, path, group.throttle, {}, {},
      [&reader](detail::SettingValue& value, const toml::node& node, const std::string& key) {
        std::vector<std::string_view> valid;
        for (const RefusalOutcome& outcome : refusal_outcomes()) valid.push_back(outcome.name);
        for (const std::string& name : value.type_names) {
          const auto found =
              std::find_if(refusal_outcomes().begin(), refusal_outcomes().end(),
                           [&name](const RefusalOutcome& outcome) { return outcome.name == name; });
          if (found == refusal_outcomes().end()) {
            reader.error(node.source(), key + " names \"" + name + "\"; expected outcomes among " +
                                            join(valid) + " (did you mean \"" +
                                            std::string(text::closest(name, valid)) + "\"?)");
            return false;
          }
          value.types.push_back(found->type);
        }
        return true;
      });
}

// The names of the adaptive limit's algorithms, in the library's vocabulary (aliases left out).
std::vector<std::string_view> algorithm_names() {
  std::vector<std::string_view> names;
  for (const EnumName<LimitAlgorithm>& entry : enum_names(LimitAlgorithm{})) {
    if (to_string(entry.value) == entry.name) names.push_back(entry.name);
  }
  return names;
}

// What a group's `policy` may name: an algorithm of the adaptive limit, another simulated kind
// by its name in the library's list, none.
std::vector<std::string_view> policy_names() {
  std::vector<std::string_view> names = algorithm_names();
  for (const PolicyKind kind : kSimulatedKinds) {
    if (kind != kAdaptiveLimit) names.push_back(detail::AllKinds::names[kind].cpp);
  }
  names.push_back(kNoPolicyName);
  return names;
}

// The group's policy; an algorithm's name means the adaptive limit with that algorithm, read
// by the library's from_string. Reports and returns false when it names none.
bool read_policy(Reader& reader, const toml::node& node, const std::string& key, GroupSpec& group) {
  const auto* text = node.as_string();
  if (text != nullptr) {
    if (const std::optional<LimitAlgorithm> algorithm = from_string<LimitAlgorithm>(text->get())) {
      group.policy = kAdaptiveLimit;
      group.limit.algorithm(*algorithm);
      return true;
    }
    if (text->get() == kNoPolicyName) {
      group.policy = kNoPolicy;
      return true;
    }
    const std::optional<std::size_t> kind = detail::find_kind(&KindNames::cpp, text->get());
    if (kind && *kind != kAdaptiveLimit &&
        std::find(std::begin(kSimulatedKinds), std::end(kSimulatedKinds), *kind) !=
            std::end(kSimulatedKinds)) {
      group.policy = *kind;
      return true;
    }
  }
  reader.bad(node, key, "one of " + join(policy_names()));
  return false;
}

void read_group(Reader& reader, const toml::table& table, const std::string& path, GroupSpec& group,
                Nanos duration) {
  bool has_name = false;
  bool has_rate = false;
  bool has_policy = false;
  const toml::table* limit_table = nullptr;
  std::string limit_path;
  const toml::table* throttle_table = nullptr;
  std::string throttle_path;
  const toml::node* timeout_node = nullptr;
  const toml::node* max_concurrent_node = nullptr;
  const toml::node* class_node = nullptr;
  const toml::node* partition_node = nullptr;
  reader.read_table(
      table, path,
      {
          {"name",
           [&](const toml::node& node, const std::string& key) {
             has_name = true;  // given, even if wrong: no second message
             read_plain_name(reader, node, key, "a name such as \"gradient2\"", "it names CSV rows",
                             group.name);
           }},
          {"rate",
           [&](const toml::node& node, const std::string& key) {
             if (auto rate = reader.number(node, key, 0.0, kMaxRate, false,
                                           "calls per second, a number from 0 to 1000000")) {
               group.rate = *rate;
             }
             has_rate = true;
           }},
          {"policy",
           [&](const toml::node& node, const std::string& key) {
             has_policy = read_policy(reader, node, key, group);
           }},
          {"timeout",
           [&](const toml::node& node, const std::string& key) {
             timeout_node = &node;
             group.timeout = reader.duration(node, key, Nanos(1), std::chrono::hours(1));
           }},
          reader.int_field("clients", 1, kMaxClients, group.clients),
          {"class",
           [&](const toml::node& node, const std::string& key) {
             class_node = &node;
             if (auto cls = reader.choice<CallClass>(node, key)) group.cls = *cls;
           }},
          {"partition",
           [&](const toml::node& node, const std::string& key) {
             partition_node = &node;
             read_plain_name(reader, node, key, "a name such as \"user\"",
                             "one of its limit table's partitions", group.partition);
           }},
          plain_name_field(reader, "shared_limit", "a name such as \"api\"",
                           "the groups that give it call through one limit", group.shared_limit),
          {"max_concurrent",
           [&](const toml::node& node, const std::string& key) {
             max_concurrent_node = &node;
             if (auto n = reader.integer(node, key, 1, kMaxWorkers)) {
               group.max_concurrent = static_cast<int>(*n);
             }
           }},
          {"limit",
           [&](const toml::node& node, const std::string& key) {
             limit_table = reader.table(node, key);
             limit_path = key;
           }},
          {"throttle",
           [&](const toml::node& node, const std::string& key) {
             throttle_table = reader.table(node, key);
             throttle_path = key;
           }},
          {"changes",
           [&](const toml::node& node, const std::string& key) {
             reader.tables(node, key, [&](const toml::table& change, const std::string& at_path) {
               RateChange parsed;
               bool has_at = false;
               bool has_change_rate = false;
               reader.read_table(change, at_path,
                                 {{"at",
                                   [&](const toml::node& n, const std::string& k) {
                                     has_at = true;
                                     if (auto at = reader.duration(n, k, Nanos(1), duration))
                                       parsed.at = *at;
                                   }},
                                  {"rate", [&](const toml::node& n, const std::string& k) {
                                     has_change_rate = true;
                                     if (auto rate = reader.number(
                                             n, k, 0.0, kMaxRate, false,
                                             "calls per second, a number from 0 to 1000000")) {
                                       parsed.rate = *rate;
                                     }
                                   }}});
               if (!has_at) {
                 reader.missing(change, at_path, "at",
                                std::string(kDurationForm) + " within the scenario's duration");
               }
               if (!has_change_rate) reader.missing(change, at_path, "rate", "calls per second");
               if (has_at && has_change_rate) {
                 for (const RateChange& other : group.changes) {
                   if (other.at == parsed.at) {
                     reader.error(change.source(), at_path + ".at is \"" +
                                                       text::format_duration(parsed.at) +
                                                       "\", the time of another change of the "
                                                       "group; expected one change per time");
                   }
                 }
                 group.changes.push_back(parsed);
               }
             });
           }},
      });
  if (!has_name) reader.missing(table, path, "name", "a name such as \"gradient2\"");
  if (!has_rate) reader.missing(table, path, "rate", "calls per second");
  if (!has_policy) {
    if (table.find("policy") == table.end()) {
      reader.missing(table, path, "policy", "one of " + join(policy_names()));
    }
    return;
  }
  std::sort(group.changes.begin(), group.changes.end(),
            [](const RateChange& a, const RateChange& b) { return a.at < b.at; });

  const std::string policy(group.policy_name());
  if (group.policy == kBulkhead) {
    if (max_concurrent_node == nullptr) {
      reader.missing(table, path, "max_concurrent", "the bulkhead's size for policy bulkhead");
    }
  } else if (max_concurrent_node != nullptr) {
    reader.error(max_concurrent_node->source(),
                 path + ".max_concurrent applies to policy bulkhead only (this group's policy is " +
                     policy + ")");
  }
  if (throttle_table != nullptr) {
    if (group.policy == kThrottle) {
      read_throttle(reader, *throttle_table, throttle_path, group);
    } else {
      reader.error(throttle_table->source(),
                   throttle_path + " applies to policy throttle only (this group's policy is " +
                       policy + ")");
    }
  }
  const bool adaptive = group.policy == kAdaptiveLimit;
  if (class_node != nullptr && !adaptive) {
    reader.error(class_node->source(), path +
                                           ".class applies to the adaptive limit's policies only "
                                           "(this group's policy is " +
                                           policy + ")");
  }
  if (partition_node != nullptr && !adaptive) {
    reader.error(partition_node->source(),
                 path +
                     ".partition applies to the adaptive limit's policies only (this group's "
                     "policy is " +
                     policy + ")");
  }
  if (!group.shared_limit.empty() && group.clients > 1) {
    reader.error(table.source(),
                 path + ".shared_limit is given with clients = " + std::to_string(group.clients) +
                     "; a fleet's clients have a limit each (leave one out)");
  }
  if (adaptive && group.limit.algorithm() == LimitAlgorithm::aimd && timeout_node == nullptr) {
    reader.missing(table, path, "timeout",
                   std::string(kDurationForm) +
                       ": policy aimd needs a timeout inside the limit as its drop signal");
  }

  // After the limit table: the partition must be one of its partitions.
  const auto check_partition = [&] {
    if (!group.partition.empty() && !group.limit.partition_index(group.partition)) {
      std::string names;
      for (const LimitPartitionShare& known : group.limit.partitions())
        names += (names.empty() ? "" : ", ") + known.name;
      reader.error(
          partition_node->source(),
          "R4C-REG-012: " + path + ".partition is \"" + group.partition +
              "\", none of its limit's partitions; valid: " +
              (names.empty() ? "none (give the limit table partitions = \"name:share, ...\")"
                             : names));
    }
  };
  if (limit_table == nullptr) {
    if (adaptive) check_partition();
    return;
  }
  if (!adaptive) {
    reader.error(limit_table->source(),
                 limit_path + " applies to the adaptive limit's policies only (" +
                     join(algorithm_names()) + "; this group's policy is " + policy + ")");
    return;
  }
  read_limit(reader, *limit_table, limit_path, group, policy);
  try {
    group.limit.validate();
  } catch (const ConfigException& e) {
    reader.error(limit_table->source(), limit_path + ": " + e.what());
  }
  check_partition();
}

// Groups sharing a limit call through one pipeline: what builds it must be the same.
void check_shared_limit(Reader& reader, const toml::table& table, const std::string& path,
                        const GroupSpec& group, const GroupSpec& other) {
  std::string differs;
  if (group.policy != other.policy || group.limit.algorithm() != other.limit.algorithm()) {
    differs = "policy";
  } else if (group.timeout != other.timeout) {
    differs = "timeout";
  } else if (const auto difference = first_difference(group.limit, other.limit)) {
    differs = "limit." + difference->setting;
  }
  if (differs.empty()) return;
  reader.error(table.source(), path + ".shared_limit is \"" + group.shared_limit +
                                   "\", shared with group \"" + other.name + "\", whose " +
                                   differs +
                                   " differs; expected the same policy, timeout and "
                                   "limit table (only rate, class and changes may differ)");
}

void read_server(Reader& reader, const toml::table& table, ServerSpec& server, Nanos duration) {
  bool has_workers = false;
  reader.read_table(
      table, "server",
      {
          {"workers",
           [&](const toml::node& node, const std::string& key) {
             has_workers = true;
             if (auto n = reader.integer(node, key, 1, kMaxWorkers)) {
               server.workers = static_cast<int>(*n);
             }
           }},
          reader.int_field("queue_limit", 0, 100000000, server.queue_limit),
          {"abandoned",
           [&](const toml::node& node, const std::string& key) {
             if (auto a = reader.choice<Abandoned>(node, key)) {
               server.abandoned = *a;
             }
           }},
          reader.int_field("knee", 0, kMaxWorkers, server.knee),
          {"contention",
           [&](const toml::node& node, const std::string& key) {
             if (auto c = reader.number(node, key, 0.0, 100.0, true, "a number in (0, 100]")) {
               server.contention = *c;
             }
           }},
          {"service",
           [&](const toml::node& node, const std::string& key) {
             const toml::table* service = reader.table(node, key);
             if (service == nullptr) return;
             const toml::node* sigma_node = nullptr;
             reader.read_table(
                 *service, key,
                 {{"distribution",
                   [&](const toml::node& n, const std::string& k) {
                     if (auto d = reader.choice<Distribution>(n, k)) {
                       server.service.distribution = *d;
                     }
                   }},
                  {"mean",
                   [&](const toml::node& n, const std::string& k) {
                     if (auto mean = reader.duration(n, k, std::chrono::microseconds(1),
                                                     std::chrono::minutes(1))) {
                       server.service.mean = *mean;
                     }
                   }},
                  {"tail_share",
                   [&](const toml::node& n, const std::string& k) {
                     if (auto share = reader.number(n, k, 0.0, 1.0, false,
                                                    "a share of calls, a number from 0 to 1")) {
                       server.service.tail_share = *share;
                     }
                   }},
                  {"tail_factor",
                   [&](const toml::node& n, const std::string& k) {
                     if (auto factor =
                             reader.number(n, k, 0.0, 1000.0, true, "a number in (0, 1000]")) {
                       server.service.tail_factor = *factor;
                     }
                   }},
                  {"sigma", [&](const toml::node& n, const std::string& k) {
                     sigma_node = &n;
                     if (auto sigma = reader.number(n, k, 0.0, 3.0, true, "a number in (0, 3]")) {
                       server.service.sigma = *sigma;
                     }
                   }}});
             if (sigma_node != nullptr && server.service.distribution != Distribution::lognormal) {
               reader.error(sigma_node->source(),
                            key + ".sigma applies to distribution lognormal only");
             }
           }},
          {"changes",
           [&](const toml::node& node, const std::string& key) {
             reader.tables(node, key, [&](const toml::table& change, const std::string& path) {
               ServerChange parsed;
               bool has_at = false;
               reader.read_table(
                   change, path,
                   {{"at",
                     [&](const toml::node& n, const std::string& k) {
                       has_at = true;
                       if (auto at = reader.duration(n, k, Nanos(1), duration)) parsed.at = *at;
                     }},
                    {"workers",
                     [&](const toml::node& n, const std::string& k) {
                       if (auto w = reader.integer(n, k, 1, kMaxWorkers)) {
                         parsed.workers = static_cast<int>(*w);
                       } else {
                         parsed.workers = 1;  // given, though wrong: not "nothing changes"
                       }
                     }},
                    {"service_scale",
                     [&](const toml::node& n, const std::string& k) {
                       parsed.service_scale =
                           reader.number(n, k, 0.0, kMaxScale, true, "a number in (0, 1000]")
                               .value_or(1.0);
                     }},
                    {"extra_latency", [&](const toml::node& n, const std::string& k) {
                       parsed.extra_latency =
                           reader.duration(n, k, Nanos(0), std::chrono::minutes(10))
                               .value_or(Nanos(0));
                     }}});
               if (!has_at) {
                 reader.missing(change, path, "at",
                                std::string(kDurationForm) + " within the scenario's duration");
                 return;
               }
               if (!parsed.workers && !parsed.service_scale && !parsed.extra_latency) {
                 reader.error(change.source(),
                              path +
                                  " changes nothing; expected at least one of workers, "
                                  "service_scale, extra_latency");
               }
               for (const ServerChange& other : server.changes) {
                 if (other.at == parsed.at) {
                   reader.error(change.source(),
                                path + ".at is \"" + text::format_duration(parsed.at) +
                                    "\", the time of another server change; expected one "
                                    "change per time");
                 }
               }
               server.changes.push_back(parsed);
             });
           }},
      });
  if (!has_workers) reader.missing(table, "server", "workers", "an integer from 1 to 100000");
  std::sort(server.changes.begin(), server.changes.end(),
            [](const ServerChange& a, const ServerChange& b) { return a.at < b.at; });
}

void read_live(Reader& reader, const toml::table& table, LiveSpec& live) {
  reader.read_table(
      table, "live",
      {reader.int_field("clients", 1, 1000, live.clients),
       {"max_calls",
        [&](const toml::node& node, const std::string& key) {
          if (auto n = reader.integer(node, key, 1, 100000000)) live.max_calls = *n;
        }},
       {"drain", [&](const toml::node& node, const std::string& key) {
          if (auto d = reader.duration(node, key, Nanos(0), std::chrono::minutes(10))) {
            live.drain = *d;
          }
        }}});
}

// A group of N clients becomes N groups sharing its load, each with its own limit (the engine
// gives each its own random seed, so that VEGAS's clients do not probe in step).
void expand_fleets(Scenario& scenario) {
  std::vector<GroupSpec> groups;
  for (std::size_t origin = 0; origin < scenario.groups.size(); ++origin) {
    GroupSpec& group = scenario.groups[origin];
    group.origin = static_cast<int>(origin);
    if (group.clients <= 1) {
      groups.push_back(std::move(group));
      continue;
    }
    for (int i = 1; i <= group.clients; ++i) {
      GroupSpec client = group;
      client.client = i;
      client.fleet = group.name;
      client.name = group.name + "." + std::to_string(i);
      const double share = 1.0 / static_cast<double>(group.clients);
      client.rate = group.rate * share;
      for (RateChange& change : client.changes) change.rate *= share;
      groups.push_back(std::move(client));
    }
  }
  scenario.groups = std::move(groups);
}

Scenario read_scenario(const toml::table& root, Reader& reader, std::string_view source) {
  Scenario scenario;
  const std::filesystem::path stem = std::filesystem::path(std::string(source)).stem();
  scenario.name = stem.string();
  // The file's name, made plain (see is_plain_name) when it is not.
  for (char& c : scenario.name) {
    if (!is_plain_name(std::string_view(&c, 1))) c = '_';
  }
  if (scenario.name.size() > 64) scenario.name.resize(64);
  if (!is_plain_name(scenario.name)) scenario.name = "scenario";
  // The duration bounds every time in the schedule: read it first.
  if (const toml::node* node = root.get("duration")) {
    if (auto d = reader.duration(*node, "duration", std::chrono::seconds(1), kMaxDuration)) {
      scenario.duration = *d;
    }
  } else {
    reader.missing(root, "", "duration", std::string(kDurationForm) + ", from 1s to 24h");
  }
  const Nanos bound = scenario.duration > Nanos(0) ? scenario.duration : kMaxDuration;
  bool has_server = false;
  bool has_groups = false;
  reader.read_table(
      root, "",
      {
          plain_name_field(reader, "name", "a name such as \"capacity-drop\"",
                           "it names the output folder", scenario.name),
          {"description",
           [&](const toml::node& node, const std::string& key) {
             if (auto text = reader.string(node, key, "a text")) scenario.description = *text;
           }},
          {"duration", [](const toml::node&, const std::string&) {}},
          {"seed",
           [&](const toml::node& node, const std::string& key) {
             if (auto seed =
                     reader.integer(node, key, 0, std::numeric_limits<std::int64_t>::max())) {
               scenario.seed = static_cast<std::uint64_t>(*seed);
             }
           }},
          {"isolated",
           [&](const toml::node& node, const std::string& key) {
             if (auto isolated = reader.boolean(node, key)) scenario.isolated = *isolated;
           }},
          {"server",
           [&](const toml::node& node, const std::string& key) {
             has_server = true;
             if (const toml::table* table = reader.table(node, key)) {
               read_server(reader, *table, scenario.server, bound);
             }
           }},
          {"groups",
           [&](const toml::node& node, const std::string& key) {
             has_groups = true;
             reader.tables(node, key, [&](const toml::table& table, const std::string& path) {
               GroupSpec group;
               read_group(reader, table, path, group, bound);
               for (const GroupSpec& other : scenario.groups) {
                 if (!group.name.empty() && other.name == group.name) {
                   reader.error(table.source(), path + ".name is \"" + group.name +
                                                    "\", the name of another group; expected "
                                                    "a name of its own");
                 }
                 if (!group.shared_limit.empty() && other.shared_limit == group.shared_limit)
                   check_shared_limit(reader, table, path, group, other);
               }
               scenario.groups.push_back(std::move(group));
             });
           }},
          {"live",
           [&](const toml::node& node, const std::string& key) {
             if (const toml::table* table = reader.table(node, key)) {
               read_live(reader, *table, scenario.live);
             }
           }},
      });
  expand_fleets(scenario);
  if (!has_server) reader.missing(root, "", "server", "a [server] table");
  if (!has_groups) reader.missing(root, "", "groups", "at least one [[groups]] table");
  if (has_groups && scenario.groups.empty()) {
    reader.error(root.source(), "groups is empty; expected at least one [[groups]] table");
  }
  return scenario;
}

}  // namespace

Scenario parse_scenario(std::string_view text, std::string_view source) {
  Reader reader{std::string(source)};
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    reader.error(e.source(), std::string("not valid TOML: ") + std::string(e.description()));
    reader.throw_errors();
  }
  Scenario scenario = read_scenario(root, reader, source);
  if (!reader.ok()) reader.throw_errors();
  return scenario;
}

Scenario load_scenario(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError("cannot open scenario \"" + file.string() + "\"");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw InputError("cannot read scenario \"" + file.string() + "\"");
  return parse_scenario(text.str(), file.string());
}

}  // namespace r4c::sim
