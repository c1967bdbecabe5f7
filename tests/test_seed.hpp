// SPDX-License-Identifier: Apache-2.0
// Random seeds for r4c's randomised tests. Fixed by default, so that every run repeats the last one
// and a failure is never a matter of luck; R4C_TEST_SEED=<n> picks another seed and
// R4C_TEST_SEED=random draws one. A test that uses it prints its seed (and records it in the
// XML report), so a failure says how to replay its inputs; the thread schedule is not replayed.
#pragma once

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <string_view>

namespace r4c::test {

inline constexpr std::uint64_t kDefaultTestSeed = 0;

/// The random seed R4C_TEST_SEED asks for, read once (nullopt when unset); a value that is neither
/// a number nor "random" stops the binary with a message rather than run with some other seed.
inline std::optional<std::uint64_t> chosen_seed() {
  static const std::optional<std::uint64_t> seed = []() -> std::optional<std::uint64_t> {
    const char* text = std::getenv("R4C_TEST_SEED");
    if (text == nullptr || *text == '\0') return std::nullopt;
    if (std::string_view(text) == "random") {
      std::random_device device;
      return (static_cast<std::uint64_t>(device()) << 32) | device();
    }
    char* end = nullptr;
    errno = 0;
    const unsigned long long value = std::strtoull(text, &end, 10);
    if (*text < '0' || *text > '9' || *end != '\0' || errno != 0) {
      std::fprintf(stderr, "R4C_TEST_SEED=%s: expected a number or \"random\"\n", text);
      std::exit(2);
    }
    return static_cast<std::uint64_t>(value);
  }();
  return seed;
}

/// The running test's seed: R4C_TEST_SEED's, else `fixed` (a suite whose bounds were sized
/// with another seed keeps it). Printed, and recorded as the test's "seed" property.
inline std::uint64_t test_seed(std::uint64_t fixed = kDefaultTestSeed) {
  const std::optional<std::uint64_t> chosen = chosen_seed();
  const std::uint64_t seed = chosen.value_or(fixed);
  std::printf("[   SEED   ] R4C_TEST_SEED=%llu%s\n", static_cast<unsigned long long>(seed),
              chosen ? "" : " (the default)");
  std::fflush(stdout);
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  return seed;
}

}  // namespace r4c::test
