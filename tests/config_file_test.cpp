// SPDX-License-Identifier: Apache-2.0
// The external configuration's reader: what it refuses, and how it names bad input.
#include "r4c/detail/config_file.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "r4c/errors.hpp"
#include "r4c/registry.hpp"
#include "test_support.hpp"

namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

r4c::ConfigException build_error(const std::string& text) {
  return r4c::test::config_error(
      [&] { r4c::ResilienceRegistry::builder().config_text(text).build(); });
}

TEST(ConfigFileTest, ADirectoryIsNotAConfigFile) {
  const auto directory = std::filesystem::temp_directory_path();
  const auto e = r4c::test::config_error(
      [&] { r4c::ResilienceRegistry::builder().config_file(directory).build(); });
  EXPECT_EQ(e.code(), "R4C-CFG-001");
  EXPECT_THAT(e.what(), AllOf(HasSubstr(directory.string()), HasSubstr("is a directory")));
}

TEST(ConfigFileTest, AKeyWithAPartTooManyForDefaultsIsMalformedNotAnUnknownScope) {
  const auto e = build_error("defaults.adaptiveLimit.maxLimit.extra=5");
  EXPECT_EQ(e.code(), "R4C-CFG-002");
  EXPECT_THAT(
      e.what(),
      AllOf(HasSubstr("'defaults.adaptiveLimit.maxLimit.extra'"), HasSubstr("a part too many"),
            HasSubstr("expected defaults.<kind>.<key>"), Not(HasSubstr("did you mean"))));
}

TEST(ConfigFileTest, AScopeWithoutItsNameIsMalformedNotAnUnknownScope) {
  for (const std::string scope : {"configs", "instances"}) {
    const auto e = build_error(scope + ".adaptiveLimit.maxLimit=5");
    EXPECT_EQ(e.code(), "R4C-CFG-002") << scope;
    EXPECT_THAT(e.what(), AllOf(HasSubstr("names no"), Not(HasSubstr("did you mean")))) << scope;
  }
}

TEST(ConfigFileTest, AnUnknownScopeSuggestsAnotherWord) {
  const auto e = build_error("defualts.adaptiveLimit.maxLimit=5");
  EXPECT_EQ(e.code(), "R4C-CFG-003");
  EXPECT_THAT(e.what(), HasSubstr("unknown scope 'defualts'; did you mean 'defaults'?"));
}

TEST(ConfigFileTest, ANulInAValueIsNamedAndTheMessageIsWhole) {
  const auto e = build_error(std::string("defaults.adaptiveLimit.maxLimit=5\0x", 35));
  EXPECT_EQ(e.code(), "R4C-CFG-004");
  EXPECT_THAT(e.what(), AllOf(HasSubstr("'5\\x00x'"), HasSubstr("expected an integer")));
}

TEST(ConfigFileTest, ANulInAKindIsNamedAndTheMessageIsWhole) {
  const auto e = build_error(std::string("defaults.adaptive\0Limit.maxLimit=5", 34));
  EXPECT_EQ(e.code(), "R4C-CFG-003");
  EXPECT_THAT(e.what(), AllOf(HasSubstr("'adaptive\\x00Limit'"),
                              HasSubstr("did you mean 'adaptiveLimit'?"), HasSubstr("valid: ")));
}

TEST(ConfigFileTest, EveryMessageSurvivesANulFromAnyCaller) {
  const r4c::ConfigException e("R4C-CFG-004", std::string("value 'a\0b' is bad", 18));
  EXPECT_EQ(std::string(e.what()), "R4C-CFG-004: value 'a\\x00b' is bad");
  EXPECT_EQ(e.code(), "R4C-CFG-004");
}

TEST(ConfigFileTest, QuoteEscapesWhatIsNotPrintableAndKeepsUtf8) {
  using r4c::detail::quote;
  EXPECT_EQ(quote("maxLimit"), "'maxLimit'");
  EXPECT_EQ(quote(std::string("a\0b", 3)), "'a\\x00b'");
  EXPECT_EQ(quote("tab\there\nnew\rline"), "'tab\\there\\nnew\\rline'");
  EXPECT_EQ(quote("\x01\x1f\x7f"), "'\\x01\\x1f\\x7f'");
  EXPECT_EQ(quote("it's a \\ path"), "'it\\'s a \\\\ path'");
  EXPECT_EQ(quote("mínimo €"), "'mínimo €'");    // valid UTF-8 passes through
  EXPECT_EQ(quote("\xff\xc3"), "'\\xff\\xc3'");  // not UTF-8: escaped
  EXPECT_EQ(quote("\xe2\x82"), "'\\xe2\\x82'");  // a cut sequence too
}

}  // namespace
