# bench/lib/lib.sh: what bench/pass_through/run.sh and
# bench/patterns/pattern_run.sh share. Sourced
# (not run) by a script that has `set -euo pipefail`.
#
# Contract:
#   bench_init BINARY WORK_PREFIX [BUILD_DIR] [bench args...]
#       sets SRC (the checkout), BUILD (absolute; default build), BENCH (the
#       BINARY found in BUILD or BUILD/bench, else die), BENCH_ARGS (the
#       args after BUILD_DIR) and WORK (a fresh temp dir), and installs the
#       EXIT trap that stops everything started here and removes WORK.
#   bench_rule FILE.yaml
#       (optional) the rule remold must run, as BENCH --print-rule prints it:
#       a remold started here gets it as WORK/rules/FILE.yaml with
#       --rules WORK/rules.
#   bench_start_endpoints [remold serve args...]
#       BACKEND = REMOLD_BENCH_BACKEND, else a mongo-java-server started here;
#       REMOLD_BENCH_BACKEND=documentdb starts a DocumentDB of its own here
#       (scripts/install-documentdb.sh serve, installed when missing) and
#       sets the credentials below for it;
#       PROXY = REMOLD_BENCH_PROXY, else BUILD/remold serve started here in
#       front of BACKEND (with the rule and the given extra args). Sets
#       BACKEND_PID / REMOLD_PID for what it started ("" otherwise) and prints
#       the "backend ..., remold ..." line.
#   bench_start_peer
#       (optional) PEER = haproxy in tcp mode in front of BACKEND (installed
#       with apt-get when missing; its threads as many as remold's), unless
#       REMOLD_BENCH_PEER=none; sets PEER_PID and adds --peer haproxy=PEER
#       to what bench_run passes.
#   bench_run [args...]
#       runs BENCH --direct BACKEND --proxy PROXY args... BENCH_ARGS... and
#       sets STATUS to its exit status, or 1 when a remold started here died
#       during the run (its stderr is printed).
#   bench_run_with_cpu
#       bench_run with --remold-pid/--backend-pid of the processes started
#       here (CPU accounting), then prints the last lines of a remold started
#       here if it wrote any, and exits with STATUS.
# Messages name the sourcing script (bench/ROOM/NAME.sh); a failed start prints
# the logs of what failed and exits 1.

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BENCH_SCRIPT=bench/$(basename "$(dirname "${BASH_SOURCE[1]}")")/$(basename "${BASH_SOURCE[1]}")
BACKEND_PID=""
REMOLD_PID=""
PEER_PID=""
PEER_ARGS=()
RULE_FILE=""
RULE_TEXT=""
WORK=""

die() { echo "$BENCH_SCRIPT: $*" >&2; exit 1; }

bench_cleanup() {
  if [[ -n $PEER_PID ]]; then
    kill -TERM "$PEER_PID" 2>/dev/null || true
    wait "$PEER_PID" 2>/dev/null || true
  fi
  if [[ -n $REMOLD_PID ]]; then
    kill -TERM "$REMOLD_PID" 2>/dev/null || true
    wait "$REMOLD_PID" 2>/dev/null || true
  fi
  if [[ -n $BACKEND_PID ]]; then
    exec 3>&- 2>/dev/null || true  # stdin EOF: the launcher shuts down
    for _ in $(seq 50); do kill -0 "$BACKEND_PID" 2>/dev/null || break; sleep 0.1; done
    kill -TERM "$BACKEND_PID" 2>/dev/null || true
    wait "$BACKEND_PID" 2>/dev/null || true
  fi
  if [[ -n $WORK ]]; then rm -rf "$WORK"; fi
}

bench_init() {
  local binary=$1 prefix=$2
  shift 2
  BUILD=${1:-build}
  if [[ $# -gt 0 ]]; then shift; fi
  [[ $BUILD = /* ]] || BUILD=$PWD/$BUILD
  BENCH_ARGS=("$@")
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/$prefix.XXXXXX")
  trap bench_cleanup EXIT
  trap 'exit 130' INT TERM
  local candidate
  for candidate in "$BUILD/$binary" "$BUILD/bench/$binary"; do
    if [[ -x $candidate ]]; then BENCH=$candidate; return 0; fi
  done
  die "no $binary in $BUILD (build it: cmake --build $BUILD --target $binary)"
}

bench_rule() {
  RULE_FILE=$1
  RULE_TEXT=$("$BENCH" --print-rule) || die "$BENCH --print-rule failed"
  [[ -n $RULE_TEXT ]] || die "$BENCH --print-rule printed no rule"
}

# wait_for_line FILE PATTERN PID: prints the first line of FILE matching the
# extended regex PATTERN, waiting up to 60 s while PID is alive.
wait_for_line() {
  local file=$1 pattern=$2 pid=$3 line
  for _ in $(seq 600); do
    line=$(grep -m1 -E "$pattern" "$file" 2>/dev/null || true)
    if [[ -n $line ]]; then echo "$line"; return 0; fi
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# Starts mongo-java-server on a free loopback port and sets BACKEND. Its
# stdin is a fifo held open on fd 3, so closing fd 3 (or this shell
# exiting) stops it. Runs in this shell, not in $(...), to keep fd 3 and
# BACKEND_PID.
start_backend() {
  local lib=$SRC/tests/backend
  [[ -d $lib/classes && -d $lib/lib ]] || die "no test backend in $lib (run: make deps)"
  mkfifo "$WORK/backend.in"
  java -cp "$lib/lib/*:$lib/classes" Launcher 127.0.0.1 0 \
    <"$WORK/backend.in" >"$WORK/backend.log" 2>&1 &
  BACKEND_PID=$!
  exec 3>"$WORK/backend.in"
  local line
  line=$(wait_for_line "$WORK/backend.log" '^listening ' "$BACKEND_PID") || {
    cat "$WORK/backend.log" >&2; die "backend did not start"; }
  BACKEND=${line#listening }
}

# A free loopback port, for a remold that refuses --listen HOST:0.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Starts a DocumentDB of its own (scripts/install-documentdb.sh serve: a
# fresh copy of the prepared cluster, stopped when its stdin closes) and sets
# BACKEND and BACKEND_PID, and the credentials: the bench's clients log in
# as the engine's libmongoc user (REMOLD_BENCH_USER/PASSWORD/AUTH_SOURCE:
# libmongoc 1.23 rejects the salt the engine gives other users), remold's
# own connections as the test user (REMOLD_BACKEND_USERNAME/...).
start_documentdb() {
  local script=$SRC/scripts/install-documentdb.sh line password
  bash "$script" install >"$WORK/documentdb-install.log" 2>&1 || {
    tail -n 30 "$WORK/documentdb-install.log" >&2; die "cannot install DocumentDB"; }
  mkfifo "$WORK/backend.in"
  bash "$script" serve <"$WORK/backend.in" >"$WORK/backend.log" 2>&1 &
  BACKEND_PID=$!
  exec 3>"$WORK/backend.in"
  line=$(wait_for_line "$WORK/backend.log" '^listening ' "$BACKEND_PID") || {
    cat "$WORK/backend.log" >&2; die "DocumentDB did not start"; }
  BACKEND=${line#listening }
  line=$(wait_for_line "$WORK/backend.log" '^libmongoc ' "$BACKEND_PID") || die "DocumentDB named no libmongoc user"
  password=$(bash "$script" password)
  export REMOLD_BENCH_USER=${line#libmongoc } REMOLD_BENCH_PASSWORD=$password REMOLD_BENCH_AUTH_SOURCE=admin
  export REMOLD_BACKEND_USERNAME
  REMOLD_BACKEND_USERNAME=$(bash "$script" user)
  export REMOLD_BACKEND_PASSWORD=$password REMOLD_BACKEND_AUTH_SOURCE=admin REMOLD_BACKEND_AUTH_MECHANISM=SCRAM-SHA-256
}

# Starts BUILD/remold (with the rule, if any, and ARGS) in front of BACKEND
# and sets PROXY. Asks for port 0 first; when remold rejects it (some builds
# validate the listen port like a backend port), retries on free ports
# picked here.
start_remold() {
  [[ -x $BUILD/remold ]] || die "no remold binary at $BUILD/remold (run: make build)"
  local args=("$@")
  if [[ -n $RULE_FILE ]]; then
    mkdir -p "$WORK/rules"
    printf '%s\n' "$RULE_TEXT" >"$WORK/rules/$RULE_FILE"
    args=(--rules "$WORK/rules" "${args[@]}")
  fi
  local listen=127.0.0.1:0 line attempt
  for attempt in 1 2 3 4; do
    "$BUILD/remold" serve --listen "$listen" --backend "mongodb://$BACKEND" \
      --log-level warn "${args[@]}" >"$WORK/remold.out" 2>"$WORK/remold.err" &
    REMOLD_PID=$!
    if line=$(wait_for_line "$WORK/remold.out" '^remold listening on ' "$REMOLD_PID"); then
      PROXY=${line#remold listening on }
      return 0
    fi
    wait "$REMOLD_PID" 2>/dev/null || true
    REMOLD_PID=""
    grep -qE "invalid port|in use" "$WORK/remold.out" "$WORK/remold.err" || break
    listen=127.0.0.1:$(free_port)
  done
  cat "$WORK/remold.out" "$WORK/remold.err" >&2
  die "remold did not start"
}

bench_start_endpoints() {
  BACKEND=${REMOLD_BENCH_BACKEND:-}
  PROXY=${REMOLD_BENCH_PROXY:-}
  if [[ $BACKEND == documentdb ]]; then
    start_documentdb
  elif [[ -z $BACKEND ]]; then
    start_backend
  fi
  [[ -n $PROXY ]] || start_remold "$@"
  local rules=""
  if [[ -n $RULE_FILE && -n $REMOLD_PID ]]; then
    rules=" (rules in $WORK/rules)"
  elif [[ -n $RULE_FILE ]]; then
    rules=" (its own rules)"
  fi
  echo "backend $BACKEND, remold $PROXY$rules"
}

# HAProxy 2.6 (Debian 12's) in tcp mode: it parses nothing, so it is the
# floor a proxy that reads every message is measured against.
bench_start_peer() {
  [[ ${REMOLD_BENCH_PEER:-haproxy} != none ]] || return 0
  if ! command -v haproxy >/dev/null; then
    local sudo=""; [[ $(id -u) = 0 ]] || sudo=sudo
    echo "$BENCH_SCRIPT: apt-get install haproxy (the bench's peer; REMOLD_BENCH_PEER=none skips it)"
    $sudo apt-get install -y -qq --no-install-recommends haproxy >/dev/null || die "cannot install haproxy"
  fi
  local port threads
  port=$(free_port)
  threads=$(nproc)
  cat >"$WORK/haproxy.cfg" <<CFG
global
  nbthread $threads
  maxconn 8192
defaults
  mode tcp
  timeout connect 5s
  timeout client 1h
  timeout server 1h
frontend clients
  bind 127.0.0.1:$port
  default_backend mongodb
backend mongodb
  server backend $BACKEND
CFG
  haproxy -db -f "$WORK/haproxy.cfg" >"$WORK/haproxy.log" 2>&1 &
  PEER_PID=$!
  for _ in $(seq 100); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.2).close()" 2>/dev/null && break
    kill -0 "$PEER_PID" 2>/dev/null || { cat "$WORK/haproxy.log" >&2; die "haproxy did not start"; }
    sleep 0.1
  done
  PEER=127.0.0.1:$port
  PEER_ARGS=(--peer "haproxy=$PEER")
  echo "peer: haproxy $(haproxy -v | sed -n 's/^HAProxy version \([^ ]*\).*/\1/p') (tcp mode, $threads threads) on $PEER"
}

bench_run() {
  STATUS=0
  "$BENCH" --direct "$BACKEND" --proxy "$PROXY" "${PEER_ARGS[@]}" "$@" "${BENCH_ARGS[@]}" || STATUS=$?
  if [[ -n $REMOLD_PID ]] && ! kill -0 "$REMOLD_PID" 2>/dev/null; then
    echo "$BENCH_SCRIPT: remold exited during the run; its stderr:" >&2
    cat "$WORK/remold.err" >&2
    STATUS=1
  fi
}

bench_run_with_cpu() {
  local pids=()
  [[ -n $REMOLD_PID ]] && pids+=(--remold-pid "$REMOLD_PID")
  [[ -n $BACKEND_PID ]] && pids+=(--backend-pid "$BACKEND_PID")
  bench_run "${pids[@]}"
  if [[ -n $REMOLD_PID && -s $WORK/remold.err ]]; then
    echo "remold stderr (warnings and errors during the run):"
    tail -n 20 "$WORK/remold.err"
  fi
  exit "$STATUS"
}
