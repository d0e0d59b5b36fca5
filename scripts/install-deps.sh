#!/usr/bin/env bash
# Installs everything remold's build, tests and benchmarks need on a fresh
# Debian 12 machine: compiler toolchain and libraries (apt), the Python test
# driver (a venv in .venv), and the test backend (mongo-java-server via Maven).
# Idempotent: each step checks first and does nothing when already satisfied.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libboost1.74-dev libbson-dev libmongoc-dev libssl-dev
  libspdlog-dev libyaml-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev
  libsnappy-dev zlib1g-dev libzstd-dev
  clang-14 libclang-rt-14-dev libfuzzer-14-dev
  maven openjdk-17-jdk-headless python3-venv
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
PY_REQS=(pymongo==4.17.0 pytest python-snappy backports.zstd)
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
if ! .venv/bin/python -c "import pymongo, pytest, snappy; from backports import zstd" 2>/dev/null; then
  echo "install-deps: pip install ${PY_REQS[*]}"
  .venv/bin/pip install -q "${PY_REQS[@]}"
fi

# Test backend: mongo-java-server and its dependencies, plus our launcher.
make -s -C tests/backend
echo "install-deps: ok"
