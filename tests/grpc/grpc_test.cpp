// SPDX-License-Identifier: Apache-2.0
// r4c::grpc end to end: a real gRPC server (r4c's echo service) and real clients on 127.0.0.1.
// Real time, since gRPC's threads and deadlines do not read r4c's clock: the test in which a
// limit adapts runs about a second of traffic; the others give their limits a ManualClock and
// wait only for the calls.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <asio/use_future.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "../loopback_support.hpp"
#include "r4c/asio.hpp"
#include "r4c/grpc.hpp"
#include "r4c/metrics.hpp"
#include "r4c/pipeline.hpp"
#include "r4c/registry.hpp"
#include "r4c/testing/echo.grpc.pb.h"

namespace {

using namespace std::chrono_literals;
using r4c::CallClass;
using r4c::testing::Echo;
using r4c::testing::EchoReply;
using r4c::testing::EchoRequest;

// What the echo server does with a request, by its message: "hold" waits at the gate,
// "unavailable" and "invalid" answer those statuses, "work" takes work_us.
class EchoService final : public Echo::Service {
 public:
  ::grpc::Status Echo(::grpc::ServerContext* context, const EchoRequest* request,
                      EchoReply* reply) override {
    if (limit_ != nullptr) {
      r4c::grpc::ServerPermit permit = r4c::grpc::admit(context, *limit_, options_);
      if (!permit) return r4c::grpc::rejected(context, *limit_, options_);
      return serve(context, *request, *reply);
    }
    return serve(context, *request, *reply);
  }
  ::grpc::Status Health(::grpc::ServerContext*, const EchoRequest*, EchoReply* reply) override {
    reply->set_message("ok");
    return ::grpc::Status::OK;
  }

  void guard(r4c::AdaptiveLimit& limit, r4c::grpc::ServerOptions options = {}) {
    limit_ = &limit;
    options_ = options;
  }
  void capacity(int value) { capacity_.store(value); }
  void open_gate() {
    std::lock_guard lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }
  void wait_for_holders(int count) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return holding_ >= count; });
  }
  int served() const { return served_.load(); }

 private:
  ::grpc::Status serve(::grpc::ServerContext* context, const EchoRequest& request,
                       EchoReply& reply) {
    served_.fetch_add(1);
    const std::string& message = request.message();
    if (message == "hold") {
      std::unique_lock lock(mutex_);
      ++holding_;
      changed_.notify_all();
      // gRPC has no wake-up for a cancelled sync call: look every few milliseconds.
      while (!open_ && !context->IsCancelled()) changed_.wait_for(lock, 5ms);
      --holding_;
    } else if (message == "unavailable") {
      return ::grpc::Status(::grpc::StatusCode::UNAVAILABLE, "busy");
    } else if (message == "invalid") {
      return ::grpc::Status(::grpc::StatusCode::INVALID_ARGUMENT, "bad request");
    } else if (message == "capacity") {
      struct Leave {
        std::atomic<int>& running;
        ~Leave() { running.fetch_sub(1); }
      } leave{running_};
      if (running_.fetch_add(1) >= capacity_.load())
        return ::grpc::Status(::grpc::StatusCode::UNAVAILABLE, "over capacity");
      std::this_thread::sleep_for(std::chrono::microseconds(request.work_us()));
      reply.set_message(message);
      return ::grpc::Status::OK;
    }
    if (request.work_us() > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(request.work_us()));
    reply.set_message(message);
    return ::grpc::Status::OK;
  }

  r4c::AdaptiveLimit* limit_ = nullptr;
  r4c::grpc::ServerOptions options_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool open_ = false;
  int holding_ = 0;
  std::atomic<int> served_{0};
  std::atomic<int> running_{0};
  std::atomic<int> capacity_{1000};
};

// A server on an ephemeral loopback port with r4c's server interceptor.
class TestServer {
 public:
  explicit TestServer(bool interceptor = true) {
    ::grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", ::grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    if (interceptor)
      builder.experimental().SetInterceptorCreators(r4c::grpc::server_interceptors());
    server_ = builder.BuildAndStart();
  }
  ~TestServer() {
    service_.open_gate();
    server_->Shutdown(std::chrono::system_clock::now() + 1s);
  }
  EchoService& service() { return service_; }
  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  EchoService service_;
  int port_ = 0;
  std::unique_ptr<::grpc::Server> server_;
};

std::shared_ptr<::grpc::Channel> channel_with(
    const std::string& target, std::unique_ptr<r4c::grpc::ClientInterceptorFactory> factory) {
  return ::grpc::experimental::CreateCustomChannelWithInterceptors(
      target, ::grpc::InsecureChannelCredentials(), ::grpc::ChannelArguments(),
      r4c::grpc::client_interceptors(std::move(factory)));
}

EchoRequest request_of(const std::string& message, std::int64_t work_us = 0) {
  EchoRequest request;
  request.set_message(message);
  request.set_work_us(work_us);
  return request;
}

::grpc::Status call(Echo::Stub& stub, const EchoRequest& request,
                    std::chrono::milliseconds deadline = 5s) {
  ::grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + deadline);
  EchoReply reply;
  return stub.Echo(&context, request, &reply);
}

// A callback-API call started now; its status comes through the future.
struct PendingCall {
  ::grpc::ClientContext context;
  EchoRequest request;
  EchoReply reply;
  std::promise<::grpc::Status> done;
  void start(Echo::Stub& stub) {
    stub.async()->Echo(&context, &request, &reply,
                       [this](::grpc::Status status) { done.set_value(std::move(status)); });
  }
};

// A call that holds a slot on both sides: started, and waiting at the server's gate.
std::unique_ptr<PendingCall> hold_one(Echo::Stub& stub, EchoService& service) {
  auto held = std::make_unique<PendingCall>();
  held->request = request_of("hold");
  held->start(stub);
  service.wait_for_holders(1);
  return held;
}

// The window of the calls since the last one: advances past it and closes it with an OK call.
struct WindowProbe {
  r4c::ManualClock& clock;
  r4c::AdaptiveLimit& limit;
  Echo::Stub& stub;
  r4c::AdaptiveLimitSnapshot close() {
    clock.advance(2s);
    EXPECT_TRUE(call(stub, request_of("ok")).ok());
    return limit.snapshot();
  }
};

TEST(GrpcClientTest, AFullLimitAnswersResourceExhaustedAtOnceWithoutCallingTheServer) {
  TestServer server;
  auto clock = std::make_shared<r4c::ManualClock>();
  auto registry = r4c::testing::registry(clock).build();
  r4c::AdaptiveLimit& limit = registry.adaptive_limit_policy(
      "echo", "", "", {}, [](r4c::AdaptiveLimitConfig& a) { a = r4c::test::fixed_limit(1); });
  auto factory = r4c::grpc::ClientInterceptorFactory::per_channel(limit);
  r4c::grpc::ClientInterceptorFactory& counts = *factory;
  auto stub = Echo::NewStub(channel_with(server.target(), std::move(factory)));

  const std::unique_ptr<PendingCall> holder = hold_one(*stub, server.service());
  EXPECT_EQ(limit.in_flight(), 1);

  const auto start = std::chrono::steady_clock::now();
  const ::grpc::Status refused = call(*stub, request_of("ok"));
  EXPECT_EQ(refused.error_code(), ::grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  EXPECT_EQ(server.service().served(), 1);
  EXPECT_EQ(counts.refused(), 1u);

  server.service().open_gate();
  EXPECT_TRUE(holder->done.get_future().get().ok());
  EXPECT_EQ(limit.in_flight(), 0);
  // What a scrape of the client's registry shows.
  const std::string metrics = r4c::metrics::prometheus_text(registry);
  EXPECT_NE(metrics.find("r4c_calls_rejected_total{kind=\"adaptivelimit\",name=\"echo\"} 1"),
            std::string::npos)
      << metrics;
  EXPECT_NE(
      metrics.find("r4c_adaptivelimit_concurrent_calls{kind=\"adaptivelimit\",name=\"echo\"} 0"),
      std::string::npos)
      << metrics;
}

// A server and a channel under a limit of 4 on a ManualClock, with a probe for its windows.
class GrpcClassificationTest : public ::testing::Test {
 protected:
  TestServer server;
  std::shared_ptr<r4c::ManualClock> clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit{"echo", r4c::test::fixed_limit(4), clock};
  std::unique_ptr<Echo::Stub> stub = Echo::NewStub(
      channel_with(server.target(), r4c::grpc::ClientInterceptorFactory::per_channel(limit)));
  WindowProbe probe{*clock, limit, *stub};
};

TEST_F(GrpcClassificationTest, UnavailableIsADropOtherErrorsAreNoSampleAndOkIsASample) {
  EXPECT_EQ(call(*stub, request_of("unavailable")).error_code(), ::grpc::StatusCode::UNAVAILABLE);
  r4c::AdaptiveLimitSnapshot window = probe.close();
  EXPECT_TRUE(window.window_dropped);
  EXPECT_EQ(window.window_samples, 2u);  // the unavailable call and the probe's, which closed it

  EXPECT_EQ(call(*stub, request_of("invalid")).error_code(), ::grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(call(*stub, request_of("ok")).ok());
  window = probe.close();
  EXPECT_FALSE(window.window_dropped);
  EXPECT_EQ(window.window_samples, 2u);  // the ok call and the probe's; not the invalid one
  EXPECT_EQ(limit.in_flight(), 0);
}

TEST_F(GrpcClassificationTest, ADeadlineIsADropAndACancelledCallFreesItsSlotWithoutASample) {
  EXPECT_EQ(call(*stub, request_of("hold"), 50ms).error_code(),
            ::grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(limit.in_flight(), 0);
  EXPECT_TRUE(probe.close().window_dropped);

  const std::unique_ptr<PendingCall> cancelled = hold_one(*stub, server.service());
  cancelled->context.TryCancel();
  EXPECT_EQ(cancelled->done.get_future().get().error_code(), ::grpc::StatusCode::CANCELLED);
  EXPECT_EQ(limit.in_flight(), 0);
  const r4c::AdaptiveLimitSnapshot window = probe.close();
  EXPECT_EQ(window.window_samples, 1u);  // only the probe's call
  EXPECT_FALSE(window.window_dropped);
}

TEST(GrpcClientTest, ABypassedMethodIsCalledWhileTheLimitIsFull) {
  TestServer server;
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("echo", r4c::test::fixed_limit(1), clock);
  auto stub = Echo::NewStub(channel_with(
      server.target(), r4c::grpc::ClientInterceptorFactory::per_channel(
                           limit, r4c::grpc::ClientOptions().bypass("/r4c.testing.Echo/Health"))));
  const std::unique_ptr<PendingCall> holder = hold_one(*stub, server.service());

  ::grpc::ClientContext context;
  EchoReply reply;
  EXPECT_TRUE(stub->Health(&context, request_of("health"), &reply).ok());
  server.service().open_gate();
  EXPECT_TRUE(holder->done.get_future().get().ok());
  EXPECT_EQ(limit.in_flight(), 0);
}

TEST(GrpcClientTest, PerMethodLimitsComeFromTheRegistry) {
  TestServer server;
  auto registry = r4c::ResilienceRegistry::builder().build();
  auto stub = Echo::NewStub(channel_with(
      server.target(), r4c::grpc::ClientInterceptorFactory::per_method(registry, "echo.")));
  EXPECT_TRUE(call(*stub, request_of("ok")).ok());
  ::grpc::ClientContext context;
  EchoReply reply;
  EXPECT_TRUE(stub->Health(&context, request_of("health"), &reply).ok());
  EXPECT_EQ(registry.adaptive_limit("echo.r4c.testing.Echo.Echo").in_flight(), 0);
  EXPECT_EQ(registry.adaptive_limit("echo.r4c.testing.Echo.Health").in_flight(), 0);
}

TEST(GrpcClientTest, TheLimitFollowsTheServersCapacityDownAndUp) {
  TestServer server;
  r4c::AdaptiveLimit limit("echo", r4c::test::capacity_run_limit());
  auto stub = Echo::NewStub(
      channel_with(server.target(), r4c::grpc::ClientInterceptorFactory::per_channel(limit)));
  r4c::test::expect_limit_follows_capacity(
      limit, [&](int capacity) { server.service().capacity(capacity); }, 1000,
      [&] { return call(*stub, request_of("capacity", 2000)).ok(); });
}

TEST(GrpcServerTest, AFullLimitAnswersUnavailableWithATrailerAndTheHandlerDoesNotRun) {
  TestServer server;
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("echo-server", r4c::test::fixed_limit(1), clock);
  server.service().guard(limit);
  auto stub =
      Echo::NewStub(::grpc::CreateChannel(server.target(), ::grpc::InsecureChannelCredentials()));
  const std::unique_ptr<PendingCall> holder = hold_one(*stub, server.service());

  ::grpc::ClientContext context;
  EchoReply reply;
  const ::grpc::Status refused = stub->Echo(&context, request_of("ok"), &reply);
  EXPECT_EQ(refused.error_code(), ::grpc::StatusCode::UNAVAILABLE);
  const auto& trailers = context.GetServerTrailingMetadata();
  const auto trailer = trailers.find(std::string(r4c::grpc::kLimitTrailer));
  ASSERT_NE(trailer, trailers.end());
  EXPECT_EQ(std::string(trailer->second.data(), trailer->second.size()), "echo-server");
  EXPECT_EQ(server.service().served(), 1);

  server.service().open_gate();
  EXPECT_TRUE(holder->done.get_future().get().ok());
  EXPECT_EQ(limit.in_flight(), 0);
}

TEST(GrpcServerTest, TheRejectionCodeCanBeResourceExhaustedAndNothingElse) {
  TestServer server;
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("echo-server", r4c::test::fixed_limit(1), clock);
  server.service().guard(
      limit, r4c::grpc::ServerOptions().rejection_code(::grpc::StatusCode::RESOURCE_EXHAUSTED));
  auto stub =
      Echo::NewStub(::grpc::CreateChannel(server.target(), ::grpc::InsecureChannelCredentials()));
  const std::unique_ptr<PendingCall> holder = hold_one(*stub, server.service());
  EXPECT_EQ(call(*stub, request_of("ok")).error_code(), ::grpc::StatusCode::RESOURCE_EXHAUSTED);
  server.service().open_gate();
  EXPECT_TRUE(holder->done.get_future().get().ok());
  EXPECT_THROW(r4c::grpc::ServerOptions().rejection_code(::grpc::StatusCode::INTERNAL),
               std::invalid_argument);
}

// A call naming its class in its metadata, as a caller would.
::grpc::Status call_as(Echo::Stub& stub, std::string_view cls) {
  ::grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 5s);
  context.AddMetadata(std::string(r4c::ClassFromRequest::kDefaultKey), std::string(cls));
  EchoReply reply;
  return stub.Echo(&context, request_of("ok"), &reply);
}

// Under a limit of 2 with one call held, a bulk call (its share 0.5: room below 1) finds no
// room and a critical one does.
TEST(GrpcClientTest, TheClassInACallsMetadataIsTheClassItIsAdmittedIn) {
  TestServer server;
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("echo", r4c::test::fixed_limit(2), clock);
  auto stub = Echo::NewStub(
      channel_with(server.target(), r4c::grpc::ClientInterceptorFactory::per_channel(limit)));
  const std::unique_ptr<PendingCall> holder = hold_one(*stub, server.service());

  EXPECT_EQ(call_as(*stub, "bulk").error_code(), ::grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(call_as(*stub, "best_effort").error_code(), ::grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(call_as(*stub, "critical").ok());
  EXPECT_TRUE(call(*stub, request_of("ok")).ok());  // names none: critical
  EXPECT_EQ(server.service().served(), 3);
  const r4c::AdaptiveLimitSnapshot snap = limit.snapshot();
  EXPECT_EQ(snap.rejected, 2u);
  EXPECT_EQ(snap.rejected_by_class[static_cast<int>(CallClass::bulk)], 1u);
  EXPECT_EQ(snap.rejected_by_class[static_cast<int>(CallClass::best_effort)], 1u);

  server.service().open_gate();
  EXPECT_TRUE(holder->done.get_future().get().ok());
  EXPECT_EQ(limit.in_flight(), 0);
}

TEST(GrpcServerTest, AdmitReadsTheCallsClassFromItsMetadataUpToTheHighestItTrusts) {
  TestServer server;
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("echo-server", r4c::test::fixed_limit(2), clock);
  server.service().guard(limit);
  auto stub =
      Echo::NewStub(::grpc::CreateChannel(server.target(), ::grpc::InsecureChannelCredentials()));
  {
    const std::unique_ptr<PendingCall> holder = hold_one(*stub, server.service());
    EXPECT_EQ(call_as(*stub, "bulk").error_code(), ::grpc::StatusCode::UNAVAILABLE);
    EXPECT_TRUE(call_as(*stub, "critical").ok());
    EXPECT_TRUE(call_as(*stub, "bypass").ok());  // not taken from a caller: critical
    EXPECT_EQ(limit.snapshot().rejected_by_class[static_cast<int>(CallClass::bulk)], 1u);
    server.service().open_gate();
    EXPECT_TRUE(holder->done.get_future().get().ok());
  }
  EXPECT_EQ(limit.in_flight(), 0);
}

TEST(GrpcServerTest, AServerThatCapsWhatCallersClaimAdmitsAClaimedCriticalCallAsTheCap) {
  TestServer server;
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimit limit("echo-server", r4c::test::fixed_limit(2), clock);
  r4c::ClassFromRequest rule;
  rule.default_class(CallClass::bulk).highest(CallClass::degraded);  // degraded: room below 1
  server.service().guard(limit, r4c::grpc::ServerOptions().call_class(rule));
  auto stub =
      Echo::NewStub(::grpc::CreateChannel(server.target(), ::grpc::InsecureChannelCredentials()));
  // One critical call holds a slot: the service admits it in the class the test names.
  r4c::Permit held = limit.try_acquire();
  ASSERT_TRUE(held);
  EXPECT_EQ(call_as(*stub, "critical").error_code(), ::grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(call(*stub, request_of("ok")).error_code(), ::grpc::StatusCode::UNAVAILABLE);
  const r4c::AdaptiveLimitSnapshot snap = limit.snapshot();
  EXPECT_EQ(snap.rejected_by_class[static_cast<int>(CallClass::degraded)], 1u);
  EXPECT_EQ(snap.rejected_by_class[static_cast<int>(CallClass::bulk)], 1u);
  held.on_ignore();
  EXPECT_TRUE(call_as(*stub, "critical").ok());  // room again: admitted as degraded
  EXPECT_EQ(limit.in_flight(), 0);
}

TEST(GrpcServerTest, ACallWhoseDeadlinePassedOrThatTheClientCancelledIsADrop) {
  for (const bool interceptor : {true, false}) {
    SCOPED_TRACE(interceptor ? "with the interceptor" : "without it: the permit ends the slot");
    TestServer server(interceptor);
    auto clock = std::make_shared<r4c::ManualClock>();
    r4c::AdaptiveLimit limit("echo-server", r4c::test::fixed_limit(4), clock);
    server.service().guard(limit);
    auto stub =
        Echo::NewStub(::grpc::CreateChannel(server.target(), ::grpc::InsecureChannelCredentials()));
    WindowProbe probe{*clock, limit, *stub};

    // Answers OK, but after the client's deadline.
    EXPECT_EQ(call(*stub, request_of("late", 100'000), 30ms).error_code(),
              ::grpc::StatusCode::DEADLINE_EXCEEDED);
    std::this_thread::sleep_for(150ms);  // the handler's 100 ms, in real time
    EXPECT_EQ(limit.in_flight(), 0);
    EXPECT_TRUE(probe.close().window_dropped);

    const std::unique_ptr<PendingCall> cancelled = hold_one(*stub, server.service());
    cancelled->context.TryCancel();
    EXPECT_EQ(cancelled->done.get_future().get().error_code(), ::grpc::StatusCode::CANCELLED);
    for (int i = 0; i < 200 && limit.in_flight() != 0; ++i) std::this_thread::sleep_for(5ms);
    EXPECT_EQ(limit.in_flight(), 0);
    EXPECT_TRUE(probe.close().window_dropped);
  }
}

TEST(GrpcPipelineTest, ACallbackStubCallRunsThroughAsyncExecuteAndTheTimeoutCancelsIt) {
  TestServer server;
  auto registry = r4c::ResilienceRegistry::builder().build();
  auto pipeline =
      r4c::Pipeline<EchoReply>::builder(registry, "echo")
          .adaptive_limit([](r4c::AdaptiveLimitConfig& a) { r4c::grpc::drop_on_status(a); })
          .timeout([](r4c::TimeoutConfig& t) { t.timeout(200ms); })
          .build();
  auto stub =
      Echo::NewStub(::grpc::CreateChannel(server.target(), ::grpc::InsecureChannelCredentials()));
  // gRPC's own completion of a call the timeout gave up on comes later than the caller's: the
  // channel must outlive it, so the test counts them and waits for all before it ends.
  std::atomic<int> started{0};
  std::atomic<int> completed{0};
  const auto echo = [&](const std::string& message) {
    return r4c::grpc::unary_call<EchoReply>(
        [&](::grpc::ClientContext* context, const EchoRequest* request, EchoReply* reply,
            std::function<void(::grpc::Status)> done) {
          started.fetch_add(1);
          stub->async()->Echo(context, request, reply,
                              [done = std::move(done), &completed](::grpc::Status status) {
                                done(std::move(status));
                                completed.fetch_add(1);
                              });
        },
        request_of(message));
  };

  EXPECT_EQ(pipeline.async_execute(echo("hello"), asio::use_future).get().message(), "hello");

  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(pipeline.async_execute(echo("hold"), asio::use_future).get(),
               r4c::CallTimeoutException);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  // The timeout cancelled the gRPC call: the server's handler sees it and lets go.
  for (int i = 0; i < 200 && server.service().served() < 2; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(pipeline.adaptive_limit()->in_flight(), 0);

  try {
    pipeline.async_execute(echo("unavailable"), asio::use_future).get();
    ADD_FAILURE() << "no StatusException";
  } catch (const r4c::grpc::StatusException& e) {
    EXPECT_EQ(e.status().error_code(), ::grpc::StatusCode::UNAVAILABLE);
    EXPECT_TRUE(pipeline.adaptive_limit()->is_drop(std::current_exception()));
  }
  EXPECT_EQ(pipeline.adaptive_limit()->in_flight(), 0);
  for (int i = 0; i < 400 && completed.load() < started.load(); ++i)
    std::this_thread::sleep_for(5ms);
  EXPECT_EQ(completed.load(), started.load());
}

// gRPC 1.51 frees its callback queue twice when a channel's last reference goes on gRPC's own
// callback thread. A call's ClientContext holds one; if it outlived the handler, a caller that
// drops its stub once told would leave that last reference to gRPC's thread. Each call is held
// at the server until unary_call has returned (its caller's copies of the completion are gone).
TEST(GrpcPipelineTest, AUnaryCallsHandlerRunsAfterItsContextLetGoOfTheChannel) {
  TestServer server;
  const std::shared_ptr<::grpc::Channel> channel =
      ::grpc::CreateChannel(server.target(), ::grpc::InsecureChannelCredentials());
  auto stub = Echo::NewStub(channel);
  const long before = channel.use_count();
  for (const bool answered : {false, true}) {
    SCOPED_TRACE(answered ? "answered" : "past its deadline");
    long during = 0;
    std::promise<bool> told;
    auto op = r4c::grpc::unary_call<EchoReply>(
        [&](::grpc::ClientContext* context, const EchoRequest* request, EchoReply* reply,
            std::function<void(::grpc::Status)> done) {
          stub->async()->Echo(context, request, reply, std::move(done));
        },
        request_of("hold"),
        [&](::grpc::ClientContext& context) {
          if (!answered) context.set_deadline(std::chrono::system_clock::now() + 100ms);
        });
    op([&](std::exception_ptr error, const EchoReply& reply) {
      during = channel.use_count();
      told.set_value(error == nullptr && reply.message() == "hold");
    });
    server.service().wait_for_holders(1);
    if (answered) server.service().open_gate();
    EXPECT_EQ(told.get_future().get(), answered);
    EXPECT_EQ(during, before);
  }
}

}  // namespace
