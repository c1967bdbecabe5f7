// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the external configuration: any text either builds a registry or
// fails with a ConfigException; nothing crashes, leaks or trips a sanitizer. Run by .ci/run.
#include <cstddef>
#include <cstdint>
#include <string>

#include "r4c/registry.hpp"

namespace {
struct Probe : std::runtime_error {
  using std::runtime_error::runtime_error;
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    auto registry = r4c::ResilienceRegistry::builder()
                        .clock(std::make_shared<r4c::ManualClock>())
                        .exception_type<Probe>("Probe")
                        .config_text(text)
                        .build();
    // Instances and named configs the text may name: resolve a few to reach every level.
    for (const char* id : {"orders", "a.b", "x"}) {
      for (const char* config : {"", "backend", "x"}) {
        try {
          r4c::AdaptiveLimit& limit = registry.adaptive_limit_policy("fuzz#method()", id, config);
          limit.execute([] {});
        } catch (const r4c::ConfigException&) {
        }
        try {
          registry.bulkhead_policy("fuzz#method()", id, config).execute([] {});
          registry.timeout_policy("fuzz#method()", id, config).execute([] {});
          // The permit only exercises the instance; whether one was free does not matter.
          static_cast<void>(
              registry.rate_limiter_policy("fuzz#method()", id, config).try_acquire());
          registry.circuit_breaker_policy("fuzz#method()", id, config).execute([] {});
          registry.retry_policy("fuzz#method()", id, config);
        } catch (const r4c::ConfigException&) {
        } catch (const r4c::BulkheadFullException&) {
        } catch (const r4c::CallNotPermittedException&) {
        }
      }
    }
    registry.snapshot();
  } catch (const r4c::ConfigException&) {
  }
  return 0;
}
