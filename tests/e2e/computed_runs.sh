#!/bin/sh
# The computed rule's concurrency tests (tests/e2e/python/test_computed.py:
# 8 clients inserting, deleting, moving and rewriting comments, ratings and
# order lines, then every maintained value checked against its sources),
# run again and again with other seeds, outside `make test`:
#   tests/e2e/computed_runs.sh [RUNS]        (default 10)
# Against DocumentDB unless REMOLD_TEST_BACKEND (or REMOLD_TEST_BACKEND_URI)
# says otherwise; uses build/remold (or $REMOLD_BINARY). Prints one line per
# run and exits 1 if any run found a value that is not exact.
set -u
here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$here/../.." && pwd)
runs=${1:-10}
export REMOLD_SOURCE_DIR="${REMOLD_SOURCE_DIR:-$source_dir}"
export REMOLD_BINARY="${REMOLD_BINARY:-$source_dir/build/remold}"
export REMOLD_TEST_BACKEND="${REMOLD_TEST_BACKEND:-documentdb}"
tests="concurrent or hot_posts or rewritten_by_every_client or deleted_at_once or not_reinstated"
failed=0
run=0
while [ "$run" -lt "$runs" ]; do
  start=$(date +%s)
  if REMOLD_TEST_COMPUTED_SEED=$run "$source_dir/.venv/bin/python" -m pytest -q -p no:cacheprovider \
      -k "$tests" "$here/python/test_computed.py" > "/tmp/remold-computed-run-$run.log" 2>&1; then
    verdict="exact"
  else
    verdict="FAILED (see /tmp/remold-computed-run-$run.log)"
    failed=1
  fi
  echo "run $((run + 1)) of $runs (seed $run, backend $REMOLD_TEST_BACKEND): $(tail -n 1 "/tmp/remold-computed-run-$run.log" | tr -d '=') in $(( $(date +%s) - start )) s: $verdict"
  run=$((run + 1))
done
exit $failed
