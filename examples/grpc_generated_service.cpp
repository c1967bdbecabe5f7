// SPDX-License-Identifier: Apache-2.0
// grpc_generated_service: a gRPC service whose guard r4c-gen generated from
// [[r4c::adaptive_limit]] on its method (grpc_generated/demo/echo_service.hpp). Sixteen
// callback-API calls of 50 ms each meet a server limit of 4 at once: some are answered,
// the rest refused with UNAVAILABLE and the r4c-limit trailer, and the health check is answered
// all along. Real time over real sockets: it prints what it saw and exits 0 when every call was
// answered or refused by the limit and nothing is left in flight. docs/integrations.md shows its
// [doc:...] regions.
//
//   r4c_grpc_generated_service
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include <r4c/grpc.hpp>
#include <r4c/r4c.hpp>

#include "echo_service.resilient.hpp"  // generated from demo/echo_service.hpp

namespace {

using r4c::testing::Echo;
using r4c::testing::EchoReply;
using r4c::testing::EchoRequest;

struct Call {
  grpc::ClientContext context;
  EchoRequest request;
  EchoReply reply;
  std::promise<grpc::Status> done;
};

}  // namespace

int main() {
  // [doc:grpc-gen-server]
  r4c::ResilienceRegistry registry = r4c::ResilienceRegistry::builder().build();
  // The generated demo::EchoService_Resilient: Echo under the registry's limit "echo-server".
  std::unique_ptr<demo::EchoService> service = r4c::make_resilient<demo::EchoService>(registry);
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service.get());
  builder.experimental().SetInterceptorCreators(r4c::grpc::server_interceptors());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  // [/doc:grpc-gen-server]
  if (!server) {
    std::fprintf(stderr, "the server did not start\n");
    return 1;
  }
  auto stub = Echo::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));

  std::vector<std::unique_ptr<Call>> calls;
  for (int i = 0; i < 16; ++i) {
    auto& call = *calls.emplace_back(std::make_unique<Call>());
    call.request.set_message("call " + std::to_string(i));
    call.request.set_work_us(50'000);
    stub->async()->Echo(&call.context, &call.request, &call.reply,
                        [&call](grpc::Status status) { call.done.set_value(std::move(status)); });
  }
  grpc::ClientContext health_context;
  EchoReply health;
  const grpc::Status health_status =
      stub->Health(&health_context, EchoRequest(), &health);  // while the limit is busy

  int answered = 0;
  int refused = 0;
  int other = 0;
  for (auto& call : calls) {
    const grpc::Status status = call->done.get_future().get();
    const auto& trailers = call->context.GetServerTrailingMetadata();
    if (status.ok()) {
      ++answered;
    } else if (status.error_code() == grpc::StatusCode::UNAVAILABLE &&
               trailers.find(std::string(r4c::grpc::kLimitTrailer)) != trailers.end()) {
      ++refused;
    } else {
      ++other;
      std::printf("unexpected: %d %s\n", static_cast<int>(status.error_code()),
                  status.error_message().c_str());
    }
  }
  server->Shutdown();
  const r4c::AdaptiveLimitSnapshot limit = registry.adaptive_limit("echo-server").snapshot();
  std::printf("answered %d, refused by the limit %d, health check: %s\n", answered, refused,
              health_status.ok() ? health.message().c_str() : "failed");
  std::printf("server limit %d, in flight %d, rejected %llu\n", limit.limit, limit.in_flight,
              static_cast<unsigned long long>(limit.rejected));
  const bool ok = other == 0 && answered > 0 && health_status.ok() && limit.in_flight == 0 &&
                  limit.rejected == static_cast<unsigned long long>(refused);
  return ok ? 0 : 1;
}
