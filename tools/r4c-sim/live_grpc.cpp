// SPDX-License-Identifier: Apache-2.0
#include "live_grpc.hpp"

#include <grpcpp/grpcpp.h>

#include <charconv>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>

#include "common.hpp"
#include "r4c/testing/echo.grpc.pb.h"

namespace r4c::sim {
namespace {

using r4c::testing::Echo;
using r4c::testing::EchoReply;
using r4c::testing::EchoRequest;

// The request's message is "<copy>:<size>", as the HTTP transport's query is server=&size=.
class EchoService final : public Echo::Service {
 public:
  explicit EchoService(LiveServe serve) : serve_(std::move(serve)) {}
  ::grpc::Status Echo(::grpc::ServerContext*, const EchoRequest* request,
                      EchoReply* reply) override {
    const std::string& text = request->message();
    const std::size_t colon = text.find(':');
    int copy = -1;
    double size = 0.0;
    if (colon == std::string::npos ||
        parse_number(text.substr(0, colon), copy) != NumberStatus::kOk ||
        parse_number(text.substr(colon + 1), size) != NumberStatus::kOk || !(size >= 0.0) ||
        size > 1e6) {
      return ::grpc::Status(::grpc::StatusCode::INVALID_ARGUMENT, "bad call: " + text);
    }
    if (!serve_(copy, size)) return ::grpc::Status(::grpc::StatusCode::UNAVAILABLE, "queue full");
    reply->set_message("ok");
    return ::grpc::Status::OK;
  }

 private:
  LiveServe serve_;
};

class Client final : public LiveGrpcClient {
 public:
  explicit Client(std::shared_ptr<::grpc::Channel> channel) : stub_(Echo::NewStub(channel)) {}

  void call(int copy, double size, std::stop_token stop,
            std::chrono::nanoseconds deadline) override {
    ::grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    {
      const std::lock_guard lock(mutex_);
      current_ = &context;
    }
    std::stop_callback on_stop(stop, [&context] { context.TryCancel(); });
    EchoRequest request;
    request.set_message(std::to_string(copy) + ":" + shortest(size));
    EchoReply reply;
    const ::grpc::Status status = stub_->Echo(&context, request, &reply);
    {
      const std::lock_guard lock(mutex_);
      current_ = nullptr;
    }
    if (!status.ok())
      throw std::runtime_error("gRPC status " + std::to_string(status.error_code()) + ": " +
                               status.error_message());
  }

  void cancel() override {
    const std::lock_guard lock(mutex_);
    if (current_ != nullptr) current_->TryCancel();
  }

 private:
  std::unique_ptr<Echo::Stub> stub_;
  std::mutex mutex_;
  ::grpc::ClientContext* current_ = nullptr;
};

class Server final : public LiveGrpcServer {
 public:
  explicit Server(LiveServe serve) : service_(std::move(serve)) {
    ::grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", ::grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port_ <= 0)
      throw OutputError("cannot listen on 127.0.0.1 (an ephemeral port) for gRPC");
    channel_ = ::grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                                     ::grpc::InsecureChannelCredentials());
  }
  ~Server() override { stop(); }

  int port() const override { return port_; }
  std::unique_ptr<LiveGrpcClient> client() override { return std::make_unique<Client>(channel_); }
  void stop() override {
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
      server_.reset();
    }
  }

 private:
  EchoService service_;
  int port_ = 0;
  std::unique_ptr<::grpc::Server> server_;
  std::shared_ptr<::grpc::Channel> channel_;
};

}  // namespace

bool live_grpc_available() noexcept { return true; }

std::unique_ptr<LiveGrpcServer> start_live_grpc_server(LiveServe serve) {
  return std::make_unique<Server>(std::move(serve));
}

}  // namespace r4c::sim
