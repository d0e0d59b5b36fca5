#!/usr/bin/env bash
# Pass-through traffic (remold_bench) through remold in front of a
# 3-member replica set, against a direct connection to its primary, and the
# same through remold with directConnection=true to the primary: the
# difference between the two remold rows is what monitoring and routing
# cost.
#
# Usage: bash bench/pass_through/replica_set_run.sh [BUILD_DIR] [remold_bench args...]
# The set is bench/pass_through/replica_set_backend.py (Python shims in front of
# mongo-java-server stand-ins): the shims are in every path, direct
# included, so compare ratios within one run; they cap throughput well
# below a real mongod's.
set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${1:-build}
if [[ $# -gt 0 ]]; then shift; fi
[[ $BUILD = /* ]] || BUILD=$PWD/$BUILD
PYTHON=${PYTHON:-$SRC/.venv/bin/python}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/remold-rs-bench.XXXXXX")
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  exec 3>&- 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

mkfifo "$WORK/set.in"
(cd "$SRC" && "$PYTHON" bench/pass_through/replica_set_backend.py < "$WORK/set.in" > "$WORK/set.out" 2> "$WORK/set.err") &
PIDS+=($!)
exec 3> "$WORK/set.in"
for _ in $(seq 600); do grep -q '^uri ' "$WORK/set.out" 2>/dev/null && break; sleep 0.1; done
grep -q '^uri ' "$WORK/set.out" || { cat "$WORK/set.err" >&2; echo "replica set did not start" >&2; exit 1; }
PRIMARY=$(sed -n 's/^primary //p' "$WORK/set.out")
URI=$(sed -n 's/^uri //p' "$WORK/set.out")

start_remold() {  # NAME BACKEND_URI -> prints HOST:PORT
  "$BUILD/remold" serve --listen 127.0.0.1:0 --backend "$2" --log-level warn \
    > "$WORK/$1.out" 2> "$WORK/$1.err" &
  PIDS+=($!)
  for _ in $(seq 100); do grep -q '^remold listening on ' "$WORK/$1.out" 2>/dev/null && break; sleep 0.1; done
  sed -n 's/^remold listening on //p' "$WORK/$1.out"
}

MONITORED=$(start_remold monitored "$URI")
DIRECT=$(start_remold direct "mongodb://$PRIMARY/?directConnection=true")
echo "replica set $URI; primary $PRIMARY"
echo "== remold monitoring the set ($MONITORED) vs the primary directly"
REMOLD_BENCH_BACKEND=$PRIMARY REMOLD_BENCH_PROXY=$MONITORED bash "$SRC/bench/pass_through/run.sh" "$BUILD" "$@"
echo "== remold with directConnection=true to the primary ($DIRECT) vs the primary directly"
REMOLD_BENCH_BACKEND=$PRIMARY REMOLD_BENCH_PROXY=$DIRECT bash "$SRC/bench/pass_through/run.sh" "$BUILD" "$@"
