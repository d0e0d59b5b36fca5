#!/usr/bin/env bash
# Runs attribute_bench: queries on sparse product attributes through remold's
# attribute rule against the same queries on a flat collection, sent
# directly to the same backend.
#
# Usage: bash bench/attribute_run.sh [BUILD_DIR] [attribute_bench args...]
#   BUILD_DIR defaults to build; it must hold remold and attribute_bench.
#   Extra args go to attribute_bench (e.g. --sizes 10000 --seconds 1).
# Environment:
#   REMOLD_BENCH_BACKEND=HOST:PORT  use this backend (e.g. a real mongod, which
#                                   has explain) instead of starting
#                                   mongo-java-server (tests/backend). The
#                                   bench drops bench_flat.products and
#                                   bench_attr.products on it.
#   REMOLD_BENCH_PROXY=HOST:PORT    use this remold instead of starting
#                                   BUILD_DIR/remold; it must run with the
#                                   rule below in its --rules directory.
# Everything this script starts is stopped on exit (trap), and its logs are
# printed if a start fails. Exit status is attribute_bench's.
set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-build}
if [[ $# -gt 0 ]]; then shift; fi
[[ $BUILD = /* ]] || BUILD=$PWD/$BUILD

WORK=$(mktemp -d "${TMPDIR:-/tmp}/remold-attribute-bench.XXXXXX")
BACKEND_PID=""
REMOLD_PID=""

cleanup() {
  if [[ -n $REMOLD_PID ]]; then
    kill -TERM "$REMOLD_PID" 2>/dev/null || true
    wait "$REMOLD_PID" 2>/dev/null || true
  fi
  if [[ -n $BACKEND_PID ]]; then
    exec 3>&- 2>/dev/null || true  # stdin EOF: the launcher shuts down
    for _ in $(seq 50); do kill -0 "$BACKEND_PID" 2>/dev/null || break; sleep 0.1; done
    kill -TERM "$BACKEND_PID" 2>/dev/null || true
    wait "$BACKEND_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() { echo "bench/attribute_run.sh: $*" >&2; exit 1; }

# wait_for_line FILE PATTERN PID: prints the first line of FILE matching the
# extended regex PATTERN, waiting up to 60 s while PID is alive.
wait_for_line() {
  local file=$1 pattern=$2 pid=$3 line
  for _ in $(seq 600); do
    line=$(grep -m1 -E "$pattern" "$file" 2>/dev/null || true)
    if [[ -n $line ]]; then echo "$line"; return 0; fi
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

find_bench_binary() {
  local candidate
  for candidate in "$BUILD/attribute_bench" "$BUILD/bench/attribute_bench"; do
    if [[ -x $candidate ]]; then echo "$candidate"; return 0; fi
  done
  die "no attribute_bench in $BUILD (build it: cmake --build $BUILD --target attribute_bench)"
}

# Starts mongo-java-server on a free loopback port and sets BACKEND (as
# bench/run.sh does: stdin is a fifo held open on fd 3).
start_backend() {
  local lib=$SRC/tests/backend
  [[ -d $lib/classes && -d $lib/lib ]] || die "no test backend in $lib (run: make deps)"
  mkfifo "$WORK/backend.in"
  java -cp "$lib/lib/*:$lib/classes" Launcher 127.0.0.1 0 \
    <"$WORK/backend.in" >"$WORK/backend.log" 2>&1 &
  BACKEND_PID=$!
  exec 3>"$WORK/backend.in"
  local line
  line=$(wait_for_line "$WORK/backend.log" '^listening ' "$BACKEND_PID") || {
    cat "$WORK/backend.log" >&2; die "backend did not start"; }
  BACKEND=${line#listening }
}

# The attribute rule the bench expects (attribute_bench prints it too).
write_rules() {
  mkdir -p "$WORK/rules"
  cat >"$WORK/rules/products.yaml" <<'YAML'
namespace: bench_attr.products
pattern: attribute
attribute:
  array: specs
  except: [name, price, category]
YAML
}

# A free loopback port, for a remold that refuses --listen HOST:0.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Starts BUILD/remold with the rules in front of BACKEND and sets PROXY.
# Asks for port 0 first; when remold rejects it (some builds validate the
# listen port like a backend port), retries on free ports picked here.
start_remold() {
  [[ -x $BUILD/remold ]] || die "no remold binary at $BUILD/remold (run: make build)"
  write_rules
  local listen=127.0.0.1:0 line attempt
  for attempt in 1 2 3 4; do
    "$BUILD/remold" serve --listen "$listen" --backend "mongodb://$BACKEND" \
      --rules "$WORK/rules" --log-level warn >"$WORK/remold.out" 2>"$WORK/remold.err" &
    REMOLD_PID=$!
    if line=$(wait_for_line "$WORK/remold.out" '^remold listening on ' "$REMOLD_PID"); then
      PROXY=${line#remold listening on }
      return 0
    fi
    wait "$REMOLD_PID" 2>/dev/null || true
    REMOLD_PID=""
    grep -qE "invalid port|in use" "$WORK/remold.out" "$WORK/remold.err" || break
    listen=127.0.0.1:$(free_port)
  done
  cat "$WORK/remold.out" "$WORK/remold.err" >&2
  die "remold did not start"
}

BENCH=$(find_bench_binary)
BACKEND=${REMOLD_BENCH_BACKEND:-}
PROXY=${REMOLD_BENCH_PROXY:-}
[[ -n $BACKEND ]] || start_backend
[[ -n $PROXY ]] || start_remold
if [[ -n $REMOLD_PID ]]; then
  echo "backend $BACKEND, remold $PROXY (rules in $WORK/rules)"
else
  echo "backend $BACKEND, remold $PROXY (its own rules)"
fi

# CPU accounting for the processes this script started.
PIDS=()
[[ -n $REMOLD_PID ]] && PIDS+=(--remold-pid "$REMOLD_PID")
[[ -n $BACKEND_PID ]] && PIDS+=(--backend-pid "$BACKEND_PID")

status=0
"$BENCH" --direct "$BACKEND" --proxy "$PROXY" "${PIDS[@]}" "$@" || status=$?
if [[ -n $REMOLD_PID ]] && ! kill -0 "$REMOLD_PID" 2>/dev/null; then
  echo "bench/attribute_run.sh: remold exited during the run; its stderr:" >&2
  cat "$WORK/remold.err" >&2
  status=1
fi
if [[ -n $REMOLD_PID && -s $WORK/remold.err ]]; then
  echo "remold stderr (warnings and errors during the run):"
  tail -n 20 "$WORK/remold.err"
fi
exit "$status"
