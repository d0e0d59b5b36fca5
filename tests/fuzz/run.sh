#!/usr/bin/env bash
# Runs a libFuzzer binary for a fixed time on a copy of its seed corpus.
#   tests/fuzz/run.sh BINARY SECONDS          (ctest: fuzz_<target>_60s, seed 1)
#   tests/fuzz/run.sh BINARY SECONDS merge    (make fuzz-long)
# The corpus of build-fuzz/fuzz_<target> is tests/fuzz/corpus/<target>/,
# its dictionary tests/fuzz/<target>.dict when there is one, and
# tests/fuzz/<target>.options, when there is one, holds libFuzzer flags of
# its own, one a line, that override the defaults here. The run works
# on a copy in a temp dir; with `merge`, a run without failure then merges
# the inputs that reach new coverage back into the corpus directory (the
# only way this script writes the source tree).
# FUZZ_FORK=N (N > 1) runs N fuzzing processes at once in libFuzzer's fork
# mode (-fork=N): one run, one corpus, and its executions are the sum of
# theirs; a process is restarted after each job, so a slow leak of memory
# cannot end a long run. The first crash still ends it.
# Exits non-zero on any crash, leak, timeout or OOM, keeping the temp dir
# with the reproducer and log; prints a one-line summary at the end:
#   fuzz_rules: 1234567 runs in 60 s (20576 runs/s), 0 crashes
set -uo pipefail

if [ $# -lt 2 ] || [ $# -gt 3 ] || { [ $# -eq 3 ] && [ "$3" != merge ]; }; then
  echo "usage: $0 BINARY SECONDS [merge]" >&2
  exit 2
fi
binary=$(realpath -- "$1" 2>/dev/null || echo "$1")
seconds=$2
merge=${3:-}
name=$(basename "$binary")
target=${name#fuzz_}
here=$(cd "$(dirname "$0")" && pwd)
corpus="$here/corpus/$target"

if [ ! -x "$binary" ]; then
  echo "$name: $binary is not built (run: make fuzz-build)" >&2
  exit 1
fi
if [ ! -d "$corpus" ]; then
  echo "$name: no seed corpus at $corpus" >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/remold-fuzz.XXXXXX")
mkdir "$work/corpus" "$work/artifacts"
cp "$corpus"/* "$work/corpus/"
log="$work/fuzz.log"
common=(-rss_limit_mb=2048 -max_len=65536 -timeout=30)
[ -f "$here/$target.dict" ] && common+=(-dict="$here/$target.dict")
[ -f "$here/$target.options" ] && mapfile -t -O "${#common[@]}" common < <(grep -v -e '^#' -e '^$' "$here/$target.options")
options=("${common[@]}" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$work/artifacts/")
fork=${FUZZ_FORK:-1}
case $fork in
  ''|*[!0-9]*) echo "FUZZ_FORK: a number of processes, not '$fork'" >&2; exit 2 ;;
esac
[ "$fork" -gt 1 ] && options+=(-fork="$fork")
# The short runs of `make test` mutate from a fixed seed, so that a commit's
# CI run does not depend on luck; the long runs (merge) explore at random.
[ -z "$merge" ] && options+=(-seed=1)

start=$(date +%s)
(cd "$work" && "$binary" "${options[@]}" "$work/corpus") >"$log" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))

runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
[ -n "$runs" ] || runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -n 1)
# Fork mode: the parent's progress lines, "#N: cov: ...", N the executions of all.
[ -n "$runs" ] || runs=$(sed -n 's/^#\([0-9]*\): cov:.*/\1/p' "$log" | tail -n 1)
[ -n "$runs" ] || runs="?"
rate="?"
[ "$runs" != "?" ] && [ "$elapsed" -gt 0 ] && rate=$(( runs / elapsed ))
crashes=$(find "$work/artifacts" -type f | wc -l)

if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then
  tail -n 60 "$log"
  echo "reproducers and full log kept in $work:"
  ls -l "$work/artifacts"
  if [ "$crashes" -eq 0 ]; then
    echo "$name: $runs runs in $elapsed s ($rate runs/s), fuzzer failed with exit $rc"
  else
    echo "$name: $runs runs in $elapsed s ($rate runs/s), $crashes crashes (exit $rc)"
  fi
  exit 1
fi

if [ "$merge" = merge ]; then
  before=$(find "$corpus" -type f | wc -l)
  if ! "$binary" -merge=1 "${common[@]}" "$corpus" "$work/corpus" >"$work/merge.log" 2>&1; then
    tail -n 30 "$work/merge.log"
    echo "$name: merging into $corpus failed; log kept in $work"
    exit 1
  fi
  added=$(( $(find "$corpus" -type f | wc -l) - before ))
  echo "$name: merged $added new inputs into ${corpus#"$here"/}"
fi

rm -rf "$work"
echo "$name: $runs runs in $elapsed s ($rate runs/s), 0 crashes"
