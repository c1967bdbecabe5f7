// SPDX-License-Identifier: Apache-2.0
// grpc_protected_service: a gRPC service (r4c's echo proto) protected on both sides. The server
// guards its handler with an adaptive limit and ends each slot in r4c's server interceptor; the
// client's channel has r4c's client interceptor, and one call also goes the pipeline path
// (callback stub, Pipeline::async_execute, a timeout). The service has room for 4 calls at a
// time; 16 callers push it for a second (real time: this is a demonstration over real sockets).
// It prints what each side saw and exits 0 when nothing leaked. docs/integrations.md shows its
// [doc:...] regions.
//
//   r4c_grpc_protected_service
#include <grpcpp/grpcpp.h>

#include <asio/use_future.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <semaphore>
#include <string>
#include <thread>
#include <vector>

#include <r4c/asio.hpp>
#include <r4c/grpc.hpp>
#include <r4c/r4c.hpp>

#include "r4c/testing/echo.grpc.pb.h"

namespace {

using namespace std::chrono_literals;
using r4c::testing::Echo;
using r4c::testing::EchoReply;
using r4c::testing::EchoRequest;

// The service's real capacity: 4 workers; a call beyond them waits for one.
using Workers = std::counting_semaphore<4>;

// [doc:grpc-server]
class EchoService final : public Echo::Service {
 public:
  EchoService(r4c::AdaptiveLimit& limit, Workers& workers) : limit_(limit), workers_(workers) {}

  grpc::Status Echo(grpc::ServerContext* context, const EchoRequest* request,
                    EchoReply* reply) override {
    r4c::grpc::ServerPermit permit = r4c::grpc::admit(context, limit_);
    if (!permit) return r4c::grpc::rejected(context, limit_);  // UNAVAILABLE + r4c-limit trailer
    workers_.acquire();                                        // the service's own work
    std::this_thread::sleep_for(5ms);
    workers_.release();
    reply->set_message(request->message());
    return grpc::Status::OK;
  }

 private:
  r4c::AdaptiveLimit& limit_;
  Workers& workers_;
};
// [/doc:grpc-server]

}  // namespace

int main() {
  r4c::ResilienceRegistry server_registry = r4c::ResilienceRegistry::builder().build();
  r4c::AdaptiveLimit& server_limit = server_registry.adaptive_limit_policy(
      "echo-server", "", "", {}, [](r4c::AdaptiveLimitConfig& a) {
        a.initial_limit(8).max_limit(32).window(std::chrono::milliseconds(50));
      });
  Workers workers(4);
  EchoService service(server_limit, workers);
  int port = 0;
  // [doc:grpc-server-interceptor]
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  // ends each slot with the call: deadline passed or cancelled by the client = drop
  builder.experimental().SetInterceptorCreators(r4c::grpc::server_interceptors());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  // [/doc:grpc-server-interceptor]
  const std::string target = "127.0.0.1:" + std::to_string(port);

  r4c::ResilienceRegistry registry = r4c::ResilienceRegistry::builder().build();
  // [doc:grpc-client]
  auto factory = r4c::grpc::ClientInterceptorFactory::named(registry, "echo-client");
  auto channel = grpc::experimental::CreateCustomChannelWithInterceptors(
      target, grpc::InsecureChannelCredentials(), grpc::ChannelArguments(),
      r4c::grpc::client_interceptors(std::move(factory)));
  std::unique_ptr<Echo::Stub> stub = Echo::NewStub(channel);
  // a full limit: RESOURCE_EXHAUSTED at once, and the call never leaves the process
  // [/doc:grpc-client]

  // [doc:grpc-pipeline]
  auto pipeline =
      r4c::Pipeline<EchoReply>::builder(registry, "echo-pipeline")
          .adaptive_limit([](r4c::AdaptiveLimitConfig& a) { r4c::grpc::drop_on_status(a); })
          .timeout([](r4c::TimeoutConfig& t) { t.timeout(std::chrono::seconds(1)); })
          .build();
  EchoRequest request;
  request.set_message("through the pipeline");
  auto op = r4c::grpc::unary_call<EchoReply>(
      [&stub](grpc::ClientContext* context, const EchoRequest* in, EchoReply* out,
              std::function<void(grpc::Status)> done) {
        stub->async()->Echo(context, in, out, std::move(done));
      },
      request);
  EchoReply reply = pipeline.async_execute(op, asio::use_future).get();  // or use_awaitable
  // [/doc:grpc-pipeline]
  std::printf("pipeline reply: %s\n", reply.message().c_str());

  std::atomic<bool> done{false};
  std::atomic<long> served{0};
  std::atomic<long> refused_here{0};
  std::atomic<long> refused_there{0};
  std::vector<std::thread> callers;
  for (int i = 0; i < 16; ++i) {
    callers.emplace_back([&] {
      EchoRequest ping;
      ping.set_message("ping");
      while (!done.load()) {
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + 1s);
        EchoReply pong;
        const grpc::Status status = stub->Echo(&context, ping, &pong);
        if (status.ok()) {
          served.fetch_add(1);
          continue;
        }
        (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED ? refused_here : refused_there)
            .fetch_add(1);
        std::this_thread::sleep_for(1ms);
      }
    });
  }
  std::this_thread::sleep_for(1s);
  done.store(true);
  for (std::thread& caller : callers) caller.join();
  server->Shutdown(std::chrono::system_clock::now() + 1s);

  const r4c::AdaptiveLimit& client_limit = registry.adaptive_limit_policy("echo-client");
  std::printf("served %ld; refused by the client's limit %ld, by the server's %ld\n", served.load(),
              refused_here.load(), refused_there.load());
  std::printf("limits: client %d, server %d; in flight: client %d, server %d, pipeline %d\n",
              client_limit.limit(), server_limit.limit(), client_limit.in_flight(),
              server_limit.in_flight(), pipeline.adaptive_limit()->in_flight());
  const bool settled = client_limit.in_flight() == 0 && server_limit.in_flight() == 0 &&
                       pipeline.adaptive_limit()->in_flight() == 0;
  return settled && served.load() > 0 && reply.message() == request.message() ? 0 : 1;
}
