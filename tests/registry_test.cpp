// SPDX-License-Identifier: Apache-2.0
#include "r4c/registry.hpp"
#include "test_support.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace std::chrono_literals;

struct SocketTimeout : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using r4c::test::config_error;

r4c::ConfigException build_error(const std::string& text) {
  return config_error([&] { r4c::ResilienceRegistry::builder().config_text(text).build(); });
}

// That building a registry from `text` fails with `code`, its message holding each of `parts`.
void expect_build_error(const std::string& text, const std::string& code,
                        const std::vector<std::string>& parts) {
  const auto e = build_error(text);
  EXPECT_EQ(e.code(), code) << text;
  for (const std::string& part : parts) EXPECT_THAT(e.what(), HasSubstr(part)) << text;
}

constexpr std::string_view kPlace = "shop::Orders#place(std::string)";
constexpr std::string_view kCancel = "shop::Orders#cancel(std::string)";

TEST(RegistryTest, TheInstanceIdIsTheNameOrElseTheMethodId) {
  auto registry = r4c::ResilienceRegistry::builder().build();
  r4c::AdaptiveLimit& unnamed = registry.adaptive_limit_policy(kPlace);
  r4c::AdaptiveLimit& named = registry.adaptive_limit_policy(kCancel, "orders");
  EXPECT_EQ(unnamed.instance_id(), kPlace);
  EXPECT_EQ(named.instance_id(), "orders");
  EXPECT_EQ(registry.adaptive_limit(kPlace).instance_id(), kPlace);
  EXPECT_EQ(registry.adaptive_limit("orders").instance_id(), "orders");
}

TEST(RegistryTest, AskingTwiceForAnIdReturnsTheSameLimit) {
  auto registry = r4c::ResilienceRegistry::builder().build();
  r4c::AdaptiveLimit& first = registry.adaptive_limit_policy(kPlace, "orders");
  r4c::AdaptiveLimit& second = registry.adaptive_limit_policy(kCancel, "orders");
  EXPECT_EQ(&first, &second);
  EXPECT_EQ(&registry.adaptive_limit_policy(kPlace), &registry.adaptive_limit_policy(kPlace));
}

TEST(RegistryTest, ASharedNameWithDifferentSettingsIsReg008NamingBothMethodsAndTheSetting) {
  auto registry = r4c::ResilienceRegistry::builder().build();
  registry.adaptive_limit_policy(kPlace, "orders", "", {.max_limit = 100});
  const auto e = config_error(
      [&] { registry.adaptive_limit_policy(kCancel, "orders", "", {.max_limit = 50}); });
  EXPECT_EQ(e.code(), "R4C-REG-008");
  EXPECT_THAT(e.what(), AllOf(StartsWith("R4C-REG-008: "), HasSubstr(std::string(kPlace)),
                              HasSubstr(std::string(kCancel)),
                              HasSubstr("max_limit is 100 for the first and 50 for the second")));
  EXPECT_EQ(registry.adaptive_limit("orders").snapshot().max_limit, 100);
}

TEST(RegistryTest, AnUnknownNamedConfigIsReg004WithTheClosestName) {
  auto registry = r4c::ResilienceRegistry::builder()
                      .adaptive_limit("backend", [](r4c::AdaptiveLimitConfig&) {})
                      .build();
  const auto e = config_error([&] { registry.adaptive_limit_policy(kPlace, "", "backnd"); });
  EXPECT_EQ(e.code(), "R4C-REG-004");
  EXPECT_THAT(e.what(), AllOf(HasSubstr("'backnd'"), HasSubstr("did you mean 'backend'?"),
                              HasSubstr(std::string(kPlace))));
}

TEST(RegistryTest, ANamedConfigMayComeFromTheFileAlone) {
  auto registry = r4c::ResilienceRegistry::builder()
                      .config_text("configs.backend.adaptiveLimit.maxLimit=30")
                      .build();
  EXPECT_EQ(registry.adaptive_limit_policy(kPlace, "", "backend").config().max_limit(), 30);
}

TEST(RegistryTest, AnUnknownIdIsReg009) {
  auto registry = r4c::ResilienceRegistry::builder().build();
  registry.adaptive_limit_policy(kPlace, "orders");
  const auto e = config_error([&] { registry.adaptive_limit("ordres"); });
  EXPECT_EQ(e.code(), "R4C-REG-009");
  EXPECT_THAT(e.what(), AllOf(HasSubstr("'ordres'"), HasSubstr("did you mean 'orders'?")));
}

// The worked example of docs/configuration.md: each level overrides the one below, and the
// file overrides the code at each level.
TEST(RegistryTest, SettingsResolveFromBuiltInDefaultsUpToInstanceSettings) {
  auto registry =
      r4c::ResilienceRegistry::builder()
          .adaptive_limit_defaults([](r4c::AdaptiveLimitConfig& a) {
            a.max_limit(100).min_window_samples(5).queue_size(2).long_window(50);
          })
          .adaptive_limit(
              "backend",
              [](r4c::AdaptiveLimitConfig& a) {
                a.algorithm(r4c::LimitAlgorithm::aimd).backoff_ratio(0.8).initial_limit(15);
              })
          .config_text(R"(
            defaults.adaptiveLimit.maxLimit = 120
            defaults.adaptiveLimit.queueSize = 3
            configs.backend.adaptiveLimit.backoffRatio = 0.7
            instances.orders.adaptiveLimit.initialLimit = 12
          )")
          .build();
  r4c::AdaptiveLimitAttributes site;
  site.initial_limit = 10;
  site.min_limit = 2;
  const r4c::AdaptiveLimitConfig& config =
      registry.adaptive_limit_policy(kPlace, "orders", "backend", site).config();
  EXPECT_EQ(config.smoothing(), 0.2);                        // built-in default
  EXPECT_EQ(config.long_window(), 50);                       // registry defaults (code)
  EXPECT_EQ(config.min_window_samples(), 5);                 // registry defaults (code)
  EXPECT_EQ(config.max_limit(), 120);                        // registry defaults (file)
  EXPECT_EQ(config.queue_size(), 3);                         // registry defaults (file)
  EXPECT_EQ(config.algorithm(), r4c::LimitAlgorithm::aimd);  // named config (code)
  EXPECT_EQ(config.backoff_ratio(), 0.7);                    // named config (file)
  EXPECT_EQ(config.min_limit(), 2);                          // call site
  EXPECT_EQ(config.initial_limit(), 12);                     // instance (file)
}

TEST(RegistryTest, InstanceSettingsFromCodeSitAboveTheCallSiteAndBelowTheFile) {
  auto registry = r4c::ResilienceRegistry::builder()
                      .config_text("instances.search.adaptiveLimit.maxLimit=90")
                      .build();
  const r4c::AdaptiveLimitConfig& config =
      registry
          .adaptive_limit_policy(
              "search", "search", "", {.initial_limit = 5},
              [](r4c::AdaptiveLimitConfig& a) { a.initial_limit(7).max_limit(80); })
          .config();
  EXPECT_EQ(config.initial_limit(), 7);
  EXPECT_EQ(config.max_limit(), 90);
}

TEST(RegistryTest, InstanceIdsMayContainDots) {
  auto registry = r4c::ResilienceRegistry::builder()
                      .config_text("instances.com.shop.Orders#place.adaptiveLimit.maxLimit=40")
                      .build();
  EXPECT_EQ(registry.adaptive_limit_policy("com.shop.Orders#place").config().max_limit(), 40);
}

TEST(RegistryTest, CommentsBlankLinesAndSpacesAreIgnored) {
  auto registry = r4c::ResilienceRegistry::builder()
                      .config_text(
                          "# a comment\n! another\n\n   \n"
                          "  defaults.adaptiveLimit.maxLimit   =   70  \r\n")
                      .build();
  EXPECT_EQ(registry.adaptive_limit_policy(kPlace).config().max_limit(), 70);
}

TEST(RegistryTest, EveryKeyOfTheFileSetsItsSetting) {
  auto registry = r4c::ResilienceRegistry::builder()
                      .exception_type<SocketTimeout>("SocketTimeout")
                      .config_text(R"(
                        defaults.adaptiveLimit.enabled=FALSE
                        defaults.adaptiveLimit.algorithm=AIMD
                        defaults.adaptiveLimit.initialLimit=9
                        defaults.adaptiveLimit.minLimit=3
                        defaults.adaptiveLimit.maxLimit=99
                        defaults.adaptiveLimit.window=250ms
                        defaults.adaptiveLimit.minWindowSamples=4
                        defaults.adaptiveLimit.smoothing=0.5
                        defaults.adaptiveLimit.rttTolerance=2
                        defaults.adaptiveLimit.longWindow=30
                        defaults.adaptiveLimit.queueSize=0
                        defaults.adaptiveLimit.backoffRatio=0.75
                        defaults.adaptiveLimit.dropOn=SocketTimeout, r4c::CallTimeoutException
                      )")
                      .build();
  const r4c::AdaptiveLimitConfig& c = registry.adaptive_limit_policy(kPlace).config();
  EXPECT_EQ(r4c::test::settings_of(c),
            (r4c::test::LimitSettings{r4c::LimitAlgorithm::aimd, 9, 3, 99, 250ms, 4, 0.5, 2.0, 30,
                                      0, 0.75, false}));
  EXPECT_EQ(c.drop_on_types(),
            (std::vector<r4c::ExceptionType>{r4c::ExceptionType::of<SocketTimeout>(),
                                             r4c::ExceptionType::of<r4c::CallTimeoutException>()}));
}

TEST(RegistryTest, DropOnAcceptsTheBuiltInClassNames) {
  auto registry =
      r4c::ResilienceRegistry::builder()
          .config_text("defaults.adaptiveLimit.dropOn=BulkheadFullException,LimitExceededException")
          .build();
  EXPECT_EQ(
      registry.adaptive_limit_policy(kPlace).config().drop_on_types(),
      (std::vector<r4c::ExceptionType>{r4c::ExceptionType::of<r4c::BulkheadFullException>(),
                                       r4c::ExceptionType::of<r4c::LimitExceededException>()}));
}

TEST(RegistryTest, ExceptionListsKnowEveryKindsExceptionAndTheirBase) {
  auto registry = r4c::ResilienceRegistry::builder()
                      .config_text(
                          "defaults.retry.abortOn=r4c::RejectedException, CallTimeoutException\n"
                          "defaults.circuitBreaker.ignoreOn=RequestNotPermittedException, "
                          "r4c::CallNotPermittedException")
                      .build();
  EXPECT_EQ(registry.retry_policy(kPlace).config().abort_on_types(),
            (std::vector<r4c::ExceptionType>{r4c::ExceptionType::of<r4c::RejectedException>(),
                                             r4c::ExceptionType::of<r4c::CallTimeoutException>()}));
  EXPECT_EQ(
      registry.circuit_breaker_policy(kPlace).config().ignore_on_types(),
      (std::vector<r4c::ExceptionType>{r4c::ExceptionType::of<r4c::RequestNotPermittedException>(),
                                       r4c::ExceptionType::of<r4c::CallNotPermittedException>()}));
}

TEST(RegistryTest, DurationsTakeEveryUnit) {
  const std::vector<std::pair<std::string, std::chrono::nanoseconds>> cases = {
      {"1000000ns", 1ms}, {"1500us", 1500us}, {"500ms", 500ms},
      {"2s", 2s},         {"1m", 1min},       {"1h", 1h}};
  for (const auto& [text, expected] : cases) {
    auto registry = r4c::ResilienceRegistry::builder()
                        .config_text("defaults.adaptiveLimit.window=" + text)
                        .build();
    EXPECT_EQ(registry.adaptive_limit_policy(kPlace).config().window(), expected) << text;
  }
}

// ---- errors of the file --------------------------------------------------------------------

TEST(RegistryFileErrorTest, AMalformedDurationIsAtr001) {
  for (const char* bad : {"500", "500 ms", "1.5s", "-1s", "2d", "ms", "99999999999999999h"}) {
    const auto e = build_error(std::string("defaults.adaptiveLimit.window=") + bad);
    EXPECT_EQ(e.code(), "R4C-ATR-001") << bad;
    EXPECT_THAT(e.what(),
                AllOf(HasSubstr("config text:1: key defaults.adaptiveLimit.window"),
                      HasSubstr(std::string("'") + bad + "'"), HasSubstr("ns, us, ms, s, m or h")));
  }
}

TEST(RegistryFileErrorTest, ALimitBelowOneIsAtr003WithLineAndKey) {
  expect_build_error(
      "\n# comment\nconfigs.backend.adaptiveLimit.minLimit=0", "R4C-ATR-003",
      {"config text:3: key configs.backend.adaptiveLimit.minLimit", "min_limit is 0", ">= 1"});
}

TEST(RegistryFileErrorTest, BoundsOutOfOrderAreAtr009AtBuild) {
  expect_build_error("defaults.adaptiveLimit.minLimit=50", "R4C-ATR-009",
                     {"adaptive limit defaults", "min_limit (50)", "initial_limit (20)"});
  expect_build_error("configs.small.adaptiveLimit.maxLimit=10", "R4C-ATR-009",
                     {"named config 'small'"});
  EXPECT_EQ(build_error("defaults.adaptiveLimit.window=2h").code(), "R4C-ATR-009");
}

TEST(RegistryFileErrorTest, BoundsOutOfOrderForOneInstanceAreAtr009AtBuildWithTheLine) {
  // The instance resolves over the defaults (initial_limit 20) when the registry is built, so
  // the mistake surfaces there, not in whichever pipeline first asks for "orders".
  expect_build_error("\n\ninstances.orders.adaptiveLimit.maxLimit=5", "R4C-ATR-009",
                     {"config text:3: adaptive limit 'orders'", "instances.orders.adaptiveLimit",
                      "max_limit (5)"});
}

TEST(RegistryFileErrorTest, AnInstanceIsCheckedOverTheRegistryDefaultsAtBuild) {
  const auto e = config_error([] {
    r4c::ResilienceRegistry::builder()
        .adaptive_limit_defaults([](r4c::AdaptiveLimitConfig& a) { a.max_limit(400); })
        .config_text(
            "instances.orders.adaptiveLimit.initialLimit=300\n"
            "instances.search.adaptiveLimit.initialLimit=500")
        .build();
  });
  EXPECT_EQ(e.code(), "R4C-ATR-009");
  EXPECT_THAT(e.what(), AllOf(HasSubstr("config text:2: adaptive limit 'search'"),
                              HasSubstr("initial_limit (500)")));
}

TEST(RegistryFileErrorTest, AnOutOfRangeValueIsReg001WithLineAndKey) {
  expect_build_error(
      "defaults.adaptiveLimit.smoothing=0", "R4C-REG-001",
      {"config text:1: key defaults.adaptiveLimit.smoothing", "smoothing is 0", "(0, 1]"});
}

TEST(RegistryFileErrorTest, AValueOfTheWrongTypeSaysWhichTypeIsExpected) {
  EXPECT_THAT(build_error("defaults.adaptiveLimit.maxLimit=lots").what(),
              AllOf(StartsWith("R4C-CFG-004: "), HasSubstr("'lots'"), HasSubstr("an integer")));
  EXPECT_THAT(build_error("defaults.adaptiveLimit.smoothing=half").what(),
              HasSubstr("expected a number"));
  EXPECT_THAT(build_error("defaults.adaptiveLimit.enabled=yes").what(),
              HasSubstr("expected true or false"));
  EXPECT_THAT(build_error("defaults.adaptiveLimit.algorithm=bbr").what(),
              HasSubstr("expected gradient2, aimd, vegas or delay_target"));
}

TEST(RegistryFileErrorTest, AnUnknownKeyNamesItsLineAndTheClosestValidKey) {
  expect_build_error("defaults.adaptiveLimit.maxLimit=10\n\ndefaults.adaptiveLimit.maxLimt=5",
                     "R4C-CFG-003", {"config text:3", "'maxLimt'", "did you mean 'maxLimit'?"});
}

TEST(RegistryFileErrorTest, AnUnknownPolicyKindNamesTheClosestValidKind) {
  expect_build_error("configs.backend.adaptiveLimt.maxLimit=5", "R4C-CFG-003",
                     {"unknown policy kind 'adaptiveLimt'", "did you mean 'adaptiveLimit'?"});
}

TEST(RegistryFileErrorTest, AnUnknownScopeOrMalformedLineSaysWhatIsExpected) {
  EXPECT_THAT(build_error("default.adaptiveLimit.maxLimit=5").what(),
              AllOf(StartsWith("R4C-CFG-003"), HasSubstr("did you mean 'defaults'?")));
  EXPECT_THAT(build_error("defaults.adaptiveLimit.maxLimit 5").what(),
              AllOf(StartsWith("R4C-CFG-002"), HasSubstr("has no '='")));
  EXPECT_THAT(build_error("maxLimit=5").what(), StartsWith("R4C-CFG-002"));
  EXPECT_THAT(build_error("=5").what(), StartsWith("R4C-CFG-002"));
  EXPECT_THAT(build_error("configs..adaptiveLimit.maxLimit=5").what(), StartsWith("R4C-CFG-002"));
}

TEST(RegistryFileErrorTest, AnUnknownExceptionNameSuggestsARegisteredOne) {
  expect_build_error(
      "defaults.adaptiveLimit.dropOn=CallTimeoutExeption", "R4C-CFG-003",
      {"'CallTimeoutExeption'", "did you mean 'CallTimeoutException'?", "exception_type<T>"});
}

TEST(RegistryFileErrorTest, AMissingFileSaysSoWithItsPath) {
  const auto e = config_error([] {
    r4c::ResilienceRegistry::builder().config_file("/nonexistent/r4c.properties").build();
  });
  EXPECT_EQ(e.code(), "R4C-CFG-001");
  EXPECT_THAT(e.what(),
              AllOf(HasSubstr("'/nonexistent/r4c.properties'"), HasSubstr("does not exist")));
}

TEST(RegistryFileErrorTest, AFileIsReadAtBuildAndNamedInMessages) {
  const auto path = std::filesystem::temp_directory_path() / "r4c_registry_test.properties";
  {
    std::ofstream out(path);
    out << "defaults.adaptiveLimit.maxLimit=77\n"
        << "defaults.adaptiveLimit.minLimit=x\n";
  }
  const auto e =
      config_error([&] { r4c::ResilienceRegistry::builder().config_file(path).build(); });
  EXPECT_THAT(e.what(), HasSubstr(path.string() + ":2: key defaults.adaptiveLimit.minLimit"));
  {
    std::ofstream out(path);
    out << "defaults.adaptiveLimit.maxLimit=77\n";
  }
  auto registry = r4c::ResilienceRegistry::builder().config_file(path).build();
  EXPECT_EQ(registry.adaptive_limit_policy(kPlace).config().max_limit(), 77);
  std::filesystem::remove(path);
}

// ---- errors in code --------------------------------------------------------------------------

TEST(RegistryCodeErrorTest, AnInvalidValueInCodeFailsTheBuildWithReg001) {
  const auto e = config_error([] {
    r4c::ResilienceRegistry::builder()
        .adaptive_limit("backend", [](r4c::AdaptiveLimitConfig& a) { a.smoothing(0); })
        .build();
  });
  EXPECT_EQ(e.code(), "R4C-REG-001");
  EXPECT_THAT(e.what(), AllOf(HasSubstr("named config 'backend'"), HasSubstr("smoothing is 0")));
}

TEST(RegistryCodeErrorTest, DefaultsOutOfOrderInCodeFailTheBuild) {
  const auto e = config_error([] {
    r4c::ResilienceRegistry::builder()
        .adaptive_limit_defaults([](r4c::AdaptiveLimitConfig& a) { a.max_limit(10); })
        .build();
  });
  EXPECT_EQ(e.code(), "R4C-ATR-009");
}

TEST(RegistryCodeErrorTest, ABadCallSiteAttributeFailsItsLimitOnly) {
  auto registry = r4c::ResilienceRegistry::builder().build();
  const auto e = config_error(
      [&] { registry.adaptive_limit_policy(kPlace, "orders", "", {.initial_limit = 0}); });
  EXPECT_EQ(e.code(), "R4C-ATR-003");
  EXPECT_THAT(e.what(), HasSubstr("adaptive limit 'orders', call-site attributes"));
  EXPECT_NO_THROW(registry.adaptive_limit_policy(kCancel, "orders"));
}

// ---- snapshots, clock, threads ---------------------------------------------------------------

TEST(RegistryTest, ASnapshotListsEveryLimitAndIsAValue) {
  auto clock = std::make_shared<r4c::ManualClock>();
  auto registry = r4c::testing::registry(clock).build();
  registry.adaptive_limit_policy(kPlace, "orders");
  r4c::AdaptiveLimit& search = registry.adaptive_limit_policy("search");
  const r4c::RegistrySnapshot all = registry.snapshot();
  r4c::Permit permit = search.try_acquire();
  ASSERT_EQ(all.adaptive_limits().size(), 2u);
  std::vector<std::string> ids;
  for (const auto& [id, snap] : all.adaptive_limits()) {
    ids.push_back(id);
    EXPECT_EQ(snap.in_flight, 0);  // taken before the permit
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"orders", "search"}));
  EXPECT_EQ(registry.snapshot().adaptive_limits().at("search").in_flight, 1);
}

// resilience4cata 0.6.0's "Probarlo con ManualClock", through a test registry.
TEST(RegistryTest, ATestRegistryRunsItsLimitsOnTheManualClock) {
  auto clock = std::make_shared<r4c::ManualClock>();
  auto registry = r4c::testing::registry(clock)
                      .adaptive_limit_defaults([](auto& a) { a.min_window_samples(1); })
                      .build();
  EXPECT_EQ(registry.clock(), clock);
  r4c::AdaptiveLimit& limit = registry.adaptive_limit_policy(
      "shop::OrderClient#place_async(std::string)", "orders-async", "", {.initial_limit = 2});
  r4c::AdaptiveLimitHandle handle = registry.adaptive_limit("orders-async");
  r4c::Permit a = limit.try_acquire();
  r4c::Permit b = limit.try_acquire();
  EXPECT_FALSE(limit.try_acquire());
  clock->advance(1s);
  a.on_success();
  b.on_success();
  EXPECT_EQ(handle.snapshot().windows, 1u);
  EXPECT_EQ(handle.snapshot().window_latency, 1s);
}

TEST(RegistryTest, ARegistryIsMovable) {
  auto registry = r4c::ResilienceRegistry::builder().build();
  r4c::AdaptiveLimit& limit = registry.adaptive_limit_policy(kPlace);
  r4c::ResilienceRegistry moved = std::move(registry);
  EXPECT_EQ(&moved.adaptive_limit_policy(kPlace), &limit);
}

TEST(RegistryConcurrencyTest, ThreadsAskingForOneIdGetOneLimit) {
  auto registry = r4c::ResilienceRegistry::builder().build();
  std::vector<const r4c::AdaptiveLimit*> seen(8);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < seen.size(); ++t) {
    threads.emplace_back([&, t] {
      seen[t] = &registry.adaptive_limit_policy(kPlace, "orders");
      registry.snapshot();
    });
  }
  for (auto& thread : threads) thread.join();
  for (const auto* limit : seen) EXPECT_EQ(limit, seen[0]);
  EXPECT_EQ(registry.snapshot().adaptive_limits().size(), 1u);
}

// ---- the other policy kinds ------------------------------------------------------------------

TEST(RegistryPolicyKindsTest, EveryKindResolvesDefaultsNamedConfigsAndTheFile) {
  auto clock = std::make_shared<r4c::ManualClock>();
  auto registry = r4c::testing::registry(clock)
                      .bulkhead_defaults([](r4c::BulkheadConfig& b) { b.max_concurrent(7); })
                      .bulkhead("db", [](r4c::BulkheadConfig& b) { b.max_concurrent(3); })
                      .timeout_defaults([](r4c::TimeoutConfig& t) { t.timeout(5s); })
                      .rate_limiter("api", [](r4c::RateLimiterConfig& r) { r.limit_for_period(9); })
                      .config_text(R"(
                        configs.db.bulkhead.maxConcurrent = 4
                        defaults.timeout.timeout = 3s
                        instances.slow.timeout.timeout = 10s
                        configs.api.rateLimiter.refreshPeriod = 500ms
                        configs.api.rateLimiter.timeoutDuration = 20ms
                        instances.api.rateLimiter.limitForPeriod = 11
                      )")
                      .build();
  EXPECT_EQ(registry.bulkhead_policy("a#f()").config().max_concurrent(), 7);
  EXPECT_EQ(registry.bulkhead_policy("a#g()", "", "db").config().max_concurrent(), 4);
  EXPECT_EQ(registry.timeout_policy("a#f()").config().timeout(), 3s);
  EXPECT_EQ(registry.timeout_policy("a#h()", "slow").config().timeout(), 10s);
  const r4c::RateLimiterConfig& rate = registry.rate_limiter_policy("a#f()", "api", "api").config();
  EXPECT_EQ(rate.limit_for_period(), 11);
  EXPECT_EQ(rate.refresh_period(), 500ms);
  EXPECT_EQ(rate.timeout_duration(), 20ms);
}

TEST(RegistryPolicyKindsTest, EveryKindHasHandlesAndSnapshots) {
  auto registry = r4c::ResilienceRegistry::builder().build();
  registry.bulkhead_policy("search");
  registry.rate_limiter_policy("search");
  registry.timeout_policy("search");
  EXPECT_EQ(registry.bulkhead("search").instance_id(), "search");
  EXPECT_EQ(registry.rate_limiter("search").instance_id(), "search");
  EXPECT_EQ(registry.timeout("search").instance_id(), "search");
  const r4c::RegistrySnapshot all = registry.snapshot();
  EXPECT_EQ(all.bulkheads().at("search").max_concurrent, 25);
  EXPECT_EQ(all.rate_limiters().at("search").limit_for_period, 50);
  EXPECT_EQ(all.timeouts().at("search").timeout, 1s);
  EXPECT_TRUE(all.adaptive_limits().empty());
  EXPECT_EQ(config_error([&] { registry.bulkhead("serch"); }).code(), "R4C-REG-009");
  EXPECT_EQ(config_error([&] { registry.timeout("x"); }).code(), "R4C-REG-009");
  EXPECT_EQ(config_error([&] { registry.rate_limiter("x"); }).code(), "R4C-REG-009");
}

TEST(RegistryPolicyKindsTest, FileErrorsOfEveryKindNameTheKeyAndLine) {
  EXPECT_THAT(build_error("defaults.bulkhead.maxConcurent=3").what(),
              AllOf(StartsWith("R4C-CFG-003"), HasSubstr("did you mean 'maxConcurrent'?")));
  EXPECT_THAT(build_error("defaults.bulkhead.maxConcurrent=0").what(),
              AllOf(StartsWith("R4C-ATR-003"), HasSubstr("key defaults.bulkhead.maxConcurrent")));
  EXPECT_THAT(build_error("defaults.timeout.timeout=2").what(), StartsWith("R4C-ATR-001"));
  EXPECT_THAT(build_error("defaults.timeout.timeout=0s").what(), StartsWith("R4C-REG-001"));
  EXPECT_THAT(build_error("configs.x.rateLimiter.refreshPeriod=1us").what(),
              AllOf(StartsWith("R4C-REG-001"), HasSubstr("refresh_period")));
  EXPECT_THAT(build_error("defaults.rateLimter.limitForPeriod=1").what(),
              HasSubstr("did you mean 'rateLimiter'?"));
}

TEST(RegistryPolicyKindsTest, NamedConfigsAreLookedUpPerKind) {
  auto registry =
      r4c::ResilienceRegistry::builder().bulkhead("db", [](r4c::BulkheadConfig&) {}).build();
  const auto e = config_error([&] { registry.timeout_policy("a#f()", "", "db"); });
  EXPECT_EQ(e.code(), "R4C-REG-004");
  EXPECT_THAT(e.what(), HasSubstr("of timeout"));
}

TEST(RegistryPolicyKindsTest, RetryAndCircuitBreakerTakeTheirFileKeys) {
  auto registry = r4c::ResilienceRegistry::builder()
                      .config_text(R"(
                        defaults.retry.maxAttempts = 5
                        defaults.retry.wait = 200ms
                        defaults.retry.exponentialBackoffMultiplier = 2
                        defaults.retry.maxWait = 1s
                        defaults.retry.randomizedWait = 0.5
                        defaults.retry.abortOn = LimitExceededException
                        defaults.circuitBreaker.failureRateThreshold = 25
                        defaults.circuitBreaker.slowCallRateThreshold = 80
                        defaults.circuitBreaker.slowCallDuration = 2s
                        defaults.circuitBreaker.slidingWindowType = TIME_BASED
                        defaults.circuitBreaker.slidingWindowSize = 30
                        defaults.circuitBreaker.minimumNumberOfCalls = 7
                        defaults.circuitBreaker.waitInOpen = 5s
                        defaults.circuitBreaker.permittedCallsInHalfOpen = 2
                        defaults.circuitBreaker.ignoreOn = LimitExceededException
                      )")
                      .build();
  const r4c::RetryConfig& retry = registry.retry_policy("a#f()").config();
  EXPECT_EQ(r4c::test::settings_of(retry),
            (r4c::test::RetrySettings{5, 200ms, true, 2.0, 1s, 0.5}));
  EXPECT_EQ(
      retry.abort_on_types(),
      (std::vector<r4c::ExceptionType>{r4c::ExceptionType::of<r4c::LimitExceededException>()}));
  const r4c::CircuitBreakerConfig& breaker = registry.circuit_breaker_policy("a#f()").config();
  EXPECT_EQ(r4c::test::settings_of(breaker),
            (r4c::test::BreakerSettings{25.0, 80.0, 2s, r4c::SlidingWindowType::time_based, 30, 7,
                                        5s, 2}));
  EXPECT_EQ(
      breaker.ignore_on_types(),
      (std::vector<r4c::ExceptionType>{r4c::ExceptionType::of<r4c::LimitExceededException>()}));
  EXPECT_EQ(registry.circuit_breaker("a#f()").state(), r4c::CircuitBreakerState::closed);
  EXPECT_THAT(build_error("defaults.circuitBreaker.slidingWindowType=sliding").what(),
              AllOf(StartsWith("R4C-CFG-004"), HasSubstr("count_based or time_based")));
  EXPECT_THAT(build_error("defaults.retry.maxAtempts=2").what(),
              HasSubstr("did you mean 'maxAttempts'?"));
}

TEST(RegistryPolicyKindsTest, TheHedgeTakesItsFileKeysDefaultsAndNamedConfigs) {
  auto clock = std::make_shared<r4c::ManualClock>();
  auto registry = r4c::testing::registry(clock)
                      .hedge_defaults([](r4c::HedgeConfig& h) { h.delay(80ms); })
                      .hedge("replicas", [](r4c::HedgeConfig& h) { h.max_attempts(4); })
                      .hedge_executor(3, 16)
                      .config_text(R"(
                        defaults.hedge.maxAttempts = 3
                        configs.replicas.hedge.delay = 20ms
                        instances.profiles.hedge.delay = 5ms
                      )")
                      .build();
  const r4c::Hedge& plain = registry.hedge_policy("a#f()");
  EXPECT_EQ(plain.config().delay(), 80ms);
  EXPECT_EQ(plain.config().max_attempts(), 3);
  r4c::Hedge& replicas = registry.hedge_policy("a#g()", "", "replicas");
  EXPECT_EQ(replicas.config().delay(), 20ms);
  EXPECT_EQ(replicas.config().max_attempts(), 4);
  const r4c::Hedge& profiles = registry.hedge_policy("a#h()", "profiles", "replicas");
  EXPECT_EQ(profiles.config().delay(), 5ms);
  // Every hedge of a registry runs on the one executor the builder sized, and reads its clock.
  EXPECT_EQ(plain.executor(), replicas.executor());
  EXPECT_EQ(plain.executor()->threads(), 3);
  EXPECT_EQ(plain.executor()->max_queued(), 16);
  EXPECT_EQ(plain.clock(), registry.clock());
  EXPECT_EQ(replicas.execute([] { return 5; }), 5);
  EXPECT_EQ(registry.hedge("a#g()").snapshot().calls, 1u);
  EXPECT_EQ(registry.hedge("profiles").snapshot().delay, 5ms);
  const r4c::RegistrySnapshot all = registry.snapshot();
  EXPECT_EQ(all.hedges().size(), 3u);
  EXPECT_EQ(all.hedges().at("a#f()").max_attempts, 3);
  EXPECT_EQ(config_error([&] { registry.hedge("profils"); }).code(), "R4C-REG-009");
  EXPECT_EQ(clock->pending_tasks(), 0u);
}

TEST(RegistryPolicyKindsTest, HedgeErrorsNameTheKeyTheValueAndWhatIsValid) {
  EXPECT_THAT(build_error("defaults.hedge.maxAttempts=0").what(),
              AllOf(StartsWith("R4C-ATR-003"), HasSubstr("key defaults.hedge.maxAttempts")));
  EXPECT_THAT(build_error("configs.fast.hedge.delay=0ms").what(),
              AllOf(StartsWith("R4C-REG-001"), HasSubstr("delay")));
  EXPECT_THAT(build_error("defaults.hedge.delay=fast").what(), StartsWith("R4C-ATR-001"));
  EXPECT_THAT(build_error("defaults.hedge.dealy=5ms").what(),
              AllOf(StartsWith("R4C-CFG-003"), HasSubstr("did you mean 'delay'?")));
  EXPECT_THAT(build_error("defaults.hedg.delay=5ms").what(), HasSubstr("did you mean 'hedge'?"));
  const auto threads = config_error([] { r4c::ResilienceRegistry::builder().hedge_executor(0); });
  EXPECT_EQ(threads.code(), "R4C-ATR-003");
  EXPECT_THAT(threads.what(), HasSubstr("hedge_executor threads is 0; valid: an integer >= 1"));
  const auto queue = config_error([] { r4c::ResilienceRegistry::builder().hedge_executor(2, -1); });
  EXPECT_THAT(queue.what(), HasSubstr("max_queued is -1"));

  auto registry = r4c::ResilienceRegistry::builder().build();
  registry.hedge_policy("a#f()", "reads", "", [](r4c::HedgeConfig& h) { h.delay(10ms); });
  const auto shared = config_error([&] {
    registry.hedge_policy("b#g()", "reads", "", [](r4c::HedgeConfig& h) { h.delay(20ms); });
  });
  EXPECT_EQ(shared.code(), "R4C-REG-008");
  EXPECT_THAT(shared.what(),
              HasSubstr("delay is 10000000 ns for the first and 20000000 ns for the second"));
}

// Destroying a registry runs the attempts still queued on its executor, while the policies
// they call still live.
TEST(RegistryPolicyKindsTest, DestroyingTheRegistryFinishesItsHedgedAttempts) {
  auto finished = std::make_shared<std::atomic<int>>(0);
  std::atomic<bool> release{false};
  {
    auto registry = r4c::ResilienceRegistry::builder().hedge_executor(1, 8).build();
    r4c::Hedge& hedge = registry.hedge_policy("a#f()");
    std::shared_ptr<r4c::Executor> executor = hedge.executor();
    ASSERT_TRUE(executor->try_post([&release] {
      while (!release.load()) std::this_thread::yield();
    }));
    // Queued attempts call a policy of the registry (ASan would see one destroyed first).
    r4c::Bulkhead* bulkhead = &registry.bulkhead_policy("a#f()");
    for (int i = 0; i < 5; ++i) {
      ASSERT_TRUE(executor->try_post(
          [finished, bulkhead] { bulkhead->execute([&] { finished->fetch_add(1); }); }));
    }
    release = true;
  }
  EXPECT_EQ(finished->load(), 5);
}

}  // namespace
