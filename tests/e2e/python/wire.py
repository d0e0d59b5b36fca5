"""Raw MongoDB wire-protocol helpers for the end-to-end tests.

Everything here is deliberately small and explicit: messages are built with
``struct`` so tests can produce both valid and precisely malformed frames, and
replies are decoded by hand (OP_MSG, OP_REPLY, OP_COMPRESSED) so tests can see
exactly what came back on the wire.

Reference: https://www.mongodb.com/docs/manual/reference/mongodb-wire-protocol/
"""

from __future__ import annotations

import itertools
import socket
import struct
import time
import zlib
from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence

import bson

# Opcodes.
OP_REPLY = 1
OP_UPDATE = 2001
OP_INSERT = 2002
OP_QUERY = 2004
OP_GET_MORE = 2005
OP_DELETE = 2006
OP_KILL_CURSORS = 2007
OP_COMPRESSED = 2012
OP_MSG = 2013

# OP_MSG flag bits.
MSG_CHECKSUM_PRESENT = 1 << 0
MSG_MORE_TO_COME = 1 << 1
MSG_EXHAUST_ALLOWED = 1 << 16

# OP_REPLY responseFlags bits.
REPLY_CURSOR_NOT_FOUND = 1 << 0
REPLY_QUERY_FAILURE = 1 << 1

# OP_COMPRESSED compressor ids.
COMPRESSOR_NOOP = 0
COMPRESSOR_SNAPPY = 1
COMPRESSOR_ZLIB = 2
COMPRESSOR_ZSTD = 3
COMPRESSOR_IDS = {"snappy": COMPRESSOR_SNAPPY, "zlib": COMPRESSOR_ZLIB, "zstd": COMPRESSOR_ZSTD}

HEADER = struct.Struct("<iiii")  # messageLength, requestID, responseTo, opCode
MAX_MESSAGE_SIZE = 48_000_000

_request_ids = itertools.count(1000)


def next_request_id() -> int:
    return next(_request_ids)


# --------------------------------------------------------------------------
# CRC-32C (Castagnoli), used by the OP_MSG checksum.


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC32C_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283  # the standard check value


# --------------------------------------------------------------------------
# Compression.


def compress(compressor_id: int, data: bytes) -> bytes:
    if compressor_id == COMPRESSOR_SNAPPY:
        import snappy

        return snappy.compress(data)
    if compressor_id == COMPRESSOR_ZLIB:
        return zlib.compress(data)
    if compressor_id == COMPRESSOR_ZSTD:
        from backports import zstd

        return zstd.compress(data)
    if compressor_id == COMPRESSOR_NOOP:
        return data
    raise ValueError(f"unknown compressor id {compressor_id}")


def decompress(compressor_id: int, data: bytes) -> bytes:
    if compressor_id == COMPRESSOR_SNAPPY:
        import snappy

        return snappy.decompress(data)
    if compressor_id == COMPRESSOR_ZLIB:
        return zlib.decompress(data)
    if compressor_id == COMPRESSOR_ZSTD:
        from backports import zstd

        return zstd.decompress(data)
    if compressor_id == COMPRESSOR_NOOP:
        return data
    raise ValueError(f"unknown compressor id {compressor_id}")


# --------------------------------------------------------------------------
# Building messages.


def cstring(s: str) -> bytes:
    return s.encode() + b"\x00"


def frame(opcode: int, body: bytes, *, request_id: Optional[int] = None,
          response_to: int = 0, length: Optional[int] = None) -> bytes:
    """Header + body. ``length`` overrides messageLength (for malformed frames)."""
    if request_id is None:
        request_id = next_request_id()
    if length is None:
        length = HEADER.size + len(body)
    return HEADER.pack(length, request_id, response_to, opcode) + body


def section_body(doc: dict | bytes) -> bytes:
    """A kind-0 section. ``doc`` may be raw BSON bytes (possibly malformed)."""
    raw = doc if isinstance(doc, (bytes, bytearray)) else bson.encode(doc)
    return b"\x00" + bytes(raw)


def section_sequence(identifier: str, docs: Iterable[dict]) -> bytes:
    """A kind-1 document sequence section."""
    payload = cstring(identifier) + b"".join(bson.encode(d) for d in docs)
    return b"\x01" + struct.pack("<i", 4 + len(payload)) + payload


def op_msg_body(sections: Sequence[bytes], flags: int = 0) -> bytes:
    return struct.pack("<I", flags) + b"".join(sections)


def op_msg(doc: dict | bytes, *, sequences: Sequence[bytes] = (), flags: int = 0,
           checksum: bool = False, request_id: Optional[int] = None) -> bytes:
    """A complete OP_MSG with one body section and optional kind-1 sections."""
    if checksum:
        flags |= MSG_CHECKSUM_PRESENT
    body = op_msg_body([section_body(doc), *sequences], flags)
    if not checksum:
        return frame(OP_MSG, body, request_id=request_id)
    unsummed = frame(OP_MSG, body, request_id=request_id, length=HEADER.size + len(body) + 4)
    return unsummed + struct.pack("<I", crc32c(unsummed))


def op_query(full_collection_name: str | bytes, query: dict | bytes, *, flags: int = 0,
             skip: int = 0, n_return: int = -1, request_id: Optional[int] = None) -> bytes:
    name = full_collection_name if isinstance(full_collection_name, bytes) else cstring(full_collection_name)
    raw = query if isinstance(query, (bytes, bytearray)) else bson.encode(query)
    body = struct.pack("<i", flags) + name + struct.pack("<ii", skip, n_return) + bytes(raw)
    return frame(OP_QUERY, body, request_id=request_id)


def op_compressed(original_opcode: int, original_body: bytes, compressor_id: int, *,
                  payload: Optional[bytes] = None, uncompressed_size: Optional[int] = None,
                  request_id: Optional[int] = None) -> bytes:
    """Wrap ``original_body`` (a message without its header) in OP_COMPRESSED.

    ``payload`` and ``uncompressed_size`` override the honest values, for
    malformed frames.
    """
    if payload is None:
        payload = compress(compressor_id, original_body)
    if uncompressed_size is None:
        uncompressed_size = len(original_body)
    body = struct.pack("<iiB", original_opcode, uncompressed_size, compressor_id) + payload
    return frame(OP_COMPRESSED, body, request_id=request_id)


def compressed_op_msg(doc: dict, compressor_id: int) -> bytes:
    msg = op_msg(doc)
    return op_compressed(OP_MSG, msg[HEADER.size:], compressor_id)


# --------------------------------------------------------------------------
# Reading replies.


class ConnectionClosed(Exception):
    """The peer closed the connection (EOF or reset)."""


@dataclass
class Reply:
    opcode: int                       # the opcode after decompression
    request_id: int
    response_to: int
    flags: int = 0
    docs: list[dict] = field(default_factory=list)   # OP_MSG: body first; OP_REPLY: documents
    sequences: dict[str, list[dict]] = field(default_factory=dict)
    cursor_id: int = 0                # OP_REPLY only
    compressor_id: Optional[int] = None  # set when the reply came in OP_COMPRESSED

    @property
    def doc(self) -> dict:
        assert self.docs, f"reply has no documents: {self!r}"
        return self.docs[0]

    def is_error(self) -> bool:
        """An error reply in MongoDB's own shape.

        OP_MSG / command OP_REPLY: ``ok`` is not 1 and ``errmsg`` is a string.
        Legacy OP_REPLY query failures (QueryFailure flag) carry ``$err``.
        """
        if not self.docs:
            return False
        doc = self.docs[0]
        if doc.get("ok") != 1 and isinstance(doc.get("errmsg"), str) and "ok" in doc:
            return True
        if self.opcode == OP_REPLY and isinstance(doc.get("$err"), str):
            return bool(self.flags & (REPLY_QUERY_FAILURE | REPLY_CURSOR_NOT_FOUND)) or doc.get("ok") == 0
        return False


def _recv_exact(sock: socket.socket, n: int, deadline: float) -> bytes:
    chunks = []
    while n:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout("timed out waiting for the peer")
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(min(n, 1 << 20))
        except (ConnectionResetError, BrokenPipeError) as exc:
            raise ConnectionClosed(str(exc)) from exc
        if not chunk:
            raise ConnectionClosed("EOF")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _decode_docs(data: bytes) -> list[dict]:
    return bson.decode_all(data) if data else []


def parse_message(header: tuple[int, int, int, int], body: bytes) -> Reply:
    length, request_id, response_to, opcode = header
    if opcode == OP_COMPRESSED:
        original_opcode, uncompressed_size, compressor_id = struct.unpack_from("<iiB", body)
        inner = decompress(compressor_id, body[9:])
        if len(inner) != uncompressed_size:
            raise ValueError(f"OP_COMPRESSED uncompressedSize {uncompressed_size} != {len(inner)}")
        reply = parse_message((HEADER.size + len(inner), request_id, response_to, original_opcode), inner)
        reply.compressor_id = compressor_id
        return reply
    if opcode == OP_MSG:
        (flags,) = struct.unpack_from("<I", body)
        end = len(body) - (4 if flags & MSG_CHECKSUM_PRESENT else 0)
        pos, docs, sequences = 4, [], {}
        while pos < end:
            kind = body[pos]
            pos += 1
            if kind == 0:
                (doc_len,) = struct.unpack_from("<i", body, pos)
                docs.append(bson.decode(body[pos:pos + doc_len]))
                pos += doc_len
            elif kind == 1:
                (size,) = struct.unpack_from("<i", body, pos)
                section = body[pos + 4:pos + size]
                ident, _, rest = section.partition(b"\x00")
                sequences[ident.decode()] = _decode_docs(rest)
                pos += size
            else:
                raise ValueError(f"reply has unknown OP_MSG section kind {kind}")
        return Reply(opcode, request_id, response_to, flags, docs, sequences)
    if opcode == OP_REPLY:
        flags, cursor_id, _start, n_returned = struct.unpack_from("<iqii", body)
        docs = _decode_docs(body[20:])
        if len(docs) != n_returned:
            raise ValueError(f"OP_REPLY numberReturned {n_returned} != {len(docs)} documents")
        return Reply(opcode, request_id, response_to, flags, docs, cursor_id=cursor_id)
    raise ValueError(f"unexpected reply opcode {opcode}")


def recv_message(sock: socket.socket, timeout: float = 5.0) -> Reply:
    """Read one whole message. Raises ConnectionClosed on EOF/reset and
    socket.timeout when nothing complete arrives in time."""
    deadline = time.monotonic() + timeout
    raw_header = _recv_exact(sock, HEADER.size, deadline)
    header = HEADER.unpack(raw_header)
    if not HEADER.size <= header[0] <= MAX_MESSAGE_SIZE:
        raise ValueError(f"reply has invalid messageLength {header[0]}")
    body = _recv_exact(sock, header[0] - HEADER.size, deadline)
    if header[3] == OP_MSG and struct.unpack_from("<I", body)[0] & MSG_CHECKSUM_PRESENT:
        (sent,) = struct.unpack_from("<I", body, len(body) - 4)
        if crc32c(raw_header + body[:-4]) != sent:
            raise ValueError("reply OP_MSG checksum mismatch")
    return parse_message(header, body)


# Addresses whose connections must authenticate before anything else (a
# backend that requires it, and the remolds in front of it): the harness
# registers them (conftest.py), and connect() runs SCRAM-SHA-256 on each.
_CREDENTIALS: dict[tuple[str, int], tuple[str, str, str]] = {}


def require_authentication(address: tuple[str, int], user: str, password: str, source: str = "admin") -> None:
    _CREDENTIALS[address] = (user, password, source)


def forget_authentication(address: tuple[str, int]) -> None:
    """The server at ``address`` is gone or needs no login: a later server
    on the same port (ports are reused) must not be sent SCRAM."""
    _CREDENTIALS.pop(address, None)


def connect(host: str, port: int, timeout: float = 5.0, authenticate: bool = True) -> socket.socket:
    """A connection to host:port, authenticated when the harness says that
    address requires it (``authenticate=False``: as it is)."""
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if authenticate:
        login(sock, (host, port), timeout)
    return sock


def login(sock: socket.socket, address: tuple[str, int], timeout: float = 5.0) -> None:
    """Authenticates ``sock``, a connection to ``address``, when the harness
    says that address requires it; else does nothing."""
    credentials = _CREDENTIALS.get(tuple(address))
    if credentials is not None:
        import scram  # only the suites that run against such a backend need it
        # The conversation's server side costs PBKDF2 rounds: on a loaded
        # machine it may take longer than a test's timeout for a reply.
        login_timeout = max(timeout, 30.0)
        scram.authenticate(lambda doc, db: command(sock, doc, db, login_timeout), *credentials)


def roundtrip(sock: socket.socket, message: bytes, timeout: float = 5.0) -> Reply:
    sock.sendall(message)
    reply = recv_message(sock, timeout)
    (request_id,) = struct.unpack_from("<i", message, 4)
    assert reply.response_to == request_id, (
        f"responseTo {reply.response_to} does not match requestID {request_id}")
    return reply


def command(sock: socket.socket, doc: dict, db: str = "admin", timeout: float = 5.0) -> dict:
    """Run one OP_MSG command and return its body document."""
    return roundtrip(sock, op_msg({**doc, "$db": db}), timeout).doc


def legacy_command(sock: socket.socket, doc: dict, db: str = "admin", timeout: float = 5.0) -> Reply:
    """Run one command through legacy OP_QUERY on ``db.$cmd``."""
    reply = roundtrip(sock, op_query(f"{db}.$cmd", doc, n_return=-1), timeout)
    assert reply.opcode == OP_REPLY, f"OP_QUERY answered with opcode {reply.opcode}"
    return reply
