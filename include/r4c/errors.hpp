// SPDX-License-Identifier: Apache-2.0
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

#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "r4c/outcome.hpp"  // refusals as values, beside the exceptions that throw them

namespace r4c {

/// A policy refused the call without running it: the base of every such exception
/// (LimitExceededException, BulkheadFullException, RequestNotPermittedException,
/// CallNotPermittedException, and those of kinds to come), so that one clause catches any
/// refusal, as Polly's ExecutionRejectedException does:
///
///   try { pipeline.execute(call); }
///   catch (const r4c::RejectedException& e) { shed(e.kind(), e.instance_id()); }
///
/// A CallTimeoutException is not one: that call ran. The hedge stops launching attempts after
/// a RejectedException; policies rethrow one preallocated object per instance, so catch it by
/// reference.
class RejectedException : public std::runtime_error {
 public:
  /// `kind` is the refusing kind's metrics name and must outlive the exception (a literal or
  /// a KindNames member).
  RejectedException(std::string instance_id, std::string_view kind, const std::string& message);

  /// The id of the policy that refused the call ("" when built from a message only).
  const std::string& instance_id() const noexcept { return instance_id_; }
  /// Its kind as metrics and events name it: "adaptivelimit", "bulkhead", "ratelimiter",
  /// "circuitbreaker".
  std::string_view kind() const noexcept { return kind_; }

 private:
  std::string instance_id_;
  std::string_view kind_;
};

/// Thrown by `AdaptiveLimit::execute` (and policies around it) when the limit is full.
class LimitExceededException : public RejectedException {
 public:
  explicit LimitExceededException(const std::string& message);
  LimitExceededException(std::string instance_id, const std::string& message);
};

// A limit with max_wait set says why it rejected a call that could wait, with one of these
// (each a LimitExceededException, so that a catch of it still catches them all). A full limit
// without max_wait, and a class whose share is full, throw the plain LimitExceededException.

/// The limit's wait queue was full (max_queue) and held nobody of a lower class to evict.
class LimitQueueFullException : public LimitExceededException {
 public:
  using LimitExceededException::LimitExceededException;
};
/// The call waited max_wait (or until adaptive LIFO shed it) without a slot.
class LimitWaitTimeoutException : public LimitExceededException {
 public:
  using LimitExceededException::LimitExceededException;
};
/// The caller's deadline left less than the limit's usual latency: rejected without waiting.
class LimitDeadlineException : public LimitExceededException {
 public:
  using LimitExceededException::LimitExceededException;
};
/// The caller's stop token was requested while the call waited for a slot (an asynchronous
/// call cancelled while waiting completes with asio::error::operation_aborted instead).
class LimitWaitCancelledException : public LimitExceededException {
 public:
  using LimitExceededException::LimitExceededException;
};
/// A call of a higher class took the waiting call's place in a full queue.
class LimitEvictedException : public LimitExceededException {
 public:
  using LimitExceededException::LimitExceededException;
};

/// A call that ran past its deadline. Thrown by the timeout policy; a drop by default.
class CallTimeoutException : public std::runtime_error {
 public:
  explicit CallTimeoutException(const std::string& message);
};

/// A full bulkhead rejected the call. Thrown by the bulkhead policy; a drop by default.
class BulkheadFullException : public RejectedException {
 public:
  explicit BulkheadFullException(const std::string& message);
  BulkheadFullException(std::string instance_id, const std::string& message);
};

/// A rate limiter had no permit for the call within its timeout_duration. Thrown by the rate
/// limiter policy.
class RequestNotPermittedException : public RejectedException {
 public:
  explicit RequestNotPermittedException(const std::string& message);
  RequestNotPermittedException(std::string instance_id, const std::string& message);
};

/// An open (or saturated half-open) circuit breaker refused the call without running it. Thrown
/// by the circuit breaker policy.
class CallNotPermittedException : public RejectedException {
 public:
  explicit CallNotPermittedException(const std::string& message);
  CallNotPermittedException(std::string instance_id, const std::string& message);
};

/// A retry with fail_after_max_attempts gave up on a result: the result predicate still asked
/// for a retry after the last attempt (resilience4j's MaxRetriesExceeded). Not a
/// RejectedException: the call ran, max_attempts times.
class MaxRetriesExceededException : public std::runtime_error {
 public:
  MaxRetriesExceededException(std::string instance_id, int attempts, const std::string& message);
  /// The retry's id.
  const std::string& instance_id() const noexcept { return instance_id_; }
  /// The attempts made (max_attempts).
  int attempts() const noexcept { return attempts_; }

 private:
  std::string instance_id_;
  int attempts_;
};

/// One configuration mistake among several: its code and its whole message, code first.
struct ConfigError {
  std::string code;     // "R4C-CFG-004"
  std::string message;  // "R4C-CFG-004: r4c.properties:3: key ... is 'x'; expected an integer"
};

/// A configuration mistake. `what()` starts with the documented code, e.g.
/// "R4C-ATR-009: min_limit (30) is greater than initial_limit (20); valid: ...".
/// A registry's build() reports every mistake of the file at once: code() and
/// the first line of what() are the first mistake's, errors() lists them all.
class ConfigException : public std::invalid_argument {
 public:
  /// `message` should start with an R4C code followed by ':'; `code()` extracts it.
  explicit ConfigException(const std::string& message);
  /// Builds the message "<code>: <detail>".
  ConfigException(std::string_view code, std::string_view detail);
  /// Several mistakes at once (`errors` not empty): what() is their messages, one a line.
  explicit ConfigException(std::vector<ConfigError> errors);

  /// The code the message starts with, e.g. "R4C-ATR-009"; "" when the message carries none.
  const std::string& code() const noexcept { return code_; }
  /// Every mistake reported, in the order found (one for an exception built from one message).
  /// Empty once the exception was moved from.
  std::span<const ConfigError> errors() const noexcept {
    return errors_ ? std::span<const ConfigError>(*errors_) : std::span<const ConfigError>();
  }

 private:
  std::string code_;
  // Shared, so that copying the exception cannot throw.
  std::shared_ptr<const std::vector<ConfigError>> errors_;
};

}  // namespace r4c
