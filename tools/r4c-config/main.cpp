// SPDX-License-Identifier: Apache-2.0
// r4c-config FILE [--json]: what an external configuration file resolves to.
//
// It builds a registry from the file alone, as a service's `.config_file(FILE).build()` does, and
// prints ResilienceRegistry::describe(): every kind's defaults, every named config and every
// instance the file names, each setting with its value and where it came from. A file with
// mistakes prints every one (file:line and code) on stderr and exits 1; a wrong command line
// exits 2.
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

#include "r4c/errors.hpp"
#include "r4c/registry.hpp"

namespace {

constexpr std::string_view kUsage =
    "usage: r4c-config FILE [--json]\n"
    "  Loads FILE as a registry's .config_file(FILE) would and prints what every policy\n"
    "  resolved to (text, or JSON with --json). Exits 1 naming every bad line of FILE.\n";

int usage(std::FILE* out, int code) {
  std::fputs(kUsage.data(), out);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--json") {
      json = true;
    } else if (arg == "-h" || arg == "--help") {
      return usage(stdout, 0);
    } else if (arg.starts_with("-") || !path.empty()) {
      std::fprintf(stderr, "r4c-config: unexpected argument '%s'\n", argv[i]);
      return usage(stderr, 2);
    } else {
      path = arg;
    }
  }
  if (path.empty()) return usage(stderr, 2);

  try {
    const r4c::ResilienceRegistry registry =
        r4c::ResilienceRegistry::builder().config_file(path).build();
    const r4c::ResolvedConfiguration resolved = registry.describe();
    const std::string out = json ? resolved.json() : resolved.text();
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  } catch (const r4c::ConfigException& e) {
    for (const r4c::ConfigError& error : e.errors()) {
      std::fprintf(stderr, "%s\n", error.message.c_str());
    }
    std::fprintf(stderr, "r4c-config: %zu error%s in %s\n", e.errors().size(),
                 e.errors().size() == 1 ? "" : "s", path.c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "r4c-config: %s\n", e.what());
    return 1;
  }
}
