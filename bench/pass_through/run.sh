#!/usr/bin/env bash
# Runs remold_bench: remold against a direct connection to the same backend,
# and HAProxy in tcp mode as a peer in the same run.
#
# Usage: bash bench/pass_through/run.sh [BUILD_DIR] [remold_bench args...]
#   BUILD_DIR defaults to build; it must hold remold and remold_bench.
#   Extra args go to remold_bench (e.g. --seconds 5 --clients 1,16).
# Environment:
#   REMOLD_BENCH_BACKEND=documentdb start a DocumentDB of its own (installed
#                                   when missing) with its test credentials.
#   REMOLD_BENCH_USER/_PASSWORD/_AUTH_SOURCE  the bench clients' login (SCRAM-SHA-256)
#                                   on a backend that requires one.
#   REMOLD_BENCH_BACKEND=HOST:PORT  use this backend instead of starting
#                                   mongo-java-server (tests/backend).
#   REMOLD_BENCH_REMOLD_ARGS="..."  extra flags for remold serve (e.g. --threads 1)
#   REMOLD_BENCH_PROXY=HOST:PORT    use this proxy instead of starting
#                                   BUILD_DIR/remold.
#   REMOLD_BENCH_PEER=none          no HAProxy peer (by default HAProxy in
#                                   tcp mode, installed when missing, is
#                                   timed in the same slices).
# Everything this script starts is stopped on exit (trap), and its logs
# are printed if a start fails. Exit status is remold_bench's.
set -euo pipefail

# shellcheck source=bench/lib/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/lib.sh"
bench_init remold_bench remold-bench "$@"
# shellcheck disable=SC2086  # REMOLD_BENCH_REMOLD_ARGS is a list of flags
bench_start_endpoints ${REMOLD_BENCH_REMOLD_ARGS:-}
bench_start_peer
# The CPU time per op of the proxies this script started.
pids=()
[[ -n $REMOLD_PID ]] && pids+=(--remold-pid "$REMOLD_PID")
[[ -n $PEER_PID ]] && pids+=(--peer-pid "$PEER_PID")
bench_run "${pids[@]}"
exit "$STATUS"
