#!/usr/bin/env bash
# Runs a libFuzzer binary for a fixed time on a copy of the seed corpus.
#   tests/fuzz/run.sh BINARY SECONDS
# The corpus is copied to a temp dir (the source tree is never written).
# Exits non-zero on any crash, leak, timeout or OOM, keeping the temp dir
# with the reproducer and log; prints a one-line summary at the end.
set -uo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 BINARY SECONDS" >&2
  exit 2
fi
binary=$(realpath -- "$1" 2>/dev/null || echo "$1")
seconds=$2
name=$(basename "$binary")
here=$(cd "$(dirname "$0")" && pwd)

if [ ! -x "$binary" ]; then
  echo "$name: $binary is not built (run: make fuzz-build)" >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/remold-fuzz.XXXXXX")
mkdir "$work/corpus" "$work/artifacts"
cp "$here"/corpus/* "$work/corpus/"
log="$work/fuzz.log"

start=$(date +%s)
(cd "$work" && "$binary" -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 \
  -timeout=30 -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
  "$work/corpus") >"$log" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))

runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
[ -n "$runs" ] || runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -n 1)
[ -n "$runs" ] || runs="?"
crashes=$(find "$work/artifacts" -type f | wc -l)

if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then
  tail -n 60 "$log"
  echo "reproducers and full log kept in $work:"
  ls -l "$work/artifacts"
  if [ "$crashes" -eq 0 ]; then
    echo "$name: $runs runs in $elapsed s, fuzzer failed with exit $rc"
  else
    echo "$name: $runs runs in $elapsed s, $crashes crashes (exit $rc)"
  fi
  exit 1
fi

rm -rf "$work"
echo "$name: $runs runs in $elapsed s, 0 crashes"
