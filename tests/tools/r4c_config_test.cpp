// SPDX-License-Identifier: Apache-2.0
// r4c-config, the real binary: a good file prints what it resolved to, a bad one names every bad
// line with its code and exits 1.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

// run_binary runs the program R4C_SIM_PATH names: here r4c-config (see CMakeLists.txt).
#include "sim_test_support.hpp"

namespace {

using r4c::sim::testing::run_binary;
using r4c::sim::testing::ScratchDir;
using ::testing::HasSubstr;
using ::testing::Not;

std::string write(const ScratchDir& dir, const std::string& name, const std::string& text) {
  const auto path = dir.path() / name;
  std::ofstream(path) << text;
  return path.string();
}

TEST(R4cConfigTest, PrintsWhatAGoodFileResolvedTo) {
  const ScratchDir dir("_r4c_config");
  const std::string file = write(dir, "good.properties",
                                 "defaults.adaptiveLimit.maxLimit = 300\n"
                                 "instances.orders.timeout.timeout = 250ms\n");
  const auto run = run_binary({file});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  EXPECT_THAT(run.out, HasSubstr("defaults.adaptiveLimit.maxLimit = 300"));
  EXPECT_THAT(run.out, HasSubstr("# " + file + ":1 defaults.adaptiveLimit.maxLimit\n"));
  EXPECT_THAT(run.out, HasSubstr("# timeout instances.orders: not created yet"));
  EXPECT_THAT(run.out, HasSubstr("instances.orders.timeout.timeout = 250ms"));
}

TEST(R4cConfigTest, PrintsJsonWithTheFlag) {
  const ScratchDir dir("_r4c_config");
  const std::string file = write(dir, "good.properties", "defaults.bulkhead.maxConcurrent = 7\n");
  const auto run = run_binary({file, "--json"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.rfind("{\"policies\":[", 0), 0u);
  EXPECT_THAT(run.out, HasSubstr(R"({"key":"maxConcurrent","value":"7","source":"file",)"
                                 R"("origin":")" +
                                 file + R"(:1","fileKey":"defaults.bulkhead.maxConcurrent"})"));
}

TEST(R4cConfigTest, NamesEveryBadLineWithItsCodeAndFails) {
  const ScratchDir dir("_r4c_config");
  const std::string file = write(dir, "bad.properties",
                                 "defaults.adaptiveLimit.maxLimit = lots\n"
                                 "defaults.bulkhead.maxConcurent = 3\n"
                                 "instances.orders.timeout.timeout = 250\n");
  const auto run = run_binary({file});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.out, "");
  EXPECT_THAT(run.err, HasSubstr("R4C-CFG-004: " + file + ":1: "));
  EXPECT_THAT(run.err, HasSubstr("R4C-CFG-003: " + file + ":2: "));
  EXPECT_THAT(run.err, HasSubstr("R4C-ATR-001: " + file + ":3: "));
  EXPECT_THAT(run.err, HasSubstr("r4c-config: 3 errors in " + file + "\n"));
}

TEST(R4cConfigTest, AMissingFileOrABadCommandLineFails) {
  const auto missing = run_binary({"/nonexistent/r4c.properties"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("R4C-CFG-001"));
  const auto none = run_binary({});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err, HasSubstr("usage: r4c-config FILE [--json]"));
  const auto unknown = run_binary({"a", "--yaml"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("unexpected argument '--yaml'"));
  EXPECT_THAT(run_binary({"--help"}).out, Not(HasSubstr("unexpected")));
}

}  // namespace
