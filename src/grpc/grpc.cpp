// SPDX-License-Identifier: Apache-2.0
// r4c::grpc's interceptors and server guard (see <r4c/grpc.hpp>).
//
// A server call's slot is taken by admit() in the handler and ended by the call's interceptor,
// which gRPC made before the handler ran. They find each other through a table from the call's
// ServerContextBase to its interceptor: gRPC 1.51 gives a handler no way to reach its call's
// interceptors. The table is sharded so that calls on different server threads rarely share a
// lock; an interceptor leaves it in its destructor, under the same lock admit() hands it the
// slot under, so a slot is never handed to an interceptor that is going away.
#include "r4c/grpc.hpp"

#include <array>
#include <chrono>
#include <stdexcept>

namespace r4c::grpc {

using ::grpc::experimental::InterceptionHookPoints;
using ::grpc::experimental::InterceptorBatchMethods;

namespace {

constexpr std::uint32_t bit(::grpc::StatusCode code) noexcept {
  return 1u << static_cast<unsigned>(code);
}

bool deadline_passed(const ::grpc::ServerContextBase& context) noexcept {
  return std::chrono::system_clock::now() >= context.deadline();
}

class StatusCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "grpc"; }
  std::string message(int code) const override { return "gRPC status " + std::to_string(code); }
};

}  // namespace

// ---- client ------------------------------------------------------------------------------

ClientOptions::ClientOptions()
    : drop_mask_(bit(::grpc::StatusCode::UNAVAILABLE) |
                 bit(::grpc::StatusCode::RESOURCE_EXHAUSTED) |
                 bit(::grpc::StatusCode::DEADLINE_EXCEEDED)) {}

ClientOptions& ClientOptions::drop_codes(std::vector<::grpc::StatusCode> codes) {
  std::uint32_t mask = 0;
  for (::grpc::StatusCode code : codes) {
    const int value = static_cast<int>(code);
    if (code == ::grpc::StatusCode::OK || value < 0 || value > 16)
      throw std::invalid_argument("r4c::grpc::ClientOptions::drop_codes: " + std::to_string(value) +
                                  " is no error status code (valid: 1..16, OK is never a drop)");
    mask |= bit(code);
  }
  drop_mask_ = mask;
  return *this;
}

bool ClientOptions::bypassed(std::string_view method) const noexcept {
  for (const std::string& bypass : bypass_methods_)
    if (method == bypass) return true;
  return false;
}

// One client call: a slot from PRE_SEND_INITIAL_METADATA to POST_RECV_STATUS.
class ClientCallInterceptor final : public ::grpc::experimental::Interceptor {
 public:
  ClientCallInterceptor(ClientInterceptorFactory& factory, AdaptiveLimit& limit)
      : factory_(&factory), limit_(&limit) {}

  void Intercept(InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      permit_ = limit_->try_acquire(call_class(*methods->GetSendInitialMetadata()));
      if (!permit_) {
        factory_->refused_.fetch_add(1, std::memory_order_relaxed);
        hijacked_ = true;
        methods->Hijack();  // the call never leaves the process; the PRE_RECV hooks answer it
        return;
      }
    }
    if (hijacked_) {
      if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_RECV_MESSAGE))
        methods->FailHijackedRecvMessage();
      if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_RECV_STATUS))
        *methods->GetRecvStatus() =
            ::grpc::Status(::grpc::StatusCode::RESOURCE_EXHAUSTED,
                           "r4c: adaptive limit '" + limit_->instance_id() + "' is full");
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_CANCEL)) {
      // A call the client cancelled says nothing about the server: free the slot, no sample.
      permit_.on_ignore();
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_STATUS) && permit_) {
      const ::grpc::StatusCode code = methods->GetRecvStatus()->error_code();
      if (code == ::grpc::StatusCode::OK) {
        permit_.on_success();
      } else if (factory_->options_.is_drop(code)) {
        permit_.on_drop();
      } else {
        permit_.on_ignore();
      }
    }
    methods->Proceed();
  }
  // Whatever the call still holds (an abandoned call) is freed by permit_'s destructor.

 private:
  CallClass call_class(const std::multimap<std::string, std::string>& metadata) const noexcept {
    const ClassFromRequest& rule = factory_->options_.call_class();
    if (rule.key().empty()) return rule.default_class();
    const auto entry = metadata.find(rule.key());
    return rule.resolve(entry == metadata.end() ? std::nullopt
                                                : std::optional<std::string_view>(entry->second));
  }

  ClientInterceptorFactory* factory_;
  AdaptiveLimit* limit_;
  Permit permit_;
  bool hijacked_ = false;
};

ClientInterceptorFactory::ClientInterceptorFactory(AdaptiveLimit* limit,
                                                   ResilienceRegistry* registry, std::string prefix,
                                                   ClientOptions options)
    : limit_(limit),
      registry_(registry),
      prefix_(std::move(prefix)),
      options_(std::move(options)) {}

std::unique_ptr<ClientInterceptorFactory> ClientInterceptorFactory::per_channel(
    AdaptiveLimit& limit, ClientOptions options) {
  return std::unique_ptr<ClientInterceptorFactory>(
      new ClientInterceptorFactory(&limit, nullptr, "", std::move(options)));
}

std::unique_ptr<ClientInterceptorFactory> ClientInterceptorFactory::per_method(
    ResilienceRegistry& registry, std::string prefix, ClientOptions options) {
  return std::unique_ptr<ClientInterceptorFactory>(
      new ClientInterceptorFactory(nullptr, &registry, std::move(prefix), std::move(options)));
}

std::unique_ptr<ClientInterceptorFactory> ClientInterceptorFactory::named(
    ResilienceRegistry& registry, std::string_view id, ClientOptions options) {
  return per_channel(registry.adaptive_limit_policy(id), std::move(options));
}

AdaptiveLimit* ClientInterceptorFactory::limit_for(const char* method) {
  if (limit_ != nullptr) return limit_;
  const std::lock_guard lock(methods_mutex_);
  auto found = methods_.find(method);
  if (found != methods_.end()) return found->second;
  // "/pkg.Service/Method" -> "<prefix>pkg.Service.Method": a registry id of dots.
  std::string id = prefix_;
  for (const char* c = method[0] == '/' ? method + 1 : method; *c != '\0'; ++c)
    id += *c == '/' ? '.' : *c;
  AdaptiveLimit* limit = &registry_->adaptive_limit_policy(id);
  methods_.emplace(method, limit);
  return limit;
}

::grpc::experimental::Interceptor* ClientInterceptorFactory::CreateClientInterceptor(
    ::grpc::experimental::ClientRpcInfo* info) {
  if (options_.bypassed(info->method())) return nullptr;  // gRPC skips a null interceptor
  return new ClientCallInterceptor(*this, *limit_for(info->method()));
}

std::vector<std::unique_ptr<::grpc::experimental::ClientInterceptorFactoryInterface>>
client_interceptors(std::unique_ptr<ClientInterceptorFactory> factory) {
  std::vector<std::unique_ptr<::grpc::experimental::ClientInterceptorFactoryInterface>> chain;
  chain.push_back(std::move(factory));
  return chain;
}

// ---- server ------------------------------------------------------------------------------

ServerOptions& ServerOptions::rejection_code(::grpc::StatusCode code) {
  if (code != ::grpc::StatusCode::UNAVAILABLE && code != ::grpc::StatusCode::RESOURCE_EXHAUSTED)
    throw std::invalid_argument(
        "r4c::grpc::ServerOptions::rejection_code: " + std::to_string(static_cast<int>(code)) +
        " is not UNAVAILABLE (14) or RESOURCE_EXHAUSTED (8)");
  rejection_code_ = code;
  return *this;
}

// One server call: ends the slot admit() handed it.
class ServerCallInterceptor final : public ::grpc::experimental::Interceptor {
 public:
  explicit ServerCallInterceptor(::grpc::ServerContextBase* context);
  ~ServerCallInterceptor() override;

  void hold(Permit permit) noexcept {
    const std::lock_guard lock(mutex_);
    permit_ = std::move(permit);
  }

  void Intercept(InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      // Not IsCancelled(): from inside a hook it finalizes the call's close, which runs the
      // hooks again. A call the client cancelled meets POST_RECV_CLOSE first (below).
      const ::grpc::StatusCode code = methods->GetSendStatus().error_code();
      end(code == ::grpc::StatusCode::DEADLINE_EXCEEDED || code == ::grpc::StatusCode::CANCELLED ||
          deadline_passed(*context_));
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_CLOSE)) {
      // The call closed with its slot still held, before any status was sent: the client
      // cancelled or its deadline passed. A drop.
      end(true);
    }
    methods->Proceed();
  }

 private:
  void end(bool drop) noexcept {
    const std::lock_guard lock(mutex_);
    if (drop) {
      permit_.on_drop();
    } else {
      permit_.on_success();
    }
  }

  ::grpc::ServerContextBase* context_;
  std::mutex mutex_;  // admit() on the handler's thread, the hooks on gRPC's
  Permit permit_;
};

namespace {

class ServerCallTable {
 public:
  static ServerCallTable& instance() {
    static ServerCallTable table;
    return table;
  }
  void add(const ::grpc::ServerContextBase* context, ServerCallInterceptor* call) {
    Shard& shard = shard_of(context);
    const std::lock_guard lock(shard.mutex);
    shard.calls[context] = call;
  }
  void remove(const ::grpc::ServerContextBase* context) noexcept {
    Shard& shard = shard_of(context);
    const std::lock_guard lock(shard.mutex);
    shard.calls.erase(context);
  }
  // Hands `permit` to the call's interceptor; false (and `permit` untouched) when it has none.
  bool hand_over(const ::grpc::ServerContextBase* context, Permit& permit) noexcept {
    Shard& shard = shard_of(context);
    const std::lock_guard lock(shard.mutex);
    auto found = shard.calls.find(context);
    if (found == shard.calls.end()) return false;
    found->second->hold(std::move(permit));
    return true;
  }

 private:
  struct Shard {
    std::mutex mutex;
    std::unordered_map<const ::grpc::ServerContextBase*, ServerCallInterceptor*> calls;
  };
  Shard& shard_of(const ::grpc::ServerContextBase* context) noexcept {
    // Contexts are heap objects of a few hundred bytes: the low bits say little.
    return shards_[(reinterpret_cast<std::uintptr_t>(context) >> 8) % shards_.size()];
  }
  std::array<Shard, 16> shards_;
};

}  // namespace

ServerCallInterceptor::ServerCallInterceptor(::grpc::ServerContextBase* context)
    : context_(context) {
  ServerCallTable::instance().add(context, this);
}

ServerCallInterceptor::~ServerCallInterceptor() {
  ServerCallTable::instance().remove(context_);
  const std::lock_guard lock(mutex_);
  permit_.on_ignore();  // the call ended without either hook: free the slot
}

::grpc::experimental::Interceptor* ServerInterceptorFactory::CreateServerInterceptor(
    ::grpc::experimental::ServerRpcInfo* info) {
  return new ServerCallInterceptor(info->server_context());
}

std::vector<std::unique_ptr<::grpc::experimental::ServerInterceptorFactoryInterface>>
server_interceptors() {
  std::vector<std::unique_ptr<::grpc::experimental::ServerInterceptorFactoryInterface>> chain;
  chain.push_back(std::make_unique<ServerInterceptorFactory>());
  return chain;
}

ServerPermit& ServerPermit::operator=(ServerPermit&& other) noexcept {
  if (this != &other) {
    end();
    admitted_ = std::exchange(other.admitted_, false);
    permit_ = std::move(other.permit_);
    context_ = std::exchange(other.context_, nullptr);
  }
  return *this;
}

void ServerPermit::end() noexcept {
  admitted_ = false;
  if (!permit_) return;
  if (context_->IsCancelled() || deadline_passed(*context_)) {
    permit_.on_drop();
  } else {
    permit_.on_success();
  }
}

CallClass class_of(const ::grpc::ServerContextBase& context, const ClassFromRequest& rule) {
  if (rule.key().empty()) return rule.default_class();
  const auto& metadata = context.client_metadata();
  const auto entry = metadata.find(::grpc::string_ref(rule.key()));
  if (entry == metadata.end()) return rule.resolve(std::nullopt);
  return rule.resolve(std::string_view(entry->second.data(), entry->second.size()));
}

ServerPermit admit(::grpc::ServerContextBase* context, AdaptiveLimit& limit,
                   const ServerOptions& options) {
  return admit(context, limit, class_of(*context, options.call_class()));
}

ServerPermit admit(::grpc::ServerContextBase* context, AdaptiveLimit& limit) {
  static const ServerOptions defaults;
  return admit(context, limit, defaults);
}

ServerPermit admit(::grpc::ServerContextBase* context, AdaptiveLimit& limit, CallClass cls) {
  ServerPermit result;
  Permit permit = limit.try_acquire(cls);
  if (!permit) return result;
  result.admitted_ = true;
  if (!ServerCallTable::instance().hand_over(context, permit)) {
    result.permit_ = std::move(permit);
    result.context_ = context;
  }
  return result;
}

::grpc::Status rejected(::grpc::ServerContextBase* context, const AdaptiveLimit& limit,
                        const ServerOptions& options) {
  context->AddTrailingMetadata(std::string(kLimitTrailer), limit.instance_id());
  return ::grpc::Status(options.rejection_code(),
                        "r4c: adaptive limit '" + limit.instance_id() + "' is full");
}

// ---- the pipeline path -------------------------------------------------------------------

const std::error_category& status_category() noexcept {
  static const StatusCategory category;
  return category;
}

void drop_on_status(AdaptiveLimitConfig& config, const ClientOptions& options) {
  config.drop_on_error([options](const std::error_code& code) {
    return code.category() == status_category() &&
           options.is_drop(static_cast<::grpc::StatusCode>(code.value()));
  });
}

}  // namespace r4c::grpc
