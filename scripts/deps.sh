# SPDX-License-Identifier: Apache-2.0
# Sourced by scripts/demo, scripts/test and .ci/run: makes sure the Debian packages r4c builds with
# are installed. As root it installs what is missing, one line per step, apt's own output in a log
# file (named if a step fails); otherwise it prints the apt-get line and stops.
# libgrpc++-dev and protobuf-compiler-grpc: r4c::grpc, its tests, example and benchmark (a build
# without them skips those, saying so; the test and CI commands install them so that CI tests it).
r4c_packages=(g++ cmake make python3 googletest libgtest-dev libgmock-dev libbenchmark-dev libasio-dev
              libcli11-dev pkgconf libcpp-httplib-dev libtomlplusplus-dev libclang-14-dev
              libgrpc++-dev protobuf-compiler-grpc)

# r4c_apt_quietly <what> <command...>: runs an apt command with its output in the log; on failure
# says which step failed and where its output is, and returns non-zero.
r4c_apt_quietly() {
  local what="$1"
  shift
  local log="${R4C_APT_LOG:-${TMPDIR:-/tmp}/r4c-apt.log}"
  echo "r4c: $what" >&2
  if ! { echo "### $what: $*"; DEBIAN_FRONTEND=noninteractive "$@"; } >> "$log" 2>&1; then
    echo "r4c: failed: $what (apt's output: $log)" >&2
    return 1
  fi
}

# r4c_ensure_packages [extra packages...]: installs r4c's packages and the extra ones.
r4c_ensure_packages() {
  local missing=()
  local package
  for package in "${r4c_packages[@]}" "$@"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
      missing+=("$package")
    fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -eq 0 ]; then
    r4c_apt_quietly "updating the package lists" apt-get update -q || exit 1
    r4c_apt_quietly "installing ${missing[*]}" apt-get install -y -q "${missing[@]}" || exit 1
  else
    echo "r4c: missing Debian packages; install them with:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
}

# r4c_ccache: sets r4c_launcher to the CMake arguments that compile through ccache when it is
# installed (none otherwise), so that rebuilding a configuration reuses what did not change. The
# base folder makes the cached results independent of where the clone lives.
r4c_ccache() {
  # Without ccache, -U forgets a launcher an earlier configuration of the build folder set.
  r4c_launcher=(-UCMAKE_CXX_COMPILER_LAUNCHER)
  command -v ccache > /dev/null || return 0
  r4c_launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
  # Debug information names the folder it was compiled in, so ccache hashes that folder too:
  # each new clone (CI's, a worktree's) would miss on every file. Without it the line tables'
  # folder may be another clone's; their paths are relative to the base folder all the same.
  export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
  # The tests' precompiled headers (R4C_PCH): without these ccache compiles every file that uses
  # one itself, caching nothing. It hashes the .gch, which it cannot see as just built.
  export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
}

# r4c_small_debug: sets r4c_debug to the CMake arguments that keep a test build's debug information
# small: line tables only (-g1: what a backtrace, a sanitizer report and a debugger's "where" need),
# compressed (-gz) in the objects and in what links them. Full -g made one test build 4.6 GB and a
# CI run 15 GB, more than a shared CI disk had; this makes them about a fifth. R4C_FULL_DEBUG=1
# keeps CMake's full -g, to inspect variables in a debugger.
r4c_small_debug() {
  # -U: a build folder configured small before gets CMake's defaults back.
  r4c_debug=(-UCMAKE_CXX_FLAGS_DEBUG -UCMAKE_CXX_FLAGS_RELWITHDEBINFO)
  [ "${R4C_FULL_DEBUG:-0}" = 1 ] && return 0
  local flags="-g1"
  if echo 'int main() {}' | "${CXX:-c++}" -x c++ -g1 -gz -o /dev/null - 2> /dev/null; then
    flags="-g1 -gz"
  fi
  r4c_debug=("-DCMAKE_CXX_FLAGS_DEBUG=$flags" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 $flags -DNDEBUG")
}
