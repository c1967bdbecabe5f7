# Sourced by scripts/demo and scripts/test: makes sure the Debian packages r4c builds with are
# installed. As root it installs what is missing; otherwise it prints the apt-get line and stops.
r4c_packages=(g++ cmake make python3 googletest libgtest-dev libgmock-dev libbenchmark-dev libasio-dev
              libcli11-dev pkgconf libcpp-httplib-dev libtomlplusplus-dev libclang-14-dev)

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
    echo "r4c: installing ${missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
  else
    echo "r4c: missing Debian packages; install them with:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
}
