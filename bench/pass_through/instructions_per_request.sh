#!/usr/bin/env bash
# Instructions remold executes per forwarded find_by_id, deterministic where
# throughput is noisy: remold runs under callgrind (--threads 1) in front of
# mongo-java-server, serves N1 then N2 requests in two runs, and the
# difference of the totals divided by N2 - N1 is printed. Every thread of
# the process counts, the backend monitor's included. A find_by_id is
# counted twice: with no rules, and with a rule loaded (for another
# collection: every command is then looked at for rules), each against the
# budget of 6,000 instructions (REMOLD_IR_BUDGET).
#
# Usage: bash bench/pass_through/instructions_per_request.sh [BUILD_DIR] [URI_OPTIONS]
#   URI_OPTIONS is appended to the backend URI after '?', for example
#   directConnection=true. N1/N2 default to 200/2200 (REMOLD_IR_N1/_N2).
#   REMOLD_IR_OP=bucket_insert counts instead the instructions per reading
#   of bucket ingest: N1 and N2 insert_many batches of 1,000 readings
#   (50 sensors, unordered) under a bucket rule (defaults 2 and 22).
set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${1:-build}
[[ $BUILD = /* ]] || BUILD=$PWD/$BUILD
OPTIONS=${2:-}
OP=${REMOLD_IR_OP:-find_by_id}
BUDGET=${REMOLD_IR_BUDGET:-6000}
case $OP in
  find_by_id) N1=${REMOLD_IR_N1:-200}; N2=${REMOLD_IR_N2:-2200}; PER=1 ;;
  bucket_insert) N1=${REMOLD_IR_N1:-2}; N2=${REMOLD_IR_N2:-22}; PER=1000 ;;
  *) echo "REMOLD_IR_OP: find_by_id or bucket_insert, not '$OP'" >&2; exit 2 ;;
esac
PYTHON=${PYTHON:-$SRC/.venv/bin/python}
command -v valgrind > /dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/remold-ir.XXXXXX")
BACKEND_PID=""
cleanup() {
  exec 3>&- 2>/dev/null || true
  [[ -n $BACKEND_PID ]] && { kill -TERM "$BACKEND_PID" 2>/dev/null || true; wait "$BACKEND_PID" 2>/dev/null || true; }
  rm -rf "$WORK"
}
trap cleanup EXIT

mkfifo "$WORK/backend.in"
(cd "$SRC" && java -cp 'tests/backend/lib/*:tests/backend/classes' Launcher 127.0.0.1 0 \
   < "$WORK/backend.in" > "$WORK/backend.out" 2>&1) &
BACKEND_PID=$!
exec 3> "$WORK/backend.in"
for _ in $(seq 600); do grep -q '^listening ' "$WORK/backend.out" 2>/dev/null && break; sleep 0.1; done
BACKEND=$(sed -n 's/^listening //p' "$WORK/backend.out")
[[ -n $BACKEND ]] || { cat "$WORK/backend.out" >&2; exit 1; }
URI="mongodb://$BACKEND/${OPTIONS:+?$OPTIONS}"

mkdir -p "$WORK/rules"
cat > "$WORK/rules/readings.yaml" <<'YAML'
namespace: remold_ir.readings
pattern: bucket
bucket:
  collection: readings_buckets
  meta: [sensor]
  time: at
  span: 1h
  summaries:
    temp: [sum, min, max]
YAML

mkdir -p "$WORK/no-rules"

# total_instructions N RULES_DIR: remold under callgrind serving N
# find_by_id (or N batches of readings).
total_instructions() {
  rm -f "$WORK"/callgrind.*
  valgrind --tool=callgrind --callgrind-out-file="$WORK/callgrind.%p" \
    "$BUILD/remold" serve --threads 1 --backend "$URI" --listen 127.0.0.1:0 --log-level warn \
    --rules "$2" \
    > "$WORK/remold.out" 2> "$WORK/remold.err" &
  local pid=$!
  for _ in $(seq 300); do grep -q '^remold listening on ' "$WORK/remold.out" 2>/dev/null && break; sleep 0.1; done
  local port
  port=$(sed -n 's/^remold listening on .*:\([0-9]*\)$/\1/p' "$WORK/remold.out")
  [[ -n $port ]] || { cat "$WORK/remold.err" >&2; exit 1; }
  sleep 2  # startup settles (libmongoc initialisation, first heartbeats)
  (cd "$SRC/tests/e2e/python" && "$PYTHON" - "$port" "$1" "$OP" <<'PY'
import datetime
import sys
import wire
port, count, op = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
with wire.connect("127.0.0.1", port) as sock:
    if op == "bucket_insert":
        t0 = datetime.datetime(2024, 1, 1)
        for b in range(count):
            # With an _id, as drivers send them (remold adds one otherwise).
            docs = [{"_id": 1000 * b + i, "sensor": f"s{i % 50}",
                     "at": t0 + datetime.timedelta(seconds=1000 * b + i), "temp": 10 + (i % 97) / 10}
                    for i in range(1000)]
            reply = wire.command(sock, {"insert": "readings", "documents": docs, "ordered": False}, db="remold_ir")
            assert reply["ok"] == 1 and reply["n"] == 1000, reply
        sys.exit(0)
    wire.command(sock, {"insert": "c", "documents": [{"_id": i, "v": "x" * 100} for i in range(100)],
                        "ordered": False}, db="remold_ir")
    for i in range(count):
        reply = wire.command(sock, {"find": "c", "filter": {"_id": i % 100}, "limit": 1,
                                    "singleBatch": True}, db="remold_ir")
        assert reply["ok"] == 1 and len(reply["cursor"]["firstBatch"]) == 1, reply
PY
  )
  kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
  grep -h '^summary:' "$WORK"/callgrind.* | awk '{total += $2} END {print total}'
}

echo "backend $URI"
if [[ $OP = find_by_id ]]; then
  for rules in no-rules rules; do
    first=$(total_instructions "$N1" "$WORK/$rules")
    second=$(total_instructions "$N2" "$WORK/$rules")
    per=$(( (second - first) / (N2 - N1) ))
    verdict=$([[ $per -le $BUDGET ]] && echo "within" || echo "over")
    label=$([[ $rules = rules ]] && echo "a rule loaded" || echo "no rules")
    echo "instructions per find_by_id, $label: $per ($verdict the budget of $BUDGET; $N1 requests: $first, $N2 requests: $second)"
  done
else
  first=$(total_instructions "$N1" "$WORK/rules")
  second=$(total_instructions "$N2" "$WORK/rules")
  echo "instructions per reading of bucket ingest: $(( (second - first) / ((N2 - N1) * PER) )) ($N1 batches of $PER: $first, $N2 batches: $second)"
fi
