// SPDX-License-Identifier: Apache-2.0
// registry.reconfigure(): a new external configuration on a running registry, all or nothing,
// every live policy keeping its state; and the adaptive limit's observe mode.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "r4c/registry.hpp"
#include "reconfigure_loop.hpp"

namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr std::string_view kAimd =
    "instances.orders.adaptiveLimit.algorithm = aimd\n"
    "instances.orders.adaptiveLimit.initialLimit = 10\n"
    "instances.orders.adaptiveLimit.maxLimit = 100\n"
    "instances.orders.adaptiveLimit.window = 100ms\n"
    "instances.orders.adaptiveLimit.minWindowSamples = 1\n";

struct Fixture {
  std::shared_ptr<r4c::ManualClock> clock = std::make_shared<r4c::ManualClock>();
  r4c::ResilienceRegistry registry;
  r4c::AdaptiveLimit& limit;

  explicit Fixture(std::string_view text)
      : registry(r4c::testing::registry(clock).config_text(std::string(text)).build()),
        limit(registry.adaptive_limit_policy("shop::Orders#place", "orders")) {}

  // One window with `calls` in flight at once, each taking `latency`; the first to end after
  // the window's end closes it.
  void window(int calls, std::chrono::nanoseconds latency = 100ms) {
    std::vector<r4c::Permit> permits;
    for (int i = 0; i < calls; ++i) permits.push_back(limit.try_acquire());
    clock->advance(latency);
    for (r4c::Permit& permit : permits) permit.on_success();
  }
};

std::string with(std::string_view base, std::string_view more) {
  return std::string(base) + std::string(more);
}

void write_file(const std::string& path, std::string_view text) {
  std::FILE* file = std::fopen(path.c_str(), "w");
  ASSERT_NE(file, nullptr);
  std::fwrite(text.data(), 1, text.size(), file);
  std::fclose(file);
}

TEST(RegistryReconfigureTest, AdaptiveLimitKeepsItsLimitClampedIntoTheNewBounds) {
  Fixture f(kAimd);
  for (int i = 0; i < 6; ++i) f.window(f.limit.limit());
  ASSERT_EQ(f.limit.limit(), 16);  // aimd: one more per window with the limit in use
  const std::uint64_t windows = f.limit.snapshot().windows;

  const auto changes =
      f.registry.reconfigure(with(kAimd,
                                  "instances.orders.adaptiveLimit.maxLimit = 12\n"
                                  "instances.orders.adaptiveLimit.backoffRatio = 0.5\n"));
  EXPECT_EQ(f.limit.limit(), 12);
  EXPECT_EQ(f.limit.snapshot().max_limit, 12);
  EXPECT_EQ(f.limit.snapshot().windows, windows);  // a reconfiguration is no window
  EXPECT_EQ(f.limit.config().backoff_ratio(), 0.5);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].kind, "adaptiveLimit");
  EXPECT_EQ(changes[0].id, "orders");
  EXPECT_EQ(changes[0].key, "maxLimit");
  EXPECT_EQ(changes[0].old_value, "100");
  EXPECT_EQ(changes[0].new_value, "12");
  EXPECT_EQ(changes[1].key, "backoffRatio");

  // A higher bound leaves the limit where it is: it grows from there, one window at a time.
  (void)f.registry.reconfigure(kAimd);
  EXPECT_EQ(f.limit.limit(), 12);
  f.window(12);
  EXPECT_EQ(f.limit.limit(), 13);
}

TEST(RegistryReconfigureTest, Gradient2KeepsItsLongTermLatencyUnlessTheAlgorithmChanges) {
  constexpr std::string_view kGradient2 =
      "instances.orders.adaptiveLimit.initialLimit = 20\n"
      "instances.orders.adaptiveLimit.window = 100ms\n"
      "instances.orders.adaptiveLimit.minWindowSamples = 1\n";
  Fixture f(kGradient2);
  for (int i = 0; i < 5; ++i) f.window(f.limit.limit(), 40ms);
  const r4c::AdaptiveLimitSnapshot before = f.limit.snapshot();
  ASSERT_GT(before.long_latency.count(), 0);

  (void)f.registry.reconfigure(
      with(kGradient2, "instances.orders.adaptiveLimit.smoothing = 0.5\n"));
  const r4c::AdaptiveLimitSnapshot retuned = f.limit.snapshot();
  EXPECT_EQ(retuned.long_latency, before.long_latency);
  EXPECT_EQ(retuned.limit, before.limit);
  EXPECT_EQ(f.limit.config().smoothing(), 0.5);

  (void)f.registry.reconfigure(
      with(kGradient2, "instances.orders.adaptiveLimit.algorithm = aimd\n"));
  const r4c::AdaptiveLimitSnapshot switched = f.limit.snapshot();
  EXPECT_EQ(switched.algorithm, r4c::LimitAlgorithm::aimd);
  EXPECT_EQ(switched.limit, before.limit);  // aimd starts from where gradient2 was
  EXPECT_EQ(switched.long_latency.count(), 0);
}

TEST(RegistryReconfigureTest, EveryBadLineIsReportedAndNothingChanges) {
  Fixture f(kAimd);
  std::vector<r4c::ReconfigurationEvent> events;
  r4c::Subscription s = f.registry.on_reconfiguration(
      [&](const r4c::ReconfigurationEvent& e) { events.push_back(e); });
  const std::string bad = with(kAimd,
                               "instances.orders.adaptiveLimit.maxLimit = 50\n"
                               "instances.orders.adaptiveLimit.window = 5d\n"
                               "defaults.bulkhead.maxConcurrentCals = 3\n");
  try {
    (void)f.registry.reconfigure(bad);
    FAIL() << "a bad text was applied";
  } catch (const r4c::ConfigException& e) {
    ASSERT_EQ(e.errors().size(), 2u) << e.what();
    EXPECT_EQ(e.errors()[0].code, "R4C-CFG-003");
    EXPECT_THAT(e.errors()[0].message, HasSubstr("config text:8"));
    EXPECT_EQ(e.errors()[1].code, "R4C-ATR-001");
    EXPECT_THAT(e.errors()[1].message, HasSubstr("config text:7"));
  }
  EXPECT_EQ(f.limit.config().max_limit(), 100);  // the good line was not applied either
  EXPECT_TRUE(events.empty());
  const r4c::ResolvedConfiguration resolved = f.registry.describe();  // kept: instance() points in
  for (const r4c::ResolvedSetting& setting : resolved.instance("orders")[0]->settings) {
    if (setting.key == "maxLimit") {
      EXPECT_EQ(setting.value, "100");  // describe() still shows the old lines
    }
  }
}

// The adaptive limit's wait settings, once fixed at creation, change on the live limit; what no
// live instance resolves from may change too: it applies to instances made later.
TEST(RegistryReconfigureTest, WaitSettingsChangeLiveAndAProfileNobodyUsesAppliesLater) {
  Fixture f(kAimd);
  auto& bulkhead = f.registry.bulkhead_policy("shop::Orders#place", "orders");
  EXPECT_FALSE(f.limit.waits());
  (void)f.registry.reconfigure(with(kAimd,
                                    "instances.orders.adaptiveLimit.maxWait = 10ms\n"
                                    "instances.orders.adaptiveLimit.maxQueue = 7\n"
                                    "instances.orders.adaptiveLimit.maxLimit = 50\n"));
  EXPECT_EQ(f.limit.config().max_limit(), 50);
  EXPECT_TRUE(f.limit.waits());
  EXPECT_EQ(f.limit.snapshot().max_queue, 7);
  EXPECT_EQ(f.limit.limit(), 10);  // kept
  (void)f.registry.reconfigure(with(kAimd, "configs.small.bulkhead.maxConcurrent = 3\n"));
  EXPECT_FALSE(f.limit.waits());  // back to the default: no wait
  EXPECT_EQ(bulkhead.config().max_concurrent(), r4c::BulkheadConfig().max_concurrent());
  EXPECT_EQ(f.registry.bulkhead_policy("later", "later", "small").config().max_concurrent(), 3);
}

TEST(RegistryReconfigureTest, RetryHedgeAndThrottleTakeTheirNewSettings) {
  // No wait between attempts: a manual clock would never end it.
  Fixture f(with(kAimd, "instances.orders.retry.wait = 0ms\n"));
  auto& retry = f.registry.retry_policy("m", "orders");
  auto& hedge = f.registry.hedge_policy("m", "orders");
  auto& throttle = f.registry.throttle_policy("m", "orders");
  int attempts = 0;
  EXPECT_THROW(retry.execute([&] {
    ++attempts;
    throw std::runtime_error("down");
  }),
               std::runtime_error);
  EXPECT_EQ(attempts, 3);

  const auto changes = f.registry.reconfigure(with(kAimd,
                                                   "instances.orders.retry.maxAttempts = 2\n"
                                                   "instances.orders.retry.wait = 0ms\n"
                                                   "instances.orders.hedge.delay = 7ms\n"
                                                   "instances.orders.throttle.k = 1.5\n"));
  ASSERT_EQ(changes.size(), 3u);  // the wait was 0 already
  attempts = 0;
  EXPECT_THROW(retry.execute([&] {
    ++attempts;
    throw std::runtime_error("down");
  }),
               std::runtime_error);
  EXPECT_EQ(attempts, 2);
  EXPECT_EQ(retry.snapshot().max_attempts, 2);
  EXPECT_EQ(hedge.snapshot().delay, 7ms);
  EXPECT_EQ(throttle.snapshot().k, 1.5);
  EXPECT_EQ(throttle.config().k(), 1.5);

  // A new window: new buckets, which take over the counts of the window so far.
  for (int i = 0; i < 3; ++i) throttle.try_acquire().on_accepted();
  throttle.try_acquire().on_refused();
  const auto window = f.registry.reconfigure(with(kAimd,
                                                  "instances.orders.retry.wait = 0ms\n"
                                                  "instances.orders.throttle.window = 5s\n"));
  ASSERT_EQ(window.size(), 4u);  // k back to 2, window; the retry's maxAttempts, the hedge's delay
  const r4c::ThrottleSnapshot s = throttle.snapshot();
  EXPECT_EQ(s.window, 5s);
  EXPECT_EQ(s.k, 2.0);
  EXPECT_EQ(s.requests, 4u);
  EXPECT_EQ(s.accepts, 3u);
  EXPECT_EQ(s.refused, 1u);
}

TEST(RegistryReconfigureTest, PublishesWhatChangedPerInstanceAndSetting) {
  Fixture f(kAimd);
  std::vector<std::string> seen;
  r4c::Subscription s = f.registry.on_reconfiguration([&](const r4c::ReconfigurationEvent& e) {
    seen.push_back(std::to_string(e.reconfiguration) + " " + std::string(e.instance_id));
    for (const r4c::SettingChange& c : e.changes) {
      seen.push_back(c.kind + " " + c.id + " " + c.key + " " + c.old_value + " -> " + c.new_value);
    }
  });
  (void)f.registry.reconfigure(with(kAimd, "instances.orders.adaptiveLimit.mode = observe\n"));
  (void)f.registry.reconfigure(kAimd);
  EXPECT_THAT(seen, ::testing::ElementsAre(
                        "1 config text", "adaptiveLimit orders mode enforce -> observe",
                        "2 config text", "adaptiveLimit orders mode observe -> enforce"));
}

// A limit-change listener may reconfigure the registry when a window's close called it; when
// the registry's own reconfiguration did, the registry's lock is this thread's: R4C-REG-013.
TEST(RegistryReconfigureTest, ALimitListenerReconfiguresTheRegistryUnlessItsReconfigurationRan) {
  Fixture f(kAimd);
  std::vector<std::string> codes;
  r4c::Subscription s = f.limit.on_limit_change([&](const r4c::LimitChangeEvent& event) {
    try {
      const std::string max = event.new_limit < 10 ? "30" : "40";
      (void)f.registry.reconfigure(
          with(kAimd, "instances.orders.adaptiveLimit.maxLimit = " + max + "\n"));
      codes.emplace_back("applied " + max);
    } catch (const r4c::ConfigException& e) {
      codes.emplace_back(e.code());
    }
  });
  r4c::Permit permit = f.limit.try_acquire();
  f.clock->advance(100ms);
  permit.on_drop();  // 10 backs off to 9: the listener reconfigures from the window's close
  EXPECT_EQ(f.limit.limit(), 9);
  EXPECT_EQ(f.limit.config().max_limit(), 30);
  // A minimum above the running limit moves it inside the registry's reconfiguration.
  (void)f.registry.reconfigure(
      "instances.orders.adaptiveLimit.algorithm = aimd\n"
      "instances.orders.adaptiveLimit.initialLimit = 12\n"
      "instances.orders.adaptiveLimit.minLimit = 12\n"
      "instances.orders.adaptiveLimit.maxLimit = 100\n"
      "instances.orders.adaptiveLimit.window = 100ms\n"
      "instances.orders.adaptiveLimit.minWindowSamples = 1\n");
  EXPECT_EQ(f.limit.limit(), 12);
  EXPECT_EQ(codes, (std::vector<std::string>{"applied 30", "R4C-REG-013"}));
  EXPECT_EQ(f.limit.config().max_limit(), 100);  // the refused one changed nothing
  EXPECT_EQ(f.limit.in_flight(), 0);
}

// Registry A's reconfiguration runs a listener that reconfigures B, whose reconfiguration runs
// a listener that reconfigures A: A's lock is this thread's too, so that is R4C-REG-013 as well
// (it would deadlock), and everything else applies.
TEST(RegistryReconfigureTest, ListenersOfTwoRegistriesReconfiguringEachOtherGetR4cReg013) {
  constexpr std::string_view kMin12 =
      "instances.orders.adaptiveLimit.algorithm = aimd\n"
      "instances.orders.adaptiveLimit.initialLimit = 12\n"
      "instances.orders.adaptiveLimit.minLimit = 12\n"
      "instances.orders.adaptiveLimit.maxLimit = 100\n"
      "instances.orders.adaptiveLimit.window = 100ms\n"
      "instances.orders.adaptiveLimit.minWindowSamples = 1\n";
  Fixture a(kAimd);
  Fixture b(kAimd);
  std::vector<std::string> heard;
  const auto reconfigure = [&heard](Fixture& other, std::string_view text, const char* who) {
    try {
      (void)other.registry.reconfigure(std::string(text));
      heard.emplace_back(std::string(who) + " applied");
    } catch (const r4c::ConfigException& e) {
      heard.emplace_back(std::string(who) + " " + e.code());
    }
  };
  r4c::Subscription sa = a.limit.on_limit_change(
      [&](const r4c::LimitChangeEvent&) { reconfigure(b, kMin12, "a's listener"); });
  r4c::Subscription sb = b.limit.on_limit_change([&](const r4c::LimitChangeEvent&) {
    reconfigure(a, with(kAimd, "instances.orders.adaptiveLimit.maxLimit = 50\n"), "b's listener");
  });
  (void)a.registry.reconfigure(std::string(kMin12));
  EXPECT_EQ(heard, (std::vector<std::string>{"b's listener R4C-REG-013", "a's listener applied"}));
  EXPECT_EQ(a.limit.limit(), 12);
  EXPECT_EQ(b.limit.limit(), 12);
  EXPECT_EQ(a.limit.config().min_limit(), 12);
  EXPECT_EQ(a.limit.config().max_limit(), 100);  // the refused one changed nothing
  // Once both are done, each may reconfigure the other again.
  sb = {};
  reconfigure(a, with(kAimd, "instances.orders.adaptiveLimit.maxLimit = 50\n"), "test");
  EXPECT_EQ(heard.back(), "test applied");
  EXPECT_EQ(a.limit.config().max_limit(), 50);
}

TEST(RegistryReconfigureTest, WhatOnlyCodeCanSetStays) {
  auto clock = std::make_shared<r4c::ManualClock>();
  auto registry = r4c::testing::registry(clock).config_text(std::string(kAimd)).build();
  auto& limit =
      registry.adaptive_limit_policy("m", "orders", "", {}, [](r4c::AdaptiveLimitConfig& a) {
        a.drop_on_error([](const std::error_code& code) { return code.value() == 42; });
      });
  (void)registry.reconfigure(with(kAimd, "instances.orders.adaptiveLimit.maxLimit = 50\n"));
  EXPECT_EQ(limit.config().max_limit(), 50);
  ASSERT_TRUE(limit.config().drop_on_error());
  EXPECT_TRUE(limit.config().drop_on_error()(std::error_code(42, std::generic_category())));
}

TEST(RegistryReconfigureTest, ALiveInstanceKeepsItsNamedConfig) {
  auto clock = std::make_shared<r4c::ManualClock>();
  auto registry = r4c::testing::registry(clock)
                      .config_text("configs.backend.adaptiveLimit.maxLimit = 40\n")
                      .build();
  auto& limit = registry.adaptive_limit_policy("m", "orders", "backend");
  try {
    (void)registry.reconfigure("defaults.adaptiveLimit.maxLimit = 30\n");
    FAIL() << "the instance lost its named config";
  } catch (const r4c::ConfigException& e) {
    EXPECT_EQ(e.code(), "R4C-REG-004");
    EXPECT_THAT(e.what(), HasSubstr("backend"));
  }
  (void)registry.reconfigure("configs.backend.adaptiveLimit.maxLimit = 30\n");
  EXPECT_EQ(limit.config().max_limit(), 30);
}

TEST(RegistryReconfigureTest, ReconfigureFileReadsTheFileAndNamesItInErrors) {
  Fixture f(kAimd);
  EXPECT_THROW((void)f.registry.reconfigure_file("/nonexistent/r4c.properties"),
               r4c::ConfigException);
  const std::string path = ::testing::TempDir() + "r4c_reconfigure_test.properties";
  write_file(path, "instances.orders.adaptiveLimit.maxLimit = x\n");
  try {
    (void)f.registry.reconfigure_file(path);
    FAIL();
  } catch (const r4c::ConfigException& e) {
    EXPECT_THAT(e.what(), HasSubstr(path + ":1"));
  }
}

TEST(ConfigFileWatchTest, ReloadsWhenTheFileChangesAndOnlyThen) {
  const std::string path = ::testing::TempDir() + "r4c_watch_test.properties";
  write_file(path, kAimd);
  auto clock = std::make_shared<r4c::ManualClock>();
  auto registry = r4c::testing::registry(clock).config_file(path).build();
  auto& limit = registry.adaptive_limit_policy("m", "orders");
  r4c::ConfigFileWatch watch = registry.watch_file(path);
  EXPECT_EQ(watch.poll(), std::nullopt);  // the text it was built from

  write_file(path, with(kAimd, "instances.orders.adaptiveLimit.maxLimit = 30\n"));
  const auto changes = watch.poll();
  ASSERT_TRUE(changes.has_value());
  ASSERT_EQ(changes->size(), 1u);
  EXPECT_EQ((*changes)[0].new_value, "30");
  EXPECT_EQ(limit.config().max_limit(), 30);
  EXPECT_EQ(watch.poll(), std::nullopt);

  // A bad file is reported once and changes nothing; fixing it applies it.
  write_file(path, "instances.orders.adaptiveLimit.maxLimit = many\n");
  EXPECT_THROW((void)watch.poll(), r4c::ConfigException);
  EXPECT_EQ(watch.poll(), std::nullopt);
  EXPECT_EQ(limit.config().max_limit(), 30);
  write_file(path, kAimd);
  ASSERT_TRUE(watch.poll().has_value());
  EXPECT_EQ(limit.config().max_limit(), 100);
}

// ---- observe mode ---------------------------------------------------------------------

TEST(AdaptiveLimitObserveTest, AdmitsWhatItWouldRejectAndCountsItApart) {
  Fixture f(with(kAimd, "instances.orders.adaptiveLimit.mode = observe\n"));
  std::vector<r4c::Permit> permits;
  for (int i = 0; i < 15; ++i) permits.push_back(f.limit.try_acquire());
  for (const r4c::Permit& p : permits) EXPECT_TRUE(p);
  EXPECT_TRUE(f.limit.try_acquire(r4c::CallClass::bulk));  // over its share: admitted too
  const r4c::AdaptiveLimitSnapshot s = f.limit.snapshot();
  EXPECT_EQ(s.in_flight, 15);
  EXPECT_EQ(s.would_have_rejected, 6u);  // 5 critical over 10, and the bulk call
  EXPECT_EQ(s.rejected, 0u);
  EXPECT_EQ(s.mode, r4c::PolicyMode::observe);
}

TEST(AdaptiveLimitObserveTest, LearnsAsItWouldAndKeepsTheLimitWhenSwitchedToEnforce) {
  Fixture f(with(kAimd, "instances.orders.adaptiveLimit.mode = observe\n"));
  for (int i = 0; i < 4; ++i) f.window(f.limit.limit() + 5);
  EXPECT_EQ(f.limit.limit(), 14);  // the windows ran: aimd grew the limit
  (void)f.registry.reconfigure(kAimd);
  EXPECT_EQ(f.limit.limit(), 14);
  std::vector<r4c::Permit> permits;
  for (int i = 0; i < 14; ++i) permits.push_back(f.limit.try_acquire());
  EXPECT_FALSE(f.limit.try_acquire());
  const r4c::AdaptiveLimitSnapshot s = f.limit.snapshot();
  EXPECT_EQ(s.rejected, 1u);
  EXPECT_EQ(s.would_have_rejected, 20u);  // kept from observe mode
}

TEST(AdaptiveLimitObserveTest, ObserveWithAWaitIsRefused) {
  r4c::AdaptiveLimitConfig config;
  config.mode(r4c::PolicyMode::observe).max_wait(10ms);
  try {
    config.validate();
    FAIL();
  } catch (const r4c::ConfigException& e) {
    EXPECT_EQ(e.code(), "R4C-ATR-009");
  }
}

// ---- under load ---------------------------------------------------------------------

// Eight threads call the adaptive limit, the retry and the throttle while the main thread
// flips the configuration back and forth; TSan (label concurrency) checks the publication.
// Real threads, no sleep: the clock is manual and only the main thread moves it.
TEST(RegistryReconfigureTest, ReconfiguresInALoopWhileEightThreadsCall) {
  Fixture f(with(kAimd, "instances.orders.retry.wait = 0ms\n"));
  auto& retry = f.registry.retry_policy("m", "orders");
  auto& throttle = f.registry.throttle_policy("m", "orders");
  const std::string texts[] = {with(kAimd,
                                    "instances.orders.retry.maxAttempts = 2\n"
                                    "instances.orders.retry.wait = 0ms\n"),
                               with(kAimd,
                                    "instances.orders.adaptiveLimit.maxLimit = 12\n"
                                    "instances.orders.adaptiveLimit.mode = observe\n"
                                    "instances.orders.retry.maxAttempts = 4\n"
                                    "instances.orders.retry.wait = 0ms\n"
                                    "instances.orders.throttle.k = 1.5\n"
                                    "instances.orders.adaptiveLimit.algorithm = gradient2\n")};
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> admitted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        if (r4c::Permit permit = f.limit.try_acquire()) {
          admitted.fetch_add(1, std::memory_order_relaxed);
          permit.on_success();
        }
        int attempts = 0;
        (void)retry.try_execute([&]() -> r4c::Outcome<int> {
          return ++attempts < 2
                     ? r4c::Outcome<int>::failure(std::make_exception_ptr(std::runtime_error("x")))
                     : r4c::Outcome<int>::success(attempts);
        });
        if (auto permit = throttle.try_acquire()) permit.on_accepted();
      }
    });
  }
  r4c::test::reconfigure_while_calling(f.registry, *f.clock, texts, 400, 30ms, stop, threads);
  EXPECT_GT(admitted.load(), 0u);
  EXPECT_EQ(f.limit.in_flight(), 0);  // every slot came back
  const r4c::AdaptiveLimitSnapshot s = f.limit.snapshot();
  EXPECT_GE(s.limit, 1);
  EXPECT_LE(s.limit, 100);
}

}  // namespace
