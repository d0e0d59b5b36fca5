#!/usr/bin/env bash
# `make run`: starts the embedded default backend (mongo-java-server, in
# memory) on a free loopback port, puts remold in front of it with the
# example rules (examples/rules), prints the connection string and, per
# rule, a command to try (examples/tryouts.py), and serves until Ctrl-C.
# Extra remold flags may follow; with a --rules or --config of their own,
# the example rules are not loaded and no commands are printed:
#   bash scripts/run-local.sh build/remold [--log-level warn ...]
set -euo pipefail
cd "$(dirname "$0")/.."
REMOLD=${1:-build/remold}
shift || true
LISTEN=${REMOLD_LISTEN:-127.0.0.1:27018}
PYTHON=$PWD/.venv/bin/python

rules=(--rules examples/rules)
for arg in "$@"; do
  case "$arg" in --rules|--config) rules=() ;; esac
done

workdir=$(mktemp -d)
backend_pid="" remold_pid=""
cleanup() {
  [ -n "$remold_pid" ] && kill -TERM "$remold_pid" 2>/dev/null && wait "$remold_pid" 2>/dev/null || true
  [ -n "$backend_pid" ] && kill -TERM "$backend_pid" 2>/dev/null && wait "$backend_pid" 2>/dev/null || true
  rm -rf "$workdir"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

# Waits until FILE has a line matching PATTERN; prints its last field.
wait_for_line() {
  local file=$1 pattern=$2 what=$3
  for _ in $(seq 1 300); do
    if line=$(grep -m1 "$pattern" "$file" 2>/dev/null); then
      echo "${line##* }"
      return 0
    fi
    sleep 0.1
  done
  echo "run: $what did not start; its output:" >&2
  cat "$file" >&2
  return 1
}

mkfifo "$workdir/backend.stdin"
java -cp "tests/backend/lib/*:tests/backend/classes" Launcher 127.0.0.1 0 \
  < "$workdir/backend.stdin" > "$workdir/backend.out" 2>&1 &
backend_pid=$!
exec 3> "$workdir/backend.stdin"  # the backend lives while this stays open
backend=$(wait_for_line "$workdir/backend.out" '^listening ' "the backend")

"$REMOLD" serve --listen "$LISTEN" --backend "mongodb://$backend" "${rules[@]}" "$@" \
  > "$workdir/remold.out" &
remold_pid=$!
proxy=$(wait_for_line "$workdir/remold.out" '^remold listening on ' "remold")

cat <<MSG

remold is running in front of the embedded backend (mongo-java-server, in memory).

  connection string:  mongodb://$proxy
  mongosh:            mongosh "mongodb://$proxy"
  pymongo:            pymongo.MongoClient("mongodb://$proxy")

  backend (direct):   mongodb://$backend
MSG
if [ ${#rules[@]} -gt 0 ]; then
  echo
  echo "remold loaded the rules of examples/rules; to try one, run the command under it:"
  "$PYTHON" examples/tryouts.py examples/rules "mongodb://$proxy" "mongodb://$backend" "$PYTHON" ||
    echo "run: examples/tryouts.py failed (above); the rules are loaded all the same" >&2
fi
echo
echo "  Ctrl-C stops both."
wait "$remold_pid"
