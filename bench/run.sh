#!/usr/bin/env bash
# Runs remold_bench: remold against a direct connection to the same backend.
#
# Usage: bash bench/run.sh [BUILD_DIR] [remold_bench args...]
#   BUILD_DIR defaults to build; it must hold remold and remold_bench.
#   Extra args go to remold_bench (e.g. --seconds 5 --clients 1,16).
# Environment:
#   REMOLD_BENCH_BACKEND=HOST:PORT  use this backend instead of starting
#                                   mongo-java-server (tests/backend).
#   REMOLD_BENCH_REMOLD_ARGS="..."  extra flags for remold serve (e.g. --threads 1)
#   REMOLD_BENCH_PROXY=HOST:PORT    use this proxy instead of starting
#                                   BUILD_DIR/remold.
# Everything this script starts is stopped on exit (trap), and its logs
# are printed if a start fails. Exit status is remold_bench's.
set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-build}
if [[ $# -gt 0 ]]; then shift; fi
[[ $BUILD = /* ]] || BUILD=$PWD/$BUILD

WORK=$(mktemp -d "${TMPDIR:-/tmp}/remold-bench.XXXXXX")
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

die() { echo "bench/run.sh: $*" >&2; exit 1; }

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
  for candidate in "$BUILD/remold_bench" "$BUILD/bench/remold_bench"; do
    if [[ -x $candidate ]]; then echo "$candidate"; return 0; fi
  done
  die "no remold_bench in $BUILD (build it: cmake --build $BUILD --target remold_bench)"
}

# Starts mongo-java-server on a free loopback port and sets BACKEND. Its
# stdin is a fifo held open on fd 3, so closing fd 3 (or this shell
# exiting) stops it. Runs in this shell, not in $(...), to keep fd 3 and
# BACKEND_PID.
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

# Starts BUILD/remold in front of BACKEND and sets PROXY.
start_remold() {
  [[ -x $BUILD/remold ]] || die "no remold binary at $BUILD/remold (run: make build)"
  "$BUILD/remold" serve --listen 127.0.0.1:0 --backend "mongodb://$BACKEND" \
    --log-level warn ${REMOLD_BENCH_REMOLD_ARGS:-} >"$WORK/remold.out" 2>"$WORK/remold.err" &
  REMOLD_PID=$!
  local line
  line=$(wait_for_line "$WORK/remold.out" '^remold listening on ' "$REMOLD_PID") || {
    cat "$WORK/remold.out" "$WORK/remold.err" >&2; die "remold did not start"; }
  PROXY=${line#remold listening on }
}

BENCH=$(find_bench_binary)
BACKEND=${REMOLD_BENCH_BACKEND:-}
PROXY=${REMOLD_BENCH_PROXY:-}
[[ -n $BACKEND ]] || start_backend
[[ -n $PROXY ]] || start_remold
echo "backend $BACKEND, remold $PROXY"

status=0
"$BENCH" --direct "$BACKEND" --proxy "$PROXY" "$@" || status=$?
if [[ -n $REMOLD_PID ]] && ! kill -0 "$REMOLD_PID" 2>/dev/null; then
  echo "bench/run.sh: remold exited during the run; its stderr:" >&2
  cat "$WORK/remold.err" >&2
  status=1
fi
exit "$status"
