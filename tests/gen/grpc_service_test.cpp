// SPDX-License-Identifier: Apache-2.0
// gRPC services that r4c-gen guards (tests/gen/grpc/gen_grpc/echo_services.hpp): the generated
// header against its golden file, then the generated services on a real server on 127.0.0.1,
// called by real clients. The callback service is r4c::grpc's callback (reactor) server path:
// admission, refusal with a finished default reactor, and the slot released by the server's
// interceptor when the client cancels or the server shuts down with the call held.
// Real time, since gRPC's threads and deadlines do not read r4c's clock: the limits have a
// ManualClock, and the tests wait only for the calls.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "echo_services.resilient.hpp"  // generated from gen_grpc/echo_services.hpp
#include "r4c/grpc.hpp"
#include "r4c/registry.hpp"

namespace {

using namespace std::chrono_literals;
using r4c::testing::Echo;
using r4c::testing::EchoReply;
using r4c::testing::EchoRequest;

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(GeneratedGrpcHeaderTest, IsTheGoldenOne) {
  std::string generated = read(R4C_GEN_GRPC_OUTPUT);
  ASSERT_FALSE(generated.empty());
  // The header is named by its absolute path, which depends on where the tree is.
  const std::string source = R4C_SOURCE_DIR;
  for (std::size_t at = generated.find(source); at != std::string::npos;
       at = generated.find(source, at)) {
    generated.replace(at, source.size(), "<source>");
  }
  EXPECT_EQ(generated, read(R4C_GEN_GRPC_EXPECTED));
}

// docs/integrations.md shows generated code in ```c++ blocks: each is a part of this header.
TEST(GeneratedGrpcHeaderTest, HoldsTheDocsExcerpts) {
  const std::string generated = read(R4C_GEN_GRPC_OUTPUT);
  const std::string page = read(std::string(R4C_SOURCE_DIR) + "/docs/integrations.md");
  const std::string open = "```c++\n";
  int excerpts = 0;
  for (std::size_t at = page.find(open); at != std::string::npos; at = page.find(open, at)) {
    at += open.size();
    const std::size_t end = page.find("```", at);
    ASSERT_NE(end, std::string::npos);
    ++excerpts;
    EXPECT_NE(generated.find(page.substr(at, end - at)), std::string::npos)
        << "docs/integrations.md: this ```c++ block is not in the generated header:\n"
        << page.substr(at, end - at);
  }
  EXPECT_GE(excerpts, 1);
}

// A generated service on an ephemeral loopback port, with r4c's server interceptor.
class Served {
 public:
  explicit Served(::grpc::Service& service) {
    ::grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", ::grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service);
    builder.experimental().SetInterceptorCreators(r4c::grpc::server_interceptors());
    server_ = builder.BuildAndStart();
    stub_ = Echo::NewStub(::grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                                                ::grpc::InsecureChannelCredentials()));
  }
  ~Served() { shutdown(); }
  void shutdown() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + 1s);
    server_.reset();
  }
  Echo::Stub& stub() { return *stub_; }

 private:
  int port_ = 0;
  std::unique_ptr<::grpc::Server> server_;
  std::unique_ptr<Echo::Stub> stub_;
};

// A call started with the stub's callback API; its status comes through the future.
struct Started {
  ::grpc::ClientContext context;
  EchoRequest request;
  EchoReply reply;
  std::promise<::grpc::Status> done;
  Started(Echo::Stub& stub, const std::string& message) {
    request.set_message(message);
    stub.async()->Echo(&context, &request, &reply,
                       [this](::grpc::Status status) { done.set_value(std::move(status)); });
  }
};

struct Answer {
  ::grpc::Status status;
  std::string trailer;  // r4c-limit's value, "" without it
};

template <class Method>
Answer call(Echo::Stub& stub, Method method, const std::string& message = "ok") {
  ::grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 5s);
  EchoRequest request;
  request.set_message(message);
  EchoReply reply;
  Answer answer{(stub.*method)(&context, request, &reply), ""};
  const auto& trailers = context.GetServerTrailingMetadata();
  if (auto found = trailers.find(std::string(r4c::grpc::kLimitTrailer)); found != trailers.end())
    answer.trailer.assign(found->second.data(), found->second.size());
  return answer;
}

// Waits (real time: the release happens on gRPC's threads) until the limit has nothing in flight.
void expect_nothing_in_flight(const r4c::AdaptiveLimitHandle& limit) {
  for (int i = 0; i < 400 && limit.in_flight() != 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(limit.in_flight(), 0);
}

class GeneratedGrpcServiceTest : public ::testing::Test {
 protected:
  // A "hold" call, admitted and waiting in the service.
  std::unique_ptr<Started> hold(Served& served) {
    auto held = std::make_unique<Started>(served.stub(), "hold");
    gate_.wait_for_holders(1);
    return held;
  }

  std::shared_ptr<r4c::ManualClock> clock_ = std::make_shared<r4c::ManualClock>();
  // The external file tunes the generated services' limits by their attributes' names.
  r4c::ResilienceRegistry registry_ =
      r4c::testing::registry(clock_)
          .config_text(
              "instances.echo-server.adaptiveLimit.minWindowSamples=1\n"
              "instances.echo-callback.adaptiveLimit.minWindowSamples=1")
          .build();
  gen_grpc::Gate gate_;
};

TEST_F(GeneratedGrpcServiceTest, AFullLimitRefusesWithTheTrailerBeforeTheHandlerAndHealthBypasses) {
  auto service = r4c::make_resilient<gen_grpc::SyncEcho>(registry_, gate_);
  const r4c::AdaptiveLimitHandle limit = registry_.adaptive_limit("echo-server");
  Served served(*service);
  const std::unique_ptr<Started> holder = hold(served);
  EXPECT_EQ(limit.in_flight(), 1);

  const Answer refused = call(served.stub(), &Echo::Stub::Echo);
  EXPECT_EQ(refused.status.error_code(), ::grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(refused.trailer, "echo-server");
  EXPECT_EQ(dynamic_cast<gen_grpc::SyncEcho&>(*service).served(), 1);  // the handler did not run
  const Answer health = call(served.stub(), &Echo::Stub::Health);      // [[r4c::bypass]]
  EXPECT_TRUE(health.status.ok()) << health.status.error_message();
  EXPECT_EQ(health.trailer, "");

  gate_.open([](::grpc::ServerUnaryReactor*) {});
  EXPECT_TRUE(holder->done.get_future().get().ok());
  expect_nothing_in_flight(limit);
  EXPECT_TRUE(call(served.stub(), &Echo::Stub::Echo).status.ok());
  EXPECT_EQ(limit.snapshot().rejected, 1u);
}

TEST_F(GeneratedGrpcServiceTest, TheSecondConstructorSetsTheRejectionCode) {
  auto service = r4c::make_resilient<gen_grpc::SyncEcho>(
      registry_, r4c::grpc::ServerOptions().rejection_code(::grpc::StatusCode::RESOURCE_EXHAUSTED),
      gate_);
  Served served(*service);
  const std::unique_ptr<Started> holder = hold(served);
  EXPECT_EQ(call(served.stub(), &Echo::Stub::Echo).status.error_code(),
            ::grpc::StatusCode::RESOURCE_EXHAUSTED);
  gate_.open([](::grpc::ServerUnaryReactor*) {});
  EXPECT_TRUE(holder->done.get_future().get().ok());
}

// The generated guard admits a call in the class its metadata names, by the wrapper's options:
// under the limit of 1, bulk's share (0.5) leaves a bulk call no room even with nothing in flight.
TEST_F(GeneratedGrpcServiceTest, TheGuardAdmitsACallInTheClassItsMetadataNamesByTheOptions) {
  const auto call_as_bulk = [](Echo::Stub& stub) {
    ::grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 5s);
    context.AddMetadata("r4c-class", "bulk");
    EchoRequest request;
    request.set_message("ok");
    EchoReply reply;
    return stub.Echo(&context, request, &reply);
  };
  auto trusting = r4c::make_resilient<gen_grpc::SyncEcho>(registry_, gate_);
  const r4c::AdaptiveLimitHandle limit = registry_.adaptive_limit("echo-server");
  {
    Served served(*trusting);
    EXPECT_EQ(call_as_bulk(served.stub()).error_code(), ::grpc::StatusCode::UNAVAILABLE);
    EXPECT_TRUE(call(served.stub(), &Echo::Stub::Echo).status.ok());
    EXPECT_EQ(limit.snapshot().rejected_by_class[static_cast<int>(r4c::CallClass::bulk)], 1u);
  }
  // A service that reads no class from its callers admits the same call as critical.
  auto service = r4c::make_resilient<gen_grpc::SyncEcho>(
      registry_, r4c::grpc::ServerOptions().call_class(r4c::ClassFromRequest().key("")), gate_);
  Served served(*service);
  EXPECT_TRUE(call_as_bulk(served.stub()).ok());
  expect_nothing_in_flight(limit);
}

TEST_F(GeneratedGrpcServiceTest, TheCallbackPathAdmitsRefusesWithAFinishedReactorAndReleases) {
  auto service = r4c::make_resilient<gen_grpc::CallbackEcho>(registry_, gate_);
  const r4c::AdaptiveLimitHandle limit = registry_.adaptive_limit("echo-callback");
  Served served(*service);
  EXPECT_TRUE(call(served.stub(), &Echo::Stub::Echo).status.ok());  // a default reactor
  expect_nothing_in_flight(limit);

  const std::unique_ptr<Started> holder = hold(served);
  EXPECT_EQ(limit.in_flight(), 1);  // the handler returned; the interceptor holds the slot
  const Answer refused = call(served.stub(), &Echo::Stub::Echo);
  EXPECT_EQ(refused.status.error_code(), ::grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(refused.trailer, "echo-callback");
  EXPECT_EQ(dynamic_cast<gen_grpc::CallbackEcho&>(*service).served(), 2);
  EXPECT_TRUE(call(served.stub(), &Echo::Stub::Health).status.ok());  // not annotated

  gate_.open([](::grpc::ServerUnaryReactor* r) {
    static_cast<gen_grpc::HeldReactor*>(r)->finish(::grpc::Status::OK);
  });
  EXPECT_TRUE(holder->done.get_future().get().ok());
  expect_nothing_in_flight(limit);
  const r4c::AdaptiveLimitSnapshot after = limit.snapshot();
  EXPECT_EQ(after.rejected, 1u);
  EXPECT_FALSE(after.window_dropped);
}

TEST_F(GeneratedGrpcServiceTest, ACallbackCallTheClientCancelsIsADropAndFreesItsSlot) {
  auto service = r4c::make_resilient<gen_grpc::CallbackEcho>(registry_, gate_);
  const r4c::AdaptiveLimitHandle limit = registry_.adaptive_limit("echo-callback");
  Served served(*service);
  const std::unique_ptr<Started> holder = hold(served);
  clock_->advance(2s);  // the call's end closes the window
  holder->context.TryCancel();
  EXPECT_EQ(holder->done.get_future().get().error_code(), ::grpc::StatusCode::CANCELLED);
  expect_nothing_in_flight(limit);
  for (int i = 0; i < 400 && gate_.holding() != 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(gate_.holding(), 0);  // OnCancel finished the reactor, OnDone deleted it
  const r4c::AdaptiveLimitSnapshot after = limit.snapshot();
  EXPECT_EQ(after.windows, 1u);
  EXPECT_TRUE(after.window_dropped);
  EXPECT_TRUE(call(served.stub(), &Echo::Stub::Echo).status.ok());  // the slot is free
}

TEST_F(GeneratedGrpcServiceTest, AServerShutDownWithCallbackCallsHeldLeaksNoSlot) {
  auto service = r4c::make_resilient<gen_grpc::CallbackEcho>(registry_, gate_);
  const r4c::AdaptiveLimitHandle limit = registry_.adaptive_limit("echo-callback");
  auto served = std::make_unique<Served>(*service);
  const std::unique_ptr<Started> holder = hold(*served);
  EXPECT_EQ(limit.in_flight(), 1);
  served->shutdown();  // cancels the held call: OnCancel finishes it
  EXPECT_NE(holder->done.get_future().get().error_code(), ::grpc::StatusCode::OK);
  EXPECT_EQ(limit.in_flight(), 0);
  EXPECT_EQ(gate_.holding(), 0);
}

}  // namespace
