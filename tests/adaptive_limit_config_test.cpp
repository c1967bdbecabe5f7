// SPDX-License-Identifier: Apache-2.0
#include "r4c/adaptive_limit_config.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "r4c/adaptive_limit.hpp"
#include "test_support.hpp"

namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace std::chrono_literals;

using r4c::test::config_error;
using r4c::test::LimitSettings;
using r4c::test::settings_of;

TEST(AdaptiveLimitConfigTest, DefaultsAreThoseOfTheProductDocument) {
  const r4c::AdaptiveLimitConfig config;
  EXPECT_EQ(settings_of(config), (LimitSettings{r4c::LimitAlgorithm::gradient2, 20, 1, 200, 1s, 10,
                                                0.2, 1.5, 600, 4, 0.9, true}));
  ASSERT_EQ(config.drop_on_types().size(), 2u);
  EXPECT_EQ(config.drop_on_types()[0], r4c::ExceptionType::of<r4c::CallTimeoutException>());
  EXPECT_EQ(config.drop_on_types()[1], r4c::ExceptionType::of<r4c::BulkheadFullException>());
  EXPECT_NO_THROW(config.validate());
}

TEST(AdaptiveLimitConfigTest, SettersChainAndStoreTheirValues) {
  r4c::AdaptiveLimitConfig config;
  config.algorithm(r4c::LimitAlgorithm::aimd)
      .initial_limit(10)
      .min_limit(2)
      .max_limit(50)
      .window(500ms)
      .min_window_samples(20)
      .smoothing(0.5)
      .rtt_tolerance(2)
      .long_window(100)
      .queue_size(0)
      .backoff_ratio(0.8)
      .enabled(false);
  EXPECT_EQ(settings_of(config), (LimitSettings{r4c::LimitAlgorithm::aimd, 10, 2, 50, 500ms, 20,
                                                0.5, 2.0, 100, 0, 0.8, false}));
  EXPECT_NO_THROW(config.validate());
}

TEST(AdaptiveLimitConfigTest, ALimitBelowOneIsAtr003NamingSettingValueAndRange) {
  for (const char* setting : {"initial_limit", "min_limit", "max_limit"}) {
    r4c::AdaptiveLimitConfig config;
    const auto e = config_error([&] {
      const std::string name = setting;
      if (name == "initial_limit") config.initial_limit(0);
      if (name == "min_limit") config.min_limit(-3);
      if (name == "max_limit") config.max_limit(0);
    });
    EXPECT_EQ(e.code(), "R4C-ATR-003") << setting;
    EXPECT_THAT(e.what(),
                AllOf(StartsWith("R4C-ATR-003: "), HasSubstr(setting), HasSubstr(">= 1")));
  }
  EXPECT_THAT(config_error([] { r4c::AdaptiveLimitConfig().initial_limit(0); }).what(),
              HasSubstr("initial_limit is 0"));
}

TEST(AdaptiveLimitConfigTest, ARejectedValueLeavesTheConfigUnchanged) {
  r4c::AdaptiveLimitConfig config;
  config.initial_limit(7);
  EXPECT_THROW(config.initial_limit(0), r4c::ConfigException);
  EXPECT_THROW(config.smoothing(2.0), r4c::ConfigException);
  EXPECT_EQ(config.initial_limit(), 7);
  EXPECT_EQ(config.smoothing(), 0.2);
}

TEST(AdaptiveLimitConfigTest, AWindowOutsideOneMillisecondToOneHourIsAtr009) {
  EXPECT_NO_THROW(r4c::AdaptiveLimitConfig().window(1ms));
  EXPECT_NO_THROW(r4c::AdaptiveLimitConfig().window(1h));
  const auto too_short = config_error([] { r4c::AdaptiveLimitConfig().window(999999ns); });
  EXPECT_EQ(too_short.code(), "R4C-ATR-009");
  EXPECT_THAT(too_short.what(), AllOf(HasSubstr("window is 999999 ns"), HasSubstr("1 ms .. 1 h")));
  EXPECT_EQ(config_error([] { r4c::AdaptiveLimitConfig().window(1h + 1ns); }).code(),
            "R4C-ATR-009");
}

struct InvalidValue {
  const char* setting;
  std::function<void(r4c::AdaptiveLimitConfig&)> set;
  const char* shown;
  const char* valid;
};

TEST(AdaptiveLimitConfigTest, AnyOtherInvalidValueIsReg001NamingSettingValueAndRange) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<InvalidValue> cases = {
      {"smoothing", [](auto& c) { c.smoothing(0.0); }, "smoothing is 0", "(0, 1]"},
      {"smoothing", [](auto& c) { c.smoothing(1.5); }, "smoothing is 1.5", "(0, 1]"},
      {"smoothing", [nan](auto& c) { c.smoothing(nan); }, "smoothing is nan", "(0, 1]"},
      {"rtt_tolerance", [](auto& c) { c.rtt_tolerance(0.99); }, "rtt_tolerance is 0.99", ">= 1"},
      {"long_window", [](auto& c) { c.long_window(0); }, "long_window is 0", ">= 1"},
      {"queue_size", [](auto& c) { c.queue_size(-1); }, "queue_size is -1", ">= 0"},
      {"backoff_ratio", [](auto& c) { c.backoff_ratio(1.0); }, "backoff_ratio is 1", "(0, 1)"},
      {"backoff_ratio", [](auto& c) { c.backoff_ratio(0.0); }, "backoff_ratio is 0", "(0, 1)"},
      {"min_window_samples", [](auto& c) { c.min_window_samples(0); }, "min_window_samples is 0",
       ">= 1"},
      {"probe_multiplier", [](auto& c) { c.probe_multiplier(0); }, "probe_multiplier is 0", ">= 1"},
      {"alpha", [](auto& c) { c.alpha(-1); }, "alpha is -1", ">= 0"},
      {"beta", [](auto& c) { c.beta(-2); }, "beta is -2", ">= 0"},
      {"algorithm", [](auto& c) { c.algorithm(static_cast<r4c::LimitAlgorithm>(7)); },
       "algorithm is 7", "gradient2, aimd, vegas, delay_target"},
  };
  for (const InvalidValue& invalid : cases) {
    r4c::AdaptiveLimitConfig config;
    const auto e = config_error([&] { invalid.set(config); });
    EXPECT_EQ(e.code(), "R4C-REG-001") << invalid.setting;
    EXPECT_THAT(e.what(), AllOf(HasSubstr(invalid.shown), HasSubstr(invalid.valid)));
  }
}

TEST(AdaptiveLimitConfigTest, BoundsOutOfOrderAreAtr009NamingBothValues) {
  const auto min_over_initial =
      config_error([] { r4c::AdaptiveLimitConfig().min_limit(30).validate(); });
  EXPECT_EQ(min_over_initial.code(), "R4C-ATR-009");
  EXPECT_THAT(min_over_initial.what(),
              AllOf(HasSubstr("min_limit (30)"), HasSubstr("initial_limit (20)"),
                    HasSubstr("min_limit <= initial_limit <= max_limit")));

  const auto initial_over_max =
      config_error([] { r4c::AdaptiveLimitConfig().max_limit(10).validate(); });
  EXPECT_EQ(initial_over_max.code(), "R4C-ATR-009");
  EXPECT_THAT(initial_over_max.what(),
              AllOf(HasSubstr("initial_limit (20)"), HasSubstr("max_limit (10)")));

  const auto min_over_max = config_error(
      [] { r4c::AdaptiveLimitConfig().min_limit(50).max_limit(40).initial_limit(45).validate(); });
  EXPECT_THAT(min_over_max.what(), AllOf(StartsWith("R4C-ATR-009"), HasSubstr("min_limit (50)"),
                                         HasSubstr("max_limit (40)")));
}

TEST(AdaptiveLimitConfigTest, ASingleSettingIsCheckedBeforeSettingsBetweenThemselves) {
  r4c::AdaptiveLimitConfig config;
  config.min_limit(30);  // out of order with initial_limit 20, but valid on its own
  EXPECT_EQ(config_error([&] { config.initial_limit(0); }).code(), "R4C-ATR-003");
  EXPECT_EQ(config_error([&] { config.validate(); }).code(), "R4C-ATR-009");
}

TEST(AdaptiveLimitConfigTest, TheLimitValidatesItsConfigWhenBuilt) {
  const auto e = config_error([] {
    r4c::AdaptiveLimit limit("orders", r4c::AdaptiveLimitConfig().min_limit(30),
                             std::make_shared<r4c::ManualClock>());
  });
  EXPECT_EQ(e.code(), "R4C-ATR-009");
}

TEST(AdaptiveLimitConfigTest, DropOnReplacesTheDefaultList) {
  struct SocketTimeout {};
  r4c::AdaptiveLimitConfig config;
  config.drop_on<SocketTimeout, r4c::CallTimeoutException>();
  ASSERT_EQ(config.drop_on_types().size(), 2u);
  EXPECT_EQ(config.drop_on_types()[0], r4c::ExceptionType::of<SocketTimeout>());
  EXPECT_EQ(config.drop_on_types()[1], r4c::ExceptionType::of<r4c::CallTimeoutException>());
  config.drop_on({});
  EXPECT_TRUE(config.drop_on_types().empty());
}

TEST(AdaptiveLimitConfigTest, AlgorithmsHaveTheirConfigNames) {
  EXPECT_EQ(r4c::to_string(r4c::LimitAlgorithm::gradient2), "gradient2");
  EXPECT_EQ(r4c::to_string(r4c::LimitAlgorithm::aimd), "aimd");
  EXPECT_EQ(r4c::to_string(r4c::LimitAlgorithm::vegas), "vegas");
  EXPECT_EQ(r4c::to_string(r4c::LimitAlgorithm::delay_target), "delay_target");
}

TEST(AdaptiveLimitConfigTest, SmoothingDefaultsToTheAlgorithmsOwnUntilSet) {
  r4c::AdaptiveLimitConfig config;
  EXPECT_EQ(config.smoothing(), 0.2);
  config.algorithm(r4c::LimitAlgorithm::vegas);
  EXPECT_EQ(config.smoothing(), 1.0);  // VegasLimit's default
  config.smoothing(0.5);
  EXPECT_EQ(config.smoothing(), 0.5);
  config.algorithm(r4c::LimitAlgorithm::gradient2);
  EXPECT_EQ(config.smoothing(), 0.5);  // set: whatever the algorithm
}

TEST(AdaptiveLimitConfigTest, VegasSettingsHaveNetflixDefaultsAndAreCompared) {
  r4c::AdaptiveLimitConfig config;
  EXPECT_EQ(config.probe_multiplier(), 30);
  EXPECT_EQ(config.alpha(), 0);
  EXPECT_EQ(config.beta(), 0);
  EXPECT_EQ(config.random_seed(), 0u);
  r4c::AdaptiveLimitConfig other = config;
  other.probe_multiplier(5).alpha(2).beta(4).random_seed(9);
  EXPECT_EQ(other.probe_multiplier(), 5);
  const auto difference = r4c::first_difference(config, other);
  ASSERT_TRUE(difference.has_value());
  EXPECT_EQ(difference->setting, "probe_multiplier");
}

}  // namespace
