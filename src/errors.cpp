// SPDX-License-Identifier: Apache-2.0
#include "r4c/errors.hpp"

#include <cctype>

#include "r4c/adaptive_limit.hpp"
#include "r4c/bulkhead.hpp"
#include "r4c/circuit_breaker.hpp"
#include "r4c/rate_limiter.hpp"

namespace r4c {
namespace {

// A code looks like "R4C-ABC-123": the prefix, a group of capitals, a dash, digits.
std::string code_prefix(const std::string& message) {
  constexpr std::string_view kPrefix = "R4C-";
  if (message.compare(0, kPrefix.size(), kPrefix) != 0) return {};
  std::size_t i = kPrefix.size();
  const std::size_t group = i;
  while (i < message.size() && std::isupper(static_cast<unsigned char>(message[i]))) ++i;
  if (i == group || i >= message.size() || message[i] != '-') return {};
  const std::size_t digits = ++i;
  while (i < message.size() && std::isdigit(static_cast<unsigned char>(message[i]))) ++i;
  if (i == digits) return {};
  return message.substr(0, i);
}

}  // namespace

RejectedException::RejectedException(std::string instance_id, std::string_view kind,
                                     const std::string& message)
    : std::runtime_error(message), instance_id_(std::move(instance_id)), kind_(kind) {}

LimitExceededException::LimitExceededException(const std::string& message)
    : LimitExceededException("", message) {}

LimitExceededException::LimitExceededException(std::string instance_id, const std::string& message)
    : RejectedException(std::move(instance_id), AdaptiveLimitKind::kNames.metrics, message) {}

CallTimeoutException::CallTimeoutException(const std::string& message)
    : std::runtime_error(message) {}

BulkheadFullException::BulkheadFullException(const std::string& message)
    : BulkheadFullException("", message) {}

BulkheadFullException::BulkheadFullException(std::string instance_id, const std::string& message)
    : RejectedException(std::move(instance_id), BulkheadKind::kNames.metrics, message) {}

RequestNotPermittedException::RequestNotPermittedException(const std::string& message)
    : RequestNotPermittedException("", message) {}

RequestNotPermittedException::RequestNotPermittedException(std::string instance_id,
                                                           const std::string& message)
    : RejectedException(std::move(instance_id), RateLimiterKind::kNames.metrics, message) {}

CallNotPermittedException::CallNotPermittedException(const std::string& message)
    : CallNotPermittedException("", message) {}

CallNotPermittedException::CallNotPermittedException(std::string instance_id,
                                                     const std::string& message)
    : RejectedException(std::move(instance_id), CircuitBreakerKind::kNames.metrics, message) {}

MaxRetriesExceededException::MaxRetriesExceededException(std::string instance_id, int attempts,
                                                         const std::string& message)
    : std::runtime_error(message), instance_id_(std::move(instance_id)), attempts_(attempts) {}

namespace {
// what() is a C string: a NUL from bad input would end the message there.
std::string without_nul(const std::string& message) {
  if (message.find('\0') == std::string::npos) return message;
  std::string out;
  for (char c : message) {
    if (c == '\0') {
      out += "\\x00";
    } else {
      out += c;
    }
  }
  return out;
}
}  // namespace

ConfigException::ConfigException(const std::string& message)
    : std::invalid_argument(without_nul(message)),
      code_(code_prefix(message)),
      errors_(std::make_shared<const std::vector<ConfigError>>(
          std::vector<ConfigError>{{code_, without_nul(message)}})) {}

namespace {
std::string joined_messages(const std::vector<ConfigError>& errors) {
  std::string text;
  for (const ConfigError& error : errors) {
    if (!text.empty()) text += '\n';
    text += error.message;
  }
  return text;
}
}  // namespace

ConfigException::ConfigException(std::vector<ConfigError> errors)
    : std::invalid_argument(without_nul(joined_messages(errors))),
      code_(errors.empty() ? std::string() : errors.front().code),
      errors_(std::make_shared<const std::vector<ConfigError>>(std::move(errors))) {}

ConfigException::ConfigException(std::string_view code, std::string_view detail)
    : ConfigException(std::string(code) + ": " + std::string(detail)) {}

}  // namespace r4c
