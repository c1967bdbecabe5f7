// SPDX-License-Identifier: Apache-2.0
// r4c::http: adaptive limits where cpp-httplib servers answer and clients call (target
// r4c::http, `find_package(r4c COMPONENTS http)`; see docs/integrations.md).
//
// Server side, a ServerGuard takes a limit and sits in httplib::Server's pre- and post-routing
// handlers: a request that finds the limit full gets 503 with Retry-After at once and its handler
// never runs; an admitted one is measured until its response is written, and a 5xx answer or a
// handler slower than the guard's handler_timeout is a drop. Some paths bypass it (/health,
// /metrics). A request may name its priority class in a header, `r4c-class: bulk` (or
// critical, degraded, best_effort; ServerGuardOptions::call_class() says which header, the class
// of a request naming none and the highest a request may claim; <r4c/call_class.hpp>).
//
//   r4c::AdaptiveLimit limit("api");
//   r4c::http::ServerGuard guard(limit, r4c::http::ServerGuardOptions().bypass("/health"));
//   httplib::Server server;
//   guard.install(server);
//
// Client side, a Client runs each request through a Pipeline<httplib::Response>: the
// pipeline's timeout stops the request (its stop_token stops the connection), a connection error
// or a 503/429 answer fails the call with OverloadException (a drop, once the limit counts it:
// count_overload_as_drop), and a 4xx answer is returned as it is without a sample, since it says
// nothing about the server's load.
//
//   auto pipeline = r4c::Pipeline<httplib::Response>::builder(registry, "backend")
//       .adaptive_limit(r4c::http::count_overload_as_drop)
//       .timeout([](r4c::TimeoutConfig& t) { t.timeout(std::chrono::milliseconds(500)); })
//       .build();
//   r4c::http::Client client("127.0.0.1", port, pipeline);
//   httplib::Response reply = client.get("/orders/7");
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "r4c/adaptive_limit.hpp"
#include "r4c/call_class.hpp"
#include "r4c/pipeline.hpp"

namespace r4c::http {

/// Settings of a ServerGuard: plain values, checked when the guard is built.
class ServerGuardOptions {
 public:
  static constexpr std::chrono::seconds kDefaultRetryAfter{1};

  /// A path the guard never limits, matched exactly (e.g. "/health", "/metrics").
  ServerGuardOptions& bypass(std::string path) {
    bypass_paths_.push_back(std::move(path));
    return *this;
  }
  /// The Retry-After header of a refused request, in whole seconds (1; 0 sends none).
  ServerGuardOptions& retry_after(std::chrono::seconds value) {
    retry_after_ = value;
    return *this;
  }
  /// A handler that takes at least this long counts as a drop although it answered (0: off).
  ServerGuardOptions& handler_timeout(std::chrono::nanoseconds value) {
    handler_timeout_ = value;
    return *this;
  }

  /// How a request's class is read from its headers: "r4c-class" (any case), a request naming
  /// none is critical, a request may claim any class. A server open to callers it does not
  /// trust caps what they claim (ClassFromRequest::highest) or reads no class (an empty key).
  ServerGuardOptions& call_class(ClassFromRequest rule) {
    call_class_ = std::move(rule);
    return *this;
  }

  const std::vector<std::string>& bypass_paths() const noexcept { return bypass_paths_; }
  const ClassFromRequest& call_class() const noexcept { return call_class_; }
  std::chrono::seconds retry_after() const noexcept { return retry_after_; }
  std::chrono::nanoseconds handler_timeout() const noexcept { return handler_timeout_; }

 private:
  std::vector<std::string> bypass_paths_;
  std::chrono::seconds retry_after_ = kDefaultRetryAfter;
  std::chrono::nanoseconds handler_timeout_{0};
  ClassFromRequest call_class_;
};

/// Guards an httplib::Server with an adaptive limit. A request holds its slot from the
/// pre-routing handler until its response is written (the post-routing handler, which httplib
/// calls for every response, also a handler's exception turned into 500).
/// Thread safety: one guard serves all of a server's threads; an httplib server handles each
/// request on one thread, which the guard relies on to carry the slot from one step to the next.
/// Allocation: none per request but httplib's own (the Retry-After text of a refusal is built
/// once).
class ServerGuard {
 public:
  /// Guards with `limit`, which must outlive the guard. A negative retry_after or
  /// handler_timeout throws std::invalid_argument.
  explicit ServerGuard(AdaptiveLimit& limit, ServerGuardOptions options = {});
  ServerGuard(const ServerGuard&) = delete;
  ServerGuard& operator=(const ServerGuard&) = delete;

  /// Sets `server`'s pre- and post-routing handlers to admit() and complete() (replacing any
  /// set before). A server that needs handlers of its own calls these two from them.
  void install(httplib::Server& server);

  /// The pre-routing step: Unhandled when the request may go on (admitted in its class, or a
  /// bypassed path), Handled with 503 and Retry-After when the limit has no room for its class.
  httplib::Server::HandlerResponse admit(const httplib::Request& request,
                                         httplib::Response& response) noexcept;
  /// The post-routing step: ends the request's slot, a drop for a 5xx status or a handler that
  /// took handler_timeout or longer, a sample otherwise.
  void complete(const httplib::Request& request, const httplib::Response& response) noexcept;

  /// Requests refused with 503 since the guard was built.
  std::uint64_t refused() const noexcept { return refused_.load(std::memory_order_relaxed); }
  AdaptiveLimit& limit() const noexcept { return *limit_; }

 private:
  bool bypassed(std::string_view path) const noexcept;
  CallClass class_of(const httplib::Request& request) const noexcept;

  AdaptiveLimit* limit_;
  ServerGuardOptions options_;
  std::string retry_after_text_;
  std::atomic<std::uint64_t> refused_{0};
};

/// A call that failed with an overload signal: no connection or no answer (status() 0, error()
/// says why), or an answer of 503 or 429.
class OverloadException : public std::runtime_error {
 public:
  OverloadException(int status, httplib::Error error, const std::string& what)
      : std::runtime_error(what), status_(status), error_(error) {}
  /// The HTTP status, or 0 when no response came.
  int status() const noexcept { return status_; }
  /// httplib's error when no response came; httplib::Error::Success otherwise.
  httplib::Error error() const noexcept { return error_; }

 private:
  int status_;
  httplib::Error error_;
};

/// Adds OverloadException to the limit's drop_on types (beside what is there), for the
/// adaptive limit of a Client's pipeline: `builder.adaptive_limit(count_overload_as_drop)`.
void count_overload_as_drop(AdaptiveLimitConfig& config);

/// Calls one HTTP server through a pipeline. Each call opens its own httplib::Client (a
/// loopback or LAN connection costs far less than the call), so calls may run from any number
/// of threads at once. The pipeline's timeout stops a request in flight: its stop_token stops
/// the connection.
/// Thread safety: every member may be called from any thread. The pipeline's policies live in
/// its registry, which must outlive the client.
class Client {
 public:
  Client(std::string host, int port, Pipeline<httplib::Response> pipeline);

  /// GET `path`: the response (2xx, 3xx, 4xx; a 4xx frees the limit's slot without a sample),
  /// or throws OverloadException (no connection, 503, 429), the pipeline's own exceptions
  /// (LimitExceededException, CallTimeoutException, ...), or a 5xx as OverloadException too
  /// when `count_5xx` is on.
  httplib::Response get(const std::string& path, const httplib::Headers& headers = {}) const;
  /// POST `body` to `path`, as get() does.
  httplib::Response post(const std::string& path, const std::string& body,
                         const std::string& content_type,
                         const httplib::Headers& headers = {}) const;

  /// Whether 5xx answers other than 503 are overload signals too (off: they are returned).
  Client& count_5xx(bool on) noexcept {
    count_5xx_ = on;
    return *this;
  }
  /// How long connecting may take before the call fails with an OverloadException (1 s).
  Client& connect_timeout(std::chrono::milliseconds value) noexcept {
    connect_timeout_ = value;
    return *this;
  }
  const Pipeline<httplib::Response>& pipeline() const noexcept { return pipeline_; }

 private:
  template <class Send>
  httplib::Response call(const Send& send) const;

  std::string host_;
  int port_;
  Pipeline<httplib::Response> pipeline_;
  bool count_5xx_ = false;
  std::chrono::milliseconds connect_timeout_{1000};
};

}  // namespace r4c::http
