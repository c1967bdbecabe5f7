// The code of docs/pipeline.md, in // [doc:NAME] regions (tests/docs checks the page against
// them). Each region is followed by checks; the program exits non-zero if one fails.
#include <chrono>
#include <cstdio>
#include <stop_token>
#include <string>
#include <thread>

#include <r4c/r4c.hpp>

namespace {

int failures = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "pipeline_docs: FAILED: %s\n", what);
    ++failures;
  }
}

// A stand-in for a client library whose calls can be cancelled through a stop token.
struct SearchBackend {
  std::string search(const std::string& query) { return "results for " + query; }
  std::string search(const std::string& query, std::stop_token stop) {
    return stop.stop_requested() ? std::string() : "results for " + query;
  }
};

}  // namespace

int main() {
  using namespace std::chrono_literals;
  SearchBackend backend;

  {
    // [doc:pipeline-builder]
    auto registry = r4c::ResilienceRegistry::builder().build();
    auto search = r4c::Pipeline<std::string>::builder(registry, "search")
                      .adaptive_limit([](r4c::AdaptiveLimitConfig& a) { a.max_limit(100); })
                      .timeout([](r4c::TimeoutConfig& t) { t.timeout(std::chrono::seconds(2)); })
                      .bulkhead([](r4c::BulkheadConfig& b) { b.max_concurrent(10); })
                      .rate_limiter([](r4c::RateLimiterConfig& r) {
                        r.limit_for_period(100).refresh_period(std::chrono::seconds(1));
                      })
                      .build();
    std::string results = search.execute([&] { return backend.search("java"); });
    std::string r2 = search.execute([&](std::stop_token st) { return backend.search("java", st); });
    registry.adaptive_limit("search");  // the pipeline's id is the instance id of each policy
    registry.bulkhead("search");
    registry.rate_limiter("search");
    registry.timeout("search");
    // [/doc:pipeline-builder]
    check(results == "results for java" && r2 == results, "the pipeline returns the results");
  }

  {
    auto clock = std::make_shared<r4c::ManualClock>();
    // [doc:timeout-is-a-drop]
    auto registry = r4c::testing::registry(clock).build();
    auto orders =
        r4c::Pipeline<std::string>::builder(registry, "orders")
            .adaptive_limit([](r4c::AdaptiveLimitConfig& a) {
              a.algorithm(r4c::LimitAlgorithm::aimd).initial_limit(10).min_window_samples(1);
            })
            .timeout([](r4c::TimeoutConfig& t) { t.timeout(std::chrono::seconds(2)); })
            .build();
    try {
      orders.execute([&](std::stop_token stop) {
        clock->advance(std::chrono::seconds(2));  // the deadline fires on this thread
        return stop.stop_requested() ? std::string("gave up") : std::string("placed");
      });
    } catch (const r4c::CallTimeoutException&) {
      // the call took its whole timeout: a drop sample of 2 s
    }
    r4c::AdaptiveLimitSnapshot snap = registry.adaptive_limit("orders").snapshot();
    // snap.window_dropped == true, snap.window_latency == 2 s, snap.limit == 9 (AIMD backed off)
    // [/doc:timeout-is-a-drop]
    check(snap.window_dropped && snap.window_latency == 2s && snap.limit == 9,
          "a timeout inside the limit is a drop and AIMD backs off");
    check(clock->pending_tasks() == 0, "no timer left pending");
  }

  {
    auto clock = std::make_shared<r4c::ManualClock>();
    // [doc:rate-limiter-wait]
    r4c::RateLimiter limiter("api",
                             r4c::RateLimiterConfig()
                                 .limit_for_period(1)
                                 .refresh_period(std::chrono::seconds(1))
                                 .timeout_duration(std::chrono::seconds(2)),
                             clock);
    limiter.acquire();                               // the period's only permit
    std::thread caller([&] { limiter.acquire(); });  // reserves the next period's permit, waits
    while (limiter.snapshot().waiting_calls == 0) std::this_thread::yield();
    clock->advance(std::chrono::seconds(1));  // the next period starts: the caller proceeds
    caller.join();
    // [/doc:rate-limiter-wait]
    check(limiter.snapshot().waiting_calls == 0, "the waiting caller proceeded");
  }

  {
    // [doc:standalone]
    r4c::Bulkhead pool("db-pool", r4c::BulkheadConfig().max_concurrent(10));
    int rows = pool.execute([] { return 42; });  // BulkheadFullException when 10 calls run

    r4c::Timeout timeout("search", r4c::TimeoutConfig().timeout(std::chrono::milliseconds(50)));
    std::string hits = timeout.execute([&](std::stop_token stop) {
      return backend.search("c++", stop);  // CallTimeoutException when it ends 50 ms late
    });
    // [/doc:standalone]
    check(rows == 42 && hits == "results for c++", "standalone policies run the call");
  }

  if (failures == 0) std::puts("pipeline_docs: every example did what docs/pipeline.md says");
  return failures == 0 ? 0 : 1;
}
