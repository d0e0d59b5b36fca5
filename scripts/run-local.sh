#!/usr/bin/env bash
# `make run`: starts the embedded default backend (mongo-java-server, in
# memory) on a free loopback port, puts remold in front of it with the
# example rules (examples/rules), prints the connection string and, per
# rule, a command to try (examples/tryouts.py), and serves until Ctrl-C.
# Extra remold flags may follow; with a --rules or --config of their own,
# the example rules are not loaded and no commands are printed:
#   bash scripts/run-local.sh build/remold [--log-level warn ...]
# REMOLD_RUN_BACKEND=documentdb (`make run BACKEND=documentdb`): the same in
# front of DocumentDB, the real engine (scripts/install-documentdb.sh serve:
# a fresh server of its own, deleted at the end), which requires
# authentication: remold gets its own identity from the environment, and
# the connection strings printed carry the test user.
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
credentials="" auth_options=""
case "${REMOLD_RUN_BACKEND:-stand-in}" in
  stand-in)
    backend_name="the embedded backend (mongo-java-server, in memory)"
    java -cp "tests/backend/lib/*:tests/backend/classes" Launcher 127.0.0.1 0 \
      < "$workdir/backend.stdin" > "$workdir/backend.out" 2>&1 &
    ;;
  documentdb)
    backend_name="DocumentDB (PostgreSQL with the documentdb extension; a fresh server, deleted at the end)"
    bash scripts/install-documentdb.sh serve < "$workdir/backend.stdin" > "$workdir/backend.out" 2>&1 &
    ;;
  *) echo "run: REMOLD_RUN_BACKEND must be stand-in or documentdb" >&2; exit 2 ;;
esac
backend_pid=$!
exec 3> "$workdir/backend.stdin"  # the backend lives while this stays open
backend=$(wait_for_line "$workdir/backend.out" '^listening ' "the backend")
if [ "${REMOLD_RUN_BACKEND:-stand-in}" = documentdb ]; then
  user=$(bash scripts/install-documentdb.sh user)
  password=$(bash scripts/install-documentdb.sh password)
  export REMOLD_BACKEND_USERNAME=$user REMOLD_BACKEND_PASSWORD=$password  # remold's own identity
  credentials="$user:$password@" auth_options="/?authSource=admin"
fi

"$REMOLD" serve --listen "$LISTEN" --backend "mongodb://$backend" "${rules[@]}" "$@" \
  > "$workdir/remold.out" &
remold_pid=$!
proxy=$(wait_for_line "$workdir/remold.out" '^remold listening on ' "remold")
proxy_uri="mongodb://$credentials$proxy$auth_options"
backend_uri="mongodb://$credentials$backend$auth_options"

cat <<MSG

remold is running in front of $backend_name.

  connection string:  $proxy_uri
  mongosh:            mongosh "$proxy_uri"
  pymongo:            pymongo.MongoClient("$proxy_uri")

  backend (direct):   $backend_uri
MSG
if [ ${#rules[@]} -gt 0 ]; then
  echo
  echo "remold loaded the rules of examples/rules; to try one, run the command under it:"
  "$PYTHON" examples/tryouts.py examples/rules "$proxy_uri" "$backend_uri" "$PYTHON" ||
    echo "run: examples/tryouts.py failed (above); the rules are loaded all the same" >&2
fi
echo
echo "  Ctrl-C stops both."
wait "$remold_pid"
