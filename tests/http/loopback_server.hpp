// SPDX-License-Identifier: Apache-2.0
// An httplib server on an ephemeral loopback port, listening on its own thread: what the HTTP
// tests and bench/http_bench.cpp serve their requests from.
#pragma once

#include <httplib.h>

#include <chrono>
#include <thread>

namespace r4c::test {

/// Routes and guards go on server() before start(); stopped by stop() or its destruction.
class LoopbackServer {
 public:
  ~LoopbackServer() { stop(); }  // not copied: its thread listens on its server

  httplib::Server& server() { return server_; }
  // Listens on 127.0.0.1 and returns once the listener runs; the port it bound.
  int start() {
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // httplib 0.11 has no wait_until_ready(): its listener thread says so through is_running().
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return port_;
  }
  void stop() {
    if (thread_.joinable()) {
      server_.stop();
      thread_.join();
    }
  }
  int port() const { return port_; }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace r4c::test
