// SPDX-License-Identifier: Apache-2.0
// The r4c-gen binary on the headers of tests/gen/errors: each bad header's messages against its
// golden file (*.expected), exit status 1 and nothing written; the headers that must pass; the
// depfile; and docs/declarative.md's excerpt of a generated file against a real one.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../file_text.hpp"

namespace {

namespace fs = std::filesystem;

struct GeneratorRun {
  int status = -1;
  std::string output;  // stdout and stderr
};

// Runs r4c-gen from the cases' folder, so messages name the headers as given.
GeneratorRun generate(const std::string& arguments) {
  const std::string command =
      std::string("cd '") + R4C_GEN_CASES + "' && '" + R4C_GEN_PATH + "' " + arguments + " 2>&1";
  GeneratorRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  std::array<char, 4096> buffer{};
  while (std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe)) {
    run.output.append(buffer.data(), n);
  }
  const int status = pclose(pipe);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

using r4c::test::read_text;

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / "r4c_gen_errors_test";
  fs::create_directories(dir);
  const fs::path path = dir / name;
  fs::remove(path);
  return path;
}

// r4c-gen on the test header `<name>.hpp`, writing a scratch `<name>.resilient.hpp`.
struct Generated {
  fs::path output;
  GeneratorRun run;
};

Generated generate_header(const std::string& name) {
  const fs::path output = scratch(name + ".resilient.hpp");
  return {output, generate(name + ".hpp -o '" + output.string() + "'")};
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at)) {
    text.replace(at, from.size(), to);
    at += to.size();
  }
  return text;
}

// ---- golden messages ----------------------------------------------------------------------

class GoldenErrorsTest : public ::testing::TestWithParam<const char*> {};

TEST_P(GoldenErrorsTest, PrintsTheGoldenMessagesExitsWithOneAndWritesNothing) {
  const std::string name = GetParam();
  const fs::path output = scratch(name + ".resilient.hpp");
  const fs::path depfile = scratch(name + ".resilient.hpp.d");
  const GeneratorRun run = generate(name + ".hpp -o '" + output.string() + "' --depfile '" +
                                    depfile.string() + "' -I '" + R4C_GEN_INCLUDE + "'");
  EXPECT_EQ(run.status, 1) << run.output;
  const std::string expected = replace_all(
      read_text(fs::path(R4C_GEN_CASES) / (name + ".expected")), "<output>", output.string());
  EXPECT_EQ(run.output, expected);
  EXPECT_FALSE(fs::exists(output));
  EXPECT_FALSE(fs::exists(depfile));
}

INSTANTIATE_TEST_SUITE_P(Headers, GoldenErrorsTest,
                         ::testing::Values("bad_duration",              // R4C-ATR-001
                                           "limit_below_one",           // R4C-ATR-003
                                           "bounds_out_of_order",       // R4C-ATR-009
                                           "invalid_value",             // R4C-REG-001
                                           "unknown_names",             // R4C-GEN-001, 002
                                           "malformed",                 // R4C-GEN-003
                                           "not_virtual",               // R4C-GEN-004
                                           "misplaced",                 // R4C-GEN-004
                                           "private_and_final",         // R4C-GEN-004
                                           "noexcept_throws",           // R4C-GEN-005
                                           "arguments_not_repeatable",  // R4C-GEN-006
                                           "grpc_handlers",             // R4C-GEN-003, 004
                                           "does_not_compile"),         // R4C-GEN-007
                         [](const auto& info) { return std::string(info.param); });

TEST(GeneratorTest, AFailedRunLeavesAnEarlierOutputAsItWas) {
  const fs::path output = scratch("kept.resilient.hpp");
  std::ofstream(output) << "earlier";
  const GeneratorRun run = generate("malformed.hpp -o '" + output.string() + "'");
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(read_text(output), "earlier");
}

TEST(GeneratorTest, AMissingHeaderOrArgumentsFileIsAnInputError) {
  const fs::path output = scratch("missing.resilient.hpp");
  GeneratorRun run = generate("no_such_header.hpp -o '" + output.string() + "'");
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(run.output,
            "no_such_header.hpp: error: R4C-GEN-007: cannot read the header: no such readable "
            "file\n1 error generated; " +
                output.string() + " was not written.\n");
  run = generate("@no_such.args");
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(run.output,
            "r4c-gen: error: R4C-GEN-007: cannot read the arguments file 'no_such.args'\n");
  EXPECT_FALSE(fs::exists(output));
}

// ---- headers that pass --------------------------------------------------------------------

TEST(GeneratorTest, AttributesInSkippedPreprocessorBranchesAreNotRead) {
  const auto [output, run] = generate_header("inactive_branches");
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(run.output, "");
  const std::string text = read_text(output);
  EXPECT_NE(text.find("{.initial_limit = 5,"), std::string::npos) << text;
  EXPECT_EQ(text.find("no_such"), std::string::npos) << text;
}

TEST(GeneratorTest, SettingsThatConflictWithTheBuiltInDefaultsAreAWarning) {
  const auto [output, run] = generate_header("default_conflict");
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(run.output,
            "default_conflict.hpp:6:10: warning: with the built-in defaults for what "
            "[[r4c::adaptive_limit]] leaves unset, R4C-ATR-009: initial_limit (20) is greater "
            "than max_limit (10); valid: min_limit <= initial_limit <= max_limit; the wrapper's "
            "constructor will throw this unless the registry's defaults or a named config set "
            "those settings\n");
  EXPECT_TRUE(fs::exists(output));
}

TEST(GeneratorTest, MethodIdsSpellParameterTypesFullyQualified) {
  const auto [output, run] = generate_header("ids");
  ASSERT_EQ(run.status, 0) << run.output;
  const std::string text = read_text(output);
  for (const char* id :
       {// written `const string&`, `Order`, `unique_ptr<Order>` under `using namespace std`
        "\"shop::Ids#a(const std::string&, shop::Order, std::unique_ptr<shop::Order>)\"",
        // a typedef keeps its name; template arguments are qualified too
        "\"shop::Ids#b(const shop::Orders&, std::map<std::string, std::vector<shop::Order>>)\"",
        "\"shop::Ids#c(const shop::Order*, shop::Order* const, shop::Priority, "
        "shop::detail::Token)\"",
        "\"shop::Ids#d(int (*)(int), std::size_t, unsigned long long)\"",
        // qualifiers of the method after the parameters
        "\"shop::Ids#e(std::array<int, 3>) const &\"", "\"shop::Ids#operator()(int)\""}) {
    EXPECT_NE(text.find(id), std::string::npos) << id << "\n" << text;
  }
  // A function pointer parameter is declared through std::type_identity_t.
  EXPECT_NE(text.find("void d(std::type_identity_t<int (*)(int)> p0, std::size_t p1"),
            std::string::npos)
      << text;
}

// examples/declarative's header, generated once for the tests below (about a second: it
// includes Asio).
struct Example {
  fs::path header = fs::path(R4C_SOURCE_DIR) / "examples/declarative/shop/search_client.hpp";
  fs::path output = scratch("search_client.resilient.hpp");
  fs::path depfile = scratch("search_client.resilient.hpp.d");
  // append: GCC 12 at -O3 warns falsely on "literal" + std::string&& (-Wstringop-overflow).
  GeneratorRun run =
      generate(std::string("'").append(header.string()) + "' -o '" + output.string() +
               "' --depfile '" + depfile.string() + "' -I '" + R4C_GEN_INCLUDE + "' -I '" +
               R4C_SOURCE_DIR + "/examples/declarative'");
};

const Example& example() {
  static const Example generated;
  return generated;
}

TEST(GeneratorTest, TheDepfileNamesTheHeaderAndEveryFileItIncludes) {
  const auto& [header, output, depfile, run] = example();
  ASSERT_EQ(run.status, 0) << run.output;
  const std::string rule = read_text(depfile);
  EXPECT_EQ(rule.rfind(output.string() + ": \\\n", 0), 0u) << rule;
  EXPECT_NE(rule.find(std::string(" ").append(header.lexically_normal().string()) + " \\\n"),
            std::string::npos);
  EXPECT_NE(rule.find(std::string(R4C_GEN_INCLUDE) + "/r4c/errors.hpp"), std::string::npos);
  EXPECT_NE(rule.find("asio/awaitable.hpp"), std::string::npos);
  // The generated header includes the annotated one as the include path finds it.
  EXPECT_NE(read_text(output).find("#include \"shop/search_client.hpp\"\n"), std::string::npos);
}

// ---- the docs -----------------------------------------------------------------------------

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// docs/declarative.md shows a generated file in ```c++ blocks (doc_snippets_test checks the
// ```cpp ones against examples/; generated code is not in examples/): each must be a run of
// consecutive lines of what r4c-gen makes of the example header today.
TEST(GeneratorTest, TheDocsExcerptsOfAGeneratedFileMatchARealOne) {
  const auto& [header, output, depfile, run] = example();
  ASSERT_EQ(run.status, 0) << run.output;
  const std::vector<std::string> generated = lines_of(read_text(output));

  const std::vector<std::string> page =
      lines_of(read_text(fs::path(R4C_SOURCE_DIR) / "docs/declarative.md"));
  int excerpts = 0;
  for (std::size_t i = 0; i < page.size(); ++i) {
    if (page[i] != "```c++") continue;
    std::vector<std::string> block;
    for (++i; i < page.size() && page[i] != "```"; ++i) block.push_back(page[i]);
    ++excerpts;
    bool found = false;
    for (std::size_t start = 0; !found && start + block.size() <= generated.size(); ++start) {
      found = std::equal(block.begin(), block.end(), generated.begin() + static_cast<long>(start));
    }
    EXPECT_TRUE(found) << "docs/declarative.md: a ```c++ block (" << block.size()
                       << " lines, starting '" << (block.empty() ? "" : block.front())
                       << "') is not in the generated file:\n"
                       << read_text(output);
  }
  EXPECT_GE(excerpts, 1);
}

}  // namespace
