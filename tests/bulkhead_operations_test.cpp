// SPDX-License-Identifier: Apache-2.0
// Operating the bulkhead (docs/operations.md): observe mode, live reconfiguration through
// registry.reconfigure() and the latency histogram, on a ManualClock. A waiting caller runs on
// its own thread, watched through the snapshot's `waiting` (yielding, never sleeping); the loop
// test reconfigures while 8 threads call and runs under TSan.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "r4c/metrics.hpp"
#include "r4c/registry.hpp"
#include "reconfigure_loop.hpp"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

struct Fixture {
  std::shared_ptr<r4c::ManualClock> clock = std::make_shared<r4c::ManualClock>();
  r4c::ResilienceRegistry registry;
  std::vector<std::thread> threads;

  explicit Fixture(const std::string& text)
      : registry(r4c::testing::registry(clock).config_text(text).build()) {}
  ~Fixture() {
    for (std::thread& thread : threads) thread.join();
  }

  r4c::Bulkhead& bulkhead() { return registry.bulkhead_policy("m", "pool"); }

  // Starts a caller of acquire() on a thread that holds the slot it gets until `release` is
  // set; returns once it waits. `granted` counts the callers that got a slot.
  void wait_on_thread(std::atomic<int>& granted, std::atomic<bool>& release) {
    r4c::Bulkhead& b = bulkhead();
    const int before = b.snapshot().waiting;
    threads.emplace_back([&b, &granted, &release] {
      r4c::BulkheadPermit permit = b.acquire();
      if (!permit) return;
      granted.fetch_add(1);
      while (!release.load()) std::this_thread::yield();
    });
    while (b.snapshot().waiting == before) std::this_thread::yield();
  }
};

// The error a refused text raised, or "" when it was accepted.
std::string refusal(r4c::ResilienceRegistry& registry, const std::string& text) {
  try {
    (void)registry.reconfigure(text);
  } catch (const r4c::ConfigException& e) {
    return e.what();
  }
  return "";
}

void wait_until(const std::atomic<int>& value, int expected) {
  while (value.load() != expected) std::this_thread::yield();
}

// ---- observe mode ------------------------------------------------------------------------

TEST(BulkheadObserveTest, LetsEveryCallThroughAndCountsWhatItWouldHaveRejected) {
  Fixture f(
      "instances.pool.bulkhead.maxConcurrent = 2\n"
      "instances.pool.bulkhead.mode = observe\n");
  r4c::Bulkhead& bulkhead = f.bulkhead();
  std::vector<r4c::BulkheadPermit> permits;
  for (int i = 0; i < 4; ++i) {
    permits.push_back(bulkhead.try_acquire());
    EXPECT_TRUE(permits.back());
  }
  EXPECT_EQ(bulkhead.execute([] { return 7; }), 7);
  r4c::BulkheadSnapshot s = bulkhead.snapshot();
  EXPECT_EQ(s.rejected, 0u);
  EXPECT_EQ(s.would_have_rejected, 3u);  // the third, the fourth and the execute()
  EXPECT_EQ(s.in_flight, 4);             // the calls let through hold slots beyond the limit
  EXPECT_EQ(s.available, 0);
  EXPECT_EQ(s.mode, r4c::PolicyMode::observe);
  EXPECT_THAT(r4c::metrics::prometheus_text(f.registry),
              HasSubstr("r4c_bulkhead_would_reject_total{kind=\"bulkhead\",name=\"pool\"} 3"));
  permits.clear();
  EXPECT_EQ(bulkhead.in_flight(), 0);
}

TEST(BulkheadObserveTest, AnEnforcingBulkheadPublishesNoWouldRejectMetric) {
  Fixture f("instances.pool.bulkhead.maxConcurrent = 1\n");
  r4c::BulkheadPermit held = f.bulkhead().try_acquire();
  EXPECT_FALSE(f.bulkhead().try_acquire());
  EXPECT_EQ(f.bulkhead().snapshot().would_have_rejected, 0u);
  EXPECT_THAT(r4c::metrics::prometheus_text(f.registry), Not(HasSubstr("would_reject")));
}

TEST(BulkheadObserveTest, RefusesObserveWithAMaxWait) {
  EXPECT_THROW(r4c::BulkheadConfig().max_wait(1s).mode(r4c::PolicyMode::observe).validate(),
               r4c::ConfigException);
  Fixture f("instances.pool.bulkhead.maxWait = 1s\n");
  (void)f.bulkhead();
  const std::string error = refusal(f.registry,
                                    "instances.pool.bulkhead.maxWait = 1s\n"
                                    "instances.pool.bulkhead.mode = observe\n");
  EXPECT_THAT(error, HasSubstr("R4C-ATR-009"));
  EXPECT_THAT(error, HasSubstr("max_wait 0 in observe mode"));
  EXPECT_EQ(f.bulkhead().config().mode(), r4c::PolicyMode::enforce);  // nothing changed
}

TEST(BulkheadObserveTest, SwitchedToEnforceKeepsItsCallsInFlight) {
  Fixture f(
      "instances.pool.bulkhead.maxConcurrent = 2\n"
      "instances.pool.bulkhead.mode = observe\n");
  r4c::Bulkhead& bulkhead = f.bulkhead();
  std::vector<r4c::BulkheadPermit> permits;
  for (int i = 0; i < 3; ++i) permits.push_back(bulkhead.try_acquire());
  (void)f.registry.reconfigure("instances.pool.bulkhead.maxConcurrent = 2\n");
  EXPECT_EQ(bulkhead.config().mode(), r4c::PolicyMode::enforce);
  EXPECT_EQ(bulkhead.in_flight(), 3);
  EXPECT_FALSE(bulkhead.try_acquire());  // 3 in flight, 2 slots: rejected now
  permits.pop_back();
  EXPECT_FALSE(bulkhead.try_acquire());  // 2 in flight
  permits.pop_back();
  EXPECT_TRUE(bulkhead.try_acquire());
  const r4c::BulkheadSnapshot s = bulkhead.snapshot();
  EXPECT_EQ(s.rejected, 2u);
  EXPECT_EQ(s.would_have_rejected, 1u);
}

// ---- live reconfiguration ----------------------------------------------------------------

TEST(BulkheadReconfigureTest, AHigherLimitHandsItsNewSlotsToTheWaiters) {
  Fixture f(
      "instances.pool.bulkhead.maxConcurrent = 1\n"
      "instances.pool.bulkhead.maxWait = 1s\n");
  r4c::Bulkhead& bulkhead = f.bulkhead();
  r4c::BulkheadPermit held = bulkhead.try_acquire();
  ASSERT_TRUE(held);
  std::atomic<int> granted{0};
  std::atomic<bool> release{false};
  f.wait_on_thread(granted, release);
  f.wait_on_thread(granted, release);
  f.wait_on_thread(granted, release);
  (void)f.registry.reconfigure(
      "instances.pool.bulkhead.maxConcurrent = 3\n"
      "instances.pool.bulkhead.maxWait = 1s\n");
  wait_until(granted, 2);  // two new slots, two waiters, without a release
  r4c::BulkheadSnapshot s = bulkhead.snapshot();
  EXPECT_EQ(s.max_concurrent, 3);
  EXPECT_EQ(s.in_flight, 3);
  EXPECT_EQ(s.waiting, 1);
  EXPECT_EQ(s.waits_granted, 2u);
  held.release();  // the third waiter gets this one
  wait_until(granted, 3);
  release.store(true);
  for (std::thread& thread : f.threads) thread.join();
  f.threads.clear();
  s = bulkhead.snapshot();
  EXPECT_EQ(s.in_flight, 0);
  EXPECT_EQ(s.rejected, 0u);
}

TEST(BulkheadReconfigureTest, ALowerLimitLetsTheCallsInFlightAndTheWaitersDrain) {
  Fixture f(
      "instances.pool.bulkhead.maxConcurrent = 3\n"
      "instances.pool.bulkhead.maxWait = 1s\n");
  r4c::Bulkhead& bulkhead = f.bulkhead();
  std::vector<r4c::BulkheadPermit> permits;
  for (int i = 0; i < 3; ++i) permits.push_back(bulkhead.try_acquire());
  std::atomic<int> granted{0};
  std::atomic<bool> release{false};
  f.wait_on_thread(granted, release);
  (void)f.registry.reconfigure(
      "instances.pool.bulkhead.maxConcurrent = 1\n"
      "instances.pool.bulkhead.maxWait = 1s\n");
  EXPECT_EQ(bulkhead.in_flight(), 3);  // nobody lost a slot
  permits.pop_back();
  permits.pop_back();  // 1 in flight: still no slot below the new limit
  EXPECT_EQ(bulkhead.snapshot().waiting, 1);
  EXPECT_EQ(granted.load(), 0);
  permits.pop_back();  // 0 in flight: the waiter's
  wait_until(granted, 1);
  EXPECT_EQ(bulkhead.in_flight(), 1);
  EXPECT_FALSE(bulkhead.try_acquire());
  release.store(true);
  for (std::thread& thread : f.threads) thread.join();
  f.threads.clear();
  EXPECT_EQ(bulkhead.snapshot().rejected, 1u);
  EXPECT_EQ(bulkhead.in_flight(), 0);
}

TEST(BulkheadReconfigureTest, AMaxWaitGivenLiveMakesCallsWaitForSlotsTakenBefore) {
  Fixture f("instances.pool.bulkhead.maxConcurrent = 1\n");
  r4c::Bulkhead& bulkhead = f.bulkhead();
  r4c::BulkheadPermit held = bulkhead.try_acquire();  // the short way: no max_wait yet
  EXPECT_FALSE(bulkhead.acquire());
  (void)f.registry.reconfigure(
      "instances.pool.bulkhead.maxConcurrent = 1\n"
      "instances.pool.bulkhead.maxWait = 1s\n");
  EXPECT_TRUE(bulkhead.waits());
  std::atomic<int> granted{0};
  std::atomic<bool> release{true};
  f.wait_on_thread(granted, release);
  held.release();  // taken before the change, released the short way: still handed over
  wait_until(granted, 1);
  for (std::thread& thread : f.threads) thread.join();
  f.threads.clear();
  EXPECT_EQ(bulkhead.snapshot().waits_granted, 1u);
  // And a wait times out after the new max_wait.
  held = bulkhead.try_acquire();
  std::atomic<int> rejected{0};
  f.threads.emplace_back([&] {
    if (!bulkhead.acquire()) rejected.fetch_add(1);
  });
  while (bulkhead.snapshot().waiting == 0) std::this_thread::yield();
  f.clock->advance(1s);
  wait_until(rejected, 1);
  EXPECT_EQ(bulkhead.snapshot().rejected_by_reason[1], 1u);  // wait_timeout
}

TEST(BulkheadReconfigureTest, AMaxWaitTakenAwayKeepsTheWaitersAndRejectsNewCallsAtOnce) {
  Fixture f(
      "instances.pool.bulkhead.maxConcurrent = 1\n"
      "instances.pool.bulkhead.maxWait = 1s\n");
  r4c::Bulkhead& bulkhead = f.bulkhead();
  r4c::BulkheadPermit held = bulkhead.try_acquire();
  std::atomic<int> granted{0};
  std::atomic<bool> release{true};
  f.wait_on_thread(granted, release);
  (void)f.registry.reconfigure("instances.pool.bulkhead.maxConcurrent = 1\n");
  EXPECT_FALSE(bulkhead.waits());
  EXPECT_THROW(bulkhead.execute([] {}), r4c::BulkheadFullException);  // no wait now
  EXPECT_EQ(bulkhead.snapshot().waiting, 1);
  held.release();
  wait_until(granted, 1);
  for (std::thread& thread : f.threads) thread.join();
  f.threads.clear();
  const r4c::BulkheadSnapshot s = bulkhead.snapshot();
  EXPECT_EQ(s.rejected_by_reason[0], 1u);  // full
  EXPECT_EQ(s.waits_granted, 1u);
  EXPECT_EQ(s.in_flight, 0);
}

TEST(BulkheadReconfigureTest, RefusesToSwitchTheLatencyHistogramOnLive) {
  Fixture f("instances.pool.bulkhead.maxConcurrent = 2\n");
  (void)f.bulkhead();
  const std::string error =
      refusal(f.registry, "instances.pool.bulkhead.latencyHistogram = true\n");
  EXPECT_THAT(error, HasSubstr("R4C-REG-011"));
  EXPECT_THAT(error, HasSubstr("latencyHistogram"));
  EXPECT_FALSE(f.bulkhead().config().latency_histogram());
}

// ---- latency histogram -------------------------------------------------------------------

TEST(BulkheadLatencyHistogramTest, RecordsHowLongEachCallHeldItsSlot) {
  Fixture f("instances.pool.bulkhead.latencyHistogram = true\n");
  r4c::Bulkhead& bulkhead = f.bulkhead();
  for (int i = 1; i <= 100; ++i) {
    bulkhead.execute([&] { f.clock->advance(std::chrono::microseconds(10 * i)); });
  }
  {
    r4c::BulkheadPermit permit = bulkhead.try_acquire();  // a permit's slot counts too
    f.clock->advance(2ms);
  }
  const r4c::BulkheadSnapshot s = bulkhead.snapshot();
  ASSERT_TRUE(s.latency.enabled);
  EXPECT_EQ(s.latency.total.count, 101u);
  EXPECT_EQ(s.latency.sum, std::chrono::microseconds(10 * 5050) + 2ms);
  // Percentiles: the bucket bound at or above the exact value, at most 1/8 above it.
  EXPECT_GE(s.latency.total.p50, 500us);
  EXPECT_LE(s.latency.total.p50, 500us + 500us / 8);
  EXPECT_GE(s.latency.total.p99, 990us);
  EXPECT_LE(s.latency.total.p99, 990us + 990us / 8);
  EXPECT_GE(s.latency.total.p999, 2000us);
  EXPECT_LE(s.latency.total.p999, 2000us + 2000us / 8);
  const std::string text = r4c::metrics::prometheus_text(f.registry);
  EXPECT_THAT(text, HasSubstr("# TYPE r4c_bulkhead_call_latency_seconds histogram"));
  EXPECT_THAT(text, HasSubstr("r4c_bulkhead_call_latency_seconds_count{kind=\"bulkhead\",name="
                              "\"pool\"} 101"));
  EXPECT_THAT(text, HasSubstr("r4c_bulkhead_call_latency_seconds_sum{kind=\"bulkhead\",name="
                              "\"pool\"} 0.0525"));
}

TEST(BulkheadLatencyHistogramTest, TheLastWindowIsTheLastSecondThatEnded) {
  Fixture f("instances.pool.bulkhead.latencyHistogram = true\n");
  r4c::Bulkhead& bulkhead = f.bulkhead();
  bulkhead.execute([&] { f.clock->advance(100ms); });
  f.clock->advance(1s);  // the next call ends the first window
  bulkhead.execute([&] { f.clock->advance(1ms); });
  bulkhead.execute([&] { f.clock->advance(1ms); });
  const r4c::BulkheadSnapshot s = bulkhead.snapshot();
  EXPECT_EQ(s.latency.window.count, 1u);
  EXPECT_GE(s.latency.window.p50, 100ms);
  EXPECT_EQ(s.latency.total.count, 3u);
}

TEST(BulkheadLatencyHistogramTest, OffByDefault) {
  Fixture f("instances.pool.bulkhead.maxConcurrent = 2\n");
  f.bulkhead().execute([&] { f.clock->advance(1ms); });
  EXPECT_FALSE(f.bulkhead().snapshot().latency.enabled);
  EXPECT_EQ(f.bulkhead().snapshot().latency.total.count, 0u);
  EXPECT_THAT(r4c::metrics::prometheus_text(f.registry), Not(HasSubstr("latency_seconds")));
}

// ---- under TSan --------------------------------------------------------------------------

TEST(BulkheadOperationsTest, ReconfiguresInALoopWhileEightThreadsCall) {
  const std::string base = "instances.pool.bulkhead.maxConcurrent = 4\n";
  const std::string texts[] = {base,
                               "instances.pool.bulkhead.maxConcurrent = 1\n"
                               "instances.pool.bulkhead.maxWait = 5ms\n",
                               "instances.pool.bulkhead.maxConcurrent = 16\n"
                               "instances.pool.bulkhead.maxWait = 1ms\n",
                               "instances.pool.bulkhead.maxConcurrent = 2\n"
                               "instances.pool.bulkhead.mode = observe\n"};
  Fixture f(base);
  r4c::Bulkhead& bulkhead = f.bulkhead();
  std::atomic<bool> stop{false};
  std::stop_source ending;  // ends the waits of the last calls
  std::atomic<std::uint64_t> ran{0};
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    while (!stop.load()) std::this_thread::yield();
    ending.request_stop();
  });
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::uint64_t i = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        ++i;
        if ((i + static_cast<std::uint64_t>(t)) % 3 == 0) {
          if (r4c::BulkheadPermit permit = bulkhead.acquire(ending.get_token())) ran.fetch_add(1);
        } else if (r4c::BulkheadPermit permit = bulkhead.try_acquire()) {
          ran.fetch_add(1);
          std::this_thread::yield();  // hold the slot a little
        }
      }
    });
  }
  r4c::test::reconfigure_while_calling(f.registry, *f.clock, texts, 300, 2ms, stop, threads);
  // Every slot came back, nobody waits, the counts add up.
  const r4c::BulkheadSnapshot s = bulkhead.snapshot();
  EXPECT_EQ(s.in_flight, 0);
  EXPECT_EQ(s.waiting, 0);
  EXPECT_GT(ran.load(), 0u);
  std::uint64_t by_reason = 0;
  for (std::uint64_t n : s.rejected_by_reason) by_reason += n;
  EXPECT_EQ(by_reason, s.rejected);
  (void)f.registry.reconfigure(base);
  EXPECT_EQ(bulkhead.max_concurrent(), 4);
  EXPECT_EQ(bulkhead.config().max_wait(), 0ns);
  EXPECT_TRUE(bulkhead.try_acquire());
}

}  // namespace
