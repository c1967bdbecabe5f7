// SPDX-License-Identifier: Apache-2.0
// The one text vocabulary (<r4c/text.hpp>) and the one list of kinds (<r4c/detail/kinds.hpp>):
// what the config file, r4c-gen's attributes and r4c-sim's scenarios all read values with.
#include "r4c/text.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "r4c/detail/kinds.hpp"

namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;

TEST(TextTest, DurationsAreAnIntegerWithAUnitAndNothingElse) {
  EXPECT_EQ(r4c::text::parse_duration("500ms"), 500ms);
  EXPECT_EQ(r4c::text::parse_duration("0s"), 0s);
  EXPECT_EQ(r4c::text::parse_duration("1500us"), 1500us);
  EXPECT_EQ(r4c::text::parse_duration("2m"), 2min);
  EXPECT_EQ(r4c::text::parse_duration("1h"), 1h);
  for (std::string_view bad :
       {"1.5s", "500", "500 ms", " 5s", "-1s", "+1s", "5d", "", "s", "9999999999999h"}) {
    EXPECT_EQ(r4c::text::parse_duration(bad), std::nullopt) << bad;
  }
}

TEST(TextTest, AFormattedDurationReadsBackInTheLargestExactUnit) {
  EXPECT_EQ(r4c::text::format_duration(90s), "90s");
  EXPECT_EQ(r4c::text::format_duration(2min), "2m");
  EXPECT_EQ(r4c::text::format_duration(1500ms), "1500ms");
  EXPECT_EQ(r4c::text::format_duration(0ns), "0s");
  for (std::chrono::nanoseconds value :
       {std::chrono::nanoseconds(1ns), std::chrono::nanoseconds(999us),
        std::chrono::nanoseconds(3600s), std::chrono::nanoseconds(61s)}) {
    EXPECT_EQ(r4c::text::parse_duration(r4c::text::format_duration(value)), value);
  }
}

TEST(TextTest, EnumNamesIgnoreCaseAndAcceptTheirAliases) {
  EXPECT_EQ(r4c::from_string<r4c::LimitAlgorithm>("AIMD"), r4c::LimitAlgorithm::aimd);
  EXPECT_EQ(r4c::from_string<r4c::LimitAlgorithm>("gradient2"), r4c::LimitAlgorithm::gradient2);
  EXPECT_EQ(r4c::from_string<r4c::LimitAlgorithm>("bbr"), std::nullopt);
  EXPECT_EQ(r4c::from_string<r4c::SlidingWindowType>("TimeBased"),
            r4c::SlidingWindowType::time_based);
  EXPECT_EQ(r4c::from_string<r4c::CircuitBreakerState>("half_open"),
            r4c::CircuitBreakerState::half_open);
  EXPECT_EQ(r4c::to_string(r4c::SlidingWindowType::time_based), "time_based");
  EXPECT_EQ(r4c::text::choices<r4c::LimitAlgorithm>(), "gradient2, aimd, vegas or delay_target");
  EXPECT_EQ(r4c::text::choices<r4c::SlidingWindowType>(), "count_based or time_based");
  EXPECT_EQ(r4c::text::choices<r4c::CircuitBreakerState>(),
            "closed, open, half_open, disabled, metrics_only or forced_open");
}

TEST(TextTest, NumbersAndBooleansAreWholeWords) {
  EXPECT_EQ(r4c::text::parse_int("-3"), -3);
  EXPECT_EQ(r4c::text::parse_int("3.0"), std::nullopt);
  EXPECT_EQ(r4c::text::parse_int("99999999999"), std::nullopt);
  EXPECT_EQ(r4c::text::parse_number("0.9"), 0.9);
  EXPECT_EQ(r4c::text::parse_number("0.9x"), std::nullopt);
  EXPECT_EQ(r4c::text::parse_bool("TRUE"), true);
  EXPECT_EQ(r4c::text::parse_bool("yes"), std::nullopt);
}

TEST(TextTest, AListKeepsAnEmptyNameInTheMiddleForTheCallerToRefuse) {
  EXPECT_THAT(r4c::text::split_list(" A , B,"), ElementsAre("A", "B"));
  EXPECT_THAT(r4c::text::split_list("A,,B"), ElementsAre("A", "", "B"));
  EXPECT_TRUE(r4c::text::split_list("  ").empty());
}

TEST(TextTest, TheClosestCandidateIgnoresCaseAndPrefersTheFirstOfATie) {
  const std::array<std::string_view, 3> keys = {"maxLimit", "minLimit", "window"};
  EXPECT_EQ(r4c::text::closest("maxlimt", keys), "maxLimit");
  EXPECT_EQ(r4c::text::closest("mLimit", keys), "maxLimit");
  EXPECT_EQ(r4c::text::closest("x", std::span<const std::string_view>()), "");
}

TEST(KindsTest, TheListIsInPipelineOrder) {
  std::vector<std::string_view> order;
  r4c::detail::for_each_kind(
      [&]<class Kind>(std::type_identity<Kind>) { order.push_back(Kind::kNames.cpp); });
  EXPECT_THAT(order, ElementsAre("retry", "hedge", "throttle", "circuit_breaker", "rate_limiter",
                                 "adaptive_limit", "timeout", "bulkhead"));
  static_assert(std::is_same_v<r4c::detail::KindOf<r4c::AdaptiveLimit>, r4c::AdaptiveLimitKind>);
  static_assert(r4c::detail::kKindIndex<r4c::RetryKind> == 0);
}

TEST(KindsTest, EachKindIsFoundByEachOfItsNames) {
  constexpr r4c::KindNames names = r4c::AdaptiveLimitKind::kNames;
  EXPECT_EQ(names.file, "adaptiveLimit");
  EXPECT_EQ(names.display, "adaptive limit");
  EXPECT_EQ(names.metrics, "adaptivelimit");
  const auto index = r4c::detail::kKindIndex<r4c::AdaptiveLimitKind>;
  EXPECT_EQ(r4c::detail::find_kind(&r4c::KindNames::file, "adaptiveLimit"), index);
  EXPECT_EQ(r4c::detail::find_kind(&r4c::KindNames::cpp, "adaptive_limit"), index);
  EXPECT_EQ(r4c::detail::find_kind(&r4c::KindNames::metrics, "adaptivelimit"), index);
  EXPECT_EQ(r4c::detail::find_kind(&r4c::KindNames::file, "adaptive_limit"), std::nullopt);
}

TEST(KindsTest, EverySettingHasOneFileKeyOneNameAndASetter) {
  r4c::detail::for_each_kind([]<class Kind>(std::type_identity<Kind>) {
    std::set<std::string_view> keys;
    std::set<std::string_view> names;
    for (const auto& setting : Kind::settings()) {
      EXPECT_TRUE(keys.insert(setting.key).second) << Kind::kNames.file << "." << setting.key;
      EXPECT_TRUE(names.insert(setting.name).second) << Kind::kNames.cpp << "." << setting.name;
      EXPECT_NE(setting.apply, nullptr) << setting.key;
      EXPECT_EQ(setting.type == r4c::detail::SettingType::choice, setting.choice != nullptr)
          << setting.key;
    }
    EXPECT_FALSE(keys.empty()) << Kind::kNames.file;
  });
}

TEST(KindsTest, ASettingParsesItsTextAndAppliesItThroughTheSetter) {
  r4c::CircuitBreakerConfig breaker;
  const auto* window =
      r4c::detail::find_setting(r4c::CircuitBreakerKind::settings(), "sliding_window_type");
  ASSERT_NE(window, nullptr);
  const auto value = r4c::detail::parse(*window, "TimeBased");
  ASSERT_TRUE(value.has_value());
  window->apply(breaker, *value);
  EXPECT_EQ(breaker.sliding_window_type(), r4c::SlidingWindowType::time_based);
  EXPECT_EQ(r4c::detail::expected(*window), "count_based or time_based");

  r4c::AdaptiveLimitConfig limit;
  const auto* max_limit = r4c::detail::find_setting(r4c::AdaptiveLimitKind::settings(), "maxLimit");
  ASSERT_NE(max_limit, nullptr);
  max_limit->apply(limit, *r4c::detail::parse(*max_limit, "150"));
  EXPECT_EQ(limit.max_limit(), 150);
  EXPECT_FALSE(r4c::detail::parse(*max_limit, "lots").has_value());
  // The range stays the setter's: the config keeps its old value.
  EXPECT_THROW(max_limit->apply(limit, *r4c::detail::parse(*max_limit, "0")), r4c::ConfigException);
  EXPECT_EQ(limit.max_limit(), 150);
}

TEST(KindsTest, TheAttributeTakesTheMembersOfAdaptiveLimitAttributesOnly) {
  std::vector<std::string_view> attribute;
  for (const auto& setting : r4c::AdaptiveLimitKind::settings()) {
    if (setting.attribute) attribute.push_back(setting.name);
  }
  EXPECT_THAT(attribute, ElementsAre("enabled", "algorithm", "initial_limit", "min_limit",
                                     "max_limit", "window", "drop_on"));
}

}  // namespace
