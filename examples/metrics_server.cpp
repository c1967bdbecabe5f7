// SPDX-License-Identifier: Apache-2.0
// metrics_server: r4c's metrics served at /metrics for Prometheus, over HTTP with cpp-httplib.
//
// Client threads call an in-process dependency (8 workers, 10 ms per call, a queue behind)
// through a pipeline with an adaptive limit (aimd) and a 50 ms timeout, the timeouts being the
// limit's drop signal: the limit climbs until calls queue long enough to time out, backs off,
// and the surplus calls are rejected. After the load phase the threads stop, so every value
// stays put and a scraper can be checked against it; the server keeps answering until the run
// time is over. The registry also holds one policy of every other kind, so /metrics shows
// every metric r4c has.
//
//   r4c_metrics_server [--port N] [--load-seconds S] [--seconds T]
//       serves on 127.0.0.1:N (0, the default: a free port); prints "listening 127.0.0.1:PORT",
//       starts the load phase at the first request (a scraper's, so that it sees the limit
//       move however long it took to start; 60 s at most), prints "settled" once the load
//       phase is over; ends after T seconds (default 60)
//   r4c_metrics_server --print [--load-seconds S]
//       runs the load phase, prints the exposition on standard output and ends
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <semaphore>
#include <string>
#include <thread>
#include <vector>

#include <r4c/r4c.hpp>

namespace {

using namespace std::chrono_literals;

struct Options {
  int port = 0;
  int load_seconds = 5;
  int seconds = 60;
  bool print = false;
};

bool parse_int(const char* text, int low, int high, int& out) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < low || value > high) return false;
  out = static_cast<int>(value);
  return true;
}

bool parse(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--print") == 0) {
      options.print = true;
    } else if (std::strcmp(argv[i], "--port") == 0 && has_value) {
      if (!parse_int(argv[++i], 0, 65535, options.port)) return false;
    } else if (std::strcmp(argv[i], "--load-seconds") == 0 && has_value) {
      if (!parse_int(argv[++i], 1, 600, options.load_seconds)) return false;
    } else if (std::strcmp(argv[i], "--seconds") == 0 && has_value) {
      if (!parse_int(argv[++i], 1, 3600, options.seconds)) return false;
    } else {
      return false;
    }
  }
  return true;
}

// The dependency: 8 workers serving one call each in 10 ms, the others waiting their turn.
class Dependency {
 public:
  int call() {
    workers_.acquire();
    std::this_thread::sleep_for(10ms);
    workers_.release();
    return 1;
  }

 private:
  std::counting_semaphore<64> workers_{8};
};

// Drives calls through `orders` from 48 threads until `stop`.
void run_load(r4c::Pipeline<int>& orders, Dependency& dependency, std::chrono::seconds length) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int i = 0; i < 48; ++i) {
    clients.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        try {
          orders.execute([&] { return dependency.call(); });
        } catch (const r4c::LimitExceededException&) {
          std::this_thread::sleep_for(2ms);  // rejected at once: try again a little later
        } catch (const r4c::CallTimeoutException&) {
        }
      }
    });
  }
  std::this_thread::sleep_for(length);
  stop.store(true);
  for (auto& client : clients) client.join();
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!parse(argc, argv, options)) {
    std::fprintf(stderr,
                 "usage: r4c_metrics_server [--port 0..65535] [--load-seconds 1..600] "
                 "[--seconds 1..3600] [--print]\n");
    return 2;
  }

  auto registry = r4c::ResilienceRegistry::builder().build();
  auto orders = r4c::Pipeline<int>::builder(registry, "orders")
                    .adaptive_limit([](r4c::AdaptiveLimitConfig& a) {
                      a.algorithm(r4c::LimitAlgorithm::aimd)
                          .initial_limit(10)
                          .window(100ms)
                          .min_window_samples(5);
                    })
                    .timeout([](r4c::TimeoutConfig& t) { t.timeout(50ms); })
                    .build();
  // One of every other kind, so that the exposition shows every metric.
  registry.bulkhead_policy("example", "pool");
  registry.rate_limiter_policy("example", "quota");
  registry.retry_policy("example", "again");
  registry.circuit_breaker_policy("example", "inventory");
  registry.hedge_policy("example", "profiles");
  Dependency dependency;

  if (options.print) {
    run_load(orders, dependency, std::chrono::seconds(options.load_seconds));
    std::fputs(r4c::metrics::prometheus_text(registry).c_str(), stdout);
    return 0;
  }

  // [doc:serve-metrics]
  httplib::Server server;
  server.Get("/metrics", [&registry](const httplib::Request&, httplib::Response& response) {
    response.set_content(r4c::metrics::prometheus_text(registry),
                         std::string(r4c::metrics::kPrometheusContentType));
  });
  // [/doc:serve-metrics]
  const int port = options.port == 0
                       ? server.bind_to_any_port("127.0.0.1")
                       : (server.bind_to_port("127.0.0.1", options.port) ? options.port : -1);
  if (port < 0) {
    std::fprintf(stderr, "r4c_metrics_server: cannot listen on 127.0.0.1:%d\n", options.port);
    return 1;
  }
  std::binary_semaphore requested(0);
  std::atomic<bool> first{true};
  server.set_logger([&](const httplib::Request&, const httplib::Response&) {
    if (first.exchange(false)) requested.release();
  });
  std::thread listener([&server] { server.listen_after_bind(); });
  std::printf("listening 127.0.0.1:%d\n", port);
  std::fflush(stdout);

  const auto start = std::chrono::steady_clock::now();
  (void)requested.try_acquire_for(std::chrono::seconds(60));
  run_load(orders, dependency, std::chrono::seconds(options.load_seconds));
  const r4c::AdaptiveLimitSnapshot limit = registry.adaptive_limit("orders").snapshot();
  std::printf("settled limit=%d rejected=%llu limit_changes=%llu\n", limit.limit,
              static_cast<unsigned long long>(limit.rejected),
              static_cast<unsigned long long>(limit.limit_changes));
  std::fflush(stdout);

  std::this_thread::sleep_until(start + std::chrono::seconds(options.seconds));
  server.stop();
  listener.join();
  return 0;
}
