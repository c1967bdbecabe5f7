// SPDX-License-Identifier: Apache-2.0
// r4c::http's guard and client (see <r4c/http.hpp>).
//
// The guard carries a request's permit from the pre-routing handler to the post-routing one in
// a thread-local: httplib runs the whole of one request (routing, handler, writing the response)
// on one thread of its pool, and calls the post-routing handler for every response it writes
// after routing, a handler's exception included. A request that never reached routing (a
// malformed one) never took a slot, and a slot left behind by a request whose response was never
// written is freed, without a sample, by the next request on that thread.
#include "r4c/http.hpp"

#include <optional>
#include <stop_token>
#include <utility>

namespace r4c::http {
namespace {

struct HeldRequest {
  const ServerGuard* guard = nullptr;
  Permit permit;
  std::chrono::steady_clock::time_point start;
};

thread_local HeldRequest held_request;

// A 4xx answer inside the pipeline: an exception that is no drop, so the limit frees the slot
// without a sample; Client::call catches it and returns the answer.
struct ClientErrorAnswer {
  httplib::Response response;
};

}  // namespace

ServerGuard::ServerGuard(AdaptiveLimit& limit, ServerGuardOptions options)
    : limit_(&limit), options_(std::move(options)) {
  if (options_.retry_after().count() < 0)
    throw std::invalid_argument("r4c::http::ServerGuard: retry_after must be >= 0 s, not " +
                                std::to_string(options_.retry_after().count()) + " s");
  if (options_.handler_timeout().count() < 0)
    throw std::invalid_argument("r4c::http::ServerGuard: handler_timeout must be >= 0 ns, not " +
                                std::to_string(options_.handler_timeout().count()) + " ns");
  if (options_.retry_after().count() > 0)
    retry_after_text_ = std::to_string(options_.retry_after().count());
}

void ServerGuard::install(httplib::Server& server) {
  server.set_pre_routing_handler(
      [this](const httplib::Request& request, httplib::Response& response) {
        return admit(request, response);
      });
  server.set_post_routing_handler(
      [this](const httplib::Request& request, httplib::Response& response) {
        complete(request, response);
      });
}

bool ServerGuard::bypassed(std::string_view path) const noexcept {
  for (const std::string& bypass : options_.bypass_paths())
    if (path == bypass) return true;
  return false;
}

CallClass ServerGuard::class_of(const httplib::Request& request) const noexcept {
  const ClassFromRequest& rule = options_.call_class();
  if (rule.key().empty()) return rule.default_class();
  const auto header = request.headers.find(rule.key());  // httplib ignores the name's case
  return rule.resolve(header == request.headers.end()
                          ? std::nullopt
                          : std::optional<std::string_view>(header->second));
}

httplib::Server::HandlerResponse ServerGuard::admit(const httplib::Request& request,
                                                    httplib::Response& response) noexcept {
  HeldRequest& held = held_request;
  // A slot left by a request whose response was never written (see the top of this file).
  held.permit.on_ignore();
  held.guard = nullptr;
  if (bypassed(request.path)) return httplib::Server::HandlerResponse::Unhandled;
  Permit permit = limit_->try_acquire(class_of(request));
  if (!permit) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    response.status = 503;
    if (!retry_after_text_.empty()) response.set_header("Retry-After", retry_after_text_);
    return httplib::Server::HandlerResponse::Handled;
  }
  held.guard = this;
  held.permit = std::move(permit);
  held.start = std::chrono::steady_clock::now();
  return httplib::Server::HandlerResponse::Unhandled;
}

void ServerGuard::complete(const httplib::Request&, const httplib::Response& response) noexcept {
  HeldRequest& held = held_request;
  if (held.guard != this || !held.permit) return;
  held.guard = nullptr;
  const bool slow = options_.handler_timeout().count() > 0 &&
                    std::chrono::steady_clock::now() - held.start >= options_.handler_timeout();
  if (response.status >= 500 || slow) {
    held.permit.on_drop();
  } else {
    held.permit.on_success();
  }
}

void count_overload_as_drop(AdaptiveLimitConfig& config) {
  std::vector<ExceptionType> types = config.drop_on_types();
  const ExceptionType overload = ExceptionType::of<OverloadException>();
  for (const ExceptionType& type : types)
    if (type == overload) return;
  types.push_back(overload);
  config.drop_on(std::move(types));
}

Client::Client(std::string host, int port, Pipeline<httplib::Response> pipeline)
    : host_(std::move(host)), port_(port), pipeline_(std::move(pipeline)) {}

template <class Send>
httplib::Response Client::call(const Send& send) const {
  try {
    return pipeline_.execute([&](std::stop_token stop) -> httplib::Response {
      httplib::Client client(host_, port_);
      client.set_connection_timeout(connect_timeout_);
      // stop() shuts the socket down, which ends a request blocked on it; httplib allows it
      // from another thread (the timeout's timer).
      std::stop_callback on_stop(stop, [&client] { client.stop(); });
      httplib::Result result = send(client);
      if (!result) {
        const httplib::Error error = result.error();
        throw OverloadException(
            0, error,
            "r4c::http: " + host_ + ":" + std::to_string(port_) + ": " + httplib::to_string(error));
      }
      const int status = result->status;
      if (status == 503 || status == 429 || (count_5xx_ && status >= 500))
        throw OverloadException(status, httplib::Error::Success,
                                "r4c::http: " + host_ + ":" + std::to_string(port_) + " answered " +
                                    std::to_string(status));
      if (status >= 400 && status < 500) throw ClientErrorAnswer{std::move(*result)};
      return std::move(*result);
    });
  } catch (ClientErrorAnswer& answer) {
    return std::move(answer.response);
  }
}

httplib::Response Client::get(const std::string& path, const httplib::Headers& headers) const {
  return call([&](httplib::Client& client) { return client.Get(path, headers); });
}

httplib::Response Client::post(const std::string& path, const std::string& body,
                               const std::string& content_type,
                               const httplib::Headers& headers) const {
  return call(
      [&](httplib::Client& client) { return client.Post(path, headers, body, content_type); });
}

}  // namespace r4c::http
