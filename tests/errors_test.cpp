// SPDX-License-Identifier: Apache-2.0
#include "r4c/errors.hpp"

#include <gtest/gtest.h>

#include <string>
#include <type_traits>
#include <utility>

namespace {

struct SlowReply : r4c::CallTimeoutException {
  using CallTimeoutException::CallTimeoutException;
};

TEST(ErrorsTest, ConfigExceptionExtractsTheCodeItsMessageStartsWith) {
  const r4c::ConfigException e("R4C-ATR-009: min_limit (30) is greater than initial_limit (20)");
  EXPECT_EQ(e.code(), "R4C-ATR-009");
  EXPECT_STREQ(e.what(), "R4C-ATR-009: min_limit (30) is greater than initial_limit (20)");
}

TEST(ErrorsTest, ConfigExceptionBuildsItsMessageFromCodeAndDetail) {
  const r4c::ConfigException e("R4C-REG-001", "smoothing is 0; valid: (0, 1]");
  EXPECT_EQ(e.code(), "R4C-REG-001");
  EXPECT_STREQ(e.what(), "R4C-REG-001: smoothing is 0; valid: (0, 1]");
}

TEST(ErrorsTest, ConfigExceptionWithoutACodeHasAnEmptyCode) {
  EXPECT_EQ(r4c::ConfigException("something went wrong").code(), "");
  EXPECT_EQ(r4c::ConfigException("R4C-: no group").code(), "");
  EXPECT_EQ(r4c::ConfigException("R4C-ATR-x").code(), "");
}

TEST(ErrorsTest, ConfigExceptionIsAnInvalidArgument) {
  static_assert(std::is_base_of_v<std::invalid_argument, r4c::ConfigException>);
  try {
    throw r4c::ConfigException("R4C-REG-009", "unknown id 'x'");
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "R4C-REG-009: unknown id 'x'");
  }
}

TEST(ErrorsTest, RuntimeExceptionsAreRuntimeErrors) {
  static_assert(std::is_base_of_v<std::runtime_error, r4c::LimitExceededException>);
  static_assert(std::is_base_of_v<std::runtime_error, r4c::CallTimeoutException>);
  static_assert(std::is_base_of_v<std::runtime_error, r4c::BulkheadFullException>);
  static_assert(std::is_base_of_v<std::runtime_error, r4c::RequestNotPermittedException>);
  static_assert(std::is_base_of_v<std::runtime_error, r4c::CallNotPermittedException>);
}

TEST(ErrorsTest, LimitExceededExceptionCarriesItsInstanceId) {
  const r4c::LimitExceededException with_id("orders", "full");
  EXPECT_EQ(with_id.instance_id(), "orders");
  EXPECT_STREQ(with_id.what(), "full");
  EXPECT_EQ(r4c::LimitExceededException("full").instance_id(), "");
}

TEST(ErrorsTest, EveryRefusalIsARejectedExceptionNamingItsKindAndInstance) {
  const auto refusal = [](auto exception) -> std::pair<std::string, std::string> {
    try {
      throw exception;
    } catch (const r4c::RejectedException& e) {
      return {std::string(e.kind()), e.instance_id()};
    }
  };
  using Refusal = std::pair<std::string, std::string>;
  EXPECT_EQ(refusal(r4c::LimitExceededException("a", "full")), Refusal("adaptivelimit", "a"));
  EXPECT_EQ(refusal(r4c::BulkheadFullException("b", "full")), Refusal("bulkhead", "b"));
  EXPECT_EQ(refusal(r4c::RequestNotPermittedException("c", "no permit")),
            Refusal("ratelimiter", "c"));
  EXPECT_EQ(refusal(r4c::CallNotPermittedException("d", "open")), Refusal("circuitbreaker", "d"));
  EXPECT_EQ(refusal(r4c::BulkheadFullException("full")), Refusal("bulkhead", ""));
}

TEST(ErrorsTest, ATimedOutCallRanSoItIsNoRejection) {
  static_assert(!std::is_base_of_v<r4c::RejectedException, r4c::CallTimeoutException>);
  static_assert(std::is_base_of_v<std::runtime_error, r4c::RejectedException>);
}

TEST(ErrorsTest, UsersCanDeriveTheirOwnExceptionTypes) {
  try {
    throw SlowReply("no reply in 2 s");
  } catch (const r4c::CallTimeoutException& e) {
    EXPECT_STREQ(e.what(), "no reply in 2 s");
  }
}

}  // namespace
