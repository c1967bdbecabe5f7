// Which seed r4c-sim's randomised tests use. Fixed by default, so a run repeats what the last
// one did; printed, so a failing run can be repeated with the same R4C_TEST_SEED; R4C_TEST_SEED
// (a number, or `random`) picks another, to look for a value the bounds do not hold for.
#pragma once

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>

namespace r4c::sim::testing {

inline constexpr std::uint64_t kDefaultTestSeed = 1;

/// This process's seed: kDefaultTestSeed, or what R4C_TEST_SEED says. Throws for a value
/// that is neither a number nor `random` (the test calling it fails, naming the value).
inline std::uint64_t test_seed() {
  static const std::uint64_t seed = [] {
    const char* text = std::getenv("R4C_TEST_SEED");
    std::uint64_t value = kDefaultTestSeed;
    if (text != nullptr && *text != '\0') {
      const std::string_view given(text);
      if (given == "random") {
        std::random_device device;
        value = (static_cast<std::uint64_t>(device()) << 32) ^ device();
      } else {
        const auto [end, error] = std::from_chars(given.data(), given.data() + given.size(), value);
        if (error != std::errc() || end != given.data() + given.size()) {
          throw std::invalid_argument("R4C_TEST_SEED is \"" + std::string(given) +
                                      "\"; expected a number from 0 to 2^64 - 1, or random");
        }
      }
    }
    std::printf("randomised tests use seed %llu (R4C_TEST_SEED=<number>|random picks another)\n",
                static_cast<unsigned long long>(value));
    std::fflush(stdout);
    return value;
  }();
  return seed;
}

}  // namespace r4c::sim::testing
