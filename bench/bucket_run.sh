#!/usr/bin/env bash
# Runs bucket_bench: readings/s through remold's bucket rule against direct
# flat inserts into the same backend, and the storage of both layouts.
#
# Usage: bash bench/bucket_run.sh [BUILD_DIR] [bucket_bench args...]
#   BUILD_DIR defaults to build; it must hold remold and bucket_bench.
#   Extra args go to bucket_bench (e.g. --days 2 --threads 1,4 --rounds 3).
# Environment:
#   REMOLD_BENCH_BACKEND=HOST:PORT  use this backend instead of starting
#                                   mongo-java-server (tests/backend). The
#                                   bench drops bench_flat.readings and
#                                   empties bench_bucket.readings_buckets.
#   REMOLD_BENCH_PROXY=HOST:PORT    use this remold instead of starting
#                                   BUILD_DIR/remold; it must run with the
#                                   rule below in its --rules directory.
# Everything this script starts is stopped on exit (trap), and its logs are
# printed if a start fails. Exit status is bucket_bench's.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init bucket_bench remold-bucket-bench "$@"

# The bucket rule the bench expects (bucket_bench prints it too).
bench_rule readings.yaml <<'YAML'
namespace: bench_bucket.readings
pattern: bucket
bucket:
  collection: readings_buckets
  meta: [sensor]
  time: at
  span: 1h
  summaries:
    temp: [sum, min, max]
YAML

bench_start_endpoints
bench_run_with_cpu
