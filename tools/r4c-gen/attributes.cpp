// SPDX-License-Identifier: Apache-2.0
#include "attributes.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <climits>
#include <exception>
#include <functional>
#include <map>
#include <span>
#include <stdexcept>

#include "r4c/detail/config_file.hpp"
#include "r4c/errors.hpp"
#include "r4c/text.hpp"

namespace r4c::gen {

using r4c::detail::AllKinds;
using r4c::detail::SettingType;
using r4c::detail::SettingValue;

std::string_view attribute_name(PolicyKind kind) noexcept { return AllKinds::names[kind].cpp; }

std::string_view label(PolicyKind kind) noexcept { return AllKinds::names[kind].display; }

bool can_throw(PolicyKind kind) noexcept { return kind != kRetry; }

namespace {

// ---- tokens ------------------------------------------------------------------------------

bool is(const std::vector<Token>& tokens, std::size_t i, std::string_view text) {
  return i < tokens.size() && tokens[i].text == text;
}

bool is_word(const Token& token) {
  return token.kind == Token::Kind::identifier || token.kind == Token::Kind::keyword;
}

// Tokens joined as C++ would print them: a space only between two words.
std::string joined(std::span<const Token> tokens) {
  std::string text;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0 && is_word(tokens[i - 1]) &&
        (is_word(tokens[i]) || tokens[i].kind == Token::Kind::literal)) {
      text += ' ';
    }
    text += tokens[i].text;
  }
  return text;
}

// The attribute for a comment: words spaced, ", " and " = " as people write them.
std::string pretty(std::span<const Token> tokens) {
  std::string text;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i].text;
    if (t == "=") {
      text += " = ";
    } else if (t == ",") {
      text += ", ";
    } else {
      if (i > 0 && is_word(tokens[i - 1]) &&
          (is_word(tokens[i]) || tokens[i].kind == Token::Kind::literal)) {
        text += ' ';
      }
      text += t;
    }
  }
  return text;
}

bool opens(const std::string& text) { return text == "(" || text == "[" || text == "{"; }
bool closes(const std::string& text) { return text == ")" || text == "]" || text == "}"; }

// Splits [first, last) at the commas outside any bracket (and, with `angles`, outside <...>).
std::vector<std::span<const Token>> split_commas(std::span<const Token> tokens, bool angles) {
  std::vector<std::span<const Token>> parts;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i].text;
    if (opens(t) || (angles && t == "<")) ++depth;
    if (closes(t) || (angles && t == ">")) --depth;
    if (angles && t == ">>") depth -= 2;
    if (t == "," && depth == 0) {
      parts.push_back(tokens.subspan(start, i - start));
      start = i + 1;
    }
  }
  if (start < tokens.size() || !parts.empty()) parts.push_back(tokens.subspan(start));
  return parts;
}

// ---- literals ----------------------------------------------------------------------------

// The contents of a plain string literal, or nullopt.
std::optional<std::string> string_literal(std::span<const Token> tokens) {
  if (tokens.size() != 1 || tokens[0].kind != Token::Kind::literal) return std::nullopt;
  const std::string& t = tokens[0].text;
  if (t.size() < 2 || t.front() != '"' || t.back() != '"') return std::nullopt;
  return t.substr(1, t.size() - 2);
}

// A signed number: optional '-' or '+', then one numeric literal (digit separators allowed).
std::optional<std::string> numeric_literal(std::span<const Token> tokens) {
  std::string sign;
  if (!tokens.empty() && (tokens[0].text == "-" || tokens[0].text == "+")) {
    if (tokens[0].text == "-") sign = "-";
    tokens = tokens.subspan(1);
  }
  if (tokens.size() != 1 || tokens[0].kind != Token::Kind::literal) return std::nullopt;
  std::string digits;
  for (char c : tokens[0].text) {
    if (c != '\'') digits += c;
  }
  if (digits.empty() || !std::isdigit(static_cast<unsigned char>(digits[0]))) return std::nullopt;
  return sign + digits;
}

// ---- values ------------------------------------------------------------------------------

std::string comma_list(std::span<const std::string_view> names) {
  std::string list;
  for (std::string_view name : names) list += (list.empty() ? "" : ", ") + std::string(name);
  return list;
}

// The keys every attribute takes besides its kind's settings.
constexpr std::string_view kName = "name";
constexpr std::string_view kConfig = "config";
// The adaptive limit's too: the priority class the method's calls say at admission.
constexpr std::string_view kCallClass = "call_class";

// One value as written in the attribute, and as the library's parser read it.
struct Value {
  Location where;
  std::string written;             // the tokens, for messages
  std::string text;                // what the library parses: "10", "2s", "aimd"
  std::vector<std::string> types;  // exception types, as C++ spells them
  SettingValue parsed;
};

using Values = std::vector<std::pair<std::string, Value>>;

const Value* find(const Values& values, std::string_view key) {
  for (const auto& [k, v] : values) {
    if (k == key) return &v;
  }
  return nullptr;
}

// The token shapes an attribute's value may take (C++ tokens, not the file's text), for the
// message when the tokens are none of them. Within that shape, the text follows the library's
// grammar and its expected(): a duration is a string literal whose contents the library reads.
std::string expected_shape(SettingType type, std::string expected_text) {
  switch (type) {
    case SettingType::duration:
      return "a duration string, e.g. \"500ms\" or \"2s\"";
    case SettingType::exception_types:
      return "exception types in braces, e.g. {shop::SocketTimeout, r4c::CallTimeoutException}";
    default:
      return expected_text;
  }
}

// The text inside the tokens, in the shape the setting's type takes, or nullopt.
std::optional<std::string> text_of(SettingType type, std::span<const Token> tokens) {
  switch (type) {
    case SettingType::integer:
    case SettingType::number: {
      auto digits = numeric_literal(tokens);
      // A float suffix is C++ spelling, not part of the number.
      if (digits && type == SettingType::number && (digits->back() == 'f' || digits->back() == 'F'))
        digits->pop_back();
      return digits;
    }
    case SettingType::duration:
      return string_literal(tokens);
    case SettingType::boolean:
    case SettingType::choice:
      // aimd, "aimd", LimitAlgorithm::aimd or r4c::LimitAlgorithm::aimd; true or "true".
      if (auto text = string_literal(tokens)) return text;
      if (type == SettingType::boolean && tokens.size() != 1) return std::nullopt;
      if (!tokens.empty() && is_word(tokens.back())) return tokens.back().text;
      return std::nullopt;
    case SettingType::exception_types:
      return std::nullopt;  // read as C++ types by read_types
    case SettingType::named_numbers:
      return std::nullopt;  // file only: no attribute takes one
  }
  return std::nullopt;
}

// Exception types in braces, each as C++ spells it; nullopt when the tokens are not that.
std::optional<std::vector<std::string>> read_types(std::span<const Token> tokens) {
  std::span<const Token> list = tokens;
  if (!list.empty() && list.front().text == "{") {
    if (list.back().text != "}") return std::nullopt;
    list = list.subspan(1, list.size() - 2);
  }
  std::vector<std::string> types;
  if (list.empty()) return types;  // {}: no type
  for (std::span<const Token> type_tokens : split_commas(list, true)) {
    const bool well_formed =
        !type_tokens.empty() &&
        (type_tokens[0].kind == Token::Kind::identifier || type_tokens[0].text == "::") &&
        std::all_of(type_tokens.begin(), type_tokens.end(), [](const Token& t) {
          return is_word(t) || t.text == "::" || t.text == "<" || t.text == ">" || t.text == ">>" ||
                 t.text == "," || t.kind == Token::Kind::literal;
        });
    if (!well_formed) return std::nullopt;
    types.push_back(joined(type_tokens));
  }
  return types;
}

// Reads the value of `setting` from its tokens with the library's parser; reports and returns
// nullopt when it is not one.
template <class Config>
std::optional<Value> read_value(const r4c::detail::Setting<Config>& setting,
                                std::span<const Token> tokens, const Location& where,
                                Diagnostics& diagnostics) {
  Value value;
  value.where = tokens.empty() ? where : tokens[0].where;
  value.written = joined(tokens);
  const std::string key(setting.name);
  auto wrong = [&](std::string_view code, const std::string& shown, const std::string& expected) {
    diagnostics.error(value.where, code,
                      key + " is " + (tokens.empty() ? std::string("empty") : "'" + shown + "'") +
                          "; expected " + expected);
    return std::nullopt;
  };
  if (setting.type == SettingType::exception_types) {
    auto types = read_types(tokens);
    if (!types) {
      return wrong(kMalformed, value.written,
                   expected_shape(setting.type, r4c::detail::expected(setting)));
    }
    value.types = std::move(*types);
    // Exception types exist only in the generated code: the library's checks see
    // placeholders, as many as were written.
    value.parsed.type = setting.type;
    value.parsed.types.assign(value.types.size(), ExceptionType::of<std::exception>());
    return value;
  }
  auto text = text_of(setting.type, tokens);
  if (!text) {
    return wrong(kMalformed, value.written,
                 expected_shape(setting.type, r4c::detail::expected(setting)));
  }
  value.text = std::move(*text);
  auto parsed = r4c::detail::parse(setting, value.text);
  if (!parsed) {
    // A duration string the library's grammar refuses gets the config file's own message
    // (R4C-ATR-001); any other value was not of the setting's type.
    if (setting.type == SettingType::duration) {
      try {
        r4c::detail::parse_duration(value.text, key);
      } catch (const ConfigException& e) {
        diagnostics.error(value.where, "", e.what());
        return std::nullopt;
      }
    }
    return wrong(kMalformed, value.written, r4c::detail::expected(setting));
  }
  value.parsed = std::move(*parsed);
  return value;
}

// ---- from values to C++ ------------------------------------------------------------------

// The C++ spelling of a type, from the type itself.
// WORKAROUND (remove when the library's descriptors spell their types in C++): ExceptionType's
// name() is the library's one demangler, and works for any type.
template <class T>
std::string cpp_name() {
  return ExceptionType::of<T>().name();
}

std::string duration_cpp(const Value& value) {
  // "2s" -> std::chrono::seconds{2}: the unit as written stays readable in the generated file.
  std::size_t digits = 0;
  while (digits < value.text.size() &&
         std::isdigit(static_cast<unsigned char>(value.text[digits]))) {
    ++digits;
  }
  static const std::map<std::string, std::string, std::less<>> kUnits = {
      {"ns", "nanoseconds"}, {"us", "microseconds"}, {"ms", "milliseconds"},
      {"s", "seconds"},      {"m", "minutes"},       {"h", "hours"}};
  return "std::chrono::" + kUnits.at(value.text.substr(digits)) + "{" +
         value.text.substr(0, digits) + "}";
}

// One type a line: the emitter indents what follows each '\n'.
std::string types_cpp(const Value& value) {
  std::string text = "std::vector<r4c::ExceptionType>{";
  for (std::size_t i = 0; i < value.types.size(); ++i) {
    text +=
        (i > 0 ? ",\n" : "\n") + std::string("r4c::ExceptionType::of<") + value.types[i] + ">()";
  }
  return text + "}";
}

// A choice's enumerator as C++ spells it: "r4c::LimitAlgorithm::aimd".
// WORKAROUND (remove when detail::Setting names a choice's enum type): a setting's choice is
// the vocabulary's choice_of<E>, so the enum is found among the library's enums by it; an enum
// missing here fails every run that uses it, loudly.
template <class E, class Config>
bool spell_choice(const r4c::detail::Setting<Config>& setting, int choice, std::string& cpp) {
  if (setting.choice != &r4c::detail::choice_of<E>) return false;
  cpp = cpp_name<E>() + "::" + std::string(to_string(static_cast<E>(choice)));
  return true;
}

template <class Config>
std::string value_cpp(const r4c::detail::Setting<Config>& setting, const Value& v) {
  switch (setting.type) {
    case SettingType::integer:
    case SettingType::number:
      return v.text;
    case SettingType::boolean:
      return v.parsed.boolean ? "true" : "false";
    case SettingType::duration:
      return duration_cpp(v);
    case SettingType::exception_types:
      return types_cpp(v);
    case SettingType::named_numbers:
      throw std::logic_error("r4c-gen cannot spell " + std::string(setting.name) +
                             ": no attribute takes name:number pairs");
    case SettingType::choice: {
      std::string cpp;
      if (spell_choice<LimitAlgorithm>(setting, v.parsed.choice, cpp) ||
          spell_choice<SlidingWindowType>(setting, v.parsed.choice, cpp)) {
        return cpp;
      }
      throw std::logic_error("r4c-gen cannot spell a value of " + std::string(setting.name) +
                             " in C++: add its enum to value_cpp");
    }
  }
  return v.text;
}

// How the generated code sets one value on the config `c`: its setter, which the setting is
// named after.
// WORKAROUND (remove when detail::Setting spells its setter call in C++): the retry's backoff
// pair shares one setter, exponential_backoff(multiplier, max_wait), applied as the
// descriptor's apply() does.
template <class Config>
std::string setter_cpp(const r4c::detail::Setting<Config>& setting, const std::string& value) {
  if constexpr (std::is_same_v<Config, RetryConfig>) {
    if (setting.name == "exponential_backoff_multiplier") {
      return "c.exponential_backoff(" + value +
             ", c.exponential_backoff() ? c.max_wait() : r4c::RetryConfig::kLongestWait)";
    }
    if (setting.name == "max_wait") {
      return "c.exponential_backoff(c.backoff_multiplier(), " + value + ")";
    }
  }
  return "c." + std::string(setting.name) + "(" + value + ")";
}

// ---- the library's checks ----------------------------------------------------------------

// A config where every setting the attribute leaves unset takes the value least likely to
// conflict with the ones it sets: the checks between settings then report only conflicts the
// attribute itself has (a named config may still set the others). loosen() runs before the
// attribute's values are applied, settle() after.
// WORKAROUND (remove when each kind's descriptor offers such a config): which values those are
// is each config's own knowledge; kinds without an overload here keep their defaults.
template <class Config>
void loosen(Config&) {}
void loosen(AdaptiveLimitConfig& config) { config.max_limit(INT_MAX); }
void loosen(RetryConfig& config) { config.wait(std::chrono::nanoseconds(0)); }

template <class Config>
void settle(Config&, const Values&) {}
void settle(AdaptiveLimitConfig& config, const Values& values) {
  if (find(values, "initial_limit") == nullptr) config.initial_limit(config.min_limit());
}

template <class Config>
const r4c::detail::Setting<Config>* setting_named(
    std::span<const r4c::detail::Setting<Config>> settings, std::string_view name) {
  for (const auto& setting : settings) {
    if (setting.attribute && setting.name == name) return &setting;
  }
  return nullptr;
}

// Applies every value to `config` through the descriptor's setters; throws what they throw.
template <class Config>
void apply_all(Config& config, std::span<const r4c::detail::Setting<Config>> settings,
               const Values& values) {
  for (const auto& [key, value] : values) {
    if (const auto* setting = setting_named(settings, key)) setting->apply(config, value.parsed);
  }
}

// Checks one r4c attribute of the kind `Kind`: `args` is what is inside its parentheses (empty
// without them).
template <class Kind>
std::optional<Policy> check_kind(const Token& name_token, std::span<const Token> args,
                                 std::string written, Diagnostics& diagnostics) {
  using Config = typename Kind::Config;
  const std::span<const r4c::detail::Setting<Config>> settings = Kind::settings();
  const PolicyKind kind = r4c::detail::kKindIndex<Kind>;
  std::vector<std::string_view> keys = {kName, kConfig};
  if constexpr (std::is_same_v<Kind, AdaptiveLimitKind>) keys.push_back(kCallClass);
  for (const auto& setting : settings) {
    if (setting.attribute) keys.push_back(setting.name);
  }
  const std::string valid_keys = comma_list(keys);

  Policy policy;
  policy.kind = kind;
  policy.where = name_token.where;
  policy.written = std::move(written);
  policy.config_type = cpp_name<Config>();
  const std::string attribute = "[[r4c::" + name_token.text + "]]";
  bool ok = true;
  Values values;
  const auto parts =
      args.empty() ? std::vector<std::span<const Token>>{} : split_commas(args, false);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    std::span<const Token> part = parts[i];
    const Location where = part.empty() ? name_token.where : part[0].where;
    std::string key;
    std::span<const Token> value_tokens;
    if (part.size() >= 2 && part[0].kind == Token::Kind::identifier && part[1].text == "=") {
      key = part[0].text;
      value_tokens = part.subspan(2);
    } else if (i == 0 && setting_named(settings, attribute_name(kind)) != nullptr) {
      key = attribute_name(kind);  // the setting named as its kind: [[r4c::timeout("2s")]]
      value_tokens = part;
    } else {
      diagnostics.error(where, kMalformed,
                        "expected 'key = value' in " + attribute + ", got '" + joined(part) +
                            "'; valid keys: " + valid_keys);
      ok = false;
      continue;
    }
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      diagnostics.error(where, kUnknownKey,
                        "unknown key '" + key + "' in " + attribute + "; did you mean '" +
                            std::string(text::closest(key, keys)) + "'? valid: " + valid_keys);
      ok = false;
      continue;
    }
    if (find(values, key) != nullptr) {
      diagnostics.error(where, kMalformed, key + " is given twice in " + attribute);
      ok = false;
      continue;
    }
    std::optional<Value> value;
    if (key == kName || key == kConfig) {
      if (auto text = string_literal(value_tokens)) {
        value = Value{};
        value->text = std::move(*text);
      } else {
        diagnostics.error(
            value_tokens.empty() ? where : value_tokens[0].where, kMalformed,
            key + " is " +
                (value_tokens.empty() ? std::string("empty") : "'" + joined(value_tokens) + "'") +
                "; expected a string literal, e.g. \"orders\"");
      }
    } else if (key == kCallClass) {
      // An identifier (bulk) or a string ("bulk"), as the library names the classes.
      std::optional<std::string> text = string_literal(value_tokens);
      if (!text && value_tokens.size() == 1 && value_tokens[0].kind == Token::Kind::identifier)
        text = value_tokens[0].text;
      const auto cls = text ? r4c::from_string<r4c::CallClass>(*text) : std::nullopt;
      if (cls) {
        value = Value{};
        value->text = std::string(r4c::to_string(*cls));
      } else {
        diagnostics.error(value_tokens.empty() ? where : value_tokens[0].where, kMalformed,
                          "call_class is '" + joined(value_tokens) + "' in " + attribute +
                              "; valid: " + r4c::text::choices<r4c::CallClass>());
      }
    } else {
      value = read_value(*setting_named(settings, key), value_tokens, where, diagnostics);
    }
    if (!value) {
      ok = false;
      continue;
    }
    if (key == kName) policy.name = value->text;
    if (key == kConfig) policy.config = value->text;
    if (key == kCallClass) policy.call_class = "r4c::CallClass::" + value->text;
    values.emplace_back(key, std::move(*value));
  }
  if (!ok) return std::nullopt;

  // Each value on its own, with the library's own setters, checks and messages...
  Config config;
  loosen(config);
  for (const auto& [key, value] : values) {
    const auto* setting = setting_named(settings, key);
    if (setting == nullptr) continue;  // name, config
    try {
      setting->apply(config, value.parsed);
    } catch (const ConfigException& e) {
      diagnostics.error(value.where, "", e.what());
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  // ...then against each other: only settings this attribute gives can conflict here.
  try {
    settle(config, values);
    config.validate();
  } catch (const ConfigException& e) {
    diagnostics.error(name_token.where, "", std::string(e.what()) + " (in " + attribute + ")");
    return std::nullopt;
  }

  // The same settings over the built-in defaults: a conflict with those is not an error (the
  // registry's defaults or a named config may set the rest), but it fails the wrapper's
  // constructor unless something does, so it is worth a warning.
  try {
    Config defaults;
    apply_all(defaults, settings, values);
    defaults.validate();
  } catch (const ConfigException& e) {
    diagnostics.warning(name_token.where,
                        "with the built-in defaults for what " + attribute + " leaves unset, " +
                            e.what() +
                            "; the wrapper's constructor will throw this unless the registry's "
                            "defaults or a named config set those settings");
  }

  if constexpr (std::is_same_v<Kind, AdaptiveLimitKind>) {
    // The adaptive limit takes its attributes as AdaptiveLimitAttributes, whose members are
    // its attribute settings: designated initializers, in the members' order.
    // WORKAROUND (remove when the descriptor lists them in that order): the struct declares
    // `enabled` last, the descriptor first.
    std::vector<const r4c::detail::Setting<Config>*> order;
    for (const auto& setting : settings) {
      if (setting.attribute && setting.name != "enabled") order.push_back(&setting);
    }
    if (const auto* enabled = setting_named(settings, "enabled")) order.push_back(enabled);
    for (const auto* setting : order) {
      if (const Value* value = find(values, setting->name))
        policy.settings.push_back("." + std::string(setting->name) + " = " +
                                  value_cpp(*setting, *value));
    }
  } else {
    for (const auto& [key, value] : values) {
      if (const auto* setting = setting_named(settings, key))
        policy.settings.push_back(setter_cpp(*setting, value_cpp(*setting, value)));
    }
  }
  return policy;
}

// Checks one r4c attribute: `name_index` is its name's token, `args` what is inside its
// parentheses (empty without them).
std::optional<Policy> check_attribute(const std::vector<Token>& tokens, std::size_t name_index,
                                      std::span<const Token> args, std::string written,
                                      Diagnostics& diagnostics) {
  const Token& name_token = tokens[name_index];
  const auto kind = r4c::detail::find_kind(&KindNames::cpp, name_token.text);
  if (!kind) {
    const auto kinds = r4c::detail::kind_names(&KindNames::cpp);
    std::vector<std::string_view> names(kinds.begin(), kinds.end());
    names.push_back(kBypassAttribute);
    diagnostics.error(name_token.where, kUnknownAttribute,
                      "unknown attribute 'r4c::" + name_token.text + "'; did you mean 'r4c::" +
                          std::string(text::closest(name_token.text, names)) +
                          "'? valid: " + comma_list(names));
    return std::nullopt;
  }
  return r4c::detail::visit_kind(*kind, [&](auto kind_type) {
    return check_kind<typename decltype(kind_type)::type>(name_token, args, std::move(written),
                                                          diagnostics);
  });
}

}  // namespace

std::optional<AttributeGroup> parse_attribute_group(const std::vector<Token>& tokens,
                                                    std::size_t begin, Diagnostics& diagnostics) {
  if (!is(tokens, begin, "[") || !is(tokens, begin + 1, "[")) return std::nullopt;
  // The closing "]]": the first "]" "]" at the depth of the opening.
  std::size_t close = begin + 2;
  int depth = 0;
  for (; close < tokens.size(); ++close) {
    const std::string& t = tokens[close].text;
    if (depth == 0 && t == "]" && is(tokens, close + 1, "]")) break;
    if (opens(t)) ++depth;
    if (closes(t)) --depth;
  }
  if (close >= tokens.size()) return std::nullopt;  // not an attribute: the compiler will say
  AttributeGroup group;
  group.begin = begin;
  group.end = close + 2;

  std::size_t i = begin + 2;
  std::string using_namespace;
  if (is(tokens, i, "using") && i + 2 < close && is(tokens, i + 2, ":")) {
    using_namespace = tokens[i + 1].text;
    i += 3;
  }
  const std::span<const Token> items(tokens.data() + i, close - i);
  for (std::span<const Token> item : split_commas(items, false)) {
    if (item.empty()) continue;
    // [namespace ::] name [( arguments )] [...]
    std::string space = using_namespace;
    std::size_t name = 0;
    if (item.size() >= 3 && item[1].text == "::") {
      space = item[0].text;
      name = 2;
    }
    if (space != "r4c") continue;
    group.has_r4c = true;
    const std::size_t name_index = static_cast<std::size_t>(&item[name] - tokens.data());
    std::span<const Token> args;
    std::size_t after = name + 1;
    if (after < item.size() && item[after].text == "(") {
      if (item.back().text != ")") {
        diagnostics.error(
            item[after].where, kMalformed,
            "expected ')' to close the arguments of [[r4c::" + item[name].text + "]]");
        continue;
      }
      args = item.subspan(after + 1, item.size() - after - 2);
      after = item.size();
    }
    if (after != item.size()) {
      diagnostics.error(
          item[after].where, kMalformed,
          "unexpected '" + item[after].text + "' after [[r4c::" + item[name].text + "]]");
      continue;
    }
    if (item[name].text == kBypassAttribute) {
      if (!args.empty() || after != name + 1) {
        diagnostics.error(item[name].where, kMalformed,
                          "[[r4c::bypass]] takes no arguments: it leaves the method out of "
                          "every policy of its class");
      } else {
        group.bypass = item[name].where;
      }
      continue;
    }
    std::string written = "r4c::" + pretty(item.subspan(name));
    if (auto policy = check_attribute(tokens, name_index, args, std::move(written), diagnostics)) {
      group.policies.push_back(std::move(*policy));
    }
  }
  return group;
}

}  // namespace r4c::gen
