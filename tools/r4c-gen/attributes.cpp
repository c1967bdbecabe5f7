#include "attributes.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstdint>
#include <functional>
#include <map>
#include <span>

#include "r4c/adaptive_limit_config.hpp"
#include "r4c/bulkhead.hpp"
#include "r4c/circuit_breaker.hpp"
#include "r4c/detail/config_file.hpp"
#include "r4c/errors.hpp"
#include "r4c/hedge.hpp"
#include "r4c/rate_limiter.hpp"
#include "r4c/retry.hpp"
#include "r4c/timeout.hpp"

namespace r4c::gen {

std::string_view attribute_name(PolicyKind kind) noexcept {
  switch (kind) {
    case PolicyKind::retry:
      return "retry";
    case PolicyKind::hedge:
      return "hedge";
    case PolicyKind::circuit_breaker:
      return "circuit_breaker";
    case PolicyKind::rate_limiter:
      return "rate_limiter";
    case PolicyKind::adaptive_limit:
      return "adaptive_limit";
    case PolicyKind::timeout:
      return "timeout";
    case PolicyKind::bulkhead:
      return "bulkhead";
  }
  return "";
}

std::string_view label(PolicyKind kind) noexcept {
  switch (kind) {
    case PolicyKind::retry:
      return "retry";
    case PolicyKind::hedge:
      return "hedge";
    case PolicyKind::circuit_breaker:
      return "circuit breaker";
    case PolicyKind::rate_limiter:
      return "rate limiter";
    case PolicyKind::adaptive_limit:
      return "adaptive limit";
    case PolicyKind::timeout:
      return "timeout";
    case PolicyKind::bulkhead:
      return "bulkhead";
  }
  return "";
}

bool can_throw(PolicyKind kind) noexcept { return kind != PolicyKind::retry; }

namespace {

// ---- what each attribute accepts ---------------------------------------------------------

enum class ValueType { text, integer, number, duration, boolean, algorithm, window_type, types };

struct KeySpec {
  std::string_view key;
  ValueType type;
};

constexpr KeySpec kAdaptiveLimitKeys[] = {
    {"name", ValueType::text},           {"config", ValueType::text},
    {"algorithm", ValueType::algorithm}, {"initial_limit", ValueType::integer},
    {"min_limit", ValueType::integer},   {"max_limit", ValueType::integer},
    {"window", ValueType::duration},     {"drop_on", ValueType::types},
    {"enabled", ValueType::boolean}};
constexpr KeySpec kTimeoutKeys[] = {
    {"name", ValueType::text}, {"config", ValueType::text}, {"timeout", ValueType::duration}};
constexpr KeySpec kBulkheadKeys[] = {
    {"name", ValueType::text}, {"config", ValueType::text}, {"max_concurrent", ValueType::integer}};
constexpr KeySpec kRateLimiterKeys[] = {{"name", ValueType::text},
                                        {"config", ValueType::text},
                                        {"limit_for_period", ValueType::integer},
                                        {"refresh_period", ValueType::duration},
                                        {"timeout_duration", ValueType::duration}};
constexpr KeySpec kRetryKeys[] = {{"name", ValueType::text},
                                  {"config", ValueType::text},
                                  {"max_attempts", ValueType::integer},
                                  {"wait", ValueType::duration},
                                  {"exponential_backoff_multiplier", ValueType::number},
                                  {"max_wait", ValueType::duration},
                                  {"randomized_wait", ValueType::number},
                                  {"retry_on", ValueType::types},
                                  {"abort_on", ValueType::types}};
constexpr KeySpec kCircuitBreakerKeys[] = {{"name", ValueType::text},
                                           {"config", ValueType::text},
                                           {"failure_rate_threshold", ValueType::number},
                                           {"slow_call_rate_threshold", ValueType::number},
                                           {"slow_call_duration", ValueType::duration},
                                           {"sliding_window_type", ValueType::window_type},
                                           {"sliding_window_size", ValueType::integer},
                                           {"minimum_number_of_calls", ValueType::integer},
                                           {"wait_in_open", ValueType::duration},
                                           {"permitted_calls_in_half_open", ValueType::integer},
                                           {"record_on", ValueType::types},
                                           {"ignore_on", ValueType::types}};
constexpr KeySpec kHedgeKeys[] = {{"name", ValueType::text},
                                  {"config", ValueType::text},
                                  {"delay", ValueType::duration},
                                  {"max_attempts", ValueType::integer}};

std::span<const KeySpec> keys_of(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::retry:
      return kRetryKeys;
    case PolicyKind::hedge:
      return kHedgeKeys;
    case PolicyKind::circuit_breaker:
      return kCircuitBreakerKeys;
    case PolicyKind::rate_limiter:
      return kRateLimiterKeys;
    case PolicyKind::adaptive_limit:
      return kAdaptiveLimitKeys;
    case PolicyKind::timeout:
      return kTimeoutKeys;
    case PolicyKind::bulkhead:
      return kBulkheadKeys;
  }
  return {};
}

std::string_view expected(ValueType type) {
  switch (type) {
    case ValueType::text:
      return "a string literal, e.g. \"orders\"";
    case ValueType::integer:
      return "an integer";
    case ValueType::number:
      return "a number";
    case ValueType::duration:
      return "a duration string, e.g. \"500ms\" or \"2s\"";
    case ValueType::boolean:
      return "true or false";
    case ValueType::algorithm:
      return "gradient2 or aimd";
    case ValueType::window_type:
      return "count_based or time_based";
    case ValueType::types:
      return "exception types in braces, e.g. {shop::SocketTimeout, r4c::CallTimeoutException}";
  }
  return "";
}

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

// ---- values ------------------------------------------------------------------------------

struct Value {
  ValueType type = ValueType::text;
  Location where;
  std::string written;  // as written, for messages
  std::string text;     // text, enum value, duration as written ("2s"), number as written
  std::int64_t integer = 0;
  double number = 0;
  std::chrono::nanoseconds duration{0};
  bool boolean = false;
  std::vector<std::string> types;
};

std::string lower(std::string_view text) {
  std::string result(text);
  std::transform(result.begin(), result.end(), result.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return result;
}

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

// Reads a value of `type` from its tokens; reports and returns nullopt when it is not one.
std::optional<Value> read_value(ValueType type, std::string_view key, std::span<const Token> tokens,
                                const Location& where, Diagnostics& diagnostics) {
  Value value;
  value.type = type;
  value.where = tokens.empty() ? where : tokens[0].where;
  value.written = joined(tokens);
  auto wrong = [&]() -> std::optional<Value> {
    diagnostics.error(value.where, kMalformed,
                      std::string(key) + " is " +
                          (tokens.empty() ? std::string("empty") : "'" + value.written + "'") +
                          "; expected " + std::string(expected(type)));
    return std::nullopt;
  };
  switch (type) {
    case ValueType::text: {
      auto text = string_literal(tokens);
      if (!text) return wrong();
      value.text = *text;
      return value;
    }
    case ValueType::duration: {
      auto text = string_literal(tokens);
      if (!text) return wrong();
      value.text = *text;
      try {
        value.duration = r4c::detail::parse_duration(*text, std::string(key));
      } catch (const ConfigException& e) {
        diagnostics.error(value.where, "", e.what());
        return std::nullopt;
      }
      return value;
    }
    case ValueType::integer: {
      auto digits = numeric_literal(tokens);
      if (!digits) return wrong();
      const char* first = digits->data();
      const char* last = first + digits->size();
      auto [end, error] = std::from_chars(first, last, value.integer);
      if (error != std::errc() || end != last) return wrong();
      if (value.integer < INT_MIN || value.integer > INT_MAX) {
        diagnostics.error(value.where, kMalformed,
                          std::string(key) + " is " + *digits + "; expected an int (" +
                              std::to_string(INT_MIN) + " .. " + std::to_string(INT_MAX) + ")");
        return std::nullopt;
      }
      value.text = *digits;
      return value;
    }
    case ValueType::number: {
      auto digits = numeric_literal(tokens);
      if (!digits) return wrong();
      std::string plain = *digits;
      if (!plain.empty() && (plain.back() == 'f' || plain.back() == 'F')) plain.pop_back();
      const char* first = plain.data();
      const char* last = first + plain.size();
      auto [end, error] = std::from_chars(first, last, value.number);
      if (error != std::errc() || end != last) return wrong();
      value.text = plain;
      return value;
    }
    case ValueType::boolean: {
      std::string word;
      if (auto text = string_literal(tokens)) {
        word = lower(*text);
      } else if (tokens.size() == 1 && is_word(tokens[0])) {
        word = tokens[0].text;
      }
      if (word != "true" && word != "false") return wrong();
      value.boolean = word == "true";
      return value;
    }
    case ValueType::algorithm:
    case ValueType::window_type: {
      // aimd, "aimd", LimitAlgorithm::aimd or r4c::LimitAlgorithm::aimd.
      std::string word;
      if (auto text = string_literal(tokens)) {
        word = *text;
      } else if (!tokens.empty() && tokens.back().kind == Token::Kind::identifier) {
        word = tokens.back().text;
      }
      word = lower(word);
      const bool known = type == ValueType::algorithm
                             ? (word == "gradient2" || word == "aimd")
                             : (word == "count_based" || word == "time_based");
      if (!known) return wrong();
      value.text = word;
      return value;
    }
    case ValueType::types: {
      std::span<const Token> list = tokens;
      if (!list.empty() && list.front().text == "{") {
        if (list.back().text != "}") return wrong();
        list = list.subspan(1, list.size() - 2);
      }
      if (list.empty()) return value;  // {}: no type
      for (std::span<const Token> type_tokens : split_commas(list, true)) {
        const bool well_formed =
            !type_tokens.empty() &&
            (type_tokens[0].kind == Token::Kind::identifier || type_tokens[0].text == "::") &&
            std::all_of(type_tokens.begin(), type_tokens.end(), [](const Token& t) {
              return is_word(t) || t.text == "::" || t.text == "<" || t.text == ">" ||
                     t.text == ">>" || t.text == "," || t.kind == Token::Kind::literal;
            });
        if (!well_formed) return wrong();
        value.types.push_back(joined(type_tokens));
      }
      return value;
    }
  }
  return wrong();
}

// ---- from values to C++ and to the library's checks --------------------------------------

std::string duration_cpp(const Value& value) {
  // "2s" -> std::chrono::seconds{2}: the unit as written stays readable in the generated file.
  std::size_t digits = 0;
  while (digits < value.text.size() &&
         std::isdigit(static_cast<unsigned char>(value.text[digits]))) {
    ++digits;
  }
  const std::string amount = value.text.substr(0, digits);
  const std::string unit = value.text.substr(digits);
  static const std::map<std::string, std::string, std::less<>> kUnits = {
      {"ns", "nanoseconds"}, {"us", "microseconds"}, {"ms", "milliseconds"},
      {"s", "seconds"},      {"m", "minutes"},       {"h", "hours"}};
  return "std::chrono::" + kUnits.at(unit) + "{" + amount + "}";
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

// The library's types that runtime-only values (exception types) cannot be checked against:
// the generator checks them by building the config with placeholders.
std::vector<ExceptionType> placeholder_types(const Value& value) {
  return std::vector<ExceptionType>(value.types.size(), ExceptionType::of<std::exception>());
}

using Values = std::vector<std::pair<std::string, Value>>;

const Value* find(const Values& values, std::string_view key) {
  for (const auto& [k, v] : values) {
    if (k == key) return &v;
  }
  return nullptr;
}

// Each policy: how a value is set on its config (for the checks), and as C++.
struct Rules {
  // Applies one value to `config` (a type-erased config of the policy's kind); throws
  // ConfigException as the library's setters do.
  std::function<void(void* config, std::string_view key, const Value& value)> apply;
  std::function<std::string(std::string_view key, const Value& value)> cpp;
};

void apply_adaptive_limit(AdaptiveLimitConfig& c, std::string_view key, const Value& v) {
  if (key == "algorithm")
    c.algorithm(v.text == "aimd" ? LimitAlgorithm::aimd : LimitAlgorithm::gradient2);
  if (key == "initial_limit") c.initial_limit(static_cast<int>(v.integer));
  if (key == "min_limit") c.min_limit(static_cast<int>(v.integer));
  if (key == "max_limit") c.max_limit(static_cast<int>(v.integer));
  if (key == "window") c.window(v.duration);
  if (key == "drop_on") c.drop_on(placeholder_types(v));
  if (key == "enabled") c.enabled(v.boolean);
}

std::string adaptive_limit_cpp(std::string_view key, const Value& v) {
  if (key == "algorithm") return ".algorithm = r4c::LimitAlgorithm::" + v.text;
  if (key == "window") return ".window = " + duration_cpp(v);
  if (key == "drop_on") return ".drop_on = " + types_cpp(v);
  if (key == "enabled") return std::string(".enabled = ") + (v.boolean ? "true" : "false");
  return "." + std::string(key) + " = " + v.text;
}

void apply_retry(RetryConfig& c, std::string_view key, const Value& v) {
  if (key == "max_attempts") c.max_attempts(static_cast<int>(v.integer));
  if (key == "wait") c.wait(v.duration);
  // As the file does: a multiplier alone is capped at the longest wait; max_wait alone keeps
  // the multiplier in effect.
  if (key == "exponential_backoff_multiplier") {
    c.exponential_backoff(v.number,
                          c.exponential_backoff() ? c.max_wait() : RetryConfig::kLongestWait);
  }
  if (key == "max_wait") c.exponential_backoff(c.backoff_multiplier(), v.duration);
  if (key == "randomized_wait") c.randomized_wait(v.number);
  if (key == "retry_on") c.retry_on(placeholder_types(v));
  if (key == "abort_on") c.abort_on(placeholder_types(v));
}

std::string retry_cpp(std::string_view key, const Value& v) {
  if (key == "max_attempts") return "c.max_attempts(" + v.text + ")";
  if (key == "wait") return "c.wait(" + duration_cpp(v) + ")";
  if (key == "exponential_backoff_multiplier") {
    return "c.exponential_backoff(" + v.text +
           ", c.exponential_backoff() ? c.max_wait() : r4c::RetryConfig::kLongestWait)";
  }
  if (key == "max_wait")
    return "c.exponential_backoff(c.backoff_multiplier(), " + duration_cpp(v) + ")";
  if (key == "randomized_wait") return "c.randomized_wait(" + v.text + ")";
  return "c." + std::string(key) + "(" + types_cpp(v) + ")";
}

void apply_circuit_breaker(CircuitBreakerConfig& c, std::string_view key, const Value& v) {
  if (key == "failure_rate_threshold") c.failure_rate_threshold(v.number);
  if (key == "slow_call_rate_threshold") c.slow_call_rate_threshold(v.number);
  if (key == "slow_call_duration") c.slow_call_duration(v.duration);
  if (key == "sliding_window_type") {
    c.sliding_window_type(v.text == "time_based" ? SlidingWindowType::time_based
                                                 : SlidingWindowType::count_based);
  }
  if (key == "sliding_window_size") c.sliding_window_size(static_cast<int>(v.integer));
  if (key == "minimum_number_of_calls") c.minimum_number_of_calls(static_cast<int>(v.integer));
  if (key == "wait_in_open") c.wait_in_open(v.duration);
  if (key == "permitted_calls_in_half_open")
    c.permitted_calls_in_half_open(static_cast<int>(v.integer));
  if (key == "record_on") c.record_on(placeholder_types(v));
  if (key == "ignore_on") c.ignore_on(placeholder_types(v));
}

std::string circuit_breaker_cpp(std::string_view key, const Value& v) {
  const std::string call = "c." + std::string(key) + "(";
  switch (v.type) {
    case ValueType::duration:
      return call + duration_cpp(v) + ")";
    case ValueType::window_type:
      return call + "r4c::SlidingWindowType::" + v.text + ")";
    case ValueType::types:
      return call + types_cpp(v) + ")";
    default:
      return call + v.text + ")";
  }
}

// A config where every setting the attribute leaves unset takes the value least likely to
// conflict with the ones it sets: the checks between settings then report only conflicts the
// attribute itself has (a named config may still set the others).
void* permissive(PolicyKind kind, AdaptiveLimitConfig& adaptive_limit, RetryConfig& retry,
                 CircuitBreakerConfig& circuit_breaker, BulkheadConfig& bulkhead,
                 RateLimiterConfig& rate_limiter, TimeoutConfig& timeout, HedgeConfig& hedge) {
  switch (kind) {
    case PolicyKind::adaptive_limit:
      adaptive_limit.max_limit(INT_MAX);
      return &adaptive_limit;
    case PolicyKind::retry:
      retry.wait(std::chrono::nanoseconds(0));
      return &retry;
    case PolicyKind::circuit_breaker:
      return &circuit_breaker;
    case PolicyKind::bulkhead:
      return &bulkhead;
    case PolicyKind::rate_limiter:
      return &rate_limiter;
    case PolicyKind::timeout:
      return &timeout;
    case PolicyKind::hedge:
      return &hedge;
  }
  return nullptr;
}

void apply(PolicyKind kind, void* config, std::string_view key, const Value& v) {
  switch (kind) {
    case PolicyKind::adaptive_limit:
      apply_adaptive_limit(*static_cast<AdaptiveLimitConfig*>(config), key, v);
      break;
    case PolicyKind::retry:
      apply_retry(*static_cast<RetryConfig*>(config), key, v);
      break;
    case PolicyKind::circuit_breaker:
      apply_circuit_breaker(*static_cast<CircuitBreakerConfig*>(config), key, v);
      break;
    case PolicyKind::bulkhead:
      static_cast<BulkheadConfig*>(config)->max_concurrent(static_cast<int>(v.integer));
      break;
    case PolicyKind::rate_limiter: {
      auto& c = *static_cast<RateLimiterConfig*>(config);
      if (key == "limit_for_period") c.limit_for_period(static_cast<int>(v.integer));
      if (key == "refresh_period") c.refresh_period(v.duration);
      if (key == "timeout_duration") c.timeout_duration(v.duration);
      break;
    }
    case PolicyKind::timeout:
      static_cast<TimeoutConfig*>(config)->timeout(v.duration);
      break;
    case PolicyKind::hedge: {
      auto& c = *static_cast<HedgeConfig*>(config);
      if (key == "delay") c.delay(v.duration);
      if (key == "max_attempts") c.max_attempts(static_cast<int>(v.integer));
      break;
    }
  }
}

void validate(PolicyKind kind, void* config) {
  switch (kind) {
    case PolicyKind::adaptive_limit: {
      auto& c = *static_cast<AdaptiveLimitConfig*>(config);
      c.validate();
      break;
    }
    case PolicyKind::retry:
      static_cast<RetryConfig*>(config)->validate();
      break;
    case PolicyKind::circuit_breaker:
      static_cast<CircuitBreakerConfig*>(config)->validate();
      break;
    case PolicyKind::bulkhead:
      static_cast<BulkheadConfig*>(config)->validate();
      break;
    case PolicyKind::rate_limiter:
      static_cast<RateLimiterConfig*>(config)->validate();
      break;
    case PolicyKind::timeout:
      static_cast<TimeoutConfig*>(config)->validate();
      break;
    case PolicyKind::hedge:
      static_cast<HedgeConfig*>(config)->validate();
      break;
  }
}

std::string setting_cpp(PolicyKind kind, std::string_view key, const Value& v) {
  switch (kind) {
    case PolicyKind::adaptive_limit:
      return adaptive_limit_cpp(key, v);
    case PolicyKind::retry:
      return retry_cpp(key, v);
    case PolicyKind::circuit_breaker:
      return circuit_breaker_cpp(key, v);
    case PolicyKind::bulkhead:
      return "c.max_concurrent(" + v.text + ")";
    case PolicyKind::rate_limiter:
      return key == "limit_for_period" ? "c.limit_for_period(" + v.text + ")"
                                       : "c." + std::string(key) + "(" + duration_cpp(v) + ")";
    case PolicyKind::timeout:
      return "c.timeout(" + duration_cpp(v) + ")";
    case PolicyKind::hedge:
      return key == "delay" ? "c.delay(" + duration_cpp(v) + ")" : "c.max_attempts(" + v.text + ")";
  }
  return "";
}

std::string valid_keys(PolicyKind kind) {
  std::string list;
  for (const KeySpec& spec : keys_of(kind)) {
    if (!list.empty()) list += ", ";
    list += spec.key;
  }
  return list;
}

std::optional<PolicyKind> policy_named(std::string_view name) {
  for (PolicyKind kind : kPolicyKinds) {
    if (attribute_name(kind) == name) return kind;
  }
  return std::nullopt;
}

// Checks one r4c attribute: `name_index` is its name's token, `args` what is inside its
// parentheses (empty without them).
std::optional<Policy> check_attribute(const std::vector<Token>& tokens, std::size_t name_index,
                                      std::span<const Token> args, std::string written,
                                      Diagnostics& diagnostics) {
  const Token& name_token = tokens[name_index];
  const std::optional<PolicyKind> kind = policy_named(name_token.text);
  if (!kind) {
    std::vector<std::string_view> names;
    for (PolicyKind k : kPolicyKinds) names.push_back(attribute_name(k));
    diagnostics.error(name_token.where, kUnknownAttribute,
                      "unknown attribute 'r4c::" + name_token.text + "'; did you mean 'r4c::" +
                          std::string(r4c::detail::closest(name_token.text, names)) +
                          "'? valid: adaptive_limit, timeout, bulkhead, rate_limiter, retry, "
                          "circuit_breaker, hedge");
    return std::nullopt;
  }
  Policy policy;
  policy.kind = *kind;
  policy.where = name_token.where;
  policy.written = std::move(written);
  const std::string attribute = "[[r4c::" + name_token.text + "]]";
  bool ok = true;
  Values values;
  const auto parts =
      args.empty() ? std::vector<std::span<const Token>>{} : split_commas(args, false);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    std::span<const Token> part = parts[i];
    const Location where = part.empty() ? name_token.where : part[0].where;
    std::string key;
    Location key_where = where;
    std::span<const Token> value_tokens;
    if (part.size() >= 2 && part[0].kind == Token::Kind::identifier && part[1].text == "=") {
      key = part[0].text;
      value_tokens = part.subspan(2);
    } else if (i == 0 && *kind == PolicyKind::timeout) {
      key = "timeout";  // [[r4c::timeout("2s")]]
      value_tokens = part;
    } else {
      diagnostics.error(where, kMalformed,
                        "expected 'key = value' in " + attribute + ", got '" + joined(part) +
                            "'; valid keys: " + valid_keys(*kind));
      ok = false;
      continue;
    }
    const auto specs = keys_of(*kind);
    const auto spec =
        std::find_if(specs.begin(), specs.end(), [&](const KeySpec& s) { return s.key == key; });
    if (spec == specs.end()) {
      std::vector<std::string_view> names;
      for (const KeySpec& s : specs) names.push_back(s.key);
      diagnostics.error(key_where, kUnknownKey,
                        "unknown key '" + key + "' in " + attribute + "; did you mean '" +
                            std::string(r4c::detail::closest(key, names)) +
                            "'? valid: " + valid_keys(*kind));
      ok = false;
      continue;
    }
    if (find(values, key) != nullptr) {
      diagnostics.error(key_where, kMalformed, key + " is given twice in " + attribute);
      ok = false;
      continue;
    }
    std::optional<Value> value = read_value(spec->type, key, value_tokens, key_where, diagnostics);
    if (!value) {
      ok = false;
      continue;
    }
    values.emplace_back(key, std::move(*value));
  }
  if (!ok) return std::nullopt;

  // Each value on its own, with the library's own checks and messages...
  AdaptiveLimitConfig adaptive_limit;
  RetryConfig retry;
  CircuitBreakerConfig circuit_breaker;
  BulkheadConfig bulkhead;
  RateLimiterConfig rate_limiter;
  TimeoutConfig timeout;
  HedgeConfig hedge;
  void* config = permissive(*kind, adaptive_limit, retry, circuit_breaker, bulkhead, rate_limiter,
                            timeout, hedge);
  for (const auto& [key, value] : values) {
    if (key == "name") {
      policy.name = value.text;
      continue;
    }
    if (key == "config") {
      policy.config = value.text;
      continue;
    }
    try {
      apply(*kind, config, key, value);
    } catch (const ConfigException& e) {
      diagnostics.error(value.where, "", e.what());
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  // ...then against each other: only settings this attribute gives can conflict here.
  if (*kind == PolicyKind::adaptive_limit && find(values, "initial_limit") == nullptr) {
    adaptive_limit.initial_limit(adaptive_limit.min_limit());
  }
  try {
    validate(*kind, config);
  } catch (const ConfigException& e) {
    diagnostics.error(name_token.where, "", std::string(e.what()) + " (in " + attribute + ")");
    return std::nullopt;
  }

  // The same settings over the built-in defaults: a conflict with those is not an error (the
  // registry's defaults or a named config may set the rest), but it fails the wrapper's
  // constructor unless something does, so it is worth a warning.
  {
    AdaptiveLimitConfig d_adaptive_limit;
    RetryConfig d_retry;
    CircuitBreakerConfig d_circuit_breaker;
    BulkheadConfig d_bulkhead;
    RateLimiterConfig d_rate_limiter;
    TimeoutConfig d_timeout;
    HedgeConfig d_hedge;
    void* defaults = nullptr;
    switch (*kind) {
      case PolicyKind::adaptive_limit:
        defaults = &d_adaptive_limit;
        break;
      case PolicyKind::retry:
        defaults = &d_retry;
        break;
      case PolicyKind::circuit_breaker:
        defaults = &d_circuit_breaker;
        break;
      case PolicyKind::bulkhead:
        defaults = &d_bulkhead;
        break;
      case PolicyKind::rate_limiter:
        defaults = &d_rate_limiter;
        break;
      case PolicyKind::timeout:
        defaults = &d_timeout;
        break;
      case PolicyKind::hedge:
        defaults = &d_hedge;
        break;
    }
    try {
      for (const auto& [key, value] : values) {
        if (key != "name" && key != "config") apply(*kind, defaults, key, value);
      }
      validate(*kind, defaults);
    } catch (const ConfigException& e) {
      diagnostics.warning(name_token.where,
                          "with the built-in defaults for what " + attribute + " leaves unset, " +
                              e.what() +
                              "; the wrapper's constructor will throw this unless the registry's "
                              "defaults or a named config set those settings");
    }
  }

  if (*kind == PolicyKind::adaptive_limit) {
    // Designated initializers follow AdaptiveLimitAttributes' member order.
    constexpr std::string_view kOrder[] = {"algorithm", "initial_limit", "min_limit", "max_limit",
                                           "window",    "drop_on",       "enabled"};
    for (std::string_view key : kOrder) {
      if (const Value* value = find(values, key))
        policy.settings.push_back(setting_cpp(*kind, key, *value));
    }
  } else {
    for (const auto& [key, value] : values) {
      if (key != "name" && key != "config")
        policy.settings.push_back(setting_cpp(*kind, key, value));
    }
  }
  return policy;
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
    std::string written = "r4c::" + pretty(item.subspan(name));
    if (auto policy = check_attribute(tokens, name_index, args, std::move(written), diagnostics)) {
      group.policies.push_back(std::move(*policy));
    }
  }
  return group;
}

}  // namespace r4c::gen
