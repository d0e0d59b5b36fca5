#!/usr/bin/env bash
# Runs computed_bench: a comment inserted through remold's computed rule
# (remold maintains its post's commentCount and lastCommentAt) against the
# application doing both writes itself, directly on the same backend; and
# the maintained post read with one findOne against the aggregate over its
# comments.
#
# Usage: bash bench/computed_run.sh [BUILD_DIR] [computed_bench args...]
#   BUILD_DIR defaults to build; it must hold remold and computed_bench.
#   Extra args go to computed_bench (e.g. --only insert --seconds 2).
# Environment:
#   REMOLD_BENCH_BACKEND=HOST:PORT  use this backend (e.g. a real mongod)
#                                   instead of starting mongo-java-server
#                                   (tests/backend). The bench empties and
#                                   drops bench_computed and
#                                   bench_computed_direct on it.
#   REMOLD_BENCH_PROXY=HOST:PORT    use this remold instead of starting
#                                   BUILD_DIR/remold; it must run with the
#                                   rule below in its --rules directory.
# Everything this script starts is stopped on exit (trap), and its logs are
# printed if a start fails. Exit status is computed_bench's.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init computed_bench remold-computed-bench "$@"

# The computed rule the bench expects (computed_bench prints it too).
bench_rule comments.yaml <<'YAML'
namespace: bench_computed.comments
pattern: computed
computed:
  aggregates:
    - target: posts
      link: {from: postId, to: _id}
      fields:
        commentCount: count
        lastCommentAt: {max: createdAt}
YAML

bench_start_endpoints
bench_run_with_cpu
