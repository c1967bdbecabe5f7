// SPDX-License-Identifier: Apache-2.0
// The simulator's randomness, written out rather than taken from <random>: the standard's
// distributions are implementation-defined, and a scenario must give the same numbers with any
// standard library. xoshiro256** seeded through splitmix64; exponential and log-normal draws from
// the uniform one with std::log, std::exp, std::sqrt and std::cos.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>

#include "scenario.hpp"

namespace r4c::sim {

/// splitmix64's step: spreads a seed (and derives streams from one) over all 64 bits.
inline std::uint64_t splitmix64(std::uint64_t& state) noexcept {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// xoshiro256**: a small, fast generator with a 2^256 period.
class Rng {
 public:
  /// A stream for `seed` and `stream` (e.g. a group's index): different streams are independent.
  Rng(std::uint64_t seed, std::uint64_t stream) noexcept {
    std::uint64_t state = seed ^ (0xd1b54a32d192ed03ULL * (stream + 1));
    for (std::uint64_t& word : s_) word = splitmix64(state);
  }

  std::uint64_t next() noexcept {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  /// Uniform in (0, 1): never 0 nor 1, so its logarithm is finite.
  double uniform() noexcept {
    return (static_cast<double>(next() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  }

  /// Exponential with mean 1.
  double exponential() noexcept { return -std::log(uniform()); }

  /// Standard normal (Box-Muller, one of the pair).
  double normal() noexcept {
    const double u1 = uniform();
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
};

/// A service-time draw of mean 1 for `service`'s distribution: the service time of a call is
/// this times service.mean times the service scale when the call starts.
inline double standard_draw(Rng& rng, const ServiceTime& service) noexcept {
  switch (service.distribution) {
    case Distribution::fixed:
      return 1.0;
    case Distribution::exponential:
      return rng.exponential();
    case Distribution::lognormal:
      // exp(N(mu, sigma^2)) has mean exp(mu + sigma^2 / 2): mu = -sigma^2 / 2 gives mean 1.
      return std::exp(service.sigma * rng.normal() - 0.5 * service.sigma * service.sigma);
  }
  return 1.0;
}

}  // namespace r4c::sim
