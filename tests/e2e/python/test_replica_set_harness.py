"""Self test of the stand-in replica set (replica_set.py), with plain drivers, no remold."""

from __future__ import annotations

import ctypes
import ctypes.util
import datetime
import json
import socket
import time
import uuid

import pymongo
import pytest
from pymongo import ReadPreference
from pymongo.errors import NotPrimaryError
from pymongo.read_preferences import Secondary
from pymongo.server_type import SERVER_TYPE

import wire
from replica_set import ShimReplicaSet

DB = "rs_harness"


@pytest.fixture(scope="module")
def rs():
    with ShimReplicaSet() as shim_set:
        for m in shim_set.members:
            m.direct_client()[DB].whoami.replace_one({"_id": "whoami"}, {"member": m.address},
                                                     upsert=True)
        yield shim_set


@pytest.fixture(autouse=True)
def _restore(rs):
    yield
    rs.reset()


@pytest.fixture
def clients():
    made = []

    def make(uri, **kwargs):
        kwargs.setdefault("serverSelectionTimeoutMS", 10_000)
        c = pymongo.MongoClient(uri, **kwargs)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def wait_for(predicate, timeout=5.0, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def server_type(client, member):
    sd = client.topology_description.server_descriptions().get(member.address_tuple)
    return sd.server_type if sd else None


def whoami(client, read_preference, **kwargs):
    coll = client.get_database(DB, read_preference=read_preference).whoami
    return coll.find_one({"_id": "whoami"}, **kwargs)["member"]


def test_discovery_and_writes_go_to_primary(rs, clients):
    m0, m1, m2 = rs.members
    assert rs.primary is m0
    client = clients(rs.uri(heartbeatFrequencyMS=500))
    marker = uuid.uuid4().hex
    client[DB].docs.insert_one({"_id": marker})
    assert client.primary == m0.address_tuple
    wait_for(lambda: client.secondaries == {m1.address_tuple, m2.address_tuple},
             what="both secondaries discovered")
    assert client.topology_description.topology_type_name == "ReplicaSetWithPrimary"
    assert m0.direct_client()[DB].docs.find_one({"_id": marker}) is not None
    assert m1.direct_client()[DB].docs.find_one({"_id": marker}) is None
    assert m2.direct_client()[DB].docs.find_one({"_id": marker}) is None
    assert m0.counts["insert"] >= 1 and m0.counts["hello(local)"] >= 1
    assert m1.counts["insert"] == 0


def test_reads_follow_read_preference(rs, clients):
    m0, m1, m2 = rs.members
    client = clients(rs.uri(heartbeatFrequencyMS=500))
    assert whoami(client, ReadPreference.PRIMARY) == m0.address
    wait_for(lambda: len(client.secondaries) == 2, what="secondaries discovered")
    seen = {whoami(client, ReadPreference.SECONDARY) for _ in range(20)}
    assert seen and seen <= {m1.address, m2.address}
    assert whoami(client, ReadPreference.SECONDARY_PREFERRED) in {m1.address, m2.address}


def test_direct_connection_to_secondary_refuses(rs, clients):
    m1 = rs.members[1]
    m1.reset_counts()
    direct = clients(f"mongodb://{m1.address}/?directConnection=true")
    with pytest.raises(NotPrimaryError) as info:
        direct[DB].docs.insert_one({"x": 1})
    assert info.value.details["code"] == 10107
    assert m1.counts["refused:insert"] >= 1 and m1.counts["insert"] == 0
    # pymongo sends primaryPreferred to a replica-set member on a direct
    # connection, so its own reads succeed there (as against a real mongod).
    assert direct[DB].whoami.find_one({"_id": "whoami"})["member"] == m1.address

    sock = wire.connect(m1.host, m1.port)
    try:
        reply = wire.command(sock, {"find": "whoami"}, db=DB)
        assert (reply["code"], reply["codeName"]) == (13435, "NotPrimaryNoSecondaryOk")
        reply = wire.command(sock, {"find": "whoami", "$readPreference": {"mode": "secondary"}},
                             db=DB)
        assert reply["ok"] == 1.0 and reply["cursor"]["firstBatch"][0]["member"] == m1.address
        reply = wire.command(sock, {"aggregate": "whoami", "pipeline": [{"$out": "copy"}],
                                    "cursor": {}, "$readPreference": {"mode": "secondary"}},
                             db=DB)
        assert (reply["code"], reply["codeName"]) == (10107, "NotWritablePrimary")
        assert wire.command(sock, {"ping": 1})["ok"] == 1.0
        # Legacy OP_QUERY: the SecondaryOk flag decides.
        reply = wire.legacy_command(sock, {"count": "whoami"}, db=DB)
        assert reply.doc["code"] == 13435
        reply = wire.roundtrip(sock, wire.op_query(f"{DB}.$cmd", {"count": "whoami"}, flags=4))
        assert reply.opcode == wire.OP_REPLY and reply.doc["n"] == 1
    finally:
        sock.close()


def test_hello_shapes(rs):
    m0, m1, _ = rs.members
    sock = wire.connect(m0.host, m0.port)
    try:
        reply = wire.legacy_command(sock, {"isMaster": 1, "helloOk": True,
                                           "compression": ["zlib", "snappy"]})
        doc = reply.doc
        assert doc["ismaster"] is True and doc["secondary"] is False
        assert doc["helloOk"] is True and "compression" not in doc
        assert doc["setName"] == "rs0" and doc["hosts"] == [m.address for m in rs.members]
        assert doc["me"] == m0.address and doc["primary"] == m0.address
        assert doc["maxWireVersion"] >= 7 and doc["logicalSessionTimeoutMinutes"] == 30
        wrapped = wire.legacy_command(sock, {"$query": {"ismaster": 1}}).doc
        assert wrapped["ismaster"] is True and "helloOk" not in wrapped
        hello = wire.command(sock, {"hello": 1})
        assert hello["isWritablePrimary"] is True and "ismaster" not in hello
        election_id = hello["electionId"]
    finally:
        sock.close()
    rs.step_up(m1)
    sock = wire.connect(m1.host, m1.port)
    try:
        hello = wire.command(sock, {"hello": 1})
        assert hello["isWritablePrimary"] is True and hello["electionId"] > election_id
    finally:
        sock.close()
    rs.step_down()
    sock = wire.connect(m1.host, m1.port)
    try:
        hello = wire.command(sock, {"hello": 1})
        assert hello["isWritablePrimary"] is False and hello["secondary"] is True
        assert "primary" not in hello and "electionId" not in hello
    finally:
        sock.close()
    assert rs.primary is None


def test_step_up_is_followed(rs, clients):
    m0, m1, m2 = rs.members
    fast = clients(rs.uri(heartbeatFrequencyMS=500))
    # Default heartbeatFrequencyMS (10 s): only a woken awaitable hello can
    # make it notice the election within the wait below.
    streaming = clients(rs.uri())
    fast.admin.command("ping")
    streaming.admin.command("ping")
    wait_for(lambda: streaming.primary == m0.address_tuple and len(streaming.secondaries) == 2,
             what="streaming client discovery")
    # Both clients stream: their monitors park awaitable hellos on every member.
    wait_for(lambda: all(m.awaiting >= 1 for m in rs.members), what="awaitable hellos")
    # No busy loop: idle monitors answer about once per maxAwaitTimeMS.
    rs.reset_counts()
    time.sleep(1.0)
    for m in rs.members:
        counts = m.counts
        assert counts["hello(local)"] < 20, counts

    rs.step_up(m1)
    wait_for(lambda: fast.primary == m1.address_tuple, what="fast client follows step_up")
    wait_for(lambda: streaming.primary == m1.address_tuple, timeout=3.0,
             what="streaming client follows step_up")
    assert server_type(streaming, m0) == SERVER_TYPE.RSSecondary
    marker = uuid.uuid4().hex
    fast[DB].docs.insert_one({"_id": marker})
    assert m1.direct_client()[DB].docs.find_one({"_id": marker}) is not None
    assert m0.direct_client()[DB].docs.find_one({"_id": marker}) is None
    assert whoami(fast, ReadPreference.PRIMARY) == m1.address
    assert whoami(fast, ReadPreference.SECONDARY) in {m0.address, m2.address}

    rs.step_down()
    wait_for(lambda: fast.primary is None, what="no primary after step_down")
    assert fast.topology_description.topology_type_name == "ReplicaSetNoPrimary"


def test_stop_and_start(rs, clients):
    m2 = rs.members[2]
    client = clients(rs.uri(heartbeatFrequencyMS=500))
    wait_for(lambda: server_type(client, m2) == SERVER_TYPE.RSSecondary, what="m2 discovered")

    idle = wire.connect(m2.host, m2.port)
    waiting = wire.connect(m2.host, m2.port)
    hello = wire.command(waiting, {"hello": 1})
    # An awaitable hello that would block for 10 s: stop() must cut it short.
    waiting.sendall(wire.op_msg({"hello": 1, "topologyVersion": hello["topologyVersion"],
                                 "maxAwaitTimeMS": 10_000, "$db": "admin"}))
    assert wire.command(idle, {"ping": 1})["ok"] == 1.0
    time.sleep(0.2)
    started = time.monotonic()
    rs.stop(m2)
    with pytest.raises((wire.ConnectionClosed, ConnectionError)):
        wire.recv_message(waiting, timeout=5)
    assert time.monotonic() - started < 2
    with pytest.raises((wire.ConnectionClosed, ConnectionError)):
        wire.command(idle, {"ping": 1})
    idle.close()
    waiting.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((m2.host, m2.port), timeout=2).close()
    wait_for(lambda: server_type(client, m2) == SERVER_TYPE.Unknown, what="m2 marked Unknown")
    assert client.primary == rs.members[0].address_tuple

    rs.start(m2)
    sock = wire.connect(m2.host, m2.port)
    try:
        assert wire.command(sock, {"ping": 1})["ok"] == 1.0
    finally:
        sock.close()
    wait_for(lambda: server_type(client, m2) == SERVER_TYPE.RSSecondary, what="m2 back")
    # The stand-in kept its data.
    assert m2.direct_client()[DB].whoami.find_one({"_id": "whoami"})["member"] == m2.address


def test_delay(rs, clients):
    m1 = rs.members[1]
    direct = clients(f"mongodb://{m1.address}/?directConnection=true")
    direct.admin.command("ping")
    rs.delay(m1, 0.5)
    started = time.monotonic()
    direct.admin.command("ping")
    assert time.monotonic() - started >= 0.5
    rs.delay(m1, 0)
    started = time.monotonic()
    direct.admin.command("ping")
    assert time.monotonic() - started < 0.4


def test_tags_and_lag(rs, clients):
    _, m1, m2 = rs.members
    client = clients(rs.uri(heartbeatFrequencyMS=500))
    wait_for(lambda: len(client.secondaries) == 2, what="secondaries discovered")
    rs.set_tags(m2, {"dc": "east"})
    rs.set_lag(m2, 200)
    direct = clients(f"mongodb://{m2.address}/?directConnection=true")
    hello = direct.admin.command("hello")
    assert hello["tags"] == {"dc": "east"}
    now = datetime.datetime.now(datetime.timezone.utc)
    lag = (now - hello["lastWrite"]["lastWriteDate"].replace(tzinfo=datetime.timezone.utc))
    assert 195 <= lag.total_seconds() <= 205
    other = clients(f"mongodb://{m1.address}/?directConnection=true").admin.command("hello")
    assert "tags" not in other
    other_lag = now - other["lastWrite"]["lastWriteDate"].replace(tzinfo=datetime.timezone.utc)
    assert abs(other_lag.total_seconds()) < 5

    # Through the set: tag sets and maxStalenessSeconds select accordingly.
    wait_for(lambda: client.topology_description.server_descriptions()[m2.address_tuple].tags
             == {"dc": "east"}, what="client sees the tags")
    for _ in range(5):
        assert whoami(client, Secondary(tag_sets=[{"dc": "east"}])) == m2.address
        assert whoami(client, Secondary(max_staleness=90)) == m1.address


# --------------------------------------------------------------------------
# mongo-c-driver (what remold uses), through ctypes when libmongoc is here.


class _BsonError(ctypes.Structure):
    _fields_ = [("domain", ctypes.c_uint32), ("code", ctypes.c_uint32),
                ("message", ctypes.c_char * 504)]


class _HostList(ctypes.Structure):
    _fields_ = [("next", ctypes.c_void_p), ("host", ctypes.c_char * 256),
                ("host_and_port", ctypes.c_char * 262), ("port", ctypes.c_uint16),
                ("family", ctypes.c_int)]


def _load_libmongoc():
    try:
        mongoc = ctypes.CDLL(ctypes.util.find_library("mongoc-1.0") or "libmongoc-1.0.so.0")
        libbson = ctypes.CDLL(ctypes.util.find_library("bson-1.0") or "libbson-1.0.so.0")
    except OSError:
        pytest.skip("libmongoc-1.0 not found")
    vp = ctypes.c_void_p
    for name, restype, argtypes in [
        ("mongoc_init", None, []),
        ("mongoc_uri_new", vp, [ctypes.c_char_p]),
        ("mongoc_uri_destroy", None, [vp]),
        ("mongoc_client_pool_new", vp, [vp]),
        ("mongoc_client_pool_pop", vp, [vp]),
        ("mongoc_client_pool_push", None, [vp, vp]),
        ("mongoc_client_pool_destroy", None, [vp]),
        ("mongoc_client_select_server", vp, [vp, ctypes.c_bool, vp, ctypes.POINTER(_BsonError)]),
        ("mongoc_server_description_type", ctypes.c_char_p, [vp]),
        ("mongoc_server_description_host", ctypes.POINTER(_HostList), [vp]),
        ("mongoc_server_description_destroy", None, [vp]),
        ("mongoc_client_new", vp, [ctypes.c_char_p]),
        ("mongoc_client_destroy", None, [vp]),
        ("mongoc_read_prefs_new", vp, [ctypes.c_int]),
        ("mongoc_read_prefs_destroy", None, [vp]),
        ("mongoc_client_command_simple", ctypes.c_bool,
         [vp, ctypes.c_char_p, vp, vp, vp, ctypes.POINTER(_BsonError)]),
    ]:
        fn = getattr(mongoc, name)
        fn.restype, fn.argtypes = restype, argtypes
    for name, restype, argtypes in [
        ("bson_new_from_json", vp, [ctypes.c_char_p, ctypes.c_ssize_t, ctypes.POINTER(_BsonError)]),
        ("bson_as_relaxed_extended_json", vp, [vp, vp]),
        ("bson_destroy", None, [vp]),
        ("bson_free", None, [vp]),
    ]:
        fn = getattr(libbson, name)
        fn.restype, fn.argtypes = restype, argtypes
    mongoc.mongoc_init()
    return mongoc, libbson


def test_mongo_c_driver_view(rs):
    mongoc, libbson = _load_libmongoc()
    m0, m1, _ = rs.members
    # Pooled: background monitor threads with the streaming protocol; default
    # heartbeatFrequencyMS (10 s), so following step_up fast needs awaitable hellos.
    uri = mongoc.mongoc_uri_new(rs.uri(serverSelectionTimeoutMS=5000).encode())
    pool = mongoc.mongoc_client_pool_new(uri)
    client = mongoc.mongoc_client_pool_pop(pool)
    error = _BsonError()

    def selected(c, for_writes: bool, prefs=None) -> tuple[str, str]:
        sd = mongoc.mongoc_client_select_server(c, for_writes, prefs, ctypes.byref(error))
        assert sd, error.message.decode()
        try:
            host = mongoc.mongoc_server_description_host(sd).contents.host_and_port.decode()
            return host, mongoc.mongoc_server_description_type(sd).decode()
        finally:
            mongoc.mongoc_server_description_destroy(sd)

    def command(doc: dict) -> dict:
        cmd = libbson.bson_new_from_json(json.dumps(doc).encode(), -1, ctypes.byref(error))
        storage = ctypes.create_string_buffer(512)  # a bson_t is 128 bytes, 128-aligned
        reply = (ctypes.addressof(storage) + 127) & ~127
        try:
            ok = mongoc.mongoc_client_command_simple(client, DB.encode(), cmd, None, reply,
                                                     ctypes.byref(error))
            text = libbson.bson_as_relaxed_extended_json(reply, None)
            result = json.loads(ctypes.string_at(text).decode())
            libbson.bson_free(text)
            libbson.bson_destroy(reply)
            assert ok, error.message.decode()
            return result
        finally:
            libbson.bson_destroy(cmd)

    try:
        assert selected(client, True) == (m0.address, "RSPrimary")
        marker = uuid.uuid4().hex
        assert command({"insert": "cdriver", "documents": [{"_id": marker}]})["n"] == 1
        assert m0.direct_client()[DB].cdriver.find_one({"_id": marker}) is not None
        # Its monitors stream: an awaitable hello parked on every member.
        wait_for(lambda: all(m.awaiting >= 1 for m in rs.members), what="awaitable hellos")
        rs.step_up(m1)
        wait_for(lambda: selected(client, True) == (m1.address, "RSPrimary"), timeout=3.0,
                 what="mongo-c-driver follows step_up")
        assert command({"insert": "cdriver", "documents": [{"_id": marker}]})["n"] == 1
        assert m1.direct_client()[DB].cdriver.find_one({"_id": marker}) is not None
        # Single-threaded client: blocking scans, legacy isMaster handshake.
        single = mongoc.mongoc_client_new(rs.uri(heartbeatFrequencyMS=500).encode())
        prefs = mongoc.mongoc_read_prefs_new(2)  # MONGOC_READ_SECONDARY
        try:
            assert selected(single, True) == (m1.address, "RSPrimary")
            host, kind = selected(single, False, prefs)
            assert kind == "RSSecondary" and host != m1.address
        finally:
            mongoc.mongoc_read_prefs_destroy(prefs)
            mongoc.mongoc_client_destroy(single)
    finally:
        mongoc.mongoc_client_pool_push(pool, client)
        mongoc.mongoc_client_pool_destroy(pool)
        mongoc.mongoc_uri_destroy(uri)
