// SPDX-License-Identifier: Apache-2.0
// live_grpc.hpp for an r4c-sim built without gRPC: `--transport grpc` says so.
#include <stdexcept>

#include "live_grpc.hpp"

namespace r4c::sim {

bool live_grpc_available() noexcept { return false; }

std::unique_ptr<LiveGrpcServer> start_live_grpc_server(LiveServe) {
  throw std::runtime_error(
      "this r4c-sim was built without gRPC (Debian: libgrpc++-dev protobuf-compiler-grpc); "
      "--transport grpc is not available");
}

}  // namespace r4c::sim
