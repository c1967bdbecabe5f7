// SPDX-License-Identifier: Apache-2.0
// ClassFromRequest: how a server turns what a caller sent into a priority class.
#include "r4c/call_class.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <stdexcept>
#include <string_view>

namespace {

using r4c::CallClass;
using r4c::ClassFromRequest;

TEST(ClassFromRequestTest, TheDefaultsTrustARequestToNameAnyClassAndGiveCriticalToOneNamingNone) {
  const ClassFromRequest rule;
  EXPECT_EQ(rule.key(), "r4c-class");
  EXPECT_EQ(rule.resolve(std::nullopt), CallClass::critical);
  EXPECT_EQ(rule.resolve("critical"), CallClass::critical);
  EXPECT_EQ(rule.resolve("degraded"), CallClass::degraded);
  EXPECT_EQ(rule.resolve("best_effort"), CallClass::best_effort);
  EXPECT_EQ(rule.resolve("BULK"), CallClass::bulk);  // case ignored, as in the file
}

TEST(ClassFromRequestTest, AValueThatIsNoClassOrIsBypassGetsTheDefaultClass) {
  ClassFromRequest rule;
  rule.default_class(CallClass::best_effort);
  EXPECT_EQ(rule.resolve(std::nullopt), CallClass::best_effort);
  EXPECT_EQ(rule.resolve(""), CallClass::best_effort);
  EXPECT_EQ(rule.resolve("urgent"), CallClass::best_effort);
  EXPECT_EQ(rule.resolve("bypass"), CallClass::best_effort);  // never taken from a caller
  EXPECT_EQ(rule.resolve("bulk"), CallClass::bulk);
}

TEST(ClassFromRequestTest, ARequestCannotClimbAboveTheHighestClassItIsTrustedWith) {
  ClassFromRequest rule;
  rule.highest(CallClass::degraded);
  EXPECT_EQ(rule.resolve("critical"), CallClass::degraded);
  EXPECT_EQ(rule.resolve("degraded"), CallClass::degraded);
  EXPECT_EQ(rule.resolve("bulk"), CallClass::bulk);
  // The cap is on what a request claims; one that claims nothing has the default class.
  EXPECT_EQ(rule.resolve(std::nullopt), CallClass::critical);
}

TEST(ClassFromRequestTest, AnEmptyKeyReadsNoClass) {
  ClassFromRequest rule;
  rule.key("").default_class(CallClass::degraded);
  EXPECT_EQ(rule.resolve("bulk"), CallClass::degraded);
  EXPECT_EQ(rule.resolve(std::nullopt), CallClass::degraded);
}

TEST(ClassFromRequestTest, BypassIsNeitherADefaultNorACapAndARefusalChangesNothing) {
  ClassFromRequest rule;
  rule.default_class(CallClass::bulk).highest(CallClass::best_effort);
  try {
    rule.default_class(CallClass::bypass);
    FAIL() << "bypass was taken as the default class";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string_view(e.what()).find("default_class"), std::string_view::npos) << e.what();
    EXPECT_NE(std::string_view(e.what()).find("critical, degraded, best_effort, bulk"),
              std::string_view::npos)
        << e.what();
  }
  EXPECT_THROW(rule.highest(CallClass::bypass), std::invalid_argument);
  EXPECT_EQ(rule.default_class(), CallClass::bulk);
  EXPECT_EQ(rule.highest(), CallClass::best_effort);
}

}  // namespace
