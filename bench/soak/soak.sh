#!/usr/bin/env bash
# The soak: remold under 64 clients of mixed traffic over every pattern's
# rule and a plain collection for MINUTES (default 30), with a rule reload
# every minute and a backend kill and restart every 10 minutes; a line of
# figures per minute (RSS, file descriptors, operations, errors by kind),
# then a check that every acknowledged write is there, a summary line and
# BENCH_JSON. See bench/README.md ("soak.sh") and bench/soak/soak_run.py.
#
# Usage: bash bench/soak/soak.sh [MINUTES] [BUILD_DIR]
#   BUILD_DIR defaults to build; it must hold remold.
# Environment (seconds): REMOLD_SOAK_RELOAD_SECONDS (60),
#   REMOLD_SOAK_RESTART_SECONDS (600), REMOLD_SOAK_WARMUP_SECONDS (60),
#   REMOLD_SOAK_DOWN_SECONDS (1); REMOLD_SOAK_CLIENTS (64);
#   REMOLD_SOAK_RSS_LIMIT (5, percent); REMOLD_SOAK_KEEP=1 keeps the data
#   file, the rules and remold's log.
# Exit status: 0 when every check passed, 1 otherwise (soak_run.py says why).
set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
MINUTES=${1:-30}
BUILD=${2:-build}
[[ $BUILD = /* ]] || BUILD=$PWD/$BUILD
[[ -x $BUILD/remold ]] || { echo "bench/soak/soak.sh: no remold in $BUILD (run: make build)" >&2; exit 1; }
[[ -x $SRC/.venv/bin/python ]] || { echo "bench/soak/soak.sh: no $SRC/.venv (run: make deps)" >&2; exit 1; }
[[ -d $SRC/tests/backend/classes && -d $SRC/tests/backend/lib ]] || {
  echo "bench/soak/soak.sh: no test backend in $SRC/tests/backend (run: make deps)" >&2; exit 1; }

exec "$SRC/.venv/bin/python" "$SRC/bench/soak/soak_run.py" --minutes "$MINUTES" --build "$BUILD" \
  --clients "${REMOLD_SOAK_CLIENTS:-64}"
