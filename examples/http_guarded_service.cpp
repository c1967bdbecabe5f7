// SPDX-License-Identifier: Apache-2.0
// http_guarded_service: an HTTP service protected by r4c::http's server guard, with r4c's
// metrics at /metrics (which the guard lets through), called by r4c::http's client through a
// pipeline. The service has room for 4 requests at a time; 16 callers push it for a second
// (real time: this is a demonstration over real sockets); the example then prints what each
// side saw, reads /metrics like Prometheus would and exits 0 when both sides behaved.
// docs/integrations.md shows its [doc:...] regions.
//
//   r4c_http_guarded_service
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <optional>
#include <semaphore>
#include <string>
#include <thread>
#include <vector>

#include <r4c/http.hpp>
#include <r4c/metrics.hpp>
#include <r4c/r4c.hpp>

namespace {

using namespace std::chrono_literals;

// The service's real capacity: 4 workers; a request beyond them waits for one.
std::counting_semaphore<4> workers(4);

std::string work() {
  workers.acquire();
  std::this_thread::sleep_for(5ms);
  workers.release();
  return "done";
}

}  // namespace

int main() {
  // The server's side: its own registry, so /metrics shows the server's limit.
  r4c::ResilienceRegistry server_registry = r4c::ResilienceRegistry::builder().build();

  // [doc:http-server]
  r4c::AdaptiveLimit& limit =
      server_registry.adaptive_limit_policy("api", "", "", {}, [](r4c::AdaptiveLimitConfig& a) {
        a.initial_limit(8).max_limit(32).window(std::chrono::milliseconds(50));
      });
  r4c::http::ServerGuard guard(limit, r4c::http::ServerGuardOptions()
                                          .bypass("/health")
                                          .bypass("/metrics")
                                          .handler_timeout(std::chrono::milliseconds(200)));
  httplib::Server server;
  guard.install(server);  // 503 + Retry-After when full; 5xx and slow handlers are drops
  server.Get("/work", [&](const httplib::Request&, httplib::Response& response) {
    response.set_content(work(), "text/plain");
  });
  server.Get("/metrics", [&](const httplib::Request&, httplib::Response& response) {
    response.set_content(r4c::metrics::prometheus_text(server_registry),
                         std::string(r4c::metrics::kPrometheusContentType));
  });
  // [/doc:http-server]
  // A request may name its class (docs/integrations.md); this service trusts none with critical.
  // [doc:request-class]
  r4c::ClassFromRequest rule;
  rule.default_class(r4c::CallClass::best_effort)  // a request naming none, or no class
      .highest(r4c::CallClass::degraded);          // the most a request may claim
  // [/doc:request-class]
  const bool rule_ok = rule.resolve("critical") == r4c::CallClass::degraded &&
                       rule.resolve("bulk") == r4c::CallClass::bulk &&
                       rule.resolve(std::nullopt) == r4c::CallClass::best_effort;
  server.Get("/health", [](const httplib::Request&, httplib::Response& response) {
    response.set_content("ok", "text/plain");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread listener([&server] { server.listen_after_bind(); });
  while (!server.is_running()) std::this_thread::sleep_for(1ms);

  // The client's side.
  r4c::ResilienceRegistry registry = r4c::ResilienceRegistry::builder().build();
  // [doc:http-client]
  auto pipeline = r4c::Pipeline<httplib::Response>::builder(registry, "api-client")
                      .adaptive_limit([](r4c::AdaptiveLimitConfig& a) {
                        a.max_limit(32).window(std::chrono::milliseconds(50));
                        r4c::http::count_overload_as_drop(a);  // no connection, 503, 429
                      })
                      .timeout([](r4c::TimeoutConfig& t) { t.timeout(std::chrono::seconds(1)); })
                      .build();
  r4c::http::Client client("127.0.0.1", port, pipeline);
  try {
    httplib::Response reply = client.get("/work");  // a 4xx comes back as it is
    std::printf("first reply: %d %s\n", reply.status, reply.body.c_str());
  } catch (const r4c::http::OverloadException& e) {  // the server said it is full
    std::printf("overloaded: %d\n", e.status());
  } catch (const r4c::LimitExceededException&) {  // our own limit is full
    std::printf("refused here\n");
  }
  // [/doc:http-client]

  std::atomic<bool> done{false};
  std::atomic<long> served{0};
  std::atomic<long> failed{0};
  std::vector<std::thread> callers;
  for (int i = 0; i < 16; ++i) {
    callers.emplace_back([&] {
      while (!done.load()) {
        try {
          (void)client.get("/work");
          served.fetch_add(1);
        } catch (const std::exception&) {
          failed.fetch_add(1);
          std::this_thread::sleep_for(1ms);
        }
      }
    });
  }
  std::this_thread::sleep_for(1s);
  done.store(true);
  for (std::thread& caller : callers) caller.join();

  httplib::Client scraper("127.0.0.1", port);
  const httplib::Result metrics = scraper.Get("/metrics");
  const bool metrics_ok = metrics && metrics->status == 200 &&
                          metrics->body.find("r4c_adaptivelimit_limit{") != std::string::npos;
  server.stop();
  listener.join();

  r4c::AdaptiveLimit& client_limit = *pipeline.adaptive_limit();
  std::printf("served %ld, failed %ld; server limit %d (refused %llu), client limit %d\n",
              served.load(), failed.load(), limit.limit(),
              static_cast<unsigned long long>(guard.refused()), client_limit.limit());
  std::printf("/metrics %s\n", metrics_ok ? "shows the server's limit" : "is missing it");
  const bool settled = limit.in_flight() == 0 && client_limit.in_flight() == 0;
  return metrics_ok && settled && rule_ok && served.load() > 0 ? 0 : 1;
}
