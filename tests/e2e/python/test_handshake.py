"""The handshake remold presents: one mongos-like endpoint, whatever the backend is.

Raw ``hello``/``isMaster`` over OP_MSG and over legacy OP_QUERY on
``admin.$cmd``, compared against the backend's own reply.
"""

from __future__ import annotations

import pytest

import wire

SUPPORTED_COMPRESSORS = {"snappy", "zlib", "zstd"}
# Keys that would let a driver bypass remold and talk to backend members.
FORBIDDEN_KEYS = {"hosts", "setName", "primary", "me", "passives", "arbiters"}
# Limits and session settings a driver sizes its traffic by: kept from the backend.
KEPT_KEYS = ("maxWireVersion", "maxBsonObjectSize", "maxMessageSizeBytes",
             "maxWriteBatchSize", "logicalSessionTimeoutMinutes")

OFFERS = {
    "all": ["snappy", "zlib", "zstd"],
    "zstd_only": ["zstd"],
    "zlib_snappy": ["zlib", "snappy"],
    "empty": [],
    "with_unknown": ["lz4", "zlib", "bogus"],
    "unknown_only": ["lz4"],
    "absent": None,
}

VIAS = ["op_msg_hello", "op_msg_isMaster", "op_query_isMaster", "op_query_ismaster"]


@pytest.fixture(scope="module")
def backend_hello(backend) -> dict:
    sock = wire.connect(backend.host, backend.port)
    try:
        return wire.legacy_command(sock, {"isMaster": 1}).doc
    finally:
        sock.close()


def handshake(address, via: str, offer) -> dict:
    cmd_name = {"op_msg_hello": "hello", "op_msg_isMaster": "isMaster",
                "op_query_isMaster": "isMaster", "op_query_ismaster": "ismaster"}[via]
    cmd = {cmd_name: 1, "client": {"application": {"name": "remold-e2e"}}}
    if offer is not None:
        cmd["compression"] = offer
    sock = wire.connect(*address)
    try:
        if via.startswith("op_msg"):
            reply = wire.roundtrip(sock, wire.op_msg({**cmd, "$db": "admin"}))
            assert reply.opcode == wire.OP_MSG
        else:
            reply = wire.legacy_command(sock, cmd)
            assert reply.cursor_id == 0 and len(reply.docs) == 1
            assert not reply.flags & wire.REPLY_QUERY_FAILURE
        assert reply.compressor_id is None, "a handshake reply must not be compressed"
        return reply.doc
    finally:
        sock.close()


def backend_rejects_hello(backend) -> bool:
    sock = wire.connect(backend.host, backend.port)
    try:
        return wire.command(sock, {"hello": 1}).get("ok") != 1
    finally:
        sock.close()


@pytest.mark.parametrize("offer_name", list(OFFERS))
@pytest.mark.parametrize("via", VIAS)
def test_handshake_presents_single_mongos(via, offer_name, target, backend, backend_hello,
                                          proxy_only):
    offer = OFFERS[offer_name]
    doc = handshake(target.address, via, offer)

    if via == "op_msg_hello" and doc.get("ok") != 1:
        # MongoDB before 4.4.2 has no `hello`; remold may pass that refusal on.
        assert backend_rejects_hello(backend), f"remold refused hello the backend knows: {doc}"
        assert isinstance(doc.get("errmsg"), str) and doc.get("code") == 59, doc
        # A failed handshake is relayed as the backend sent it: no server
        # description grafted onto an error.
        assert "msg" not in doc and "compression" not in doc, doc
        return

    assert doc.get("ok") == 1, doc
    assert doc.get("msg") == "isdbgrid"
    assert FORBIDDEN_KEYS.isdisjoint(doc), f"backend topology leaked: {FORBIDDEN_KEYS & set(doc)}"
    if via == "op_msg_hello":
        assert doc.get("isWritablePrimary") is True
    else:
        assert doc.get("ismaster") is True
    for key in KEPT_KEYS:
        assert doc.get(key) == backend_hello.get(key), f"{key}: {doc.get(key)} vs backend {backend_hello.get(key)}"

    compression = doc.get("compression", [])
    assert isinstance(compression, list)
    assert len(set(compression)) == len(compression), compression
    assert set(compression) <= set(offer or []), f"answered {compression} to an offer of {offer}"
    assert set(compression) <= SUPPORTED_COMPRESSORS


@pytest.mark.parametrize("via", VIAS)
def test_handshake_negotiates_a_compressor_remold_supports(via, target, proxy_only):
    """remold decodes snappy, zlib and zstd itself, whatever the backend does."""
    for name in sorted(SUPPORTED_COMPRESSORS):
        doc = handshake(target.address, via, ["lz4", name])
        if doc.get("ok") != 1 and via == "op_msg_hello":
            pytest.skip("backend has no hello (checked by test_handshake_presents_single_mongos)")
        assert doc.get("compression") == [name], doc
