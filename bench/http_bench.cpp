// SPDX-License-Identifier: Apache-2.0
// What r4c::http adds to a GET on loopback (cpp-httplib server and client, one thread), each
// beside the same request without it:
//
//   BM_HttpPlain          a keep-alive httplib::Client, an unguarded server (the baseline)
//   BM_HttpServerGuard    the same with r4c's ServerGuard installed on the server
//   BM_HttpFreshClient    a new httplib::Client per request (a connection per request), the
//                         baseline of the next
//   BM_HttpPipelineClient r4c::http::Client, whose every call opens its own connection, through
//                         a pipeline with an adaptive limit
#include <benchmark/benchmark.h>

#include <chrono>
#include <thread>

#include "../tests/http/loopback_server.hpp"
#include "r4c/http.hpp"
#include "r4c/registry.hpp"

namespace {

// The /ping server, behind `guard` when there is one.
class Server {
 public:
  explicit Server(r4c::http::ServerGuard* guard) {
    httplib::Server& server = loopback_.server();
    if (guard != nullptr) guard->install(server);
    // Without it a keep-alive request waits out the peer's delayed ACK (about 40 ms).
    server.set_tcp_nodelay(true);
    server.Get("/ping", [](const httplib::Request&, httplib::Response& response) {
      response.set_content("pong", "text/plain");
    });
    loopback_.start();
  }
  int port() const { return loopback_.port(); }

 private:
  r4c::test::LoopbackServer loopback_;
};

r4c::AdaptiveLimitConfig roomy() {
  r4c::AdaptiveLimitConfig config;
  config.initial_limit(100).max_limit(1000);
  return config;
}

void keep_alive_gets(benchmark::State& state, r4c::http::ServerGuard* guard) {
  Server server(guard);
  httplib::Client client("127.0.0.1", server.port());
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);
  for (auto _ : state) {
    httplib::Result result = client.Get("/ping");
    if (!result || result->status != 200) {
      state.SkipWithError("a request failed");
      break;
    }
    benchmark::DoNotOptimize(result->body);
  }
}

void BM_HttpPlain(benchmark::State& state) { keep_alive_gets(state, nullptr); }

void BM_HttpServerGuard(benchmark::State& state) {
  r4c::AdaptiveLimit limit("bench-server", roomy());
  r4c::http::ServerGuard guard(limit);
  keep_alive_gets(state, &guard);
}

void BM_HttpFreshClient(benchmark::State& state) {
  Server server(nullptr);
  for (auto _ : state) {
    httplib::Client client("127.0.0.1", server.port());
    httplib::Result result = client.Get("/ping");
    if (!result || result->status != 200) {
      state.SkipWithError("a request failed");
      break;
    }
    benchmark::DoNotOptimize(result->body);
  }
}

void BM_HttpPipelineClient(benchmark::State& state) {
  Server server(nullptr);
  auto registry = r4c::ResilienceRegistry::builder().build();
  auto pipeline = r4c::Pipeline<httplib::Response>::builder(registry, "bench")
                      .adaptive_limit([](r4c::AdaptiveLimitConfig& a) {
                        a.initial_limit(100).max_limit(1000);
                        r4c::http::count_overload_as_drop(a);
                      })
                      .build();
  r4c::http::Client client("127.0.0.1", server.port(), pipeline);
  for (auto _ : state) {
    httplib::Response response = client.get("/ping");
    benchmark::DoNotOptimize(response.body);
  }
}

BENCHMARK(BM_HttpPlain)->UseRealTime();
BENCHMARK(BM_HttpServerGuard)->UseRealTime();
BENCHMARK(BM_HttpFreshClient)->UseRealTime();
BENCHMARK(BM_HttpPipelineClient)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
