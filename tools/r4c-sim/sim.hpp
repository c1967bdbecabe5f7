// SPDX-License-Identifier: Apache-2.0
// The simulated engine of `r4c-sim run`: a discrete-event simulation of a scenario on a
// ManualClock, calling through r4c's real pipeline.
//
// Every call is a real Pipeline<void>::async_execute whose operation queues at the simulated
// server; the adaptive limit, the bulkhead and the timeout are the library's own classes, with
// the registry's clock a ManualClock. Time moves from one event to the next: the clock is
// advanced to exactly the next event's time, so every latency a limit measures is the simulated
// one, and a timeout's deadline (armed on the same clock) fires at its exact time. A 10-minute
// scenario runs in seconds, and the same scenario and seed give the same outputs, byte for byte.
#pragma once

#include <cstdint>

#include "recorder.hpp"
#include "scenario.hpp"

namespace r4c::sim {

/// What a run cost, for the command's last line.
struct SimStats {
  std::int64_t events = 0;  // events handled
  std::int64_t calls = 0;   // calls offered
};

/// Simulates `scenario` from 0 to its duration, feeding `recorder`.
SimStats simulate(const Scenario& scenario, Recorder& recorder);

}  // namespace r4c::sim
