"""Client limits through the real binary: --max-connections,
--max-message-size, --idle-timeout-ms. Past a limit a client gets a MongoDB
error and/or a clean close; the other clients never notice.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
import zlib

import bson
import pymongo
import pytest
from pymongo.errors import PyMongoError, ServerSelectionTimeoutError

import wire
from conftest import NO_PROXY

pytestmark = pytest.mark.skipif(NO_PROXY, reason="remold's own limits; REMOLD_TEST_NO_PROXY=1")

SELECTION_TIMEOUT_MS = 3000


class Worker:
    """A healthy pymongo client looping insert+find in its own thread; every
    operation must succeed."""

    def __init__(self, uri: str, db_name: str):
        self.client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=10_000)
        self.coll = self.client[db_name].healthy
        self.ops = 0
        self.errors: list[Exception] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        i = 0
        while not self.stop.is_set():
            try:
                self.coll.insert_one({"_id": i})
                assert self.coll.find_one({"_id": i}) == {"_id": i}
                self.ops += 1
            except Exception as exc:  # noqa: BLE001 - any failure is the finding
                self.errors.append(exc)
            i += 1
            time.sleep(0.01)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(30)
        self.client.close()
        assert not self.errors, f"a healthy client saw errors: {self.errors[:3]!r}"
        assert self.ops > 0


def raw_client(address) -> socket.socket:
    sock = wire.connect(*address)
    # As long as a login may take on a loaded machine (wire.login): this
    # asserts the answer, not its speed.
    assert wire.command(sock, {"isMaster": 1}, timeout=30.0)["ok"] == 1
    return sock


def eof_within(sock: socket.socket, timeout: float) -> float:
    """Seconds until the peer closes ``sock`` (AssertionError if it does not)."""
    start = time.monotonic()
    sock.settimeout(timeout)
    try:
        data = sock.recv(1)
    except ConnectionResetError:
        data = b""
    except socket.timeout:
        raise AssertionError(f"connection still open after {timeout}s")
    assert data == b"", f"unexpected bytes {data!r}"
    return time.monotonic() - start


# --------------------------------------------------------------------------
# --max-connections


def test_max_connections_refuses_the_fifth(private_remold, direct_client, db_name):
    remold = private_remold(extra_args=("--max-connections", "4"))
    socks = [raw_client(remold.address) for _ in range(4)]
    try:
        fifth = wire.connect(*remold.address, authenticate=False)  # refused at its first message
        reply = wire.roundtrip(fifth, wire.op_msg({"hello": 1, "$db": "admin"}))
        assert reply.is_error(), reply.doc
        assert reply.doc["errmsg"] == "remold: too many connections (limit 4)"
        assert reply.doc["code"] == 6
        assert eof_within(fifth, 5) < 5
        fifth.close()

        # Legacy OP_QUERY handshakes get an OP_REPLY.
        legacy = wire.connect(*remold.address, authenticate=False)
        reply = wire.roundtrip(legacy, wire.op_query("admin.$cmd", {"isMaster": 1}))
        assert reply.opcode == wire.OP_REPLY and reply.is_error()
        legacy.close()

        # A driver shows the reason, not a bare network error.
        with pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=SELECTION_TIMEOUT_MS) as c:
            with pytest.raises(ServerSelectionTimeoutError, match="too many connections"):
                c.admin.command("ping")

        # The four keep working.
        for i, sock in enumerate(socks):
            assert wire.command(sock, {"insert": "c", "documents": [{"_id": i}]}, db=db_name)["n"] == 1
            found = wire.command(sock, {"find": "c", "filter": {"_id": i}}, db=db_name)
            assert found["cursor"]["firstBatch"] == [{"_id": i}]

        # A closed connection frees its slot.
        socks.pop().close()
        deadline = time.monotonic() + 5
        while True:
            sock = wire.connect(*remold.address, authenticate=False)
            reply = wire.roundtrip(sock, wire.op_msg({"isMaster": 1, "$db": "admin"}))
            if reply.doc.get("ok") == 1:
                wire.login(sock, remold.address)  # where the backend requires it
                socks.append(sock)
                break
            sock.close()
            assert time.monotonic() < deadline, "the slot was never freed"
            time.sleep(0.05)
        assert "refused a connection from 127.0.0.1" in remold.stderr()
        assert remold.alive()
    finally:
        for sock in socks:
            sock.close()
        direct_client.drop_database(db_name)


def test_max_connections_with_drivers(private_remold, direct_client, db_name):
    # A polling pymongo client holds two connections: its monitor and one
    # pooled connection for sequential operations.
    remold = private_remold(extra_args=("--max-connections", "8"))
    clients = [pymongo.MongoClient(remold.uri, serverMonitoringMode="poll",
                                   serverSelectionTimeoutMS=10_000) for _ in range(4)]
    try:
        for i, c in enumerate(clients):
            c[db_name].c.insert_one({"_id": i})
        with pymongo.MongoClient(remold.uri, serverMonitoringMode="poll",
                                 serverSelectionTimeoutMS=SELECTION_TIMEOUT_MS) as fifth:
            with pytest.raises(PyMongoError, match="too many connections"):
                fifth[db_name].c.find_one({})
        for i, c in enumerate(clients):
            assert c[db_name].c.find_one({"_id": i}) == {"_id": i}
    finally:
        for c in clients:
            c.close()
        direct_client.drop_database(db_name)


# --------------------------------------------------------------------------
# --max-message-size


LIMIT = 2_000_000


def big_insert(db_name: str, size: int) -> bytes:
    return wire.op_msg({"insert": "big", "$db": db_name,
                        "documents": [{"_id": "big", "blob": b"x" * size}]})


def test_handshake_advertises_the_limit(private_remold):
    remold = private_remold(extra_args=("--max-message-size", str(LIMIT)))
    sock = wire.connect(*remold.address)
    try:
        # isMaster over OP_MSG: `hello` is unknown before MongoDB 4.4.2, and a
        # failed handshake is relayed as it is.
        assert wire.command(sock, {"isMaster": 1})["maxMessageSizeBytes"] == LIMIT
        assert wire.legacy_command(sock, {"isMaster": 1}).doc["maxMessageSizeBytes"] == LIMIT
    finally:
        sock.close()


def test_message_too_large_gets_an_error_and_a_close(private_remold, direct_client, db_name):
    remold = private_remold(extra_args=("--max-message-size", str(LIMIT)))
    worker = Worker(remold.uri, db_name)
    try:
        # Under the limit: fine.
        sock = raw_client(remold.address)
        reply = wire.roundtrip(sock, big_insert(db_name, 1_500_000), timeout=20)
        assert reply.doc["ok"] == 1 and reply.doc["n"] == 1
        sock.close()

        # Over it: the error, then a clean close.
        sock = raw_client(remold.address)
        message = big_insert(db_name, 3_000_000)
        reply = wire.roundtrip(sock, message, timeout=20)
        assert reply.is_error(), reply.doc
        assert reply.doc["code"] == 10334
        assert f"{len(message)} bytes exceeds maxMessageSizeBytes ({LIMIT})" in reply.doc["errmsg"]
        assert eof_within(sock, 5) < 5
        sock.close()

        # OP_COMPRESSED counts what it decompresses to.
        sock = raw_client(remold.address)
        inner = big_insert(db_name, 3_000_000)[wire.HEADER.size:]
        reply = wire.roundtrip(sock, wire.op_compressed(wire.OP_MSG, inner, wire.COMPRESSOR_ZLIB))
        assert reply.is_error() and reply.doc["code"] == 10334
        assert eof_within(sock, 5) < 5
        sock.close()

        # A driver: the error surfaces, and the client carries on.
        with pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=10_000) as c:
            coll = c[db_name].big
            coll.insert_one({"_id": "small", "blob": b"y" * 1000})
            with pytest.raises(PyMongoError) as caught:
                coll.insert_one({"_id": "huge", "blob": b"z" * 3_000_000})
            assert "exceeds maxMessageSizeBytes" in str(caught.value) or "too large" in str(caught.value)
            assert coll.find_one({"_id": "small"})["_id"] == "small"
            assert coll.find_one({"_id": "huge"}) is None

        assert remold.alive()
        assert "exceeds max_message_size" in remold.stderr()
    finally:
        worker.finish()
        direct_client.drop_database(db_name)


# --------------------------------------------------------------------------
# --idle-timeout-ms

IDLE_MS = 500


def test_idle_connection_is_closed(private_remold):
    remold = private_remold(extra_args=("--idle-timeout-ms", str(IDLE_MS)))
    idle = raw_client(remold.address)
    silent = wire.connect(*remold.address)  # never sends a byte
    half = raw_client(remold.address)
    half.sendall(wire.op_msg({"ping": 1, "$db": "admin"})[:10])  # stops halfway
    active = raw_client(remold.address)
    try:
        start = time.monotonic()
        done = threading.Event()
        active_errors: list[Exception] = []

        def keep_busy():
            while not done.is_set():
                try:
                    assert wire.command(active, {"ping": 1})["ok"] == 1
                except Exception as exc:  # noqa: BLE001
                    active_errors.append(exc)
                    return
                time.sleep(0.1)

        busy = threading.Thread(target=keep_busy)
        busy.start()
        for sock in (idle, silent, half):
            waited = eof_within(sock, 5)
        elapsed = time.monotonic() - start
        assert 0.4 <= elapsed < 3.0, f"idle connections closed after {elapsed:.2f}s"
        time.sleep(IDLE_MS / 1000 * 2)  # the active one outlives several idle periods
        done.set()
        busy.join(10)
        assert not active_errors, active_errors
        assert wire.command(active, {"ping": 1})["ok"] == 1
        assert waited >= 0
    finally:
        for sock in (idle, silent, half, active):
            sock.close()


def test_idle_timeout_spares_a_long_request(private_remold, direct_client, db_name):
    from test_sigterm import PIPELINE, expected_total, seed_slow_collection

    n_docs = seed_slow_collection(direct_client[db_name].slow)
    remold = private_remold(extra_args=("--idle-timeout-ms", str(IDLE_MS)))
    try:
        with pymongo.MongoClient(remold.uri, retryReads=False,
                                 serverSelectionTimeoutMS=10_000) as c:
            start = time.monotonic()
            result = list(c[db_name].slow.aggregate(PIPELINE))
            assert time.monotonic() - start > IDLE_MS / 1000
            assert result == [{"_id": None, "total": expected_total(n_docs)}]
    finally:
        direct_client.drop_database(db_name)


def test_pymongo_reconnects_after_an_idle_close(private_remold, direct_client, db_name):
    """pymongo checks a pooled connection idle for more than a second before
    using it, and retires connections older than its maxIdleTimeMS: either
    way it never sends on a connection remold closed. (Without those, a
    request racing the close fails with a network error, which the driver
    retries where retryable writes are available; the stand-in has none.)"""
    remold = private_remold(extra_args=("--idle-timeout-ms", str(IDLE_MS)))
    try:
        with pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=10_000) as c:
            coll = c[db_name].c
            for i, pause in enumerate((0.0, 1.2, 1.5)):
                time.sleep(pause)  # remold closes the pooled connection meanwhile
                coll.insert_one({"_id": i})
                assert coll.find_one({"_id": i}) == {"_id": i}
        with pymongo.MongoClient(remold.uri, maxIdleTimeMS=IDLE_MS // 2,
                                 serverSelectionTimeoutMS=10_000) as c:
            coll = c[db_name].c
            for i, pause in enumerate((0.0, 0.7, 0.6, 1.0), start=10):
                time.sleep(pause)
                coll.insert_one({"_id": i})
                assert coll.find_one({"_id": i}) == {"_id": i}
        assert direct_client[db_name].c.count_documents({}) == 7
    finally:
        direct_client.drop_database(db_name)
