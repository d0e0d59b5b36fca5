#!/usr/bin/env bash
# DocumentDB for remold's tests, benches and demo: PostgreSQL 15 with the
# documentdb extensions and its Rust gateway, which speaks the MongoDB wire
# protocol (wire version 21, MongoDB 7.0). A real engine: real indexes, real
# concurrency (read committed), $lookup pipelines, $unionWith, views,
# transactions, explain; SCRAM-SHA-256 required.
#
#   scripts/install-documentdb.sh [install]   build and install what is missing; a second run does nothing
#   scripts/install-documentdb.sh serve [--unpatched]
#       start a server of its own on free loopback ports, from a fresh copy
#       of a prepared cluster, print "listening HOST:PORT" and "uri URI"
#       (test credentials), and stop and delete it when stdin closes: how
#       the e2e harness starts it, as it starts the stand-in. --unpatched
#       runs the gateway without the project's patch (the test of the patch).
#   scripts/install-documentdb.sh start | stop | status | uri
#       a persistent server on 127.0.0.1:$REMOLD_DOCUMENTDB_PORT (10260),
#       for the benches and trying things by hand.
#   scripts/install-documentdb.sh user | password
#       the test credentials.
#
# Where things go:
#   - the Debian packages it needs (apt-get; sudo when not root);
#   - the extensions, into PostgreSQL 15's own directories (make install);
#   - everything else under $REMOLD_DOCUMENTDB_HOME: the sources, libbson
#     1.28 (static, only to build the extension), the gateway binaries, the
#     prepared cluster `serve` copies, the persistent server's data and logs.
#     Default: ~/.cache/remold/documentdb, or /var/cache/remold/documentdb
#     as root (the postgres user must reach the clusters).
#
# Sources: four archives no registry serves (the documentdb repository at
# b2e220c4, libbson 1.28.0, pgvector 0.8.0, pg_cron 1.6.3). They are taken
# from $REMOLD_DOCUMENTDB_SOURCES, else from ../shared/backends/documentdb/
# sources beside the checkout when it exists, else downloaded from their
# upstream GitHub archives; every one is checked against
# scripts/documentdb/SHA256SUMS before it is used. (The shared libbson
# archive leaves out mongo-c-driver's test folders, so upstream's own
# archive has another sum: check it by hand, then add its line.)
#
# The gateway gets one patch of the project's own,
# scripts/documentdb/gateway-end-aborted-transactions.patch. Without it,
# one command with a maxTimeMS PostgreSQL refuses (negative, or past
# 2^31 - 1) leaves a pooled PostgreSQL connection inside an aborted
# transaction, and every later command of any client of the same user that
# gets that connection fails with 33685826 "current transaction is
# aborted, commands ignored until end of transaction block"; it lasts as
# long as the connection keeps being used (each failure restarts its idle
# timeout), so such connections accumulate. The cause, in
# src/postgres/connection.rs: a command with maxTimeMS runs BEGIN, then
# `SET LOCAL statement_timeout` with `?`, and a refused SET returns the
# error without a ROLLBACK (only a failed query is rolled back); deadpool's
# default recycling checks only that the connection is open. The patch
# rolls back when that SET or the COMMIT fails: the fix where the leak is,
# and so one for upstream (a ROLLBACK whenever the pool recycles a
# connection also cured it, but cost every request a round trip to
# PostgreSQL). The unpatched gateway is built too, beside it, so that
# tests/e2e/python/test_documentdb_backend.py shows the defect on it and
# its absence on the patched one.
#
# REMOLD_DOCUMENTDB_CORE_FILES=1: the PostgreSQL servers it starts may
# write core files (pg_ctl --core-files), to see where one crashed.
#
# Credentials: a test role, $REMOLD_DOCUMENTDB_USER / $REMOLD_DOCUMENTDB_PASSWORD
# (remold_test / remold-test-password), IN ROLE documentdb_admin_role, a
# second one with read-only rights (…_reader), and a third like the first
# whose SCRAM salt has mongod's length, for clients built on libmongoc
# (…_libmongoc: the pattern benches). Test servers only: the
# clusters run with fsync and synchronous_commit off.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$SCRIPT_DIR/.." && pwd)
PATCH_FILE=$SCRIPT_DIR/documentdb/gateway-end-aborted-transactions.patch
SUMS_FILE=$SCRIPT_DIR/documentdb/SHA256SUMS

if [ "$(id -u)" = 0 ]; then
  DEFAULT_HOME=/var/cache/remold/documentdb
  AS_PG=(runuser -u postgres --)
  SUDO=()
else
  DEFAULT_HOME=${XDG_CACHE_HOME:-$HOME/.cache}/remold/documentdb
  AS_PG=()
  SUDO=(sudo)
fi
DOCDB_HOME=${REMOLD_DOCUMENTDB_HOME:-$DEFAULT_HOME}
DOCDB_USER=${REMOLD_DOCUMENTDB_USER:-remold_test}
DOCDB_PASSWORD=${REMOLD_DOCUMENTDB_PASSWORD:-remold-test-password}
READER_USER=${DOCDB_USER}_reader
LIBMONGOC_USER=${DOCDB_USER}_libmongoc
GW_PORT=${REMOLD_DOCUMENTDB_PORT:-10260}
PG_PORT=${REMOLD_DOCUMENTDB_PG_PORT:-9712}
JOBS=${JOBS:-$(nproc)}
NICE=(nice -n 10)

PGBIN=/usr/lib/postgresql/15/bin
PG_CONFIG=$PGBIN/pg_config
DOCDB_SRC_NAME=documentdb-b2e220c4
LIBBSON_VERSION=1.28.0
LIBBSON_PREFIX=$DOCDB_HOME/libbson-$LIBBSON_VERSION
SRC_DIR=$DOCDB_HOME/src
BIN=$DOCDB_HOME/bin
TEMPLATE=$DOCDB_HOME/template
DATA=$DOCDB_HOME/data
LOGS=$DOCDB_HOME/logs
ARCHIVES=$DOCDB_HOME/archives

declare -A UPSTREAM=(
  [documentdb-b2e220c4.tar.gz]=https://github.com/microsoft/documentdb/archive/b2e220c47d85ec6fed1651f03968da2317f71c10.tar.gz
  [mongo-c-driver-1.28.0.tar.gz]=https://github.com/mongodb/mongo-c-driver/archive/refs/tags/1.28.0.tar.gz
  [pgvector-0.8.0.tar.gz]=https://github.com/pgvector/pgvector/archive/refs/tags/v0.8.0.tar.gz
  [pg_cron-1.6.3.tar.gz]=https://github.com/citusdata/pg_cron/archive/refs/tags/v1.6.3.tar.gz
)

log() { printf '[install-documentdb %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { printf 'install-documentdb: %s\n' "$*" >&2; exit 1; }
sha256() { sha256sum "$1" | cut -d' ' -f1; }
# What every build depends on: the archives' sums, the patch and this script.
build_id() { cat "$SUMS_FILE" "$PATCH_FILE" | sha256sum | cut -c1-16; }

# ------------------------------------------------------------------ install

install_packages() {
  local packages=(postgresql-15 postgresql-server-dev-15 postgresql-15-rum postgresql-15-postgis-3
                  libpcre2-dev libintelrdfpmath-dev libicu-dev libkrb5-dev libssl-dev
                  pkg-config build-essential cmake openssl ca-certificates patch python3
                  systemtap-sdt-dev)
  local missing=() p
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  export DEBIAN_FRONTEND=noninteractive
  if ((${#missing[@]})); then
    log "apt-get install ${missing[*]}"
    "${SUDO[@]}" apt-get update -qq
    "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  # Debian's pg_cron 1.4.2 cannot run the '2 seconds' schedules documentdb
  # creates; 1.6.3 is built below.
  if dpkg-query -W -f='${Status}' postgresql-15-cron 2>/dev/null | grep -q 'install ok installed'; then
    "${SUDO[@]}" apt-get remove -y -qq postgresql-15-cron >/dev/null
  fi
}

find_cargo() {
  local candidate version
  for candidate in "$(command -v cargo || true)" "$HOME/.cargo/bin/cargo"; do
    [ -n "$candidate" ] && [ -x "$candidate" ] || continue
    version=$("$candidate" --version 2>/dev/null | sed -n 's/^cargo 1\.\([0-9]*\).*/\1/p')
    if [ -n "$version" ] && [ "$version" -ge 75 ]; then echo "$candidate"; return 0; fi
  done
  return 1
}

sources_dir() {
  if [ -n "${REMOLD_DOCUMENTDB_SOURCES:-}" ]; then echo "$REMOLD_DOCUMENTDB_SOURCES"; return; fi
  if [ -d "$REPO/../shared/backends/documentdb/sources" ]; then
    (cd "$REPO/../shared/backends/documentdb/sources" && pwd); return
  fi
  echo "$ARCHIVES"
}

# Prints the path of a checked archive, downloading it when no folder has it.
archive() {
  local name=$1 dir want path
  dir=$(sources_dir)
  want=$(awk -v n="$name" '$2 == n {print $1}' "$SUMS_FILE")
  [ -n "$want" ] || die "no sum for $name in $SUMS_FILE"
  path=$dir/$name
  if [ ! -f "$path" ]; then
    path=$ARCHIVES/$name
    if [ ! -f "$path" ]; then
      mkdir -p "$ARCHIVES"
      log "downloading ${UPSTREAM[$name]}"
      curl -fsSL --retry 3 -o "$path.part" "${UPSTREAM[$name]}" || die "cannot download ${UPSTREAM[$name]}"
      mv "$path.part" "$path"
    fi
  fi
  [ "$(sha256 "$path")" = "$want" ] || die "$path: SHA-256 $(sha256 "$path"), expected $want (scripts/documentdb/SHA256SUMS)"
  echo "$path"
}

build_libbson() {
  [ -f "$LIBBSON_PREFIX/lib/pkgconfig/libbson-static-1.0.pc" ] && return
  log "libbson $LIBBSON_VERSION (static, for the extension)"
  local work=$DOCDB_HOME/work
  rm -rf "$work/mongo-c-driver-$LIBBSON_VERSION"; mkdir -p "$work"
  tar -xzf "$(archive mongo-c-driver-$LIBBSON_VERSION.tar.gz)" -C "$work"
  mkdir -p "$work/mongo-c-driver-$LIBBSON_VERSION/cmake-build"
  (cd "$work/mongo-c-driver-$LIBBSON_VERSION/cmake-build" &&
    "${NICE[@]}" cmake .. -DBUILD_VERSION=$LIBBSON_VERSION -DENABLE_MONGOC=OFF -DENABLE_TESTS=OFF \
      -DENABLE_EXAMPLES=OFF -DENABLE_ICU=OFF -DENABLE_STATIC=ON -DCMAKE_C_FLAGS="-fPIC" \
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$LIBBSON_PREFIX" >../cmake.log 2>&1 &&
    "${NICE[@]}" make -j"$JOBS" install >../make.log 2>&1) ||
    die "libbson build failed: see $work/mongo-c-driver-$LIBBSON_VERSION/*.log"
}

# Debian's libintelrdfpmath-dev has no pkg-config file; the extension asks for one.
write_intelmath_pc() {
  mkdir -p "$DOCDB_HOME/pkgconfig"
  cat >"$DOCDB_HOME/pkgconfig/intelmathlib.pc" <<'EOF'
prefix=/usr
libdir=${prefix}/lib/x86_64-linux-gnu
includedir=${prefix}/include
Name: intelmathlib
Description: Intel Decimal Floating-Point Math Library (Debian libintelrdfpmath-dev)
Version: 2.0
Cflags: -I${includedir}
Libs: -L${libdir} -lbidgcc000
EOF
}

# make + make install of one PostgreSQL extension source tree.
build_pg_extension() {
  local dir=$1 name=$2
  (cd "$dir" && "${NICE[@]}" make -j"$JOBS" PG_CONFIG=$PG_CONFIG with_llvm=no >"$DOCDB_HOME/work/$name-build.log" 2>&1) ||
    die "$name build failed: see $DOCDB_HOME/work/$name-build.log"
  (cd "$dir" && "${SUDO[@]}" make install PG_CONFIG=$PG_CONFIG with_llvm=no >"$DOCDB_HOME/work/$name-install.log" 2>&1) ||
    die "$name install failed: see $DOCDB_HOME/work/$name-install.log"
}

build_extensions() {
  local pkglib share stamp
  pkglib=$($PG_CONFIG --pkglibdir); share=$($PG_CONFIG --sharedir)/extension
  stamp=$pkglib/.remold-documentdb-$(build_id)
  [ -f "$stamp" ] && [ -f "$pkglib/pg_documentdb.so" ] && [ -f "$pkglib/pg_documentdb_extended_rum.so" ] &&
    [ -f "$pkglib/vector.so" ] && [ -f "$pkglib/pg_cron.so" ] &&
    [ -f "$SRC_DIR/$DOCDB_SRC_NAME/pg_documentdb_core/include/utils/external_error_mapping.csv" ] && return
  mkdir -p "$DOCDB_HOME/work"
  log "pgvector 0.8.0"
  rm -rf "$DOCDB_HOME/work/pgvector-0.8.0"; tar -xzf "$(archive pgvector-0.8.0.tar.gz)" -C "$DOCDB_HOME/work"
  build_pg_extension "$DOCDB_HOME/work/pgvector-0.8.0" pgvector
  log "pg_cron 1.6.3"
  rm -rf "$DOCDB_HOME/work/pg_cron-1.6.3"; tar -xzf "$(archive pg_cron-1.6.3.tar.gz)" -C "$DOCDB_HOME/work"
  build_pg_extension "$DOCDB_HOME/work/pg_cron-1.6.3" pg_cron
  log "documentdb extensions (pg_documentdb_core, pg_documentdb)"
  rm -rf "$SRC_DIR"; mkdir -p "$SRC_DIR"
  tar -xzf "$(archive $DOCDB_SRC_NAME.tar.gz)" -C "$SRC_DIR"
  build_pg_extension "$SRC_DIR/$DOCDB_SRC_NAME/pg_documentdb_core" pg_documentdb_core
  build_pg_extension "$SRC_DIR/$DOCDB_SRC_NAME/pg_documentdb" pg_documentdb
  log "documentdb's own RUM index access method (pg_documentdb_extended_rum)"
  build_pg_extension "$SRC_DIR/$DOCDB_SRC_NAME/internal/pg_documentdb_extended_rum" pg_documentdb_extended_rum
  "${SUDO[@]}" rm -f "$pkglib"/.remold-documentdb-*
  "${SUDO[@]}" touch "$stamp"
  rm -rf "$TEMPLATE"  # made from these extensions
}

# The gateway, twice: as upstream has it, then with the project's patch
# (the second build recompiles only the gateway crate).
build_gateway() {
  local id gw connection cargo
  id=$(build_id)
  [ -x "$BIN/documentdb_gateway" ] && [ -x "$BIN/documentdb_gateway_unpatched" ] &&
    [ "$(cat "$BIN/.build-id" 2>/dev/null)" = "$id" ] && return
  cargo=$(find_cargo) || die "cargo >= 1.75 is needed on PATH for the gateway (rustup; Debian 12's is 1.63)"
  gw=$SRC_DIR/$DOCDB_SRC_NAME/pg_documentdb_gw
  connection=$gw/src/postgres/connection.rs
  [ -f "$connection.upstream" ] || cp "$connection" "$connection.upstream"
  mkdir -p "$BIN"
  # Built inside the source tree: a macro of the gateway reads the error
  # table that the core extension's build generates.
  log "gateway, as upstream has it (cargo build --release)"
  cp "$connection.upstream" "$connection"
  (cd "$gw" && "${NICE[@]}" "$cargo" build --release --locked -j "$JOBS" >"$DOCDB_HOME/work/gateway-upstream.log" 2>&1) ||
    die "gateway build failed: see $DOCDB_HOME/work/gateway-upstream.log"
  install -m 755 "$gw/target/release/documentdb_gateway" "$BIN/documentdb_gateway_unpatched"
  log "gateway, patched ($(basename "$PATCH_FILE"))"
  (cd "$SRC_DIR/$DOCDB_SRC_NAME" && patch -s -p1 <"$PATCH_FILE") || die "the patch does not apply to $DOCDB_SRC_NAME"
  (cd "$gw" && "${NICE[@]}" "$cargo" build --release --locked -j "$JOBS" >"$DOCDB_HOME/work/gateway.log" 2>&1) ||
    die "gateway build failed: see $DOCDB_HOME/work/gateway.log"
  install -m 755 "$gw/target/release/documentdb_gateway" "$BIN/documentdb_gateway"
  echo "$id" >"$BIN/.build-id"
}

make_tls_pair() {
  [ -f "$DOCDB_HOME/tls/cert.pem" ] && return
  mkdir -p "$DOCDB_HOME/tls"
  # The release gateway will not start without a certificate, even for plain TCP.
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=localhost" \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    -keyout "$DOCDB_HOME/tls/key.pem" -out "$DOCDB_HOME/tls/cert.pem" 2>/dev/null
  chmod 644 "$DOCDB_HOME/tls/key.pem"
}

pg_ctl() { "${AS_PG[@]}" "$PGBIN/pg_ctl" "$@"; }
psql_on() {  # psql_on PORT SQL...
  local port=$1; shift
  psql -h 127.0.0.1 -p "$port" -U postgres -d postgres -X -q -v ON_ERROR_STOP=1 "$@"
}

# A data directory for the postgres user (or this user when not root).
own_for_postgres() { if [ "$(id -u)" = 0 ]; then chown -R postgres:postgres "$@"; fi; }

start_postgres() {  # start_postgres DATA PORT
  pg_ctl -D "$1" -l "$1/postgres.log" -w -t 60 ${REMOLD_DOCUMENTDB_CORE_FILES:+--core-files} -o "-p $2 -k $1" start >/dev/null ||
    { tail -20 "$1/postgres.log" >&2; die "PostgreSQL did not start (see $1/postgres.log)"; }
}

# The settings of every test cluster.
template_settings() {
  cat <<'EOF'
# ---- remold: DocumentDB for tests (scripts/install-documentdb.sh) ----
listen_addresses = '127.0.0.1'
shared_preload_libraries = 'pg_cron, pg_documentdb_core, pg_documentdb'
cron.database_name = 'postgres'
# Jobs (documentdb's index builds among them) run in background workers,
# not over a connection to the port the cluster had when it was prepared:
# every server runs a copy of it on a port of its own.
cron.use_background_workers = on
max_worker_processes = 32
# documentdb builds an index (even on an empty collection) in a cron job,
# every 2 seconds by default: a createIndexes waits for it. Every second
# here, the fastest the job takes.
documentdb.indexBuildScheduleInSec = 1
documentdb.enableBackgroundWorker = true
documentdb.enableBackgroundWorkerJobs = true
# Index scans through documentdb's own fork of the RUM access method, not
# Debian's rum 1.3.13 (which documentdb uses by default): its
# entryGetNextItem reads a posting-tree page that a concurrent insert split
# into a non-leaf page while the scan had it unlocked, and the server
# process crashes (signal 11; every session fails while PostgreSQL
# restarts). remold's extended-reference test met it about once in ten
# runs (docs/backends.md, departure 9). Fixed upstream in rum commit
# 78c348b (June 2025, after 1.3.14); the fork re-finds the leaf page.
documentdb.rum_library_load_option = 'require_documentdb_extended_rum'
# Collection validators: documentdb refuses them (115) unless this is on.
# The polymorphic rule puts its types' validators in the validator of the
# collection that stores them (docs/backends.md).
documentdb.enableSchemaValidation = on
max_connections = 300
ssl = off
# A test server: nothing here must survive a crash of the machine.
fsync = off
synchronous_commit = off
full_page_writes = off
EOF
}
# A SCRAM-SHA-256 verifier of the test password, as PostgreSQL stores one
# (SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>, RFC 5803), with
# the 28-byte salt mongod uses instead of PostgreSQL's 16 bytes. libmongoc
# (1.23, and 1.28 still) refuses any other salt length, so the clients that
# are built on it (the pattern benches) log in as the role that has it. The
# salt is derived from the role's name: the same template every time.
mongod_shaped_verifier() {  # mongod_shaped_verifier ROLE
  python3 - "$1" "$DOCDB_PASSWORD" <<'PY'
import base64, hashlib, hmac, sys
role, password = sys.argv[1], sys.argv[2].encode()
salt = hashlib.sha256(b"remold test salt " + role.encode()).digest()[:28]
salted = hashlib.pbkdf2_hmac("sha256", password, salt, 4096)
client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
b64 = lambda b: base64.b64encode(b).decode()
print(f"SCRAM-SHA-256$4096:{b64(salt)}${b64(hashlib.sha256(client_key).digest())}:{b64(server_key)}")
PY
}

# The test roles: the suite's user (PostgreSQL's own 16-byte salt, as a user
# of DocumentDB has), a read-only one, and the libmongoc one (above).
template_roles() {
  cat <<EOF
CREATE ROLE "$DOCDB_USER" WITH LOGIN INHERIT PASSWORD '$DOCDB_PASSWORD' IN ROLE documentdb_admin_role;
ALTER ROLE "$DOCDB_USER" CREATEROLE;
CREATE ROLE "$READER_USER" WITH LOGIN INHERIT PASSWORD '$DOCDB_PASSWORD' IN ROLE documentdb_readonly_role;
CREATE ROLE "$LIBMONGOC_USER" WITH LOGIN INHERIT PASSWORD '$(mongod_shaped_verifier "$LIBMONGOC_USER")' IN ROLE documentdb_admin_role;
EOF
}
template_id() { { build_id; template_settings; template_roles; } | sha256sum | cut -c1-16; }

# The prepared cluster every server starts from: the extensions created,
# the test roles made.
make_template() {
  [ "$(cat "$TEMPLATE/.ready" 2>/dev/null)" = "$(template_id)" ] && return
  log "preparing the cluster servers start from"
  local port
  rm -rf "$TEMPLATE"; mkdir -p "$TEMPLATE"; own_for_postgres "$TEMPLATE"; chmod 700 "$TEMPLATE"
  "${AS_PG[@]}" "$PGBIN/initdb" -D "$TEMPLATE" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
  template_settings >>"$TEMPLATE/postgresql.conf"
  port=$(free_port)
  start_postgres "$TEMPLATE" "$port"
  PGOPTIONS="-c client_min_messages=warning" psql_on "$port" -c "CREATE EXTENSION IF NOT EXISTS documentdb CASCADE;" \
    >/dev/null
  template_roles | PGOPTIONS="-c client_min_messages=warning" psql_on "$port" >/dev/null
  pg_ctl -D "$TEMPLATE" -m fast -w stop >/dev/null
  rm -f "$TEMPLATE/postgres.log"
  template_id >"$TEMPLATE/.ready"
}

do_install() {
  local t0=$SECONDS
  mkdir -p "$DOCDB_HOME"
  install_packages
  build_libbson
  write_intelmath_pc
  export PKG_CONFIG_PATH=$LIBBSON_PREFIX/lib/pkgconfig:$DOCDB_HOME/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  build_extensions
  build_gateway
  make_tls_pair
  # The postgres user reaches the clusters under $DOCDB_HOME.
  if [ "$(id -u)" = 0 ]; then chmod 755 "$DOCDB_HOME" "$(dirname "$DOCDB_HOME")"; fi
  make_template
  ((SECONDS - t0 < 2)) || log "installed in $((SECONDS - t0)) s"
}

# ------------------------------------------------------------------ servers

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

write_gateway_config() {  # write_gateway_config FILE PG_PORT GW_PORT
  cat >"$1" <<EOF
{
  "NodeHostName": "localhost",
  "BlockedRolePrefixes": ["documentdb", "citus", "pg", "internal_role"],
  "PostgresSystemUser": "postgres",
  "PostgresHostName": "127.0.0.1",
  "PostgresPort": $2,
  "GatewayListenPort": $3,
  "UseLocalHost": true,
  "TransactionTimeoutSecs": 30,
  "CursorTimeoutSecs": 600,
  "PostgresCommandTimeoutSecs": 120,
  "EnforceSslTcp": false,
  "CertificateOptions": {"CertType": "PemFile", "FilePath": "$DOCDB_HOME/tls/cert.pem", "KeyFilePath": "$DOCDB_HOME/tls/key.pem"}
}
EOF
}

wait_for_port() {  # wait_for_port PORT PID LOG
  local _
  for _ in $(seq 1 300); do
    (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || break
    sleep 0.1
  done
  tail -20 "$3" >&2
  die "the gateway did not listen on 127.0.0.1:$1 (see $3)"
}

uri_for() {
  echo "mongodb://$DOCDB_USER:$DOCDB_PASSWORD@127.0.0.1:$1/?authMechanism=SCRAM-SHA-256&authSource=admin"
}

require_installed() {
  [ -x "$BIN/documentdb_gateway" ] && [ "$(cat "$TEMPLATE/.ready" 2>/dev/null)" = "$(template_id)" ] ||
    die "DocumentDB is not installed under $DOCDB_HOME: run scripts/install-documentdb.sh"
}

# The server `serve` runs (globals: the exit trap reads them).
SERVE_DIR=""
SERVE_GATEWAY_PID=""

stop_serving() {
  if [ -n "$SERVE_GATEWAY_PID" ]; then
    kill "$SERVE_GATEWAY_PID" 2>/dev/null || true
    wait "$SERVE_GATEWAY_PID" 2>/dev/null || true
  fi
  [ -n "$SERVE_DIR" ] || return 0
  pg_ctl -D "$SERVE_DIR/pgdata" -m immediate -w stop >/dev/null 2>&1 || true
  # The last server's logs stay, for a look after a failed run.
  mkdir -p "$LOGS"
  cp "$SERVE_DIR/gateway.log" "$LOGS/last-serve-gateway.log" 2>/dev/null || true
  cp "$SERVE_DIR/pgdata/postgres.log" "$LOGS/last-serve-postgres.log" 2>/dev/null || true
  rm -rf "$SERVE_DIR"
}

do_serve() {
  local gateway=$BIN/documentdb_gateway pg_port gw_port
  [ "${1:-}" = --unpatched ] && gateway=$BIN/documentdb_gateway_unpatched
  require_installed
  trap stop_serving EXIT
  trap 'exit 143' TERM INT HUP
  SERVE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/remold-documentdb-XXXXXX")
  chmod 755 "$SERVE_DIR"
  cp -a "$TEMPLATE" "$SERVE_DIR/pgdata"
  own_for_postgres "$SERVE_DIR/pgdata"
  pg_port=$(free_port)
  start_postgres "$SERVE_DIR/pgdata" "$pg_port"
  gw_port=$(free_port)
  write_gateway_config "$SERVE_DIR/gateway.json" "$pg_port" "$gw_port"
  (cd "$SERVE_DIR" && exec "$gateway" "$SERVE_DIR/gateway.json") >"$SERVE_DIR/gateway.log" 2>&1 </dev/null &
  SERVE_GATEWAY_PID=$!
  wait_for_port "$gw_port" "$SERVE_GATEWAY_PID" "$SERVE_DIR/gateway.log"
  echo "listening 127.0.0.1:$gw_port"
  echo "uri $(uri_for "$gw_port")"
  echo "reader $READER_USER"
  echo "libmongoc $LIBMONGOC_USER"
  echo "logs $SERVE_DIR"
  # Serve until stdin closes (the harness closes it, or exits).
  while read -r _; do :; done
}

persistent_gateway_running() {
  [ -f "$DATA/gateway.pid" ] && kill -0 "$(cat "$DATA/gateway.pid")" 2>/dev/null
}

do_start() {
  require_installed
  if [ ! -f "$DATA/pgdata/PG_VERSION" ]; then
    mkdir -p "$DATA"; chmod 755 "$DATA"
    cp -a "$TEMPLATE" "$DATA/pgdata"
    own_for_postgres "$DATA/pgdata"
  fi
  if ! pg_ctl -D "$DATA/pgdata" status >/dev/null 2>&1; then start_postgres "$DATA/pgdata" "$PG_PORT"; fi
  if ! persistent_gateway_running; then
    write_gateway_config "$DATA/gateway.json" "$PG_PORT" "$GW_PORT"
    (cd "$DATA" && exec setsid "$BIN/documentdb_gateway" "$DATA/gateway.json") >"$DATA/gateway.log" 2>&1 </dev/null &
    echo $! >"$DATA/gateway.pid"
    wait_for_port "$GW_PORT" "$(cat "$DATA/gateway.pid")" "$DATA/gateway.log"
  fi
  uri_for "$GW_PORT"
}

do_stop() {
  if persistent_gateway_running; then kill "$(cat "$DATA/gateway.pid")"; fi
  rm -f "$DATA/gateway.pid"
  if [ -f "$DATA/pgdata/PG_VERSION" ] && pg_ctl -D "$DATA/pgdata" status >/dev/null 2>&1; then
    pg_ctl -D "$DATA/pgdata" -m fast -w stop >/dev/null
  fi
}

do_status() {
  local pg=stopped gw=stopped
  [ -f "$DATA/pgdata/PG_VERSION" ] && pg_ctl -D "$DATA/pgdata" status >/dev/null 2>&1 && pg="running on 127.0.0.1:$PG_PORT"
  persistent_gateway_running && gw="running on 127.0.0.1:$GW_PORT (pid $(cat "$DATA/gateway.pid"))"
  echo "postgres: $pg"
  echo "gateway:  $gw"
  [ -x "$BIN/documentdb_gateway" ] && echo "installed: $DOCDB_HOME (build $(cat "$BIN/.build-id"))" ||
    echo "installed: no"
}

case "${1:-install}" in
  install) do_install ;;
  serve) shift; do_serve "$@" ;;
  start) do_start ;;
  stop) do_stop ;;
  status) do_status ;;
  uri) uri_for "$GW_PORT" ;;
  user) echo "$DOCDB_USER" ;;
  password) echo "$DOCDB_PASSWORD" ;;
  *) echo "usage: $0 [install | serve [--unpatched] | start | stop | status | uri | user | password]" >&2; exit 2 ;;
esac
