// r4c's exception types.
//
// Every r4c failure a caller can catch is one of these. Each has a public constructor taking a
// message, so users can derive their own (for example a `SlowReply` that is a
// `CallTimeoutException` and therefore counts as a drop by default):
//
//   struct SlowReply : r4c::CallTimeoutException {
//     using CallTimeoutException::CallTimeoutException;
//   };
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace r4c {

/// Thrown by `AdaptiveLimit::execute` (and policies around it) when the limit is full.
/// The limit rethrows one preallocated object per instance, so catch it by reference.
class LimitExceededException : public std::runtime_error {
 public:
  explicit LimitExceededException(const std::string& message);
  LimitExceededException(std::string instance_id, const std::string& message);

  /// The id of the limit that rejected the call ("" when built from a message only).
  const std::string& instance_id() const noexcept { return instance_id_; }

 private:
  std::string instance_id_;
};

/// A call that ran past its deadline. Thrown by the timeout policy; a drop by default.
class CallTimeoutException : public std::runtime_error {
 public:
  explicit CallTimeoutException(const std::string& message);
};

/// A full bulkhead rejected the call. Thrown by the bulkhead policy; a drop by default.
class BulkheadFullException : public std::runtime_error {
 public:
  explicit BulkheadFullException(const std::string& message);
};

/// A rate limiter had no permit for the call within its timeout_duration. Thrown by the rate
/// limiter policy; one preallocated object per instance, rethrown.
class RequestNotPermittedException : public std::runtime_error {
 public:
  explicit RequestNotPermittedException(const std::string& message);
  RequestNotPermittedException(std::string instance_id, const std::string& message);

  /// The id of the rate limiter that refused the call ("" when built from a message only).
  const std::string& instance_id() const noexcept { return instance_id_; }

 private:
  std::string instance_id_;
};

/// An open (or saturated half-open) circuit breaker refused the call without running it. Thrown
/// by the circuit breaker policy; one preallocated object per instance, rethrown.
class CallNotPermittedException : public std::runtime_error {
 public:
  explicit CallNotPermittedException(const std::string& message);
  CallNotPermittedException(std::string instance_id, const std::string& message);

  /// The id of the circuit breaker that refused the call ("" when built from a message only).
  const std::string& instance_id() const noexcept { return instance_id_; }

 private:
  std::string instance_id_;
};

/// A configuration mistake. `what()` starts with the documented code, e.g.
/// "R4C-ATR-009: min_limit (30) is greater than initial_limit (20); valid: ...".
class ConfigException : public std::invalid_argument {
 public:
  /// `message` should start with an R4C code followed by ':'; `code()` extracts it.
  explicit ConfigException(const std::string& message);
  /// Builds the message "<code>: <detail>".
  ConfigException(std::string_view code, std::string_view detail);

  /// The code the message starts with, e.g. "R4C-ATR-009"; "" when the message carries none.
  const std::string& code() const noexcept { return code_; }

 private:
  std::string code_;
};

}  // namespace r4c
