"""A recording TCP relay: what a driver really sends and receives on the wire.

``WireTap(upstream)`` listens on a free loopback port and relays every
connection made to it to ``upstream`` byte for byte, both ways, while it
reads the MongoDB message framing of each direction and records one
``Tapped`` entry per message: its opcode as sent, the compressor id when it
is OP_COMPRESSED, whether it is an OP_MSG with moreToCome, and, for
requests, the command name (the first key of the command document, found
after decompressing). Nothing is changed, so the
driver and the server see each other as they would directly.

Used by test_driver_matrix.py to tell which compressor a driver and remold
actually used, whatever the driver lets an application see.
"""

from __future__ import annotations

import socket
import struct
import threading
from dataclasses import dataclass
from typing import Optional

import wire


@dataclass(frozen=True)
class Tapped:
    connection: int          # which relayed connection, numbered from 0
    from_client: bool        # a request (True) or a reply (False)
    request_id: int
    response_to: int
    opcode: int              # as sent: OP_COMPRESSED for a compressed message
    compressor_id: Optional[int]
    command: Optional[str]   # requests only: the command's name
    more_to_come: bool       # OP_MSG moreToCome: the sender expects no reply


def _first_key(doc: bytes) -> str:
    """The name of a BSON document's first element ('' for an empty one)."""
    if len(doc) < 6 or doc[4] == 0:
        return ""
    return doc[5:doc.index(b"\x00", 5)].decode(errors="replace")


def command_name(opcode: int, body: bytes) -> Optional[str]:
    """The command of an (uncompressed) OP_MSG or OP_QUERY request body."""
    if opcode == wire.OP_MSG:
        pos = 4  # flagBits
        while pos < len(body):
            kind = body[pos]
            (size,) = struct.unpack_from("<i", body, pos + 1)
            if kind == 0:
                return _first_key(body[pos + 1:pos + 1 + size])
            pos += 1 + size
        return None
    if opcode == wire.OP_QUERY:
        name_end = body.index(b"\x00", 4)
        return _first_key(body[name_end + 1 + 8:])
    return None


def tapped(connection: int, from_client: bool, message: bytes) -> Tapped:
    _length, request_id, response_to, opcode = wire.HEADER.unpack_from(message)
    body = message[wire.HEADER.size:]
    compressor_id = None
    inner_opcode, inner = opcode, body
    if opcode == wire.OP_COMPRESSED:
        inner_opcode, _size, compressor_id = struct.unpack_from("<iiB", body)
        inner = wire.decompress(compressor_id, body[9:])
    command = command_name(inner_opcode, inner) if from_client else None
    more_to_come = inner_opcode == wire.OP_MSG and bool(
        struct.unpack_from("<I", inner)[0] & wire.MSG_MORE_TO_COME)
    return Tapped(connection, from_client, request_id, response_to, opcode, compressor_id, command,
                  more_to_come)


class WireTap:
    def __init__(self, upstream: tuple[str, int]):
        self.upstream = upstream
        self.messages: list[Tapped] = []
        self.problems: list[str] = []  # framing the tap could not read
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        # Ports are reused: a login registered for a server that had this
        # one before is not the tap's (the tap logs nothing in by itself).
        wire.forget_authentication(("127.0.0.1", self.port))
        self._connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def uri(self, options: str = "") -> str:
        return f"mongodb://127.0.0.1:{self.port}/" + (f"?{options}" if options else "")

    def recorded(self) -> list[Tapped]:
        with self._lock:
            return list(self.messages)

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            try:
                sock.close()
            except OSError:
                pass

    def __enter__(self) -> "WireTap":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            try:
                server = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                number = self._connections
                self._connections += 1
                self._sockets += [client, server]
            for source, sink, from_client in ((client, server, True), (server, client, False)):
                threading.Thread(target=self._pump, args=(source, sink, number, from_client),
                                 daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, number: int,
              from_client: bool) -> None:
        pending = b""
        try:
            while True:
                chunk = source.recv(1 << 16)
                if not chunk:
                    break
                sink.sendall(chunk)
                pending += chunk
                pending = self._record(pending, number, from_client)
        except OSError:
            pass
        finally:
            for sock in (sink, source):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _record(self, pending: bytes, number: int, from_client: bool) -> bytes:
        while len(pending) >= 4:
            (length,) = struct.unpack_from("<i", pending)
            if length < wire.HEADER.size:
                with self._lock:
                    self.problems.append(f"connection {number}: message length {length}")
                return b""
            if len(pending) < length:
                break
            try:
                entry = tapped(number, from_client, pending[:length])
            except Exception as exc:  # noqa: BLE001 - reported by the test, never lost
                with self._lock:
                    self.problems.append(f"connection {number}: {exc!r}")
            else:
                with self._lock:
                    self.messages.append(entry)
            pending = pending[length:]
        return pending
