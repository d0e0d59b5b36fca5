"""Well-formed wire traffic pymongo rarely produces: fire-and-forget
(moreToCome) requests, pipelined requests, checksums and exhaust getMore."""

from __future__ import annotations

import time

import pytest

import wire


def backend_accepts_flags(backend, flags: int) -> bool:
    """Does the backend itself take an OP_MSG ping with these flag bits?"""
    sock = wire.connect(backend.host, backend.port)
    try:
        sock.sendall(wire.op_msg({"ping": 1, "$db": "admin"}, flags=flags))
        if not flags & wire.MSG_MORE_TO_COME:
            return wire.recv_message(sock).doc.get("ok") == 1
        return wire.command(sock, {"ping": 1}).get("ok") == 1
    except (OSError, wire.ConnectionClosed):
        return False
    finally:
        sock.close()


@pytest.fixture(scope="module")
def backend_more_to_come(backend):
    if not backend_accepts_flags(backend, wire.MSG_MORE_TO_COME):
        pytest.skip("the backend does not accept moreToCome requests")


@pytest.fixture(scope="module")
def backend_exhaust(backend):
    if not backend_accepts_flags(backend, wire.MSG_EXHAUST_ALLOWED):
        pytest.skip("the backend does not accept exhaustAllowed requests")


def test_more_to_come_request_gets_no_reply(target, db, backend_more_to_come):
    sock = wire.connect(*target.address)
    try:
        insert = wire.op_msg({"insert": "w0", "documents": [{"_id": i} for i in range(5)],
                              "writeConcern": {"w": 0}, "$db": db.name},
                             flags=wire.MSG_MORE_TO_COME)
        sock.sendall(insert)
        ping = wire.op_msg({"ping": 1, "$db": "admin"})
        reply = wire.roundtrip(sock, ping)  # asserts responseTo == the ping's requestID
        assert reply.doc.get("ok") == 1
        deadline = time.monotonic() + 5
        while db.w0.count_documents({}) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sorted(d["_id"] for d in db.w0.find()) == list(range(5))
    finally:
        sock.close()


def test_pipelined_requests_answered_in_order(target, db):
    sock = wire.connect(*target.address)
    try:
        requests = [wire.op_msg({"insert": "pipe", "documents": [{"_id": i}], "$db": db.name})
                    for i in range(10)]
        # (A count with a query: DocumentDB answers one without from its
        # statistics, an estimate; see docs/backends.md.)
        requests.append(wire.op_msg({"count": "pipe", "query": {"_id": {"$gte": 0}}, "$db": db.name}))
        sock.sendall(b"".join(requests))
        replies = [wire.recv_message(sock) for _ in requests]
        assert [r.response_to for r in replies] == [
            int.from_bytes(m[4:8], "little", signed=True) for m in requests]
        assert all(r.doc.get("ok") == 1 and r.doc.get("n") == 1 for r in replies[:-1])
        assert replies[-1].doc.get("n") == 10
    finally:
        sock.close()


def test_checksummed_request_accepted(target, db):
    sock = wire.connect(*target.address)
    try:
        msg = wire.op_msg({"insert": "crc", "documents": [{"_id": 1, "s": "x" * 100}],
                           "$db": db.name}, checksum=True)
        reply = wire.roundtrip(sock, msg)
        # (recv_message verifies the reply's own checksum if it carries one.)
        assert reply.doc.get("ok") == 1 and reply.doc.get("n") == 1, reply.doc
        assert db.crc.find_one() == {"_id": 1, "s": "x" * 100}
    finally:
        sock.close()


def test_exhaust_get_more_stream_is_relayed(target, db, backend_exhaust):
    db.ex.insert_many([{"_id": i} for i in range(95)])
    sock = wire.connect(*target.address)
    try:
        first = wire.command(sock, {"find": "ex", "sort": {"_id": 1}, "batchSize": 10}, db.name)
        assert first.get("ok") == 1, first
        cursor_id = first["cursor"]["id"]
        seen = [d["_id"] for d in first["cursor"]["firstBatch"]]
        get_more = wire.op_msg({"getMore": cursor_id, "collection": "ex", "batchSize": 10,
                                "$db": db.name}, flags=wire.MSG_EXHAUST_ALLOWED)
        sock.sendall(get_more)
        request_id = int.from_bytes(get_more[4:8], "little", signed=True)
        while cursor_id:
            reply = wire.recv_message(sock)
            assert reply.response_to == request_id
            assert reply.doc.get("ok") == 1, reply.doc
            seen += [d["_id"] for d in reply.doc["cursor"]["nextBatch"]]
            cursor_id = reply.doc["cursor"]["id"]
            if cursor_id and not reply.flags & wire.MSG_MORE_TO_COME:
                # The server chose not to stream; ask again.
                get_more = wire.op_msg({"getMore": cursor_id, "collection": "ex",
                                        "batchSize": 10, "$db": db.name},
                                       flags=wire.MSG_EXHAUST_ALLOWED)
                sock.sendall(get_more)
                request_id = int.from_bytes(get_more[4:8], "little", signed=True)
            elif reply.flags & wire.MSG_MORE_TO_COME:
                request_id = reply.request_id  # the next streamed reply answers this one
        assert seen == list(range(95))
        assert wire.command(sock, {"ping": 1}).get("ok") == 1  # the stream ended cleanly
    finally:
        sock.close()
