// SPDX-License-Identifier: Apache-2.0
// The code of docs/observability.md, in // [doc:NAME] regions (tests/docs checks the page
// against them), run as a test: each region is followed by checks of what the page says.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <r4c/r4c.hpp>

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "observability_docs: %s\n", what);
    std::exit(1);
  }
}

struct Unavailable : std::runtime_error {
  Unavailable() : std::runtime_error("unavailable") {}
};

}  // namespace

int main() {
  using namespace std::chrono_literals;
  {
    auto clock = std::make_shared<r4c::ManualClock>();
    auto registry = r4c::testing::registry(clock)
                        .adaptive_limit_defaults([](r4c::AdaptiveLimitConfig& a) {
                          a.algorithm(r4c::LimitAlgorithm::aimd).min_window_samples(1);
                        })
                        .build();
    r4c::AdaptiveLimit& limit = registry.adaptive_limit_policy("shop::Orders#place()", "orders");
    std::vector<std::string> log;
    // [doc:limit-change]
    r4c::Subscription subscription =
        registry.adaptive_limit("orders").on_limit_change([&log](const r4c::LimitChangeEvent& e) {
          log.push_back(std::string(e.instance_id) + ": " + std::to_string(e.old_limit) + " -> " +
                        std::to_string(e.new_limit) + (e.dropped ? " (drop)" : ""));
        });
    // [/doc:limit-change]
    {
      r4c::Permit permit = limit.try_acquire();
      clock->advance(1s);
      permit.on_drop();
    }
    check(log == std::vector<std::string>{"orders: 20 -> 18 (drop)"}, "the limit change is logged");
    subscription.reset();
  }

  {
    auto clock = std::make_shared<r4c::ManualClock>();
    auto registry = r4c::testing::registry(clock).build();
    r4c::CircuitBreaker& breaker = registry.circuit_breaker_policy(
        "shop::Inventory#stock()", "inventory", "",
        [](r4c::CircuitBreakerConfig& c) { c.sliding_window_size(2).minimum_number_of_calls(2); });
    std::vector<std::string> transitions;
    // [doc:breaker-transition]
    r4c::Subscription on_open =
        registry.circuit_breaker("inventory")
            .on_state_transition([&transitions](const r4c::CircuitBreakerTransitionEvent& e) {
              transitions.push_back(std::string(r4c::to_string(e.from)) + " -> " +
                                    std::string(r4c::to_string(e.to)) + " at " +
                                    std::to_string(static_cast<int>(e.failure_rate)) + "% failed");
            });
    // [/doc:breaker-transition]
    for (int i = 0; i < 2; ++i) {
      try {
        breaker.execute([]() -> int { throw Unavailable(); });
      } catch (const Unavailable&) {
      }
    }
    check(transitions == std::vector<std::string>{"closed -> open at 100% failed"},
          "the transition is logged");
  }

  {
    std::vector<std::string> errors;
    // [doc:error-hook]
    r4c::set_listener_error_hook([&errors](const r4c::ListenerError& error) {
      try {
        std::rethrow_exception(error.exception);
      } catch (const std::exception& e) {
        errors.push_back(std::string(error.kind) + " '" + std::string(error.instance_id) +
                         "': " + e.what());
      }
    });
    // [/doc:error-hook]
    auto clock = std::make_shared<r4c::ManualClock>();
    r4c::AdaptiveLimit limit(
        "orders",
        r4c::AdaptiveLimitConfig().algorithm(r4c::LimitAlgorithm::aimd).min_window_samples(1),
        clock);
    r4c::Subscription broken = limit.on_limit_change(
        [](const r4c::LimitChangeEvent&) { throw std::runtime_error("listener bug"); });
    {
      r4c::Permit permit = limit.try_acquire();
      clock->advance(1s);
      permit.on_drop();
    }
    check(errors == std::vector<std::string>{"adaptivelimit 'orders': listener bug"},
          "the hook gets the listener's exception");
    check(limit.limit() == 18, "the window closed anyway");
    r4c::set_listener_error_hook({});
  }

  {
    auto registry = r4c::ResilienceRegistry::builder().build();
    r4c::AdaptiveLimit& limit =
        registry.adaptive_limit_policy("shop::Orders#place()", "orders", "", {.initial_limit = 1});
    r4c::Permit held = limit.try_acquire();
    check(!limit.try_acquire(), "the second call is rejected");
    // [doc:collect]
    for (const r4c::metrics::Metric& metric : r4c::metrics::collect(registry)) {
      std::printf("%s", metric.name.c_str());
      for (const r4c::metrics::Label& label : metric.labels) {
        std::printf(" %s=%s", label.name.c_str(), label.value.c_str());
      }
      std::printf(" %g\n", metric.value);
    }
    // r4c.calls.rejected kind=adaptivelimit name=orders 1
    // r4c.adaptivelimit.limit.changes kind=adaptivelimit name=orders 0
    // r4c.adaptivelimit.limit kind=adaptivelimit name=orders 1
    // r4c.adaptivelimit.concurrent.calls kind=adaptivelimit name=orders 1
    // ...
    // [/doc:collect]
    // [doc:prometheus-text]
    std::string body = r4c::metrics::prometheus_text(registry);
    // # HELP r4c_calls_rejected_total Calls a policy rejected without running them.
    // # TYPE r4c_calls_rejected_total counter
    // r4c_calls_rejected_total{kind="adaptivelimit",name="orders"} 1
    // [/doc:prometheus-text]
    check(body.find("r4c_calls_rejected_total{kind=\"adaptivelimit\",name=\"orders\"} 1\n") !=
              std::string::npos,
          "the rejection is in the exposition");
    check(body.find("r4c_adaptivelimit_limit{kind=\"adaptivelimit\",name=\"orders\"} 1\n") !=
              std::string::npos,
          "the limit is in the exposition");
  }
  std::puts("observability_docs: ok");
  return 0;
}
