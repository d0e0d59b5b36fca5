#!/usr/bin/env bash
# Installs everything remold's build, tests and benchmarks need on a fresh
# Debian 12 machine: compiler toolchain and libraries (apt), the Python test
# driver (a venv in .venv), and the test backend (mongo-java-server via Maven).
# Idempotent: each step checks first and does nothing when already satisfied.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libboost1.74-dev libbson-dev libmongoc-dev libssl-dev openssl
  libspdlog-dev libyaml-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev
  libsnappy-dev zlib1g-dev libzstd-dev
  clang-14 libclang-rt-14-dev libfuzzer-14-dev
  maven openjdk-17-jdk-headless python3-venv ca-certificates
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: apt-get install ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Python driver for the e2e suite, isolated from the system interpreter.
# pymongo 4.17 is the newest release that still speaks to MongoDB 4.2 (wire 8),
# our oldest supported target and what the test backend reports.
# PyYAML: test_deploy.py parses the deploy/ manifests.
PY_REQS=(pymongo==4.17.0 pytest python-snappy backports.zstd PyYAML)
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
if ! .venv/bin/python -c "import pymongo, pytest, snappy, yaml; from backports import zstd" 2>/dev/null; then
  echo "install-deps: pip install ${PY_REQS[*]}"
  .venv/bin/pip install -q "${PY_REQS[@]}"
fi

# Test backend: mongo-java-server and its dependencies, plus our launcher.
make -s -C tests/backend

# Go, for the authentication tests' backend (FerretDB, tests/backend/ferretdb).
# Any go >= 1.21 will do: the build fetches the toolchain FerretDB asks for
# (1.24) through the Go module proxy. Debian 12's own golang is 1.19, too old
# for that, so without a usable go, golang-1.23 comes from bookworm-backports.
go_minor() {  # prints N for a go command reporting "go1.N[.x]", nothing otherwise
  GOTOOLCHAIN=local "$1" version 2>/dev/null | sed -n 's/^go version go1\.\([0-9][0-9]*\).*/\1/p'
}
find_go() {
  local candidate minor
  for candidate in "${GO:-}" "$(command -v go || true)" /usr/local/go/bin/go /usr/lib/go-1.2[1-9]/bin/go; do
    [ -n "$candidate" ] && [ -x "$candidate" ] || continue
    minor=$(go_minor "$candidate")
    if [ -n "$minor" ] && [ "$minor" -ge 21 ]; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}
if ! GO_BIN=$(find_go); then
  echo "install-deps: apt-get install golang-1.23-go (bookworm-backports)"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  if ! grep -rqs '^[^#]*bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    echo "deb http://deb.debian.org/debian bookworm-backports main" |
      $SUDO tee /etc/apt/sources.list.d/bookworm-backports.list >/dev/null
  fi
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends -t bookworm-backports golang-1.23-go >/dev/null
  GO_BIN=/usr/lib/go-1.23/bin/go
fi
make -s -C tests/backend/ferretdb GO="$GO_BIN"
echo "install-deps: ok"
