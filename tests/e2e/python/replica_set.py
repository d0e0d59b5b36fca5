"""A stand-in replica set for the end-to-end tests (there is no real one here).

``ShimReplicaSet`` starts ``size`` mongo-java-server stand-ins (our Java
``Launcher``) and, in front of each, a threaded Python shim. The shim answers
``hello`` / ``isMaster`` itself as a member of replica set ``set_name``
(primary or secondary, as the test says: ``step_up``, ``step_down``), with
``topologyVersion`` so drivers use awaitable (streaming) hellos, and passes
everything else byte for byte to its own stand-in. A non-primary shim refuses
writes (NotWritablePrimary, 10107) and reads without secondaryOk
(NotPrimaryNoSecondaryOk, 13435), as mongod does. Tests can also kill a member
(``stop``/``start``), slow it (``delay``), tag it and make it stale
(``set_tags``, ``set_lag``), and see what reached each stand-in (``counts``).
With ``mongos=True`` the members answer as a sharded cluster's routers
(``msg: "isdbgrid"``) instead.

Limits:

- No replication: each member is its own stand-in with its own data. Seed a
  secondary through ``member.direct_client()``; after ``step_up`` the new
  primary lacks the old primary's writes.
- Nothing happens by itself: no elections, and a stopped primary stays the
  primary the others name (as in a partition) until the test says otherwise.
- Only primaries and secondaries; ``setVersion`` stays 1; no ``$clusterTime``,
  compression (OP_COMPRESSED closes the connection), TLS or auth.
- The stand-in's limits pass through: it reports maxWireVersion 8 (4.2), and
  it closes the connection on an OP_MSG with moreToCome (w:0 writes) or an
  exhaust getMore.
- Hellos are never exhausted (no moreToCome): drivers then send each next
  awaitable hello themselves.
- Clients must use the ``uri()`` addresses (127.0.0.1:PORT): SDAM drops a
  member whose ``me`` differs from the address it dialled.
"""

from __future__ import annotations

import atexit
import collections
import datetime
import itertools
import socket
import struct
import subprocess
import threading
import time
from typing import Optional

import bson
import pymongo
from bson import Int64, ObjectId, Timestamp

from conftest import (BACKEND_START_TIMEOUT, SOURCE_DIR, _BACKEND_LINE, drain_in_background,
                      read_port_line)
import wire
from wire import MSG_CHECKSUM_PRESENT, MSG_MORE_TO_COME, OP_COMPRESSED, OP_MSG, OP_QUERY

OP_REPLY = 1
QUERY_SECONDARY_OK = 1 << 2
REPLY_AWAIT_CAPABLE = 1 << 3

HEADER = struct.Struct("<iiii")
MAX_MESSAGE_SIZE = 48_000_000

HELLO_NAMES = frozenset({"hello", "isMaster", "ismaster"})
WRITE_COMMANDS = frozenset({
    "insert", "update", "delete", "findAndModify", "findandmodify", "create", "drop",
    "dropDatabase", "createIndexes", "dropIndexes", "deleteIndexes", "renameCollection",
    "collMod", "createUser", "dropUser", "commitTransaction", "abortTransaction",
})
# Commands a non-primary member runs without secondaryOk (mongod's
# AllowedOnSecondary::kAlways, the ones a driver or remold may plausibly send).
SECONDARY_ALWAYS = frozenset({
    "hello", "isMaster", "ismaster", "ping", "buildInfo", "buildinfo", "saslStart",
    "saslContinue", "authenticate", "getnonce", "endSessions", "getMore", "killCursors",
    "getLastError", "whatsmyuri", "connectionStatus", "serverStatus", "listCommands",
    "getParameter", "hostInfo", "getCmdLineOpts", "logout", "startSession",
    "refreshSessions",
})
HELLO_KEEP = ("maxBsonObjectSize", "maxMessageSizeBytes", "maxWriteBatchSize", "minWireVersion",
              "maxWireVersion", "logicalSessionTimeoutMinutes")

NOT_PRIMARY = {"ok": 0.0, "errmsg": "not primary", "code": 10107,
               "codeName": "NotWritablePrimary"}
NOT_PRIMARY_NO_SECONDARY_OK = {"ok": 0.0, "errmsg": "not primary and secondaryOk=false",
                               "code": 13435, "codeName": "NotPrimaryNoSecondaryOk"}

STOP_TIMEOUT = 15.0

_reply_ids = itertools.count(1)


class _Closed(Exception):
    """The peer closed the connection (or it was shut down under us)."""


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        try:
            k = sock.recv_into(view[got:])
        except OSError as exc:
            raise _Closed(str(exc)) from exc
        if not k:
            raise _Closed("EOF")
        got += k
    return bytes(buf)


def _recv_message(sock: socket.socket) -> tuple[tuple[int, int, int, int], bytes]:
    """One whole message: (header tuple, raw bytes including the header)."""
    raw_header = _recv_exact(sock, HEADER.size)
    header = HEADER.unpack(raw_header)
    if not HEADER.size <= header[0] <= MAX_MESSAGE_SIZE:
        raise _Closed(f"invalid messageLength {header[0]}")
    return header, raw_header + _recv_exact(sock, header[0] - HEADER.size)


def _op_msg_reply(doc: dict, response_to: int) -> bytes:
    body = struct.pack("<I", 0) + b"\x00" + bson.encode(doc)
    return HEADER.pack(HEADER.size + len(body), next(_reply_ids), response_to, OP_MSG) + body


def _op_reply(doc: dict, response_to: int, flags: int = 0) -> bytes:
    body = struct.pack("<iqii", flags, 0, 0, 1) + bson.encode(doc)
    return HEADER.pack(HEADER.size + len(body), next(_reply_ids), response_to, OP_REPLY) + body


def _first_key(doc: dict) -> Optional[str]:
    return next(iter(doc), None)


class _Request:
    """What the shim needs to know about one client message."""

    __slots__ = ("opcode", "request_id", "raw", "flags", "name", "doc", "more_to_come",
                 "secondary_ok")

    def __init__(self, header, raw: bytes):
        _length, self.request_id, _response_to, self.opcode = header
        self.raw = raw
        self.flags = 0
        self.name: Optional[str] = None   # command name, when there is one
        self.doc: Optional[dict] = None   # the command document
        self.more_to_come = False
        self.secondary_ok = False
        try:
            if self.opcode == OP_MSG:
                self._parse_op_msg()
            elif self.opcode == OP_QUERY:
                self._parse_op_query()
        except Exception:  # malformed: passed through as is, the stand-in answers it
            self.name, self.doc = None, None

    def _parse_op_msg(self) -> None:
        (self.flags,) = struct.unpack_from("<I", self.raw, HEADER.size)
        self.more_to_come = bool(self.flags & MSG_MORE_TO_COME)
        end = len(self.raw) - (4 if self.flags & MSG_CHECKSUM_PRESENT else 0)
        pos = HEADER.size + 4
        while pos < end:
            kind = self.raw[pos]
            pos += 1
            (size,) = struct.unpack_from("<i", self.raw, pos)
            if kind == 0:
                self.doc = bson.decode(self.raw[pos:pos + size])
                break
            pos += size
        if self.doc is None:
            return
        self.name = _first_key(self.doc)
        pref = self.doc.get("$readPreference")
        mode = pref.get("mode") if isinstance(pref, dict) else None
        self.secondary_ok = mode not in (None, "primary")

    def _parse_op_query(self) -> None:
        (self.flags,) = struct.unpack_from("<i", self.raw, HEADER.size)
        start = HEADER.size + 4
        nul = self.raw.index(b"\x00", start)
        namespace = self.raw[start:nul].decode()
        pos = nul + 1 + 8  # numberToSkip, numberToReturn
        (size,) = struct.unpack_from("<i", self.raw, pos)
        query = bson.decode(self.raw[pos:pos + size])
        pref = None
        if "$query" in query:
            pref = query.get("$readPreference")
            query = query["$query"]
        mode = pref.get("mode") if isinstance(pref, dict) else None
        self.secondary_ok = bool(self.flags & QUERY_SECONDARY_OK) or mode not in (None, "primary")
        if namespace.endswith(".$cmd"):
            self.doc = query
            self.name = _first_key(query)
        else:
            self.name = "OP_QUERY"  # a legacy find: a read

    @property
    def count_name(self) -> str:
        if self.name is not None:
            return self.name
        return f"opcode:{self.opcode}"

    def is_hello(self) -> bool:
        return self.doc is not None and self.name in HELLO_NAMES

    def is_write(self) -> bool:
        if self.doc is None:
            return False
        if self.name in WRITE_COMMANDS:
            return True
        if self.name == "aggregate":
            pipeline = self.doc.get("pipeline")
            if isinstance(pipeline, list):
                return any(isinstance(stage, dict) and _first_key(stage) in ("$out", "$merge")
                           for stage in pipeline)
        return False

    def needs_primary_for_read(self) -> bool:
        return (self.name is not None and self.name not in SECONDARY_ALWAYS
                and not self.secondary_ok)


class ShimMember:
    """One member: a shim on ``address`` in front of a stand-in on ``backend_port``."""

    def __init__(self, rs: "ShimReplicaSet", index: int, proc: subprocess.Popen,
                 backend_host: str, backend_port: int):
        self._rs = rs
        self.index = index
        self._proc = proc
        self.backend_host = backend_host
        self.backend_port = backend_port
        # State below is guarded by rs._cond.
        self.role = "secondary"
        self.tags: dict = {}
        self.lag = 0.0
        self.delay_seconds = 0.0
        self.process_id = ObjectId()
        self.counter = 0
        self.running = False
        self._awaiting = 0
        self.stderr_lines: list = []  # the stand-in's stderr (bytes lines)
        self._stop_event = threading.Event()
        self._listener: Optional[socket.socket] = None
        self._sockets: set = set()
        self._connection_ids = itertools.count(1)
        self._counts: collections.Counter = collections.Counter()
        self._counts_lock = threading.Lock()
        self._direct_client: Optional[pymongo.MongoClient] = None
        # Bind once on a free port; start()/stop() keep reusing it.
        self.host = "127.0.0.1"
        self._listener = self._bind(0)
        self.port = self._listener.getsockname()[1]
        self.address = f"{self.host}:{self.port}"
        # A member asks for no login: a remold that had this port before
        # (ports are reused) may have left one registered.
        wire.forget_authentication((self.host, self.port))
        self._stand_in_hello: dict = {}

    def __repr__(self) -> str:
        return f"<ShimMember {self.index} {self.address} {self.role} backend={self.backend_port}>"

    # ---------------------------------------------------------------- public

    @property
    def counts(self) -> collections.Counter:
        """A snapshot: command name -> requests passed to the stand-in.

        Hellos answered by the shim count under ``hello(local)`` (those of them
        that were awaitable, i.e. carried topologyVersion and maxAwaitTimeMS,
        under ``hello(awaitable)`` too), refused commands under
        ``refused:<name>``.
        """
        with self._counts_lock:
            return collections.Counter(self._counts)

    @property
    def awaiting(self) -> int:
        """How many awaitable hellos are parked on this shim right now."""
        with self._rs._cond:
            return self._awaiting

    def reset_counts(self) -> None:
        with self._counts_lock:
            self._counts.clear()

    def direct_client(self) -> pymongo.MongoClient:
        """A client straight to this member's stand-in (bypassing the shim)."""
        with self._counts_lock:
            if self._direct_client is None:
                self._direct_client = pymongo.MongoClient(
                    self.backend_host, self.backend_port, directConnection=True,
                    serverSelectionTimeoutMS=10_000)
            return self._direct_client

    @property
    def address_tuple(self) -> tuple[str, int]:
        return self.host, self.port

    # -------------------------------------------------------------- plumbing

    def _bind(self, port: int) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(128)
        return sock

    def _count(self, name: str) -> None:
        with self._counts_lock:
            self._counts[name] += 1

    def _start(self) -> None:
        """Caller holds rs._cond."""
        if self.running:
            return
        if self._listener is None:
            deadline = time.monotonic() + 5
            while True:
                try:
                    self._listener = self._bind(self.port)
                    break
                except OSError:  # EADDRINUSE: a client socket took the port meanwhile
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
        self._stop_event = threading.Event()
        self.running = True
        threading.Thread(target=self._accept_loop, args=(self._listener, self._stop_event),
                         name=f"shim-accept-{self.port}", daemon=True).start()

    def _stop(self) -> None:
        """Caller holds rs._cond."""
        if not self.running:
            return
        self.running = False
        self._stop_event.set()
        listener, self._listener = self._listener, None
        if listener is not None:
            try:
                listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
            except OSError:
                pass
            listener.close()
        for sock in list(self._sockets):
            try:
                sock.shutdown(socket.SHUT_RDWR)  # its thread sees EOF/error and closes it
            except OSError:
                pass
        self._sockets.clear()
        self._rs._cond.notify_all()  # wake awaitable hellos

    def _accept_loop(self, listener: socket.socket, stop_event: threading.Event) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._rs._cond:
                if stop_event.is_set():
                    conn.close()
                    return
                self._sockets.add(conn)
                connection_id = next(self._connection_ids)
            threading.Thread(target=self._serve, args=(conn, stop_event, connection_id),
                             name=f"shim-conn-{self.port}-{connection_id}", daemon=True).start()

    def _track(self, sock: socket.socket, stop_event: threading.Event) -> bool:
        with self._rs._cond:
            if stop_event.is_set():
                return False
            self._sockets.add(sock)
            return True

    def _untrack(self, *socks) -> None:
        with self._rs._cond:
            for sock in socks:
                if sock is not None:
                    self._sockets.discard(sock)
        for sock in socks:
            if sock is not None:
                try:
                    sock.close()
                except OSError:
                    pass

    def _serve(self, conn: socket.socket, stop_event: threading.Event, connection_id: int) -> None:
        backend: Optional[socket.socket] = None
        try:
            while not stop_event.is_set():
                header, raw = _recv_message(conn)
                if header[3] == OP_COMPRESSED:
                    return  # never negotiated
                request = _Request(header, raw)
                if request.is_hello():
                    self._count("hello(local)")
                    reply = self._hello_reply(request, connection_id, stop_event)
                    if reply is None:
                        return
                    if reply:
                        self._send(conn, reply, stop_event)
                    continue
                refusal = self._refusal(request)
                if refusal is not None:
                    self._count(f"refused:{request.count_name}")
                    if not request.more_to_come:
                        self._send(conn, self._error_reply(request, refusal), stop_event)
                    continue
                self._count(request.count_name)
                if backend is None:
                    backend = socket.create_connection((self.backend_host, self.backend_port),
                                                       timeout=10)
                    backend.settimeout(None)
                    backend.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    if not self._track(backend, stop_event):
                        return
                backend.sendall(raw)
                if request.more_to_come:
                    continue
                while True:
                    reply_header, reply = _recv_message(backend)
                    if reply_header[2] != request.request_id:
                        continue  # a stray reply (e.g. to an earlier moreToCome request)
                    self._send(conn, reply, stop_event)
                    more = (reply_header[3] == OP_MSG
                            and struct.unpack_from("<I", reply, HEADER.size)[0] & MSG_MORE_TO_COME)
                    if not more:
                        break
                    request.request_id = reply_header[1]  # the stream's next reply answers this
        except (_Closed, OSError):
            pass
        finally:
            self._untrack(conn, backend)

    def _send(self, conn: socket.socket, data: bytes, stop_event: threading.Event) -> None:
        with self._rs._cond:
            delay = self.delay_seconds
        if delay > 0 and stop_event.wait(delay):
            raise _Closed("member stopped")
        if stop_event.is_set():
            raise _Closed("member stopped")
        conn.sendall(data)

    def _refusal(self, request: _Request) -> Optional[dict]:
        with self._rs._cond:
            primary = self.role in ("primary", "mongos")
        if primary:
            return None
        if request.is_write():
            return NOT_PRIMARY
        if request.needs_primary_for_read():
            return NOT_PRIMARY_NO_SECONDARY_OK
        return None

    def _error_reply(self, request: _Request, doc: dict) -> bytes:
        # Like mongod 4.4+, the error carries the member's topologyVersion: a
        # driver that already knows this state treats the error as stale
        # (SDAM) instead of marking the member Unknown and waiting out its
        # in-flight awaitable hello.
        with self._rs._cond:
            doc = {**doc, "topologyVersion": {"processId": self.process_id,
                                              "counter": Int64(self.counter)}}
        if request.opcode == OP_QUERY:
            return _op_reply(doc, request.request_id)
        return _op_msg_reply(doc, request.request_id)

    def _hello_reply(self, request: _Request, connection_id: int,
                     stop_event: threading.Event) -> Optional[bytes]:
        doc = request.doc
        rs = self._rs
        with rs._cond:
            tv = doc.get("topologyVersion")
            max_await = doc.get("maxAwaitTimeMS")
            if isinstance(tv, dict) and max_await is not None:
                self._count("hello(awaitable)")
                if tv.get("processId") == self.process_id and tv.get("counter") == self.counter:
                    deadline = time.monotonic() + max(0, int(max_await)) / 1000.0
                    start_counter = self.counter
                    self._awaiting += 1
                    try:
                        while self.counter == start_counter and not stop_event.is_set():
                            remaining = deadline - time.monotonic()
                            if remaining <= 0:
                                break
                            rs._cond.wait(remaining)
                    finally:
                        self._awaiting -= 1
            if stop_event.is_set():
                return None
            reply = self._hello_doc_locked(request, connection_id)
        if request.more_to_come:
            return b""
        if request.opcode == OP_QUERY:
            return _op_reply(reply, request.request_id, REPLY_AWAIT_CAPABLE)
        return _op_msg_reply(reply, request.request_id)

    def _hello_doc_locked(self, request: _Request, connection_id: int) -> dict:
        rs = self._rs
        now = datetime.datetime.now(datetime.timezone.utc)
        reply: dict = {}
        if request.name == "hello":
            reply["isWritablePrimary"] = self.role in ("primary", "mongos")
        else:
            reply["ismaster"] = self.role in ("primary", "mongos")
        if self.role == "mongos":
            return self._mongos_hello_locked(request, reply, now, connection_id)
        reply["secondary"] = self.role == "secondary"
        reply["setName"] = rs.set_name
        reply["setVersion"] = 1
        reply["hosts"] = [m.address for m in rs.members]
        primary = rs._primary_locked()
        if primary is not None:
            reply["primary"] = primary.address
        reply["me"] = self.address
        if self.role == "primary":
            reply["electionId"] = rs._election_id_locked()
        write_date = now - datetime.timedelta(seconds=self.lag)
        op_time = {"ts": Timestamp(int(write_date.timestamp()), 1), "t": Int64(rs._term)}
        reply["lastWrite"] = {"opTime": op_time, "lastWriteDate": write_date,
                              "majorityOpTime": op_time, "majorityWriteDate": write_date}
        if self.tags:
            reply["tags"] = dict(self.tags)
        reply["readOnly"] = False
        return self._common_hello_locked(request, reply, now, connection_id)


    def _mongos_hello_locked(self, request: _Request, reply: dict, now, connection_id: int) -> dict:
        reply["msg"] = "isdbgrid"
        return self._common_hello_locked(request, reply, now, connection_id)

    def _common_hello_locked(self, request: _Request, reply: dict, now, connection_id: int) -> dict:
        """What every member's hello says: its topologyVersion and the stand-in's limits."""
        reply["topologyVersion"] = {"processId": self.process_id, "counter": Int64(self.counter)}
        for key in HELLO_KEEP:
            if key in self._stand_in_hello:
                reply[key] = self._stand_in_hello[key]
        reply.setdefault("logicalSessionTimeoutMinutes", 30)
        reply["localTime"] = now
        reply["connectionId"] = connection_id
        if "helloOk" in request.doc:
            reply["helloOk"] = True
        reply["ok"] = 1.0
        return reply


class ShimReplicaSet:
    """``size`` stand-ins, each behind a shim acting as a replica-set member.

    Member 0 starts as primary, the others as secondaries. Use as a context
    manager or call ``close()``; ``close()`` is also registered with atexit.
    """

    def __init__(self, size: int = 3, set_name: str = "rs0", mongos: bool = False):
        """``mongos=True``: every member answers hello as a mongos instead
        (``msg: "isdbgrid"``, always writable, no set fields), so the set
        stands for a sharded cluster's routers; step_up/step_down do not apply."""
        if size < 1:
            raise ValueError("a replica set needs at least one member")
        self.set_name = set_name
        self.mongos = mongos
        self.members: list[ShimMember] = []
        self._cond = threading.Condition()
        self._term = 1
        self._closed = False
        self._procs: list[subprocess.Popen] = []
        atexit.register(self.close)
        try:
            self._launch(size)
        except BaseException:
            self.close()
            raise

    def _spawn(self) -> tuple[subprocess.Popen, list]:
        cmd = ["java", "-cp", "tests/backend/lib/*:tests/backend/classes", "Launcher",
               "127.0.0.1", "0"]
        proc = subprocess.Popen(cmd, cwd=SOURCE_DIR, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self._procs.append(proc)
        stderr_lines: list = []
        drain_in_background(proc.stderr, stderr_lines)
        return proc, stderr_lines

    def _ready(self, proc: subprocess.Popen, stderr_lines: list, what: str) -> tuple[str, int]:
        """The stand-in's port, once it printed it and accepts connections."""
        host, port = read_port_line(proc, _BACKEND_LINE, BACKEND_START_TIMEOUT, what)
        drain_in_background(proc.stdout, [])
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection((host, port), timeout=2).close()
                return host, port
            except OSError as exc:
                if proc.poll() is not None or time.monotonic() > deadline:
                    stderr = b"".join(stderr_lines).decode(errors="replace")
                    raise RuntimeError(f"{what} printed port {port} but does not accept "
                                       f"connections ({exc}; exit status {proc.poll()}); "
                                       f"stderr:\n{stderr}") from exc
                time.sleep(0.1)

    def _launch(self, size: int) -> None:
        # Start them all, then wait: the JVMs boot in parallel.
        spawned = [self._spawn() for _ in range(size)]
        for index, (proc, stderr_lines) in enumerate(spawned):
            what = f"stand-in {index}"
            try:
                host, port = self._ready(proc, stderr_lines, what)
            except RuntimeError:
                # One more try for this one (a JVM lost at start, seen once under load).
                _stop_process(proc)
                proc, stderr_lines = self._spawn()
                host, port = self._ready(proc, stderr_lines, what)
            member = ShimMember(self, index, proc, host, port)
            member.stderr_lines = stderr_lines
            self.members.append(member)
        stand_in_hello = self.members[0].direct_client().admin.command("isMaster")
        with self._cond:
            for member in self.members:
                member._stand_in_hello = stand_in_hello
            for member in self.members:
                member.role = "mongos" if self.mongos else "secondary"
            if not self.mongos:
                self.members[0].role = "primary"
            for member in self.members:
                member._start()

    # ---------------------------------------------------------------- queries

    def uri(self, **options) -> str:
        query = "&".join([*([] if self.mongos else [f"replicaSet={self.set_name}"]),
                          *(f"{key}={_uri_value(value)}" for key, value in options.items())])
        return f"mongodb://{','.join(m.address for m in self.members)}/?{query}"

    @property
    def primary(self) -> Optional[ShimMember]:
        """The member that reports itself primary (even if it is stopped)."""
        with self._cond:
            return self._primary_locked()

    @property
    def secondaries(self) -> list[ShimMember]:
        with self._cond:
            return [m for m in self.members if m.role == "secondary"]

    def member(self, address) -> ShimMember:
        """The member at ``address`` ("host:port" or a (host, port) tuple)."""
        if isinstance(address, tuple):
            address = f"{address[0]}:{address[1]}"
        for m in self.members:
            if m.address == address:
                return m
        raise KeyError(address)

    def _primary_locked(self) -> Optional[ShimMember]:
        return next((m for m in self.members if m.role == "primary"), None)

    def _election_id_locked(self) -> ObjectId:
        return ObjectId("7fffffff" + "%016x" % self._term)

    def _bump_locked(self, members=None) -> None:
        for m in (self.members if members is None else members):
            m.counter += 1
        self._cond.notify_all()

    # ---------------------------------------------------------------- control

    def step_up(self, member: ShimMember) -> None:
        """``member`` becomes primary (new, greater electionId), all others secondary."""
        with self._cond:
            self._term += 1
            for m in self.members:
                m.role = "primary" if m is member else "secondary"
            self._bump_locked()

    def step_down(self) -> None:
        """No primary: every member is a secondary."""
        with self._cond:
            for m in self.members:
                m.role = "secondary"
            self._bump_locked()

    def stop(self, member: ShimMember) -> None:
        """The shim closes its listener and every open connection (the stand-in lives on)."""
        with self._cond:
            member._stop()

    def start(self, member: ShimMember) -> None:
        """The shim listens again on the same port."""
        with self._cond:
            member._start()

    def delay(self, member: ShimMember, seconds: float) -> None:
        """Every reply of ``member`` (hellos too) is sent ``seconds`` late; 0 clears."""
        with self._cond:
            member.delay_seconds = max(0.0, float(seconds))

    def set_tags(self, member: ShimMember, tags: dict) -> None:
        """Tags in the member's hello (a reconfig: its topologyVersion is bumped)."""
        with self._cond:
            member.tags = dict(tags or {})
            self._bump_locked([member])

    def set_lag(self, member: ShimMember, seconds: float) -> None:
        """The member's lastWriteDate is ``now - seconds`` (its topologyVersion is bumped
        so awaiting monitors see it at once)."""
        with self._cond:
            member.lag = float(seconds)
            self._bump_locked([member])

    def reset_counts(self) -> None:
        for m in self.members:
            m.reset_counts()

    def reset(self) -> None:
        """Back to the initial state: all running, member 0 primary, no delay/tags/lag.

        (Data in the stand-ins and counts are left alone.)
        """
        with self._cond:
            for m in self.members:
                m.delay_seconds = 0.0
                m.tags = {}
                m.lag = 0.0
                m._start()
            if not self.mongos and (self._primary_locked() is not self.members[0] or any(
                    m.role != "secondary" for m in self.members[1:])):
                self._term += 1
                for m in self.members:
                    m.role = "primary" if m is self.members[0] else "secondary"
            self._bump_locked()

    def close(self) -> None:
        """Stop every shim and stand-in (stdin EOF, then kill after a timeout)."""
        if self._closed:
            return
        self._closed = True
        with self._cond:
            for m in self.members:
                m._stop()
        for m in self.members:
            with m._counts_lock:
                client, m._direct_client = m._direct_client, None
            if client is not None:
                client.close()
        for proc in self._procs:
            if proc.stdin and not proc.stdin.closed:
                try:
                    proc.stdin.close()  # the launcher exits at stdin EOF
                except OSError:
                    pass
        for proc in self._procs:
            _stop_process(proc)
        atexit.unregister(self.close)

    def __enter__(self) -> "ShimReplicaSet":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _stop_process(proc: subprocess.Popen) -> None:
    """Close the launcher's stdin (it exits at EOF), wait, kill on timeout."""
    if proc.stdin and not proc.stdin.closed:
        try:
            proc.stdin.close()
        except OSError:
            pass
    try:
        proc.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _uri_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
