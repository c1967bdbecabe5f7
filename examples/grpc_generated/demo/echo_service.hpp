// SPDX-License-Identifier: Apache-2.0
// The annotated gRPC service of examples/grpc_generated_service.cpp (r4c's echo proto):
// r4c-gen makes echo_service.resilient.hpp from it, with demo::EchoService_Resilient, whose
// Echo admits each call through r4c::grpc's server-side admission. docs/integrations.md shows
// its [doc:...] region.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <thread>

#include "r4c/testing/echo.grpc.pb.h"

namespace demo {

// [doc:grpc-gen-service]
class EchoService : public r4c::testing::Echo::Service {
 public:
  // clang-format off
  [[r4c::adaptive_limit(name = "echo-server", initial_limit = 4, max_limit = 8)]]
  grpc::Status Echo(grpc::ServerContext*, const r4c::testing::EchoRequest* request,
                    r4c::testing::EchoReply* reply) override {
    // clang-format on
    std::this_thread::sleep_for(std::chrono::microseconds(request->work_us()));
    reply->set_message(request->message());
    return grpc::Status::OK;
  }

  // clang-format off
  [[r4c::bypass]]  // a health check: never refused (without any attribute it would not be either)
  grpc::Status Health(grpc::ServerContext*, const r4c::testing::EchoRequest*,
                      r4c::testing::EchoReply* reply) override {
    // clang-format on
    reply->set_message("serving");
    return grpc::Status::OK;
  }
};
// [/doc:grpc-gen-service]

}  // namespace demo
