// SPDX-License-Identifier: Apache-2.0
// Docs are code: every ```cpp block of docs/*.md must appear inside a `// [doc:NAME]` ...
// `// [/doc:NAME]` region of a file under examples/, which CI compiles and runs. So a page
// cannot show code that no longer compiles, or that says something the library does not do.
//
// A block matches a run of consecutive lines of a region. Both sides are compared without
// trailing whitespace and without their common indentation (a region sits inside a function
// body; a page shows it flush left), and leading and trailing blank lines of a block do not
// count. Everything else is verbatim, comments included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "../file_text.hpp"

namespace {

namespace fs = std::filesystem;

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
      line.pop_back();
    }
    lines.push_back(line);
  }
  return lines;
}

std::size_t indentation(const std::string& line) {
  return std::min(line.find_first_not_of(" \t"), line.size());
}

// Without leading and trailing blank lines and without the indentation all lines share.
std::vector<std::string> normalized(std::vector<std::string> lines) {
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  auto first = std::find_if(lines.begin(), lines.end(), [](auto& l) { return !l.empty(); });
  lines.erase(lines.begin(), first);
  std::size_t common = std::string::npos;
  for (const std::string& line : lines) {
    if (!line.empty()) common = std::min(common, indentation(line));
  }
  for (std::string& line : lines) {
    if (!line.empty()) line.erase(0, common);
  }
  return lines;
}

struct CodeBlock {
  int line;  // of the opening fence, from 1
  std::vector<std::string> lines;
};

// The ```cpp blocks of a Markdown page. Fences may be indented (inside a list item), use ``` or
// ~~~, and close with a fence of the same character at least as long.
std::vector<CodeBlock> cpp_blocks(const std::string& markdown) {
  static const std::regex kOpening(R"(^\s*(`{3,}|~{3,})\s*([^\s`]*).*$)");
  std::vector<CodeBlock> blocks;
  const std::vector<std::string> lines = split_lines(markdown);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::smatch open;
    if (!std::regex_match(lines[i], open, kOpening)) continue;
    const std::string fence = open[1];
    const bool is_cpp = open[2] == "cpp";
    CodeBlock block{static_cast<int>(i) + 1, {}};
    std::size_t j = i + 1;
    for (; j < lines.size(); ++j) {
      const std::string& line = lines[j];
      const std::string rest = line.substr(indentation(line));
      if (rest.size() >= fence.size() && rest.find_first_not_of(fence[0]) == std::string::npos) {
        break;  // the closing fence
      }
      block.lines.push_back(line);
    }
    block.lines = normalized(block.lines);
    if (is_cpp && !block.lines.empty()) blocks.push_back(block);
    i = j;  // an unclosed fence runs to the end of the page
  }
  return blocks;
}

struct Region {
  std::string file;
  std::string name;
  std::vector<std::string> lines;  // marker lines of nested regions left out
};

struct Regions {
  std::vector<Region> regions;
  std::vector<std::string> errors;  // unclosed or unopened markers
};

void add_regions(const std::string& file, const std::string& source, Regions& out) {
  static const std::regex kMarker(R"(^\s*//\s*\[(/?)doc:([A-Za-z0-9_.-]+)\]\s*$)");
  std::vector<Region> open;
  const std::vector<std::string> lines = split_lines(source);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::smatch marker;
    if (!std::regex_match(lines[i], marker, kMarker)) {
      for (Region& region : open) region.lines.push_back(lines[i]);
      continue;
    }
    const std::string name = marker[2];
    auto same = std::find_if(open.begin(), open.end(), [&](auto& r) { return r.name == name; });
    const std::string where = file + ":" + std::to_string(i + 1) + ": ";
    if (marker[1] == "/") {
      if (same == open.end()) {
        out.errors.push_back(where + "[/doc:" + name + "] closes a region that is not open");
      } else {
        out.regions.push_back(std::move(*same));
        open.erase(same);
      }
    } else if (same != open.end()) {
      out.errors.push_back(where + "[doc:" + name + "] is already open");
    } else {
      open.push_back({file, name, {}});
    }
  }
  for (const Region& region : open) {
    out.errors.push_back(file + ": [doc:" + region.name + "] is never closed");
  }
}

// Whether `block` (normalized) is a run of consecutive lines of `region`.
bool region_contains(const Region& region, const std::vector<std::string>& block) {
  if (block.size() > region.lines.size()) return false;
  for (std::size_t start = 0; start + block.size() <= region.lines.size(); ++start) {
    const auto first = region.lines.begin() + static_cast<std::ptrdiff_t>(start);
    if (normalized({first, first + static_cast<std::ptrdiff_t>(block.size())}) == block) {
      return true;
    }
  }
  return false;
}

// One message per ```cpp block of the page found in no region.
std::vector<std::string> missing_blocks(const std::string& page, const std::string& markdown,
                                        const std::vector<Region>& regions) {
  std::vector<std::string> missing;
  for (const CodeBlock& block : cpp_blocks(markdown)) {
    const bool found = std::any_of(regions.begin(), regions.end(), [&](const Region& region) {
      return region_contains(region, block.lines);
    });
    if (!found) {
      missing.push_back(page + ":" + std::to_string(block.line) +
                        ": this ```cpp block is in no [doc:...] region of examples/; it starts: " +
                        block.lines.front());
    }
  }
  return missing;
}

using r4c::test::read_text;

std::string joined(const std::vector<std::string>& messages) {
  std::string text;
  for (const std::string& message : messages) text += message + "\n";
  return text;
}

Regions regions_of(const std::string& file, const std::string& source) {
  Regions regions;
  add_regions(file, source, regions);
  return regions;
}

TEST(DocSnippetsTest, FindsABlockInAnIndentedRegionWhateverItsOwnIndentation) {
  const Regions regions = regions_of("a.cpp",
                                     "void f() {\n"
                                     "  // [doc:f]\n"
                                     "  int x = 1;\n"
                                     "  if (x) {\n"
                                     "    g(x);  // why\n"
                                     "  }\n"
                                     "  // [/doc:f]\n"
                                     "}\n");
  ASSERT_TRUE(regions.errors.empty()) << joined(regions.errors);
  EXPECT_TRUE(missing_blocks("p.md", "```cpp\nint x = 1;\nif (x) {\n  g(x);  // why\n}\n```\n",
                             regions.regions)
                  .empty());
  EXPECT_TRUE(
      missing_blocks("p.md", "  ```cpp\n\n      g(x);  // why   \n\n  ```\n", regions.regions)
          .empty());
}

TEST(DocSnippetsTest, ReportsADriftedBlockByPageLineAndFirstLine) {
  const Regions regions = regions_of("a.cpp", "// [doc:f]\nint x = 1;\nint y = 2;\n// [/doc:f]\n");
  const std::string page =
      "# Title\n\n```cpp\nint x = 1;\nint y = 2;\n```\n\n```cpp\nint x = 1;\nint y = 3;\n```\n";
  const std::vector<std::string> missing = missing_blocks("docs/p.md", page, regions.regions);
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0],
            "docs/p.md:8: this ```cpp block is in no [doc:...] region of examples/; it "
            "starts: int x = 1;");
}

TEST(DocSnippetsTest, DoesNotMatchAcrossTheEdgeOfARegion) {
  const Regions regions =
      regions_of("a.cpp", "int before = 0;\n// [doc:f]\nint x = 1;\n// [/doc:f]\nint after = 2;\n");
  EXPECT_EQ(
      missing_blocks("p.md", "```cpp\nint x = 1;\nint after = 2;\n```\n", regions.regions).size(),
      1u);
}

TEST(DocSnippetsTest, ChecksOnlyCppBlocks) {
  const std::string page =
      "```sh\ncmake --build build\n```\n\n```\nplain text\n```\n\n~~~text\nr4c-sim replay\n~~~\n"
      "````markdown\n```cpp\nnot a real block, it is inside a markdown block\n```\n````\n";
  EXPECT_TRUE(missing_blocks("p.md", page, {}).empty());
  EXPECT_EQ(missing_blocks("p.md", "~~~cpp\nint z;\n~~~\n", {}).size(), 1u);
}

TEST(DocSnippetsTest, LeavesOutTheMarkersOfNestedRegions) {
  const Regions regions =
      regions_of("a.cpp",
                 "// [doc:outer]\nint a;\n// [doc:inner]\nint b;\n// [/doc:inner]\nint c;\n"
                 "// [/doc:outer]\n");
  ASSERT_TRUE(regions.errors.empty()) << joined(regions.errors);
  EXPECT_TRUE(
      missing_blocks("p.md", "```cpp\nint a;\nint b;\nint c;\n```\n", regions.regions).empty());
}

TEST(DocSnippetsTest, ReportsUnbalancedMarkers) {
  EXPECT_EQ(regions_of("a.cpp", "// [doc:f]\nint x;\n").errors.size(), 1u);
  EXPECT_EQ(regions_of("a.cpp", "int x;\n// [/doc:f]\n").errors.size(), 1u);
}

// The real check, over every page in docs/ and every source file in examples/.
TEST(DocSnippetsTest, EveryCppBlockOfTheDocsIsInACompiledExample) {
  const fs::path docs = fs::path(R4C_SOURCE_DIR) / "docs";
  const fs::path examples = fs::path(R4C_SOURCE_DIR) / "examples";
  ASSERT_TRUE(fs::is_directory(docs)) << docs;
  ASSERT_TRUE(fs::is_directory(examples)) << examples;

  Regions regions;
  for (const auto& entry : fs::recursive_directory_iterator(examples)) {
    const std::string extension = entry.path().extension().string();
    if (entry.is_regular_file() &&
        (extension == ".cpp" || extension == ".hpp" || extension == ".cc" || extension == ".h")) {
      add_regions(fs::relative(entry.path(), R4C_SOURCE_DIR).string(), read_text(entry.path()),
                  regions);
    }
  }
  EXPECT_TRUE(regions.errors.empty()) << joined(regions.errors);

  std::vector<fs::path> pages;
  for (const auto& entry : fs::directory_iterator(docs)) {
    if (entry.is_regular_file() && entry.path().extension() == ".md") pages.push_back(entry.path());
  }
  std::sort(pages.begin(), pages.end());
  for (const fs::path& page : pages) {
    const std::vector<std::string> missing = missing_blocks(
        fs::relative(page, R4C_SOURCE_DIR).string(), read_text(page), regions.regions);
    EXPECT_TRUE(missing.empty()) << joined(missing)
                                 << "Copy each block from a // [doc:NAME] region of a file "
                                    "under examples/, or fix the region and copy it again.";
  }
}

}  // namespace
