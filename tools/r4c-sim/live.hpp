// SPDX-License-Identifier: Apache-2.0
// The live engine of `r4c-sim live`: the scenario for real, in real time, over real sockets.
//
// An HTTP/1.1 server (cpp-httplib) listens on 127.0.0.1 at an ephemeral port. Each copy of the
// server (one per group when the scenario is isolated) has `workers` tokens: a request takes
// one, first come first served, holds it for its service time (a sleep), and gives it back; the
// schedule's changes resize the tokens at their times, so capacity really changes. Each group
// has a pool of client threads with one keep-alive connection each; a dispatcher thread per group
// makes the open-loop Poisson arrivals (the same draws as the simulation) and hands each call to
// an idle client thread, which calls the server through the group's r4c pipeline
// (Pipeline::execute, SystemClock). A timeout inside the pipeline closes the call's connection
// when its deadline passes.
//
// With `--transport grpc` the same calls go over gRPC instead (live_grpc.hpp): r4c's echo service,
// one unary call per offered call, a full queue answered UNAVAILABLE (HTTP's 503), the timeout's
// token cancelling the call (ClientContext::TryCancel).
//
// It stops by itself: arrivals end at the scenario's duration (or after live.max_calls calls),
// calls still running get live.drain to finish, and then every connection is closed. Every
// client read has a timeout, so a misbehaving server cannot hang it.
#pragma once

#include <string>
#include <vector>

#include <cstdint>

#include "recorder.hpp"
#include "scenario.hpp"

namespace r4c::sim {

struct LiveStats {
  double wall_s = 0.0;
  int port = 0;
  std::int64_t calls = 0;            // calls offered
  std::int64_t client_overflow = 0;  // arrivals that found every client thread of their group
                                     // busy; recorded as rejected
  /// One line per live reconfiguration from the watched file: "at 3.1 s: adaptiveLimit g2
  /// maxLimit 200 -> 5", or "at 3.1 s: rejected: <every mistake>".
  std::vector<std::string> reconfigurations;
};

/// How the live engine's calls travel.
enum class LiveTransport { http, grpc };

/// Runs `scenario` live for its duration (plus at most live.drain), feeding `recorder`. With a
/// `watch` file (r4c's external configuration format, e.g.
/// `instances.<group>.adaptiveLimit.maxLimit = 5`), its text is applied to the run's registry
/// at the start and again whenever it changes, polled at every timeline sample: the policies
/// keep their state (docs/operations.md), so the plots show the limit going on from where it
/// was. Throws OutputError when the server cannot listen, std::runtime_error for the gRPC
/// transport when r4c-sim was built without gRPC, r4c::ConfigException for a bad watch file at
/// the start (a bad change later is reported in LiveStats::reconfigurations and changes nothing).
LiveStats run_live_scenario(const Scenario& scenario, Recorder& recorder,
                            LiveTransport transport = LiveTransport::http,
                            const std::string& watch = {});

}  // namespace r4c::sim
