"""Harness for the pymongo end-to-end suite (see tests/e2e/README.md).

Session fixtures start a MongoDB-compatible backend and one shared remold in
front of it; tests talk to remold with unmodified pymongo and raw sockets.

Environment:

- ``REMOLD_TEST_BACKEND_URI``: use this server (any mongod/mongos URI, with
  credentials in it when the server requires them) and start no backend.
- ``REMOLD_TEST_BACKEND``: which backend to start when no URI is given:
  ``stand-in`` (default), the bundled mongo-java-server, or ``documentdb``,
  the real engine that ``scripts/install-documentdb.sh`` builds (its
  ``serve`` command, with test credentials). Either is launched on a free
  loopback port and stopped by closing its stdin.

A backend that requires authentication: remold is given its address
without credentials (``Backend.uri``) and its own identity in the
environment (REMOLD_BACKEND_USERNAME, REMOLD_BACKEND_PASSWORD), as an
operator would; clients, through remold or directly (``Backend.direct_uri``),
authenticate as the test user, and raw wire connections (wire.py) to either
run SCRAM first.
- ``REMOLD_BINARY``: the remold binary (default ``<source>/build/remold``).
- ``REMOLD_SOURCE_DIR``: the checkout (default: derived from this file).
- ``REMOLD_TEST_LOG_LEVEL``: debugging aid. The log level of every remold
  the suite starts with its default arguments (default warn); set, their
  stderr files (/tmp/remold-stderr-*.log) are kept.
- ``REMOLD_TEST_POOL_SIZE``: run the shared remold (``target``) in pooled
  mode, ``--backend-pool-size N`` (docs/operations.md, "Connection
  pooling"), so the whole suite checks that clients see no difference.
- ``REMOLD_TEST_NO_PROXY=1``: debugging aid. Skip remold entirely and point
  every client at the backend, to tell proxy bugs from test bugs. Tests of
  proxy-only behaviour (handshake rewriting, negotiated compression when the
  backend has none) skip themselves; tests that need the binary (config,
  SIGTERM) run only if it exists. Against mongo-java-server one case is
  expected to fail in this mode: test_malformed's op_msg_bad_checksum (the
  stand-in ignores OP_MSG checksums; mongod and remold reject them).

Each test gets its own database (``db`` fixture), dropped afterwards, so the
suite leaves a shared server as it found it.

Authentication tests (``auth_backend``, ``auth_target``) need a backend that
enforces SCRAM and whose users the harness creates: FerretDB
(``tests/backend/ferretdb/bin/ferretdb``, built by scripts/install-deps.sh)
with its new authentication, on a free loopback port with its SQLite handler
in a temporary directory, and a remold of their own in front of it (at
``--log-level debug``). Under ``REMOLD_TEST_BACKEND_URI`` they skip: the
harness controls neither that server's users nor its auth settings.
FerretDB is for authentication and wire realism only, never for judging
rewrite semantics (see shared DESIGN notes).
"""

from __future__ import annotations

import os
import re
import secrets
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import pymongo
import pytest
from pymongo.uri_parser import parse_uri

import wire

SOURCE_DIR = Path(os.environ.get("REMOLD_SOURCE_DIR") or Path(__file__).resolve().parents[3])
REMOLD_BINARY = Path(os.environ.get("REMOLD_BINARY") or SOURCE_DIR / "build" / "remold")
BACKEND_URI_ENV = os.environ.get("REMOLD_TEST_BACKEND_URI")
BACKEND_KIND_ENV = os.environ.get("REMOLD_TEST_BACKEND", "stand-in")
if BACKEND_KIND_ENV not in ("stand-in", "documentdb"):
    raise RuntimeError(f"REMOLD_TEST_BACKEND={BACKEND_KIND_ENV!r}: expected stand-in or documentdb")
NO_PROXY = os.environ.get("REMOLD_TEST_NO_PROXY") == "1"
LOG_LEVEL = os.environ.get("REMOLD_TEST_LOG_LEVEL")
POOL_SIZE = os.environ.get("REMOLD_TEST_POOL_SIZE")

# libmongoc (which remold links) initialises itself before main() and, unless
# this is set, creates /dev/shm/mongoc-<pid>. A file of that name left by any
# killed libmongoc program makes it print a warning on stderr before remold
# starts, which tests reading remold's stderr would take for remold's own.
# remold removes its own file at start: test_sigterm checks that without it.
os.environ.setdefault("MONGOC_DISABLE_SHM", "1")

BACKEND_START_TIMEOUT = 60.0
REMOLD_START_TIMEOUT = 15.0
REMOLD_STOP_TIMEOUT = 20.0

_REMOLD_LINE = re.compile(r"^remold listening on (\S+):(\d+)$")
_BACKEND_LINE = re.compile(r"^listening (\S+):(\d+)$")


# --------------------------------------------------------------------------
# Process plumbing.


def read_port_line(proc: subprocess.Popen, pattern: re.Pattern, timeout: float,
                   what: str) -> tuple[str, int]:
    """Read stdout of ``proc`` until a line matches ``pattern``; (host, port)."""
    deadline = time.monotonic() + timeout
    fd = proc.stdout.fileno()
    buf = b""
    while True:
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            match = pattern.match(line.decode(errors="replace").strip())
            if match:
                address = match.group(1), int(match.group(2))
                # A new server on a port an earlier one with a login had:
                # its caller says again whether it needs one.
                wire.forget_authentication(address)
                return address
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            proc.kill()
            raise RuntimeError(f"{what} printed no port line within {timeout}s (stdout so far: {buf!r})")
        ready, _, _ = select.select([fd], [], [], min(remaining, 0.5))
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                rc = proc.wait(5)
                raise RuntimeError(f"{what} exited with {rc} before printing its port line "
                                   f"(stdout: {buf!r})")
            buf += chunk


def drain_in_background(stream, sink: list) -> threading.Thread:
    """Keep reading a pipe so the child can never block on a full pipe."""
    def run():
        for line in iter(stream.readline, b""):
            sink.append(line)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@dataclass(frozen=True)
class Credentials:
    """A user of the backend, as a connection string names it."""
    user: str
    password: str
    source: str = "admin"
    mechanism: str = "SCRAM-SHA-256"

    def userinfo(self) -> str:
        return f"{quote(self.user, safe='')}:{quote(self.password, safe='')}@"

    def options(self) -> dict[str, str]:
        return {"authSource": self.source, "authMechanism": self.mechanism}

    def remold_env(self) -> dict[str, str]:
        """remold's own identity on the backend, as an operator gives it."""
        return {"REMOLD_BACKEND_USERNAME": self.user, "REMOLD_BACKEND_PASSWORD": self.password,
                "REMOLD_BACKEND_AUTH_SOURCE": self.source, "REMOLD_BACKEND_AUTH_MECHANISM": self.mechanism}


_AUTH_OPTIONS = {"authsource", "authmechanism", "authmechanismproperties"}


def split_credentials(uri: str) -> tuple[str, Optional[Credentials]]:
    """(the URI without user, password and auth options, the credentials it named)."""
    parts = urlsplit(uri)
    if "@" not in parts.netloc:
        return uri, None
    userinfo, hosts = parts.netloc.rsplit("@", 1)
    user, _, password = userinfo.partition(":")
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    options = {k.lower(): v for k, v in query}
    credentials = Credentials(unquote(user), unquote(password), options.get("authsource", "admin"),
                              options.get("authmechanism", "SCRAM-SHA-256"))
    kept = urlencode([(k, v) for k, v in query if k.lower() not in _AUTH_OPTIONS])
    return urlunsplit((parts.scheme, hosts, parts.path or "/", kept, "")), credentials


def with_credentials(uri: str, credentials: Optional[Credentials]) -> str:
    """``uri`` with ``credentials`` in it (``uri`` as it is for None)."""
    if credentials is None:
        return uri
    parts = urlsplit(uri)
    query = parse_qsl(parts.query, keep_blank_values=True) + list(credentials.options().items())
    return urlunsplit((parts.scheme, credentials.userinfo() + parts.netloc, parts.path or "/",
                       urlencode(query), ""))


@dataclass
class Backend:
    """The session's backend. ``uri`` is what remold is given (no
    credentials: remold's own identity comes from its environment);
    ``direct_uri`` is what a client connecting straight to it uses."""
    uri: str
    host: str
    port: int
    proc: Optional[subprocess.Popen] = None
    kind: str = "stand-in"  # "stand-in", "documentdb", or "external" (REMOLD_TEST_BACKEND_URI)
    credentials: Optional[Credentials] = None

    @property
    def direct_uri(self) -> str:
        return with_credentials(self.uri, self.credentials)

    def alive(self) -> bool:
        return self.proc is None or self.proc.poll() is None


# The credentials of the session's backend, when it requires them: remold
# processes started by the suite in front of a server that requires them
# (the session's backend, or a chain that leads to it: another remold, a
# TLS terminator) get them as their own identity, and clients of those
# remolds authenticate with them. Tests that start servers of their own (a
# replica set of stand-ins, a backend they kill) get none.
SESSION_CREDENTIALS: Optional[Credentials] = None
_SESSION = object()  # start_remold's default: the session's credentials, where needed
_REQUIRES_AUTH: dict[str, bool] = {}


def _session_credentials_for(backend_uri: str) -> Optional[Credentials]:
    """The session's credentials when the server at ``backend_uri`` refuses
    an unauthenticated command (asked once per URI)."""
    if SESSION_CREDENTIALS is None:
        return None
    if backend_uri not in _REQUIRES_AUTH:
        needs = False
        try:
            with pymongo.MongoClient(backend_uri, serverSelectionTimeoutMS=3000, connectTimeoutMS=3000) as probe:
                probe.admin.command("listDatabases", nameOnly=True)
        except pymongo.errors.OperationFailure as e:
            needs = e.code in (13, 18)  # Unauthorized, AuthenticationFailed
        except Exception:  # unreachable, or a URI the test means to be wrong
            needs = False
        _REQUIRES_AUTH[backend_uri] = needs
    return SESSION_CREDENTIALS if _REQUIRES_AUTH[backend_uri] else None


def remold_environment(credentials: Optional[Credentials]) -> dict[str, str]:
    """The environment of a remold process with ``credentials`` as its identity."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REMOLD_BACKEND_")}
    if credentials is not None:
        env.update(credentials.remold_env())
    return env


@dataclass
class Remold:
    """One running remold process."""
    proc: subprocess.Popen
    host: str
    port: int
    backend_uri: str
    stderr_path: Path
    stdout_lines: list = field(default_factory=list)
    credentials: Optional[Credentials] = None  # what its clients authenticate as

    @property
    def uri(self) -> str:
        # No directConnection: pymongo must discover the topology from the handshake.
        return with_credentials(f"mongodb://{self.host}:{self.port}/", self.credentials)

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def forget_stderr(self) -> None:
        """Deletes its stderr file, unless REMOLD_TEST_LOG_LEVEL asks to keep it."""
        if not LOG_LEVEL:
            self.stderr_path.unlink(missing_ok=True)

    def terminate(self, timeout: float = REMOLD_STOP_TIMEOUT) -> int:
        """SIGTERM and wait; returns the exit status (negative for a signal)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"remold did not exit within {timeout}s of SIGTERM; "
                                 f"stderr:\n{self.stderr()}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def require_binary() -> Path:
    if REMOLD_BINARY.is_file() and os.access(REMOLD_BINARY, os.X_OK):
        return REMOLD_BINARY
    if NO_PROXY:
        pytest.skip(f"REMOLD_TEST_NO_PROXY=1 and no remold binary at {REMOLD_BINARY}")
    pytest.fail(f"remold binary not found at {REMOLD_BINARY} (build it, or set REMOLD_BINARY)")


def start_remold(backend_uri: str, *, listen: str = "127.0.0.1:0",
                 extra_args: tuple[str, ...] = (), args: Optional[list[str]] = None,
                 timeout: float = REMOLD_START_TIMEOUT, credentials=_SESSION) -> Remold:
    """Start a remold of our own; the caller owns it (terminate/kill it).

    ``args`` replaces the default ``serve --listen .. --backend .. --log-level warn``.
    ``credentials``: remold's identity on its backend and its clients' (by
    default the session backend's; None: none).
    """
    binary = require_binary()
    if credentials is _SESSION:
        credentials = _session_credentials_for(backend_uri)
    if args is None:
        args = ["serve", "--listen", listen, "--backend", backend_uri, "--log-level", LOG_LEVEL or "warn",
                *extra_args]
    fd, stderr_name = tempfile.mkstemp(prefix="remold-stderr-", suffix=".log")
    with os.fdopen(fd, "wb") as stderr_file:
        proc = subprocess.Popen([str(binary), *args], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=stderr_file,
                                env=remold_environment(credentials))
    stderr_path = Path(stderr_name)
    try:
        host, port = read_port_line(proc, _REMOLD_LINE, timeout, "remold")
    except RuntimeError as exc:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"{exc}\nremold stderr:\n{stderr_path.read_text(errors='replace')}")
    remold = Remold(proc, host, port, backend_uri, stderr_path, credentials=credentials)
    drain_in_background(proc.stdout, remold.stdout_lines)
    if credentials is not None:
        wire.require_authentication((host, port), credentials.user, credentials.password, credentials.source)
    return remold


# --------------------------------------------------------------------------
# Session fixtures.


def _use_credentials(backend: Backend) -> None:
    """Makes ``backend``'s credentials the session's (see SESSION_CREDENTIALS)."""
    global SESSION_CREDENTIALS
    SESSION_CREDENTIALS = backend.credentials
    if backend.credentials is not None:
        os.environ.update(backend.credentials.remold_env())  # every remold the suite runs
        c = backend.credentials
        wire.require_authentication((backend.host, backend.port), c.user, c.password, c.source)


def _start_documentdb(unpatched: bool = False) -> tuple[Backend, Callable[[], None]]:
    """``scripts/install-documentdb.sh serve``: a fresh DocumentDB on free
    ports (``unpatched``: with upstream's gateway), and what stops it."""
    script = SOURCE_DIR / "scripts" / "install-documentdb.sh"
    log = tempfile.NamedTemporaryFile(prefix="remold-documentdb-", suffix=".log", delete=False)
    proc = subprocess.Popen(["bash", str(script), "serve", *(["--unpatched"] if unpatched else [])],
                            stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=log)
    lines: dict[str, str] = {}
    deadline = time.monotonic() + BACKEND_START_TIMEOUT
    fd, buf = proc.stdout.fileno(), b""
    while "logs" not in lines:  # the last line the script prints
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            key, _, value = line.decode().strip().partition(" ")
            lines[key] = value
        if "logs" in lines:
            break
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(fd, 4096) if ready else b""
        if not chunk:
            proc.kill()
            proc.wait()
            raise RuntimeError(f"DocumentDB did not start ({script} serve): "
                               f"{Path(log.name).read_text(errors='replace')[-2000:]}")
        buf += chunk
    drain_in_background(proc.stdout, [])
    uri, credentials = split_credentials(lines["uri"])
    host, port = lines["listening"].rsplit(":", 1)
    backend = Backend(uri, host, int(port), proc, "documentdb", credentials)

    def stop() -> None:
        proc.stdin.close()  # the script stops the server and deletes it at stdin EOF
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        os.unlink(log.name)

    return backend, stop


@pytest.fixture(scope="session")
def backend() -> Backend:
    if BACKEND_URI_ENV:
        uri, credentials = split_credentials(BACKEND_URI_ENV)
        host, port = parse_uri(BACKEND_URI_ENV)["nodelist"][0]
        external = Backend(uri, host, port, kind="external", credentials=credentials)
        _use_credentials(external)
        yield external
        return
    if BACKEND_KIND_ENV == "documentdb":
        documentdb, stop = _start_documentdb()
        _use_credentials(documentdb)
        yield documentdb
        stop()
        return
    cmd = ["java", "-cp", "tests/backend/lib/*:tests/backend/classes", "Launcher", "127.0.0.1", "0"]
    proc = subprocess.Popen(cmd, cwd=SOURCE_DIR, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        host, port = read_port_line(proc, _BACKEND_LINE, BACKEND_START_TIMEOUT, "backend")
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    drain_in_background(proc.stdout, [])
    yield Backend(f"mongodb://{host}:{port}/", host, port, proc)
    proc.stdin.close()  # the launcher exits at stdin EOF
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@dataclass
class Target:
    """What the clients talk to: the shared remold, or the backend under NO_PROXY."""
    uri: str
    host: str
    port: int
    remold: Optional[Remold]
    backend: Backend

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    @property
    def is_proxy(self) -> bool:
        return self.remold is not None


@pytest.fixture(scope="session")
def target(backend: Backend) -> Target:
    if NO_PROXY:
        yield Target(backend.direct_uri, backend.host, backend.port, None, backend)
        return
    # Client compression on: the compression tests negotiate with remold
    # itself (its default, off, is tested in test_backend_compression.py).
    pooled = ("--backend-pool-size", POOL_SIZE) if POOL_SIZE else ()
    remold = start_remold(backend.uri, extra_args=("--client-compression", "on", *pooled))
    yield Target(remold.uri, remold.host, remold.port, remold, backend)
    rc = remold.terminate()
    assert rc == 0, f"shared remold exited {rc} after SIGTERM; stderr:\n{remold.stderr()}"
    remold.forget_stderr()


@pytest.fixture(scope="session")
def client(target: Target) -> pymongo.MongoClient:
    c = pymongo.MongoClient(target.uri, serverSelectionTimeoutMS=10_000)
    yield c
    c.close()


@pytest.fixture(scope="session")
def direct_client(backend: Backend) -> pymongo.MongoClient:
    """A client connected straight to the backend, bypassing remold."""
    c = pymongo.MongoClient(backend.direct_uri, serverSelectionTimeoutMS=10_000)
    yield c
    c.close()


# --------------------------------------------------------------------------
# Per-test fixtures.


@pytest.fixture
def db_name(request) -> str:
    base = re.sub(r"[^A-Za-z0-9_]", "_", request.node.name)[:32]
    return f"e2e_py_{base}_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def db(client, direct_client, db_name):
    """A fresh, uniquely-named database seen through remold; dropped afterwards."""
    yield client[db_name]
    direct_client.drop_database(db_name)


@pytest.fixture
def make_client(target: Target) -> Callable[..., pymongo.MongoClient]:
    """Factory for extra MongoClients to the target; all closed after the test."""
    clients = []

    def make(uri: Optional[str] = None, **kwargs) -> pymongo.MongoClient:
        kwargs.setdefault("serverSelectionTimeoutMS", 10_000)
        c = pymongo.MongoClient(uri or target.uri, **kwargs)
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()


@pytest.fixture
def private_remold(backend: Backend) -> Callable[..., Remold]:
    """Factory for remold instances a test may signal or kill.

    Anything still running at the end of the test is killed (so a test that
    expects a clean exit must terminate and check it itself).
    """
    started: list[Remold] = []

    def start(**kwargs) -> Remold:
        remold = start_remold(kwargs.pop("backend_uri", backend.uri), **kwargs)
        started.append(remold)
        return remold

    yield start
    for remold in started:
        remold.kill()
        remold.forget_stderr()


@pytest.fixture
def proxy_only(target: Target) -> None:
    if not target.is_proxy:
        pytest.skip("asserts remold's own behaviour; REMOLD_TEST_NO_PROXY=1")


# --------------------------------------------------------------------------
# Authentication backend: FerretDB with SCRAM enforced (--test-enable-new-auth).

FERRETDB_BINARY = SOURCE_DIR / "tests" / "backend" / "ferretdb" / "bin" / "ferretdb"
_FERRETDB_LINE = re.compile(r".*Listening on TCP (\S+):(\d+)\.\.\.")


@dataclass
class AuthBackend:
    """A FerretDB that enforces SCRAM; ``admin_*`` is its first user (in admin)."""
    uri: str
    host: str
    port: int
    proc: subprocess.Popen
    admin_user: str
    admin_password: str
    log_lines: list = field(default_factory=list)

    def admin_client(self) -> pymongo.MongoClient:
        """A client authenticated as the first user, straight to FerretDB."""
        return pymongo.MongoClient(self.uri, username=self.admin_user, password=self.admin_password,
                                   authSource="admin", serverSelectionTimeoutMS=10_000)

    def create_user(self, name: str, password: str,
                    mechanisms: tuple[str, ...] = ("SCRAM-SHA-256",)) -> None:
        # FerretDB v1.24 has no roles: createUser takes only an empty list.
        with self.admin_client() as admin:
            admin.admin.command("createUser", name, pwd=password, roles=[],
                                mechanisms=list(mechanisms))

    def log(self) -> str:
        return "".join(line.decode(errors="replace") for line in list(self.log_lines))

    def alive(self) -> bool:
        return self.proc.poll() is None


@pytest.fixture(scope="session")
def auth_backend() -> AuthBackend:
    if BACKEND_URI_ENV:
        pytest.skip("REMOLD_TEST_BACKEND_URI is set: the authentication tests need a backend whose "
                    "users and auth settings the harness controls (they start FerretDB with SCRAM "
                    "enforced when it is unset)")
    if not (FERRETDB_BINARY.is_file() and os.access(FERRETDB_BINARY, os.X_OK)):
        pytest.fail(f"FerretDB test backend not found at {FERRETDB_BINARY}: "
                    "run scripts/install-deps.sh (or make -C tests/backend/ferretdb)")
    state_dir = Path(tempfile.mkdtemp(prefix="remold-ferretdb-"))
    (state_dir / "data").mkdir()
    admin_user, admin_password = "remold_admin", "adm-" + secrets.token_hex(12)
    cmd = [str(FERRETDB_BINARY), "--handler=sqlite", f"--sqlite-url=file:{state_dir}/data/",
           f"--state-dir={state_dir}", "--listen-addr=127.0.0.1:0", "--debug-addr=-",
           "--telemetry=disable", "--log-level=debug", "--test-enable-new-auth",
           "--setup-database=admin", f"--setup-username={admin_user}",
           f"--setup-password={admin_password}"]
    # FerretDB logs to stderr; its "Listening on TCP HOST:PORT..." line gives the port.
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    try:
        host, port = read_port_line(proc, _FERRETDB_LINE, BACKEND_START_TIMEOUT, "FerretDB")
    except BaseException:
        proc.kill()
        proc.wait()
        shutil.rmtree(state_dir, ignore_errors=True)
        raise
    backend = AuthBackend(f"mongodb://{host}:{port}/", host, port, proc, admin_user, admin_password)
    drain_in_background(proc.stdout, backend.log_lines)
    yield backend
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    shutil.rmtree(state_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def auth_target(auth_backend: AuthBackend) -> Target:
    """What authentication tests talk to: a remold (debug log) in front of FerretDB."""
    backend = Backend(auth_backend.uri, auth_backend.host, auth_backend.port, auth_backend.proc)
    if NO_PROXY:
        yield Target(backend.uri, backend.host, backend.port, None, backend)
        return
    remold = start_remold(auth_backend.uri, args=["serve", "--listen", "127.0.0.1:0", "--backend",
                                                  auth_backend.uri, "--log-level", "debug"],
                          credentials=None)
    yield Target(remold.uri, remold.host, remold.port, remold, backend)
    rc = remold.terminate()
    assert rc == 0, f"auth remold exited {rc} after SIGTERM; stderr:\n{remold.stderr()}"
    remold.forget_stderr()
