"""OP_COMPRESSED through remold: pymongo with compressors=X, and raw frames.

remold speaks snappy, zlib and zstd to clients itself, so compression must be
negotiated through remold even when the backend has none. Under
REMOLD_TEST_NO_PROXY=1 these tests run only if the backend itself compresses.
"""

from __future__ import annotations

import os
import threading
from collections import Counter

import pytest
from pymongo import monitoring, network_layer
from pymongo.synchronous import pool as pool_module

import wire

COMPRESSORS = ["snappy", "zlib", "zstd"]


class HeartbeatLog(monitoring.ServerHeartbeatListener):
    def __init__(self):
        self.replies = []
        self.got_one = threading.Event()

    def started(self, event):
        pass

    def succeeded(self, event):
        self.replies.append(event.reply)
        self.got_one.set()

    def failed(self, event):
        pass


@pytest.fixture
def app_handshakes(monkeypatch) -> list:
    """Handshake replies (pymongo Hello objects) of application connections.

    pymongo's monitor connections never offer compression, so the replies
    that matter are those of pooled connections, which pymongo does not
    publish; wrap the internal handshake method to see them.
    """
    replies = []
    real = pool_module.Connection._hello

    def recording(self, *args, **kwargs):
        offered = not self.performed_handshake and self.compression_settings
        hello = real(self, *args, **kwargs)
        if offered:
            replies.append(hello)
        return hello

    monkeypatch.setattr(pool_module.Connection, "_hello", recording)
    return replies


@pytest.fixture
def require_compression(target, backend):
    if target.is_proxy:
        return
    sock = wire.connect(backend.host, backend.port)
    try:
        offered = wire.legacy_command(sock, {"isMaster": 1, "compression": COMPRESSORS}).doc
    finally:
        sock.close()
    if not offered.get("compression"):
        pytest.skip("REMOLD_TEST_NO_PROXY=1 and the backend negotiates no compression")


@pytest.fixture
def decompressed_replies(monkeypatch) -> Counter:
    """Counts replies pymongo had to decompress, by compressor id."""
    seen: Counter = Counter()
    real = network_layer.decompress

    def counting(data, compressor_id):
        seen[compressor_id] += 1
        return real(data, compressor_id)

    monkeypatch.setattr(network_layer, "decompress", counting)
    return seen


@pytest.mark.parametrize("name", COMPRESSORS)
def test_pymongo_compressed_connection(name, db, make_client, decompressed_replies,
                                       app_handshakes, require_compression):
    compressor_id = wire.COMPRESSOR_IDS[name]
    heartbeats = HeartbeatLog()
    c = make_client(compressors=name, event_listeners=[heartbeats])
    coll = c[db.name].items

    docs = [{"_id": i, "text": f"row {i} " + "compressible " * 20, "n": i} for i in range(300)]
    assert coll.insert_many(docs).inserted_ids == list(range(300))
    assert list(coll.find().sort("_id", 1).batch_size(50)) == docs
    assert coll.update_many({"n": {"$gte": 150}}, {"$inc": {"n": 1000}}).modified_count == 150
    assert list(coll.aggregate([{"$group": {"_id": None, "s": {"$sum": "$n"}}}])) == [
        {"_id": None, "s": sum(range(300)) + 150 * 1000}]
    assert coll.delete_many({"n": {"$lt": 100}}).deleted_count == 100
    big = {"_id": "big", "data": os.urandom(4 * 1024 * 1024), "text": "z" * 1_000_000}
    coll.insert_one(big)
    assert coll.find_one({"_id": "big"}) == big

    # Application connections offered [name]; remold accepted exactly that.
    assert app_handshakes, "no application connection handshake seen"
    assert [h.compressors for h in app_handshakes] == [[name]] * len(app_handshakes)
    # The monitor offers nothing, so it must be granted nothing.
    assert heartbeats.got_one.wait(10), "no successful heartbeat"
    assert all(not h.compressors for h in heartbeats.replies)

    # pymongo acted on it...
    pools = [server.pool for server in c._topology._servers.values()]
    conns = [conn for pool in pools for conn in pool.conns]
    assert conns, "no pooled connection to inspect"
    for conn in conns:
        assert conn.compression_context is not None, "connection negotiated no compression"
        assert conn.compression_context.compressor_id == compressor_id

    # ...and remold's replies really came back as OP_COMPRESSED with that compressor.
    assert decompressed_replies[compressor_id] >= 5, dict(decompressed_replies)
    assert set(decompressed_replies) == {compressor_id}


@pytest.mark.parametrize("name", COMPRESSORS)
def test_raw_op_compressed_op_msg(name, db, target, require_compression):
    compressor_id = wire.COMPRESSOR_IDS[name]
    sock = wire.connect(*target.address)
    try:
        hello = wire.legacy_command(sock, {"isMaster": 1, "compression": [name]}).doc
        assert hello.get("compression") == [name], hello

        # An insert whose documents travel in a kind-1 section, compressed.
        docs = [{"_id": i, "s": "abc" * 30} for i in range(20)]
        insert = wire.op_msg({"insert": "raw", "ordered": True, "$db": db.name},
                             sequences=[wire.section_sequence("documents", docs)])
        reply = wire.roundtrip(sock, wire.op_compressed(wire.OP_MSG, insert[16:], compressor_id))
        assert reply.compressor_id == compressor_id, "reply to a compressed request not compressed"
        assert reply.opcode == wire.OP_MSG
        assert reply.doc.get("ok") == 1 and reply.doc.get("n") == 20, reply.doc

        find = wire.compressed_op_msg(
            {"find": "raw", "filter": {}, "sort": {"_id": 1}, "$db": db.name}, compressor_id)
        reply = wire.roundtrip(sock, find)
        assert reply.compressor_id == compressor_id
        assert reply.doc.get("ok") == 1, reply.doc
        assert reply.doc["cursor"]["firstBatch"] == docs

        # An uncompressed request on the same connection is still answered.
        assert wire.command(sock, {"ping": 1}).get("ok") == 1
    finally:
        sock.close()
