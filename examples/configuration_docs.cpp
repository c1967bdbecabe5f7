// SPDX-License-Identifier: Apache-2.0
// The code of docs/configuration.md, in // [doc:NAME] regions (tests/docs checks the page
// against them). Exits non-zero if what the page says does not hold.
#include <chrono>
#include <cstdio>

#include <r4c/r4c.hpp>

int main() {
  // [doc:registry-builder]
  auto registry =
      r4c::ResilienceRegistry::builder()
          .adaptive_limit_defaults([](r4c::AdaptiveLimitConfig& a) { a.max_limit(100); })
          .adaptive_limit(
              "backend",
              [](r4c::AdaptiveLimitConfig& a) {
                a.algorithm(r4c::LimitAlgorithm::aimd).backoff_ratio(0.8).min_window_samples(20);
              })
          .config_text("instances.orders.adaptiveLimit.rttTolerance=2")  // or .config_file(path)
          .build();

  r4c::AdaptiveLimit& limit = registry.adaptive_limit_policy(
      "shop::Orders#place(std::string)",  // method id, used when no name is given
      "orders",                           // name: calls with the same name share one limit
      "backend",                          // named config ("" = none)
      {.initial_limit = 10});             // call-site attributes (optional)
  r4c::AdaptiveLimitHandle handle = registry.adaptive_limit("orders");
  // [/doc:registry-builder]

  const r4c::AdaptiveLimitConfig& config = limit.config();
  const bool ok = config.max_limit() == 100 && config.algorithm() == r4c::LimitAlgorithm::aimd &&
                  config.backoff_ratio() == 0.8 && config.min_window_samples() == 20 &&
                  config.rtt_tolerance() == 2.0 && config.initial_limit() == 10 &&
                  handle.limit() == 10 && handle.instance_id() == "orders";
  if (!ok) std::fprintf(stderr, "configuration_docs: the registry example resolved unexpectedly\n");

  // The hedge's rows of "Keys of the other policies": its defaults, and both keys in the file.
  auto hedged = r4c::ResilienceRegistry::builder()
                    .hedge_executor(1, 8)
                    .config_text("defaults.hedge.delay=50ms\ninstances.reads.hedge.maxAttempts=3")
                    .build();
  const r4c::HedgeSnapshot reads = hedged.hedge_policy("reads").snapshot();
  const r4c::HedgeConfig built_in;
  const bool hedge_ok = built_in.delay() == std::chrono::milliseconds(100) &&
                        built_in.max_attempts() == 2 &&
                        reads.delay == std::chrono::milliseconds(50) && reads.max_attempts == 3 &&
                        hedged.hedge_policy("writes").config().max_attempts() == 2 &&
                        hedged.hedge("reads").instance_id() == "reads";
  if (!hedge_ok) std::fprintf(stderr, "configuration_docs: the hedge keys resolved unexpectedly\n");
  return ok && hedge_ok ? 0 : 1;
}
