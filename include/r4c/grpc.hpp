// SPDX-License-Identifier: Apache-2.0
// r4c::grpc: adaptive limits where gRPC C++ clients call and servers answer (target r4c::grpc,
// `find_package(r4c COMPONENTS grpc)`; gRPC 1.51; see docs/integrations.md).
//
// Client side, ClientInterceptorFactory gives a channel an adaptive limit (one for the channel,
// one per method, or one of a registry's by name). A call takes a slot at
// PRE_SEND_INITIAL_METADATA; when the limit is full the interceptor hijacks the call, which ends
// at once with RESOURCE_EXHAUSTED and never leaves the process. At POST_RECV_STATUS the status
// is classified: UNAVAILABLE, RESOURCE_EXHAUSTED and DEADLINE_EXCEEDED are drops (settable),
// OK is a sample, any other code frees the slot without one; a call the client cancelled frees
// its slot without a sample, and the interceptor's end frees whatever it still holds.
//
//   std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> chain;
//   chain.push_back(r4c::grpc::ClientInterceptorFactory::per_channel(limit));
//   auto channel = grpc::experimental::CreateCustomChannelWithInterceptors(
//       target, grpc::InsecureChannelCredentials(), grpc::ChannelArguments(), std::move(chain));
//
// Server side, gRPC 1.51's server interceptors cannot refuse a call before its handler runs, so
// the guard is where the handler starts, and an interceptor ends the slot:
//
//   grpc::Status Echo(grpc::ServerContext* context, const Req* request, Reply* reply) override {
//     r4c::grpc::ServerPermit permit = r4c::grpc::admit(context, limit);
//     if (!permit) return r4c::grpc::rejected(context, limit);   // UNAVAILABLE + r4c-limit trailer
//     ...
//   }
//   builder.experimental().SetInterceptorCreators(r4c::grpc::server_interceptors());
//
// The server interceptor ends the slot at PRE_SEND_STATUS (a call whose deadline passed, or
// with DEADLINE_EXCEEDED or CANCELLED, is a drop; any other status a sample, as Netflix's) or,
// when no status was sent, at POST_RECV_CLOSE (a call the client cancelled is a drop), so nothing
// leaks on cancellation or abort. Without the interceptor the permit ends where it is destroyed.
// A callback handler (its reactor finished later) needs the interceptor. r4c-gen writes this
// guard itself from [[r4c::adaptive_limit]] on a service's handlers (docs/integrations.md).
//
// The pipeline path: unary_call() makes a callback-API stub call an Asio initiation for
// Pipeline::async_execute; the pipeline's timeout and the caller's Asio cancellation cancel the
// call (ClientContext::TryCancel), and a failed status completes it with a StatusException, a
// drop when drop_on_status says so.
//
// Priority classes come from the call's metadata: a caller adds `r4c-class: bulk` (or
// critical, degraded, best_effort) to its ClientContext, the client interceptor admits the call
// in that class, and the same entry reaches the server, where admit() reads it through
// ServerOptions::call_class() (a ClassFromRequest: which key, the class of a call naming none,
// the highest class a caller may claim; <r4c/call_class.hpp>). Bypass is never read from a
// call: a client bypasses by method, a server by not calling admit() (or admit(..., bypass)).
// Not yet: partitions; a limit is per channel, per method or per name.
#pragma once

#include <grpcpp/client_context.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/client_interceptor.h>
#include <grpcpp/support/server_interceptor.h>
#include <grpcpp/support/status.h>

#include <asio/associated_cancellation_slot.hpp>
#include <asio/cancellation_type.hpp>
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "r4c/adaptive_limit.hpp"
#include "r4c/call_class.hpp"
#include "r4c/registry.hpp"

namespace r4c::grpc {

/// The trailing metadata key a refused server call carries; its value is the limit's id.
inline constexpr std::string_view kLimitTrailer = "r4c-limit";

/// Settings of the client side: which status codes are drops, which methods bypass the limit.
class ClientOptions {
 public:
  /// UNAVAILABLE, RESOURCE_EXHAUSTED and DEADLINE_EXCEEDED are drops; no method bypasses.
  ClientOptions();
  /// Replaces the status codes that are drops (OK is never one: std::invalid_argument).
  ClientOptions& drop_codes(std::vector<::grpc::StatusCode> codes);
  /// A method the limit never sees, by its full name ("/pkg.Service/Method"), e.g. a health
  /// check.
  ClientOptions& bypass(std::string method) {
    bypass_methods_.push_back(std::move(method));
    return *this;
  }
  /// How a call's class is read from the metadata its ClientContext sends (AddMetadata):
  /// "r4c-class", a call naming none is critical.
  ClientOptions& call_class(ClassFromRequest rule) {
    call_class_ = std::move(rule);
    return *this;
  }
  const ClassFromRequest& call_class() const noexcept { return call_class_; }
  bool is_drop(::grpc::StatusCode code) const noexcept {
    const auto value = static_cast<unsigned>(code);
    return value < 32 && (drop_mask_ >> value & 1u) != 0;
  }
  bool bypassed(std::string_view method) const noexcept;

 private:
  std::uint32_t drop_mask_ = 0;  // bit n: status code n is a drop
  std::vector<std::string> bypass_methods_;
  ClassFromRequest call_class_;
};

/// Creates the client interceptor of each call of a channel: admission, hijacked refusal,
/// classification (see the top of this header). Give it to
/// grpc::experimental::CreateCustomChannelWithInterceptors.
/// Thread safety: gRPC calls it from any thread. The limits must outlive the channel.
/// Allocation: gRPC allocates each call's interceptor; per_method() also looks its limit up
/// under a lock (first use: creates it in the registry).
class ClientInterceptorFactory final
    : public ::grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  /// Every call of the channel under `limit`.
  static std::unique_ptr<ClientInterceptorFactory> per_channel(AdaptiveLimit& limit,
                                                               ClientOptions options = {});
  /// One limit per method, the registry's adaptive limit `<prefix><Service>.<Method>` (e.g.
  /// "echo.r4c.testing.Echo.Echo" for prefix "echo." and method "/r4c.testing.Echo/Echo"),
  /// created on first use with the registry's settings for that id.
  static std::unique_ptr<ClientInterceptorFactory> per_method(ResilienceRegistry& registry,
                                                              std::string prefix,
                                                              ClientOptions options = {});
  /// Every call under the registry's adaptive limit `id` (created with its settings now).
  static std::unique_ptr<ClientInterceptorFactory> named(ResilienceRegistry& registry,
                                                         std::string_view id,
                                                         ClientOptions options = {});

  ::grpc::experimental::Interceptor* CreateClientInterceptor(
      ::grpc::experimental::ClientRpcInfo* info) override;

  /// Calls refused at once because their limit was full.
  std::uint64_t refused() const noexcept { return refused_.load(std::memory_order_relaxed); }
  const ClientOptions& options() const noexcept { return options_; }

 private:
  friend class ClientCallInterceptor;
  ClientInterceptorFactory(AdaptiveLimit* limit, ResilienceRegistry* registry, std::string prefix,
                           ClientOptions options);
  AdaptiveLimit* limit_for(const char* method);

  AdaptiveLimit* limit_;          // per channel or named; null: per method
  ResilienceRegistry* registry_;  // per method
  std::string prefix_;
  ClientOptions options_;
  std::mutex methods_mutex_;
  std::unordered_map<std::string, AdaptiveLimit*> methods_;
  std::atomic<std::uint64_t> refused_{0};
};

/// The client interceptor chain with `factory` alone, ready for
/// CreateCustomChannelWithInterceptors.
std::vector<std::unique_ptr<::grpc::experimental::ClientInterceptorFactoryInterface>>
client_interceptors(std::unique_ptr<ClientInterceptorFactory> factory);

/// How a server refuses a call its limit has no room for.
class ServerOptions {
 public:
  /// UNAVAILABLE (Netflix's choice) or RESOURCE_EXHAUSTED; anything else throws
  /// std::invalid_argument.
  ServerOptions& rejection_code(::grpc::StatusCode code);
  ::grpc::StatusCode rejection_code() const noexcept { return rejection_code_; }
  /// How admit() reads a call's class from its client metadata: "r4c-class", a call naming
  /// none is critical, a caller may claim any class. A server that serves callers it does not
  /// trust caps what they claim (ClassFromRequest::highest) or reads no class (an empty key).
  ServerOptions& call_class(ClassFromRequest rule) {
    call_class_ = std::move(rule);
    return *this;
  }
  const ClassFromRequest& call_class() const noexcept { return call_class_; }

 private:
  ::grpc::StatusCode rejection_code_ = ::grpc::StatusCode::UNAVAILABLE;
  ClassFromRequest call_class_;
};

class ServerCallInterceptor;

/// A server call's right to run under a limit, from admit(). Converts to true when admitted.
/// With r4c's server interceptor on the call (server_interceptors()), the interceptor holds the
/// slot and ends it with the call's status; this object only says the call was admitted and
/// may be dropped at any time. Without it, this object holds the slot and ends it when
/// destroyed: a drop if the call's deadline passed or the client cancelled, a sample otherwise.
class [[nodiscard]] ServerPermit {
 public:
  ServerPermit() noexcept = default;
  ServerPermit(ServerPermit&&) noexcept = default;
  ServerPermit& operator=(ServerPermit&& other) noexcept;
  ServerPermit(const ServerPermit&) = delete;
  ServerPermit& operator=(const ServerPermit&) = delete;
  ~ServerPermit() { end(); }

  explicit operator bool() const noexcept { return admitted_; }

 private:
  friend ServerPermit admit(::grpc::ServerContextBase* context, AdaptiveLimit& limit,
                            CallClass cls);
  void end() noexcept;

  bool admitted_ = false;
  Permit permit_;  // held here only when no interceptor took it
  ::grpc::ServerContextBase* context_ = nullptr;
};

/// Takes a slot of `limit` for the server call of `context`, in the class its metadata names
/// (options.call_class()); an empty permit when the limit has no room for that class (then
/// answer with rejected()). Never blocks, never throws.
ServerPermit admit(::grpc::ServerContextBase* context, AdaptiveLimit& limit,
                   const ServerOptions& options);
/// admit() with the default ServerOptions: the class from "r4c-class", critical when none.
ServerPermit admit(::grpc::ServerContextBase* context, AdaptiveLimit& limit);
/// admit() in class `cls`, whatever the call's metadata says (bypass: admitted, not counted).
ServerPermit admit(::grpc::ServerContextBase* context, AdaptiveLimit& limit, CallClass cls);
/// The class `context`'s client metadata names under rule.key(), resolved by `rule`.
CallClass class_of(const ::grpc::ServerContextBase& context, const ClassFromRequest& rule);

/// The status a refused call answers with (ServerOptions's code, a message naming the limit),
/// after adding the r4c-limit trailer to `context`.
::grpc::Status rejected(::grpc::ServerContextBase* context, const AdaptiveLimit& limit,
                        const ServerOptions& options = {});

/// Creates r4c's server interceptor for each call: it ends the slot admit() took (see the top of
/// this header). Give it to ServerBuilder::experimental().SetInterceptorCreators().
class ServerInterceptorFactory final
    : public ::grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  ::grpc::experimental::Interceptor* CreateServerInterceptor(
      ::grpc::experimental::ServerRpcInfo* info) override;
};

/// The server interceptor chain with r4c's alone.
std::vector<std::unique_ptr<::grpc::experimental::ServerInterceptorFactoryInterface>>
server_interceptors();

/// The error category of StatusException's codes: the value is the grpc::StatusCode.
const std::error_category& status_category() noexcept;

/// A call through the pipeline path that ended with a status other than OK.
class StatusException : public std::system_error {
 public:
  explicit StatusException(::grpc::Status status)
      : std::system_error(std::error_code(static_cast<int>(status.error_code()), status_category()),
                          status.error_message()),
        status_(std::move(status)) {}
  const ::grpc::Status& status() const noexcept { return status_; }

 private:
  ::grpc::Status status_;
};

/// Makes the StatusExceptions whose code `options` calls a drop drops of `config`'s limit (sets
/// its drop_on_error; other error codes stay no drops).
void drop_on_status(AdaptiveLimitConfig& config, const ClientOptions& options = {});

/// An Asio initiation that runs one callback-API unary call, for Pipeline::async_execute or
/// AdaptiveLimit::async_execute<Response>:
///
///   auto op = r4c::grpc::unary_call<Reply>(
///       [stub](grpc::ClientContext* c, const Req* q, Reply* r, std::function<void(grpc::Status)>
///       f) { stub->async()->Echo(c, q, r, std::move(f)); }, request);
///   Reply reply = co_await pipeline.async_execute(op, asio::use_awaitable);
///
/// Each time it is started (once per attempt) it copies `request`, makes a ClientContext
/// (`setup`, if given, sets its deadline or metadata) and ties the handler's cancellation slot
/// to ClientContext::TryCancel, so the pipeline's timeout and the caller's cancellation stop
/// the call. It completes with the reply, or with a StatusException. A call the pipeline gave up
/// on (its timeout) completes in gRPC later than for the caller: the stub's channel must outlive
/// that completion too, as gRPC requires of any callback call. The handler runs after the call's
/// ClientContext is gone, so a caller may drop its stub and channel as soon as it is told.
template <class Response, class Start, class Request>
auto unary_call(Start start, Request request,
                std::function<void(::grpc::ClientContext&)> setup = {}) {
  return [start = std::move(start), request = std::move(request),
          setup = std::move(setup)](auto handler) {
    using Handler = decltype(handler);
    struct State {
      ::grpc::ClientContext context;
      Request request;
      Response response;
      std::optional<Handler> handler;
    };
    auto state = std::make_shared<State>();
    state->request = request;
    if (setup) setup(state->context);
    auto slot = asio::get_associated_cancellation_slot(state->handler.emplace(std::move(handler)));
    if (slot.is_connected()) {
      // weak: the slot's handler lives in the caller's state, which the handler keeps alive.
      slot.assign([weak = std::weak_ptr<State>(state)](asio::cancellation_type) {
        if (auto alive = weak.lock()) alive->context.TryCancel();
      });
    }
    start(&state->context, &state->request, &state->response,
          [state](::grpc::Status status) mutable {
            Handler done = std::move(*state->handler);
            asio::get_associated_cancellation_slot(done).clear();
            Response response = std::move(state->response);
            // The context holds a reference to the channel. Released after the handler, on
            // gRPC's thread, it could be the channel's last (the caller, told, drops its stub),
            // and gRPC 1.51 cannot destroy a channel from its own callback thread: it frees its
            // callback queue twice. So the context goes first.
            state.reset();
            if (status.ok()) {
              std::move(done)(std::exception_ptr(), std::move(response));
            } else {
              std::move(done)(std::make_exception_ptr(StatusException(std::move(status))),
                              Response{});
            }
          });
  };
}

}  // namespace r4c::grpc
