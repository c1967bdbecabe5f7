// SPDX-License-Identifier: Apache-2.0
// The gRPC transport of `r4c-sim live --transport grpc` (live.cpp runs the scenario, this only
// carries its calls): r4c's echo service on 127.0.0.1, one unary call per offered call, the
// server copy and the call's size in the request. Built only with r4c::grpc; live.cpp asks
// live_grpc_available() first. gRPC's headers stay in live_grpc.cpp.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <stop_token>

namespace r4c::sim {

/// What the server does with one call: serves it (true) or refuses it because its queue is full
/// (false, answered UNAVAILABLE as the HTTP transport answers 503).
using LiveServe = std::function<bool(int copy, double size)>;

/// One client's calls, over the server's channel. Thread safety: one call at a time; cancel()
/// may come from another thread.
class LiveGrpcClient {
 public:
  virtual ~LiveGrpcClient() = default;
  /// One call; throws std::runtime_error when it fails (a status other than OK). `stop` cancels
  /// it; `deadline` bounds it.
  virtual void call(int copy, double size, std::stop_token stop,
                    std::chrono::nanoseconds deadline) = 0;
  /// Cancels the call in flight, if any (the run is ending).
  virtual void cancel() = 0;
};

/// The echo server and its channel.
class LiveGrpcServer {
 public:
  virtual ~LiveGrpcServer() = default;
  virtual int port() const = 0;
  virtual std::unique_ptr<LiveGrpcClient> client() = 0;
  virtual void stop() = 0;
};

/// Whether this r4c-sim was built with gRPC.
bool live_grpc_available() noexcept;

/// Starts the echo server on an ephemeral loopback port; throws OutputError when it cannot
/// listen, std::runtime_error when r4c-sim was built without gRPC.
std::unique_ptr<LiveGrpcServer> start_live_grpc_server(LiveServe serve);

}  // namespace r4c::sim
