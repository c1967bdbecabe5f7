// SPDX-License-Identifier: Apache-2.0
// The reconfiguring side of the "reconfigure in a loop while threads call" tests (run under
// TSan): the threads are the test's own.
#pragma once

#include <atomic>
#include <chrono>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "r4c/registry.hpp"
#include "test_seed.hpp"

namespace r4c::test {

/// Reconfigures `registry` `rounds` times with one of `texts` each time (picked at random from
/// a fixed seed), advancing `clock` by `step` and taking a snapshot after each; then sets `stop`
/// and joins `threads`.
inline void reconfigure_while_calling(ResilienceRegistry& registry, ManualClock& clock,
                                      std::span<const std::string> texts, int rounds,
                                      std::chrono::nanoseconds step, std::atomic<bool>& stop,
                                      std::vector<std::thread>& threads) {
  std::mt19937 random(test_seed(19));
  for (int i = 0; i < rounds; ++i) {
    (void)registry.reconfigure(texts[random() % texts.size()]);
    clock.advance(step);
    (void)registry.snapshot();
  }
  stop.store(true);
  for (std::thread& thread : threads) thread.join();
}

}  // namespace r4c::test
