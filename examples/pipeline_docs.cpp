// SPDX-License-Identifier: Apache-2.0
// The code of docs/pipeline.md, in // [doc:NAME] regions (tests/docs checks the page against
// them). Each region is followed by checks; the program exits non-zero if one fails.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>

#include <r4c/r4c.hpp>

#include "example_checks.hpp"

namespace {

using r4c_example::check;

// A stand-in for a client library that reports its failures as error codes.
struct CodeClient {
  std::error_code get(const std::string& key, std::string& reply) {
    if (key == "slow") return std::make_error_code(std::errc::timed_out);
    reply = "item " + key;
    return {};
  }
};

// A stand-in for a client library whose calls can be cancelled through a stop token.
struct SearchBackend {
  std::string search(const std::string& query) { return "results for " + query; }
  std::string search(const std::string& query, std::stop_token stop) {
    return stop.stop_requested() ? std::string() : "results for " + query;
  }
};

struct NotFound : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An order service whose connection drops once.
struct OrderService {
  int drops = 1;
  std::string place(const std::string& item) {
    if (drops > 0) {
      --drops;
      throw std::runtime_error("connection reset");
    }
    return "placed " + item;
  }
};

// An inventory service that fails every call while it is down.
struct InventoryService {
  bool down = true;
  int calls = 0;
  int stock(const std::string&) {
    ++calls;
    if (down) throw std::runtime_error("503 Service Unavailable");
    return 7;
  }
};

// Replicas of a profile store: the first request stalls (a replica in a long pause) until its
// token is stopped; every later request is answered at once. Called from several threads.
struct Replicas {
  std::atomic<int> calls{0};
  std::string get(const std::string& user, std::stop_token stop) {
    if (calls.fetch_add(1) == 0) {
      std::mutex mutex;
      std::condition_variable_any stopped;
      std::unique_lock<std::mutex> lock(mutex);
      stopped.wait(lock, stop, [] { return false; });  // returns once `stop` is stopped
      return std::string();
    }
    return "profile of " + user;
  }
};

}  // namespace

int main() {
  r4c_example::example_name = "pipeline_docs";
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

  {
    auto clock = std::make_shared<r4c::ManualClock>();
    OrderService shop;
    // [doc:retry]
    auto registry = r4c::testing::registry(clock).build();
    auto orders = r4c::Pipeline<std::string>::builder(registry, "orders")
                      .retry([](r4c::RetryConfig& r) {
                        r.max_attempts(3).wait(std::chrono::milliseconds(100)).abort_on<NotFound>();
                      })
                      .adaptive_limit()
                      .build();
    std::string placed;
    std::thread caller([&] {
      placed = orders.execute([&] { return shop.place("book"); });  // the first attempt fails
    });
    while (clock->pending_tasks() == 0) std::this_thread::yield();  // the retry waits on the clock
    clock->advance(std::chrono::milliseconds(100));  // the wait ends: the second attempt runs
    caller.join();
    r4c::RetrySnapshot snap = registry.retry("orders").snapshot();
    // placed == "placed book", snap.retries == 1, snap.successful_with_retry == 1
    // [/doc:retry]
    check(placed == "placed book" && snap.retries == 1 && snap.successful_with_retry == 1 &&
              snap.failed_with_retry == 0 && snap.waiting_calls == 0,
          "the retry's second attempt succeeds after its wait");
    check(registry.snapshot().retries().count("orders") == 1, "the retry is in the snapshot");
    check(clock->pending_tasks() == 0, "no wait left on the clock");
  }

  {
    auto clock = std::make_shared<r4c::ManualClock>();
    InventoryService inventory;
    // [doc:circuit-breaker]
    auto registry = r4c::testing::registry(clock).build();
    auto stock = r4c::Pipeline<int>::builder(registry, "inventory")
                     .circuit_breaker([](r4c::CircuitBreakerConfig& c) {
                       c.minimum_number_of_calls(2)
                           .wait_in_open(std::chrono::seconds(30))
                           .permitted_calls_in_half_open(1);
                     })
                     .adaptive_limit()
                     .build();
    auto count = [&] { return inventory.stock("sku-1"); };  // throws while the service is down
    for (int i = 0; i < 2; ++i) {
      try {
        stock.execute(count);
      } catch (const std::runtime_error&) {
        // 2 failures of 2 calls: 100 % reaches the threshold (50 %), the breaker opens
      }
    }
    r4c::CircuitBreakerHandle breaker = registry.circuit_breaker("inventory");
    try {
      stock.execute(count);  // open: nothing inside runs, not even the limit
    } catch (const r4c::CallNotPermittedException&) {
    }
    clock->advance(std::chrono::seconds(30));  // wait_in_open passed: the next call is a trial
    inventory.down = false;
    int left = stock.execute(count);  // the trial succeeds: the breaker closes
    r4c::CircuitBreakerSnapshot snap = breaker.snapshot();
    // snap.state == closed, snap.not_permitted_calls == 1, snap.transitions == 3
    // [/doc:circuit-breaker]
    check(left == 7 && inventory.calls == 3, "the open breaker kept one call from the service");
    check(snap.state == r4c::CircuitBreakerState::closed && snap.not_permitted_calls == 1 &&
              snap.transitions == 3 && breaker.state() == r4c::CircuitBreakerState::closed,
          "closed -> open -> half_open -> closed");
    check(registry.adaptive_limit("inventory").snapshot().rejected == 0,
          "the limit never saw the rejected call");
  }

  {
    // [doc:hedge]
    auto registry = r4c::ResilienceRegistry::builder().hedge_executor(4, 256).build();
    auto profiles = r4c::Pipeline<std::string>::builder(registry, "profiles")
                        .hedge([](r4c::HedgeConfig& h) {
                          h.delay(std::chrono::milliseconds(20)).max_attempts(2);
                        })
                        .adaptive_limit()
                        .timeout([](r4c::TimeoutConfig& t) { t.timeout(std::chrono::seconds(1)); })
                        .build();
    auto replicas = std::make_shared<Replicas>();  // shared: a losing attempt may outlive the call
    std::string profile = profiles.execute([replicas](std::stop_token stop) {
      return replicas->get("ada", stop);  // the first attempt stalls until its token is stopped
    });
    r4c::HedgeSnapshot snap = registry.hedge("profiles").snapshot();
    // profile == "profile of ada", snap.hedges_launched == 1 (an attempt stalled past 20 ms)
    // [/doc:hedge]
    // Which attempt wins depends on which one the executor started first, so not checked here;
    // the ManualClock example below is exact.
    check(profile == "profile of ada" && snap.calls == 1 && snap.hedges_launched == 1 &&
              snap.failed == 0,
          "the hedge launches a second attempt past a stalled one");
    check(registry.snapshot().hedges().count("profiles") == 1, "the hedge is in the snapshot");
  }

  {
    auto clock = std::make_shared<r4c::ManualClock>();
    // [doc:hedge-manual-clock]
    auto registry = r4c::testing::registry(clock).build();
    auto profiles = r4c::Pipeline<std::string>::builder(registry, "profiles")
                        .hedge([](r4c::HedgeConfig& h) { h.delay(std::chrono::milliseconds(50)); })
                        .build();
    auto replicas = std::make_shared<Replicas>();
    std::string profile;
    std::thread caller([&] {  // execute() blocks while its attempts run on the executor
      profile =
          profiles.execute([replicas](std::stop_token stop) { return replicas->get("ada", stop); });
    });
    while (replicas->calls == 0 || clock->pending_tasks() == 0) std::this_thread::yield();
    clock->advance(std::chrono::milliseconds(50));  // the delay passes: attempt 2 is launched
    caller.join();
    // [/doc:hedge-manual-clock]
    check(profile == "profile of ada" && registry.hedge("profiles").snapshot().won_by_hedge == 1,
          "with a ManualClock the hedge launches when the clock passes its delay");
    check(clock->pending_tasks() == 0, "the hedge leaves no timer behind");
  }

  {
    auto clock = std::make_shared<r4c::ManualClock>();
    auto registry = r4c::testing::registry(clock).build();
    auto pipeline = r4c::Pipeline<std::string>::builder(registry, "catalog")
                        .retry([](r4c::RetryConfig& r) { r.wait(std::chrono::seconds(0)); })
                        .adaptive_limit([](r4c::AdaptiveLimitConfig&) {})
                        .build();
    CodeClient client;
    const std::string key = "slow";
    std::string answer;
    // [doc:error-code]
    auto outcome = pipeline.try_execute([&]() -> r4c::Outcome<std::string> {
      std::string reply;
      if (std::error_code code = client.get(key, reply))
        return r4c::Outcome<std::string>::failure(code);
      return r4c::Outcome<std::string>::success(std::move(reply));
    });
    if (outcome.has_code() && outcome.code() == std::errc::timed_out) answer = "stale " + key;
    // [/doc:error-code]
    check(answer == "stale slow", "a code failure reaches the caller as the code");
    check(registry.retry("catalog").snapshot().failed_with_retry == 1,
          "the retry retried the code failure (every failure is, by default)");
    check(registry.adaptive_limit("catalog").in_flight() == 0, "the limit freed the slot");
  }

  return r4c_example::finish("pipeline_docs: every example did what docs/pipeline.md says");
}
