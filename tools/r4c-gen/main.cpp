// SPDX-License-Identifier: Apache-2.0
// r4c-gen: reads a C++ header whose classes carry [[r4c::...]] attributes and writes the
// wrappers that run their calls through r4c's policies. Normally run by the CMake function
// r4c_generate_resilient(); see docs/declarative.md.
//
//   r4c-gen include/shop/search_client.hpp -o search_client.resilient.hpp
//           [--depfile search_client.resilient.hpp.d] [@args-file] [clang flags: -I -D -std ...]
//
// Errors are printed like a compiler's (file:line:col: error: R4C-...: ...); on any error it
// exits with 1 and writes nothing.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "diagnostics.hpp"
#include "emit.hpp"
#include "scan.hpp"

namespace fs = std::filesystem;
using r4c::gen::Diagnostics;
using r4c::gen::Location;

namespace {

constexpr const char* kUsage =
    "usage: r4c-gen <header> -o <output> [--depfile <file>] [--system-include <dir>]...\n"
    "               [@<args file>] [clang flags...]\n"
    "  Writes the resilient wrappers of the classes of <header> that carry [[r4c::...]]\n"
    "  attributes. Flags it does not know (-I, -D, -std, ...) go to clang; an args file holds\n"
    "  one argument per line. --system-include names a folder of the compiler's own (it must\n"
    "  come before the -I flags): -I flags naming it are dropped, since clang would search it\n"
    "  before its C++ headers.\n";

struct Options {
  std::string header;
  std::string output;
  std::string depfile;
  std::vector<std::string> clang_args;
  std::vector<std::string> include_dirs;  // in search order, for the generated #include
  std::vector<std::string> system_dirs;   // the compiler's own: never passed with -I
};

bool same_dir(const std::string& a, const std::string& b) {
  std::error_code error;
  return fs::weakly_canonical(a, error) == fs::weakly_canonical(b, error);
}

bool read_args_file(const std::string& path, std::vector<std::string>& args, Diagnostics& d) {
  std::ifstream in(path);
  if (!in) {
    d.error(Location{}, r4c::gen::kInput, "cannot read the arguments file '" + path + "'");
    return false;
  }
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) args.push_back(line);
  }
  return true;
}

bool parse_options(int argc, char** argv, Options& options, Diagnostics& d) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.size() > 1 && arg[0] == '@') {
      if (!read_args_file(arg.substr(1), args, d)) return false;
    } else {
      args.push_back(arg);
    }
  }
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    auto value = [&](std::string& into) {
      if (i + 1 >= args.size()) {
        d.error(Location{}, r4c::gen::kInput, arg + " needs a value");
        return false;
      }
      into = args[++i];
      return true;
    };
    if (arg == "-o") {
      if (!value(options.output)) return false;
    } else if (arg == "--depfile") {
      if (!value(options.depfile)) return false;
    } else if (arg == "-h" || arg == "--help") {
      std::cout << kUsage;
      std::exit(0);
    } else if (arg == "--system-include") {
      std::string dir;
      if (!value(dir)) return false;
      options.system_dirs.push_back(dir);
    } else if (arg == "-I" || arg == "-isystem" || arg == "-iquote" || arg.rfind("-I", 0) == 0) {
      std::string dir = arg.substr(2);
      if (arg.size() == 2 || arg[1] != 'I') {
        if (!value(dir)) return false;
      }
      const bool is_system = std::any_of(options.system_dirs.begin(), options.system_dirs.end(),
                                         [&](const std::string& s) { return same_dir(s, dir); });
      if (is_system) continue;
      options.include_dirs.push_back(dir);
      options.clang_args.push_back(arg.size() == 2 || arg[1] == 'I' ? "-I" : arg);
      options.clang_args.push_back(dir);
    } else if (!arg.empty() && arg[0] == '-') {
      options.clang_args.push_back(arg);
    } else if (options.header.empty()) {
      options.header = arg;
    } else {
      d.error(Location{}, r4c::gen::kInput,
              "a second header '" + arg + "' (after '" + options.header + "'); give one per run");
      return false;
    }
  }
  if (options.header.empty() || options.output.empty()) {
    d.error(Location{}, r4c::gen::kInput,
            std::string("a header and -o <output> are needed\n") + kUsage);
    return false;
  }
  return true;
}

// How the generated header includes the annotated one: relative to the first include
// directory that holds it (the one the compiler would find it in), else by absolute path.
std::string include_spelling(const Options& options) {
  std::error_code error;
  const fs::path header = fs::weakly_canonical(fs::absolute(options.header), error);
  for (const std::string& dir : options.include_dirs) {
    const fs::path base = fs::weakly_canonical(fs::absolute(dir), error);
    const fs::path relative = header.lexically_relative(base);
    if (!relative.empty() && *relative.begin() != "..") return relative.generic_string();
  }
  return header.generic_string();
}

std::string escape_for_make(const std::string& path) {
  std::string escaped;
  for (char c : path) {
    if (c == ' ' || c == '#') escaped += '\\';
    if (c == '$') escaped += '$';
    escaped += c;
  }
  return escaped;
}

// Writes beside the target, then renames: readers never see half a file.
bool write_file(const std::string& path, const std::string& text, Diagnostics& d) {
  const std::string temporary = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) {
      d.error(Location{}, r4c::gen::kInput, "cannot write '" + temporary + "'");
      return false;
    }
  }
  std::error_code error;
  fs::rename(temporary, path, error);
  if (error) {
    d.error(Location{}, r4c::gen::kInput, "cannot write '" + path + "': " + error.message());
    fs::remove(temporary, error);
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Diagnostics diagnostics;
  Options options;
  if (!parse_options(argc, argv, options, diagnostics)) {
    std::cerr << diagnostics.text();
    return 1;
  }
  const auto header = r4c::gen::scan(options.header, options.clang_args, diagnostics);
  if (!header || diagnostics.has_errors()) {
    std::cerr << diagnostics.text();
    const int errors = diagnostics.error_count();
    std::cerr << errors << (errors == 1 ? " error" : " errors") << " generated; " << options.output
              << " was not written.\n";
    return 1;
  }
  if (header->classes.empty()) {
    diagnostics.warning(Location{options.header, 0, 0},
                        "no class with [[r4c::...]] attributes; the generated header declares "
                        "nothing");
  }
  std::cerr << diagnostics.text();
  Diagnostics write_errors;
  const std::string text = r4c::gen::emit(*header, include_spelling(options));
  if (!options.depfile.empty()) {
    std::string rule = escape_for_make(options.output) + ":";
    for (const std::string& dependency : header->dependencies) {
      // Canonical: clang names its own headers through "/../lib/gcc/...", which only the
      // file system (where /lib may be a link to /usr/lib) resolves right.
      std::error_code error;
      const fs::path path = fs::weakly_canonical(fs::absolute(dependency), error);
      rule += " \\\n  " + escape_for_make(error ? dependency : path.string());
    }
    // Rewritten only when it changes: the Makefile generator rescans a newer depfile and then
    // takes the output for out of date again.
    const bool unchanged = [&] {
      std::ifstream in(options.depfile, std::ios::binary);
      std::ostringstream old;
      old << in.rdbuf();
      return in && old.str() == rule + "\n";
    }();
    if (!unchanged && !write_file(options.depfile, rule + "\n", write_errors)) {
      std::cerr << write_errors.text();
      return 1;
    }
  }
  if (!write_file(options.output, text, write_errors)) {
    std::cerr << write_errors.text();
    return 1;
  }
  return 0;
}
