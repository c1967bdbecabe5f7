// SPDX-License-Identifier: Apache-2.0
// A user of r4c::grpc through the package: a channel with r4c's client interceptor (no server:
// the call fails UNAVAILABLE, a drop, and frees its slot) and a server with r4c's interceptor.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <string>
#include <utility>

#include <r4c/grpc.hpp>

int main() {
  r4c::AdaptiveLimit limit("consumer");
  auto channel = grpc::experimental::CreateCustomChannelWithInterceptors(
      "127.0.0.1:1", grpc::InsecureChannelCredentials(), grpc::ChannelArguments(),
      r4c::grpc::client_interceptors(r4c::grpc::ClientInterceptorFactory::per_channel(limit)));
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  grpc::Slice payload(std::string("ping"));  // an empty ByteBuffer is no message
  grpc::ByteBuffer request(&payload, 1);
  grpc::ByteBuffer reply;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/consumer.Service/Method", grpc::StubOptions(), &request, &reply,
                 [&done](grpc::Status status) { done.set_value(std::move(status)); });
  const grpc::Status status = done.get_future().get();
  grpc::ServerBuilder builder;
  builder.experimental().SetInterceptorCreators(r4c::grpc::server_interceptors());
  const bool ok = !status.ok() && limit.in_flight() == 0;
  std::printf("r4c::grpc consumer: status %d, %s\n", static_cast<int>(status.error_code()),
              ok ? "ok" : "failed");
  return ok ? 0 : 1;
}
