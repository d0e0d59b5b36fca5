#!/usr/bin/env bash
# Runs one pattern bench, NAME_bench (bench/patterns/NAME_bench.cc): the pattern's
# rule through remold against the same work done directly on the backend,
# in the same run. remold is started with the rule the bench prints
# (NAME_bench --print-rule), so a rule is written once, in its bench.
#
# Usage: bash bench/patterns/pattern_run.sh NAME [BUILD_DIR] [NAME_bench args...]
#   NAME: bucket, attribute, computed, subset, extended_reference (a
#   bench/patterns/NAME_bench.cc).
#   BUILD_DIR defaults to build; it must hold remold and NAME_bench.
#   Extra args go to the bench (NAME_bench --help lists them).
# Environment:
#   REMOLD_BENCH_BACKEND=documentdb start a DocumentDB of its own (installed
#                                   when missing) with its test credentials.
#   REMOLD_BENCH_USER/_PASSWORD/_AUTH_SOURCE  the bench clients' login (SCRAM-SHA-256)
#                                   on a backend that requires one.
#   REMOLD_BENCH_BACKEND=HOST:PORT  use this backend (e.g. a real mongod)
#                                   instead of starting mongo-java-server
#                                   (tests/backend). The bench drops or
#                                   empties its own databases on it.
#   REMOLD_BENCH_PROXY=HOST:PORT    use this remold instead of starting
#                                   BUILD_DIR/remold; it must run with the
#                                   bench's rule in its --rules directory.
# Everything this script starts is stopped on exit (trap), and its logs are
# printed if a start fails. Exit status is the bench's (2 for bad usage).
set -euo pipefail

if [[ $# -lt 1 || $1 == -* ]]; then
  echo "usage: bash bench/patterns/pattern_run.sh NAME [BUILD_DIR] [NAME_bench args...]" >&2
  exit 2
fi
name=$1
shift

# shellcheck source=bench/lib/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/lib.sh"
bench_init "${name}_bench" "remold-$name-bench" "$@"
bench_rule "$name.yaml"
bench_start_endpoints
bench_run_with_cpu
