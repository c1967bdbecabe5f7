// SPDX-License-Identifier: Apache-2.0
// The code of docs/throttle.md (its predicates included), and of the rate limiter's weighted
// permits (docs/pipeline.md) and the bulkhead's events (docs/observability.md), in // [doc:NAME]
// regions (tests/docs checks the pages against them). Each region is followed by checks; the
// program exits non-zero if one fails.
#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <r4c/r4c.hpp>

#include "example_checks.hpp"

namespace {

using r4c_example::check;

// What a client library throws for an HTTP 503 or 429: the backend refusing.
struct Overloaded : std::runtime_error {
  Overloaded() : std::runtime_error("503 Service Unavailable") {}
};

// A backend that refuses everything until it is told to recover.
struct Backend {
  bool up = false;
  int received = 0;
  std::string search(const std::string& query) {
    ++received;
    if (!up) throw Overloaded();
    return "results for " + query;
  }
};

}  // namespace

int main() {
  r4c_example::example_name = "throttle_docs";
  using namespace std::chrono_literals;

  {
    auto clock = std::make_shared<r4c::ManualClock>();
    Backend backend;
    // [doc:throttle-standalone]
    r4c::Throttle throttle("search",
                           r4c::ThrottleConfig()
                               .k(2)  // send about 2x what is accepted
                               .window(std::chrono::minutes(2))
                               .refused_on<Overloaded>(),  // other failures: answered
                           clock);
    int shed = 0;
    for (int i = 0; i < 100; ++i) {
      try {
        throttle.execute([&] { return backend.search("c++"); });
      } catch (const Overloaded&) {
        // the backend said no
      } catch (const r4c::ThrottledException&) {
        ++shed;  // the throttle said no for it, without sending
      }
    }
    // [/doc:throttle-standalone]
    check(backend.received + shed == 100, "every call either reached the backend or was shed");
    check(backend.received < 20, "a refusing backend receives few calls");
    const r4c::ThrottleSnapshot s = throttle.snapshot();
    check(s.requests == 100 && s.accepts == 0, "every call is a request, none an accept");
    check(s.refused == static_cast<std::uint64_t>(backend.received), "refusals are the backend's");
    check(s.throttled == static_cast<std::uint64_t>(shed), "local rejections are counted apart");
  }

  {
    auto clock = std::make_shared<r4c::ManualClock>();
    // [doc:throttle-predicates]
    struct HttpError : std::runtime_error {
      explicit HttpError(int code) : std::runtime_error("http error"), status(code) {}
      int status;
    };
    r4c::Throttle throttle(
        "search",
        r4c::ThrottleConfig()
            // thrown: a 503 or a 429 is the backend refusing, a 404 is an answer
            .refused_on<HttpError>(
                [](const HttpError& e) { return e.status == 503 || e.status == 429; })
            // returned: a status code the client hands back rather than throws
            .refused_result<int>([](const int& status) { return status == 503; }),
        clock);
    try {
      throttle.execute([]() -> int { throw HttpError(404); });  // the backend answered
    } catch (const HttpError&) {
    }
    int status = throttle.execute([] { return 503; });  // returned, and counted as refused
    // [/doc:throttle-predicates]
    check(status == 503, "a refused result is still returned");
    const r4c::ThrottleSnapshot s = throttle.snapshot();
    check(s.requests == 2 && s.accepts == 1 && s.refused == 1,
          "the returned 503 is a refusal, the thrown 404 an accept");
  }

  {
    auto clock = std::make_shared<r4c::ManualClock>();
    Backend backend;
    // [doc:throttle-pipeline]
    auto registry = r4c::testing::registry(clock)
                        .config_text(
                            "defaults.throttle.k=2\n"
                            "defaults.throttle.window=2m\n"
                            "instances.search.throttle.refusedOn=Overloaded\n")
                        .exception_type<Overloaded>("Overloaded")
                        .build();
    auto search = r4c::Pipeline<std::string>::builder(registry, "search")
                      .throttle()
                      .circuit_breaker()
                      .rate_limiter()
                      .build();
    // [/doc:throttle-pipeline]
    check(search.throttle()->config().refused_on_types().size() == 1, "refusedOn from the file");
    for (int i = 0; i < 20; ++i) {
      try {
        search.execute([&] { return backend.search("c++"); });
      } catch (const std::exception&) {
      }
    }
    check(search.throttle()->snapshot().throttled > 0, "the pipeline's throttle sheds");
  }

  {
    auto clock = std::make_shared<r4c::ManualClock>();
    // [doc:rate-limiter-weights]
    r4c::RateLimiter limiter(
        "bulk-api", r4c::RateLimiterConfig().limit_for_period(100).refresh_period(1s), clock);
    bool sent = limiter.try_acquire(40);                   // a batch of 40 costs 40 permits
    limiter.execute(25, [] { /* send a batch of 25 */ });  // waits, or RequestNotPermitted
    try {
      limiter.acquire(150);  // more than a period ever holds
    } catch (const r4c::ConfigException&) {
      // R4C-USE-001, at once: never a wait that cannot end
    }
    int given_up = limiter.drain();  // the backend said 429: nothing more this period
    // [/doc:rate-limiter-weights]
    check(sent, "the batch of 40 is sent");
    check(given_up == 35, "drain gives up the 35 permits left");
    check(!limiter.try_acquire(), "a drained period has no permit left");
    clock->advance(1s);
    check(limiter.snapshot().available_permissions == 100, "the next period refills");
  }

  {
    std::vector<std::string> log;
    r4c::Bulkhead pool("db-pool", r4c::BulkheadConfig().max_concurrent(1));
    // [doc:bulkhead-events]
    r4c::Subscription on_full = pool.on_call_rejected([&log](const r4c::BulkheadEvent& e) {
      log.push_back(std::string(e.instance_id) + " full at " + std::to_string(e.in_flight) + "/" +
                    std::to_string(e.max_concurrent));
    });
    // [/doc:bulkhead-events]
    r4c::BulkheadPermit held = pool.try_acquire();
    check(!pool.try_acquire(), "a full bulkhead rejects");
    check(log == std::vector<std::string>{"db-pool full at 1/1"}, "the rejection is logged");
  }

  return r4c_example::finish("throttle_docs: all checks passed");
}
