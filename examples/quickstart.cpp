// SPDX-License-Identifier: Apache-2.0
// r4c quickstart: an adaptive limit around a call, both ways of calling through it, what it
// reports, and a deterministic test of it with a ManualClock. Exits non-zero if anything is off.
// tests/consumer builds this file against the installed package: only <r4c/r4c.hpp> and the
// standard library.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include <r4c/r4c.hpp>

#include "example_checks.hpp"

namespace {

using r4c_example::check;

// Stands in for a call to a remote dependency.
std::string place_order(const std::string& order) { return "placed " + order; }

}  // namespace

int main() {
  r4c_example::example_name = "quickstart";
  // A limit that finds its own concurrency: it starts at 10 calls at once and never exceeds 100.
  r4c::AdaptiveLimitConfig config;
  config.initial_limit(10).max_limit(100);
  r4c::AdaptiveLimit limit("orders", config);

  // execute(): runs the call under the limit; when the limit is full it throws without running it.
  try {
    std::string receipt = limit.execute([] { return place_order("A-1"); });
    check(receipt == "placed A-1", "execute returns what the call returned");
  } catch (const r4c::LimitExceededException& e) {
    std::printf("%s is full: fail fast, degrade, or retry later\n", e.instance_id().c_str());
    check(false, "a limit with nothing in flight admits the call");
  }

  // try_acquire(): never throws. End the permit with on_success(), on_drop() (an overload
  // signal such as a timeout) or on_ignore(); destroying it is on_ignore().
  if (r4c::Permit permit = limit.try_acquire()) {
    place_order("A-2");
    permit.on_success();
  }

  // What operators see.
  const r4c::AdaptiveLimitSnapshot snapshot = limit.handle().snapshot();
  std::printf("limit %d, in flight %d, rejected %llu\n", snapshot.limit, snapshot.in_flight,
              static_cast<unsigned long long>(snapshot.rejected));
  check(snapshot.limit == 10 && snapshot.in_flight == 0 && snapshot.rejected == 0,
        "two admitted calls leave the limit at 10 and nothing in flight");

  // In a test: with a ManualClock, latencies are what the clock says and windows end when the
  // clock passes them, the same way on every run.
  auto clock = std::make_shared<r4c::ManualClock>();
  r4c::AdaptiveLimitConfig test_config;
  test_config.initial_limit(2).min_window_samples(1);  // end a window after a single call
  r4c::AdaptiveLimit tested("orders-test", test_config, clock);

  r4c::Permit a = tested.try_acquire();
  r4c::Permit b = tested.try_acquire();
  check(a && b, "two calls fit a limit of 2");
  check(!tested.try_acquire(), "a third call is rejected at once");
  clock->advance(std::chrono::seconds(1));  // both calls took 1 s; the window is over
  a.on_success();                           // ends the window: the limit is recomputed
  b.on_success();

  const r4c::AdaptiveLimitSnapshot after = tested.snapshot();
  check(after.windows == 1, "one window was recomputed");
  check(after.window_latency == std::chrono::seconds(1), "the window's latency is 1 s");
  check(after.rejected == 1, "one call was rejected");
  check(after.in_flight == 0, "no call is in flight");

  return r4c_example::finish("quickstart: ok");
}
