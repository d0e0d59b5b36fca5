"""Malformed wire input: every bad frame gets an error reply or a closed
connection within a few seconds; never a hang, never a crash.

Each case is sent on a fresh connection to a remold of this module's own.
Meanwhile a healthy pymongo client loops insert+find in its own thread; the
last test checks that every one of its operations succeeded and that the
proxy still serves new clients.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
import zlib
from dataclasses import dataclass
from typing import Callable, Optional

import bson
import pymongo
import pytest

import wire
from conftest import NO_PROXY, start_remold
from wire import HEADER, OP_COMPRESSED, OP_MSG, OP_QUERY, frame

REPLY_TIMEOUT = 5.0

PING = bson.encode({"ping": 1, "$db": "admin"})
ALL_COMPRESSORS = ["snappy", "zlib", "zstd"]


def i32(n: int) -> bytes:
    return struct.pack("<i", n)


def msg_body(*sections: bytes, flags: int = 0) -> bytes:
    return struct.pack("<I", flags) + b"".join(sections)


def kind0(raw: bytes) -> bytes:
    return b"\x00" + raw


def ping_msg_body() -> bytes:
    return msg_body(kind0(PING))


def garbage(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)


def doc_with_truncated_string() -> bytes:
    # {ping: "<string claiming 100 bytes>"} where only 4 bytes follow.
    elements = b"\x02ping\x00" + i32(100) + b"abc\x00"
    return i32(4 + len(elements) + 1) + elements + b"\x00"


def doc_with_unknown_type() -> bytes:
    elements = b"\x7eping\x00" + i32(1) + b"\x02$db\x00" + i32(6) + b"admin\x00"
    return i32(4 + len(elements) + 1) + elements + b"\x00"


def doc_with_overflowing_subdocument() -> bytes:
    sub = i32(500) + b"\x10a\x00" + i32(1) + b"\x00"  # claims 500 bytes, has 12
    elements = b"\x03ping\x00" + sub
    return i32(4 + len(elements) + 1) + elements + b"\x00"


def compressed(original_opcode: int, inner: bytes, compressor_id: int,
               payload: Optional[bytes] = None, size: Optional[int] = None) -> bytes:
    return wire.op_compressed(original_opcode, inner, compressor_id,
                              payload=payload, uncompressed_size=size)


def bad_checksum() -> bytes:
    good = wire.op_msg(PING, checksum=True)
    return good[:-4] + struct.pack("<I", struct.unpack("<I", good[-4:])[0] ^ 0xDEADBEEF)


def zlib_bomb() -> bytes:
    # Declares 100 bytes; inflates to 50 MB. Must be refused, not inflated.
    payload = zlib.compress(b"\x00" * 50_000_000, 9)
    return compressed(OP_MSG, ping_msg_body(), wire.COMPRESSOR_ZLIB, payload=payload, size=100)


def legacy_query_body(name: bytes, doc: bytes = PING) -> bytes:
    return i32(0) + name + i32(0) + i32(-1) + doc


@dataclass(frozen=True)
class Case:
    build: Callable[[], bytes]
    half_close: bool = False      # shut down our write side after sending
    negotiate: bool = False       # do a compression handshake first


CASES: dict[str, Case] = {
    # --- framing -----------------------------------------------------------
    "length_below_16": Case(lambda: HEADER.pack(12, 1, 0, OP_MSG)),
    "length_zero": Case(lambda: HEADER.pack(0, 1, 0, OP_MSG)),
    "length_negative": Case(lambda: HEADER.pack(-1, 1, 0, OP_MSG) + ping_msg_body()),
    "length_above_48MB": Case(lambda: HEADER.pack(50_000_000, 1, 0, OP_MSG) + ping_msg_body()),
    "length_exceeds_bytes_then_close": Case(
        lambda: frame(OP_MSG, ping_msg_body(), length=16 + len(ping_msg_body()) + 100),
        half_close=True),
    "unknown_opcode": Case(lambda: frame(9999, ping_msg_body())),
    "op_reply_sent_by_client": Case(
        lambda: frame(wire.OP_REPLY, struct.pack("<iqii", 0, 0, 0, 1) + PING)),
    # --- OP_MSG structure --------------------------------------------------
    "op_msg_flags_truncated": Case(lambda: frame(OP_MSG, b"\x00\x00")),
    "op_msg_no_sections": Case(lambda: frame(OP_MSG, msg_body())),
    "op_msg_unknown_section_kind": Case(lambda: frame(OP_MSG, msg_body(b"\x02" + PING))),
    "op_msg_two_body_sections": Case(lambda: frame(OP_MSG, msg_body(kind0(PING), kind0(PING)))),
    "op_msg_sequence_without_body": Case(lambda: frame(OP_MSG, msg_body(
        wire.section_sequence("documents", [{"a": 1}])))),
    "op_msg_trailing_garbage": Case(lambda: frame(OP_MSG, ping_msg_body() + b"\xff\xff\xff")),
    "op_msg_unknown_required_flag": Case(lambda: frame(OP_MSG, msg_body(kind0(PING), flags=1 << 3))),
    "op_msg_bad_checksum": Case(bad_checksum),
    "op_msg_checksum_flag_too_short": Case(lambda: frame(OP_MSG, struct.pack("<I", 1) + b"\x00\x05")),
    "op_msg_sequence_size_overflow": Case(lambda: frame(OP_MSG, msg_body(
        kind0(PING), b"\x01" + i32(1000) + b"documents\x00" + bson.encode({"a": 1})))),
    "op_msg_sequence_size_too_small": Case(lambda: frame(OP_MSG, msg_body(
        kind0(PING), b"\x01" + i32(2) + b"documents\x00"))),
    "op_msg_sequence_identifier_unterminated": Case(lambda: frame(OP_MSG, msg_body(
        kind0(PING), b"\x01" + i32(4 + 9) + b"documents"))),
    # --- BSON inside OP_MSG ------------------------------------------------
    "bson_length_overflows_message": Case(lambda: frame(OP_MSG, msg_body(
        kind0(i32(len(PING) + 100) + PING[4:])))),
    "bson_length_below_5": Case(lambda: frame(OP_MSG, msg_body(kind0(i32(4) + b"\x00")))),
    "bson_missing_terminator": Case(lambda: frame(OP_MSG, msg_body(kind0(PING[:-1] + b"\x01")))),
    "bson_truncated_element": Case(lambda: frame(OP_MSG, msg_body(kind0(doc_with_truncated_string())))),
    "bson_unknown_element_type": Case(lambda: frame(OP_MSG, msg_body(kind0(doc_with_unknown_type())))),
    "bson_subdocument_overflow": Case(lambda: frame(OP_MSG, msg_body(
        kind0(doc_with_overflowing_subdocument())))),
    "op_msg_empty_body_document": Case(lambda: frame(OP_MSG, msg_body(kind0(bson.encode({}))))),
    # --- OP_COMPRESSED -----------------------------------------------------
    "compressed_unknown_compressor": Case(
        lambda: compressed(OP_MSG, ping_msg_body(), 77, payload=ping_msg_body()), negotiate=True),
    "compressed_size_mismatch": Case(lambda: compressed(
        OP_MSG, ping_msg_body(), wire.COMPRESSOR_ZLIB, size=len(ping_msg_body()) + 10), negotiate=True),
    "compressed_garbage_snappy": Case(lambda: compressed(
        OP_MSG, ping_msg_body(), wire.COMPRESSOR_SNAPPY, payload=garbage(64, 1)), negotiate=True),
    "compressed_garbage_zlib": Case(lambda: compressed(
        OP_MSG, ping_msg_body(), wire.COMPRESSOR_ZLIB, payload=garbage(64, 2)), negotiate=True),
    "compressed_garbage_zstd": Case(lambda: compressed(
        OP_MSG, ping_msg_body(), wire.COMPRESSOR_ZSTD, payload=garbage(64, 3)), negotiate=True),
    "compressed_size_above_48MB": Case(lambda: compressed(
        OP_MSG, ping_msg_body(), wire.COMPRESSOR_ZLIB, size=60_000_000), negotiate=True),
    "compressed_size_negative": Case(lambda: compressed(
        OP_MSG, ping_msg_body(), wire.COMPRESSOR_SNAPPY, size=-1), negotiate=True),
    "compressed_bomb_understated_size": Case(zlib_bomb, negotiate=True),
    "compressed_nested": Case(lambda: compressed(
        OP_COMPRESSED,
        compressed(OP_MSG, ping_msg_body(), wire.COMPRESSOR_ZLIB)[16:],
        wire.COMPRESSOR_ZLIB), negotiate=True),
    "compressed_header_truncated": Case(lambda: frame(OP_COMPRESSED, i32(OP_MSG) + b"\x01"),
                                        negotiate=True),
    # --- legacy opcodes ----------------------------------------------------
    "op_query_unterminated_collection_name": Case(
        lambda: frame(OP_QUERY, i32(0) + b"admin.$cmd" + b"\x7f" * 24)),
    "op_query_truncated_query_doc": Case(
        lambda: frame(OP_QUERY, legacy_query_body(b"admin.$cmd\x00", PING[:-6]))),
    "op_query_missing_query_doc": Case(
        lambda: frame(OP_QUERY, legacy_query_body(b"admin.$cmd\x00", b""))),
    "op_insert_legacy": Case(
        lambda: frame(wire.OP_INSERT, i32(0) + b"test.legacy\x00" + bson.encode({"x": 1}))),
    "op_get_more_legacy": Case(
        lambda: frame(wire.OP_GET_MORE, i32(0) + b"test.legacy\x00" + i32(10) + struct.pack("<q", 12345))),
    "op_kill_cursors_legacy": Case(
        lambda: frame(wire.OP_KILL_CURSORS, i32(0) + i32(1) + struct.pack("<q", 12345))),
}


# --------------------------------------------------------------------------
# The proxy under attack, and the healthy client beside it.


class Subject:
    """This module's remold (or the backend under REMOLD_TEST_NO_PROXY=1).

    If a case crashes it, it is restarted on the same port so the remaining
    cases are still judged on their own; the crash is recorded.
    """

    def __init__(self, backend):
        self.backend = backend
        self.remold = None if NO_PROXY else start_remold(backend.uri)
        self.crashes: list[str] = []

    @property
    def address(self) -> tuple[str, int]:
        if self.remold is None:
            return self.backend.host, self.backend.port
        return self.remold.address

    @property
    def uri(self) -> str:
        return self.remold.uri if self.remold else self.backend.uri

    def alive(self) -> bool:
        return self.remold.alive() if self.remold else self.backend.alive()

    def record_crash(self, case: str) -> str:
        if self.remold is None:
            message = f"backend died during {case}"
        else:
            rc = self.remold.proc.returncode
            message = f"remold died (exit {rc}) during {case}; stderr tail:\n{self.remold.stderr()[-2000:]}"
            host, port = self.remold.address
            self.remold = start_remold(self.backend.uri, listen=f"{host}:{port}")
        self.crashes.append(message)
        return message

    def close(self) -> None:
        if self.remold is not None:
            self.remold.kill()
            self.remold.forget_stderr()


class HealthyClient(threading.Thread):
    """Loops insert_one + find_one; every operation must succeed."""

    def __init__(self, uri: str, db_name: str):
        super().__init__(daemon=True)
        # No retries: a retried operation would hide a dropped connection.
        self.client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=10_000,
                                          retryWrites=False, retryReads=False)
        self.coll = self.client[db_name].health
        self.stop = threading.Event()
        self.ops = 0
        self.errors: list[str] = []

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            try:
                doc = {"_id": i, "payload": "x" * (i % 200)}
                self.coll.insert_one(doc)
                got = self.coll.find_one({"_id": i})
                if got != doc:
                    raise AssertionError(f"read back {got!r}, wrote {doc!r}")
                self.ops += 1
            except Exception as exc:  # recorded, asserted by the final test
                self.errors.append(f"op {i}: {exc!r}")
            i += 1
            time.sleep(0.002)


@pytest.fixture(scope="module")
def subject(backend):
    s = Subject(backend)
    yield s
    s.close()


@pytest.fixture(scope="module")
def healthy(subject, direct_client):
    db_name = f"e2e_py_malformed_health_{int(time.time() * 1000) % 10**9}"
    h = HealthyClient(subject.uri, db_name)
    h.start()
    yield h
    h.stop.set()
    h.join(30)
    h.client.close()
    direct_client.drop_database(db_name)


# --------------------------------------------------------------------------
# Sending one malformed message.


def send_and_observe(address, case: Case, payload: bytes) -> str:
    """Returns "closed" or "error reply"; fails the test on a hang or a non-error reply."""
    sock = wire.connect(*address)
    try:
        if case.negotiate:
            hello = wire.legacy_command(sock, {"isMaster": 1, "compression": ALL_COMPRESSORS}).doc
            assert hello.get("ok") == 1, hello
        try:
            sock.sendall(payload)
            if case.half_close:
                sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            return "closed"
        try:
            reply = wire.recv_message(sock, REPLY_TIMEOUT)
        except wire.ConnectionClosed:
            return "closed"
        except socket.timeout:
            pytest.fail(f"no reply and the connection still open after {REPLY_TIMEOUT}s (hang)")
        assert reply.is_error(), (
            f"expected an error reply (ok:0 + errmsg) or a closed connection, got opcode "
            f"{reply.opcode}: {reply.docs}")
        return "error reply"
    finally:
        sock.close()


CONTROLS = {
    # The well-formed versions of what the cases above break: if one of these
    # fails, the builders (not the proxy) are wrong and the cases prove nothing.
    "op_msg": lambda: wire.op_msg(PING),
    "op_msg_checksum": lambda: wire.op_msg(PING, checksum=True),
    "op_msg_with_sequence": lambda: wire.op_msg(
        {"insert": "controls", "$db": "e2e_py_malformed_controls"},
        sequences=[wire.section_sequence("documents", [{"a": 1}])]),
    "op_query_handshake": lambda: wire.op_query("admin.$cmd", {"isMaster": 1}),
    **{f"op_compressed_{name}": (lambda cid=cid: wire.op_compressed(
        OP_MSG, ping_msg_body(), cid)) for name, cid in wire.COMPRESSOR_IDS.items()},
}


@pytest.mark.parametrize("name", list(CONTROLS))
def test_well_formed_control(name, subject, direct_client):
    sock = wire.connect(*subject.address)
    try:
        if name.startswith("op_compressed"):
            hello = wire.legacy_command(sock, {"isMaster": 1, "compression": ALL_COMPRESSORS}).doc
            if subject.remold is None and not hello.get("compression"):
                pytest.skip("REMOLD_TEST_NO_PROXY=1 and the backend negotiates no compression")
        reply = wire.roundtrip(sock, CONTROLS[name]())
        assert reply.doc.get("ok") == 1, reply.docs
    finally:
        sock.close()
        direct_client.drop_database("e2e_py_malformed_controls")


@pytest.mark.parametrize("name", list(CASES))
def test_malformed_message(name, subject, healthy):
    case = CASES[name]
    payload = case.build()
    try:
        outcome = send_and_observe(subject.address, case, payload)
    finally:
        time.sleep(0.05)  # let a crash, if any, become visible
        if not subject.alive():
            pytest.fail(subject.record_crash(name))
    assert outcome in ("closed", "error reply")


def test_proxy_survived_and_healthy_client_never_failed(subject, healthy):
    time.sleep(0.5)
    healthy.stop.set()
    healthy.join(30)
    assert not healthy.is_alive(), "the healthy client hung"
    assert subject.crashes == []
    assert healthy.errors == []
    assert healthy.ops >= 20, f"healthy client only completed {healthy.ops} operations"
    assert subject.alive()

    with pymongo.MongoClient(subject.uri, serverSelectionTimeoutMS=10_000) as fresh:
        assert fresh.admin.command("ping")["ok"] == 1
        assert fresh[healthy.coll.database.name].health.count_documents({}) == healthy.ops
