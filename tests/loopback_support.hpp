// SPDX-License-Identifier: Apache-2.0
// What the loopback tests of r4c::http and r4c::grpc share: a limit that does not move, and the
// capacity drop-and-recovery run in which a client's limit must follow a real server.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "r4c/adaptive_limit.hpp"

namespace r4c::test {

/// An AIMD limit pinned at `limit` that closes a window on its first sample.
inline AdaptiveLimitConfig fixed_limit(int limit) {
  AdaptiveLimitConfig config;
  config.algorithm(LimitAlgorithm::aimd)
      .initial_limit(limit)
      .min_limit(limit)
      .max_limit(limit)
      .min_window_samples(1);
  return config;
}

/// The client limit of the capacity runs: AIMD from 8, between 1 and 16, 10 ms windows.
inline AdaptiveLimitConfig capacity_run_limit() {
  AdaptiveLimitConfig config;
  config.algorithm(LimitAlgorithm::aimd)
      .initial_limit(8)
      .min_limit(1)
      .max_limit(16)
      .window(std::chrono::milliseconds(10))
      .min_window_samples(1);
  return config;
}

/// 12 callers call `call` (true: it succeeded) in a loop for 400 ms at full capacity, 400 ms
/// after `set_capacity(2)` and 600 ms after `set_capacity(full)`; checks that `limit` climbed,
/// came down with the capacity and climbed again, and that nothing is left in flight. Real time:
/// the server's capacity is real sockets and threads.
inline void expect_limit_follows_capacity(const AdaptiveLimit& limit,
                                          const std::function<void(int)>& set_capacity, int full,
                                          const std::function<bool()>& call) {
  std::atomic<bool> done{false};
  std::vector<std::thread> callers;
  for (int i = 0; i < 12; ++i) {
    callers.emplace_back([&] {
      while (!done.load()) {
        if (!call()) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // do not spin
      }
    });
  }
  // The limit's mean over the second half of a phase: AIMD saw-tooths, and one sample may
  // catch a tooth.
  const auto phase_mean = [&limit](std::chrono::milliseconds span) {
    std::this_thread::sleep_for(span / 2);
    double sum = 0.0;
    int samples = 0;
    for (auto end = std::chrono::steady_clock::now() + span / 2;
         std::chrono::steady_clock::now() < end; ++samples) {
      sum += limit.limit();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return samples > 0 ? sum / samples : 0.0;
  };
  const double high = phase_mean(std::chrono::milliseconds(400));
  set_capacity(2);
  const double low = phase_mean(std::chrono::milliseconds(400));
  set_capacity(full);
  const double recovered = phase_mean(std::chrono::milliseconds(600));
  done.store(true);
  for (std::thread& caller : callers) caller.join();

  SCOPED_TRACE("mean limits: " + std::to_string(high) + " at full capacity, " +
               std::to_string(low) + " at low capacity, " + std::to_string(recovered) +
               " recovered");
  // AIMD around a capacity of 2 swings between about 2 and 8; at full capacity it climbs to its
  // maximum of 16.
  EXPECT_GE(high, 12.0);
  EXPECT_LE(low, 0.6 * high);
  EXPECT_GE(recovered, low + 4.0);
  EXPECT_EQ(limit.in_flight(), 0);
}

}  // namespace r4c::test
