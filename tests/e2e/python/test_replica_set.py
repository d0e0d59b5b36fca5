"""remold in front of a replica set: primary routing, read preferences,
cursors that stay on their member, and failover (proxy/routing/topology_monitor.h,
proxy/routing/server_selection.h).

The set is ``replica_set.ShimReplicaSet``: three stand-ins, each behind a
shim that answers hello as a member and refuses writes (and reads without
secondaryOk) when it is not the primary. Each member's stand-in holds a
marker document naming the member, so a read through remold shows where it
landed. The stand-ins do not replicate: a failover here is an election with
catch-up done by the test (``promote``: no primary, the old primary's data
copied to the new one, then the new one elected), and writes that reach the
old primary after its step-down are refused by it, as mongod refuses them.

remold monitors the set with a 500 ms heartbeat; the shims also bump their
topologyVersion on every change, so the monitor's awaitable hellos return at
once, as a real 4.4+ member's do.

Under REMOLD_TEST_BACKEND_URI these tests skip: they drive elections, tags,
lag and member failures, which a shared server does not let a test do.
"""
from __future__ import annotations

import threading
import time
import uuid
from typing import Callable

import pymongo
import pytest
from bson import Binary, Int64
from pymongo.errors import OperationFailure, PyMongoError
from pymongo.read_preferences import Nearest, Primary, PrimaryPreferred, Secondary, SecondaryPreferred

import wire
from conftest import BACKEND_URI_ENV, NO_PROXY, Remold
from replica_set import ShimReplicaSet
from test_metrics import free_port, http_get, scrape, value, wait_for

pytestmark = pytest.mark.skipif(
    bool(BACKEND_URI_ENV) or NO_PROXY,
    reason="drives elections, tags and member failures of a set the harness owns "
           "(REMOLD_TEST_BACKEND_URI / REMOLD_TEST_NO_PROXY is set)")

MARKER_DB = "rs_whoami"
WRITERS = 16


@pytest.fixture(scope="module")
def rs():
    with ShimReplicaSet(3) as replica_set:
        for member in replica_set.members:
            member.direct_client()[MARKER_DB].me.replace_one(
                {"_id": 1}, {"_id": 1, "member": member.address}, upsert=True)
        yield replica_set


@pytest.fixture(autouse=True)
def fresh_set(rs):
    rs.reset()
    rs.reset_counts()
    yield


@pytest.fixture
def rs_remold(rs, private_remold) -> Callable[..., Remold]:
    """A remold of the test's own in front of the set: 500 ms heartbeats."""
    def start(*extra: str, **uri_options) -> Remold:
        uri_options.setdefault("heartbeatFrequencyMS", 500)
        uri_options.setdefault("serverSelectionTimeoutMS", 15000)
        remold = private_remold(backend_uri=rs.uri(**uri_options), extra_args=("--log-level", "info", *extra))
        wait_for(lambda: whole_set_known(remold.stderr(), len(rs.members)), 15, "the monitor to know every member")
        return remold

    return start


def whole_set_known(log: str, size: int) -> bool:
    """Whether remold's last topology line lists a primary and the rest secondaries."""
    lines = [line for line in log.splitlines() if "backend topology: ReplicaSetWithPrimary" in line]
    return bool(lines) and lines[-1].count(" primary") == 1 and lines[-1].count(" secondary") == size - 1


def landed(remold: Remold, read_preference: dict | None, sessions: int = 12) -> set[str]:
    """The members that answered one marker read on each of `sessions` new connections."""
    members = set()
    for _ in range(sessions):
        with wire.connect(remold.host, remold.port) as sock:
            command = {"find": "me", "filter": {}}
            if read_preference is not None:
                command["$readPreference"] = read_preference
            reply = wire.command(sock, command, db=MARKER_DB, timeout=20)
            assert reply.get("ok") == 1, reply
            members.add(reply["cursor"]["firstBatch"][0]["member"])
    return members


def wait_until_routed(remold: Remold, read_preference: dict, expected: set[str], timeout: float = 10,
                      sessions: int = 4):
    """Reads until the monitor has seen the change the test made."""
    return wait_for(lambda: (got := landed(remold, read_preference, sessions)) <= expected and got,
                    timeout, f"reads with {read_preference} to land on {expected}")


def promote(rs: ShimReplicaSet, new, db_name: str) -> tuple[float, float]:
    """An election with catch-up; returns (step-down time, election time)."""
    old = rs.primary
    stepped_down = time.monotonic()
    rs.step_down()
    time.sleep(0.3)  # requests the old primary accepted before stepping down finish
    source, target = old.direct_client()[db_name], new.direct_client()[db_name]
    for name in source.list_collection_names():
        target[name].drop()
        documents = list(source[name].find())
        if documents:
            target[name].insert_many(documents)
    rs.step_up(new)
    return stepped_down, time.monotonic()


# --------------------------------------------------------------------------
# Routing.


def test_writes_and_reads_without_preference_go_to_the_primary(rs, rs_remold, db_name):
    remold = rs_remold()
    with pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=20_000) as client:
        client[db_name].things.insert_many([{"_id": i} for i in range(10)])
        assert client[db_name].things.count_documents({}) == 10
        client[db_name].things.update_one({"_id": 1}, {"$set": {"x": 1}})
    primary, *secondaries = rs.members
    assert primary.direct_client()[db_name].things.count_documents({}) == 10
    for secondary in secondaries:
        assert secondary.direct_client()[db_name].things.count_documents({}) == 0
        assert not any(name.startswith("refused:") for name in secondary.counts), secondary.counts
    assert landed(remold, None) == {primary.address}
    for member in rs.members:
        member.direct_client().drop_database(db_name)


def test_routing_table(rs, rs_remold):
    """Read preference -> members, as the closing note of issue 12 quotes it."""
    primary, west, east = rs.members
    rs.set_tags(west, {"dc": "west"})
    rs.set_tags(east, {"dc": "east"})
    remold = rs_remold(serverSelectionTimeoutMS=1500)
    table = [
        (None, {primary.address}),
        ({"mode": "primary"}, {primary.address}),
        ({"mode": "primaryPreferred"}, {primary.address}),
        ({"mode": "secondary"}, {west.address, east.address}),
        ({"mode": "secondaryPreferred"}, {west.address, east.address}),
        ({"mode": "nearest"}, {primary.address, west.address, east.address}),
        ({"mode": "secondary", "tags": [{"dc": "west"}]}, {west.address}),
        ({"mode": "secondary", "tags": [{"dc": "north"}, {"dc": "east"}]}, {east.address}),
        ({"mode": "secondaryPreferred", "tags": [{"dc": "north"}]}, {primary.address}),
        ({"mode": "nearest", "tags": [{"dc": "east"}]}, {east.address}),
    ]
    wait_until_routed(remold, {"mode": "secondary", "tags": [{"dc": "west"}]}, {west.address})
    for preference, expected in table:
        got = landed(remold, preference, sessions=24)
        # Where a choice exists, every eligible member is used (sessions spread).
        assert got == expected, f"{preference}: landed on {got}, expected {expected}"
        print(f"routing: {preference} -> {sorted(got)}")

    # No eligible member: mongos's answer after the selection timeout.
    with wire.connect(remold.host, remold.port) as sock:
        started = time.monotonic()
        reply = wire.command(sock, {"find": "me", "filter": {},
                                    "$readPreference": {"mode": "secondary", "tags": [{"dc": "north"}]}},
                             db=MARKER_DB, timeout=20)
        assert reply["ok"] == 0 and reply["code"] == 133, reply
        assert reply["codeName"] == "FailedToSatisfyReadPreference"
        assert time.monotonic() - started >= 1.4

    # Stale secondaries are left out (lastWriteDate 200 s behind).
    rs.set_lag(west, 200)
    wait_until_routed(remold, {"mode": "secondary", "maxStalenessSeconds": 90}, {east.address})
    assert landed(remold, {"mode": "secondary", "maxStalenessSeconds": 90}, 16) == {east.address}
    assert landed(remold, {"mode": "secondary"}, 16) == {west.address, east.address}


def test_nearest_leaves_out_a_slow_member(rs, rs_remold):
    """The latency window: a member 100 ms slower than the fastest is not
    near, once the monitor's round-trip average has seen it."""
    primary, slow, fast = rs.members
    remold = rs_remold()
    # All three are near once the round-trip averages settle (a busy machine
    # can hold one back past the 15 ms window for the first heartbeats).
    everyone = {primary.address, slow.address, fast.address}
    wait_for(lambda: landed(remold, {"mode": "nearest"}, 24) == everyone, 20,
             f"reads with nearest to land on all of {everyone}")
    rs.delay(slow, 0.1)
    wait_until_routed(remold, {"mode": "nearest"}, {primary.address, fast.address}, timeout=20, sessions=16)
    assert landed(remold, {"mode": "nearest"}, 24) == {primary.address, fast.address}
    assert landed(remold, {"mode": "secondary"}, 16) == {fast.address}
    # Still eligible where it is the only choice.
    rs.set_tags(slow, {"disk": "hdd"})
    wait_until_routed(remold, {"mode": "secondary", "tags": [{"disk": "hdd"}]}, {slow.address})
    rs.delay(slow, 0)


def test_pymongo_read_preferences_through_remold(rs, rs_remold):
    remold = rs_remold()
    primary, *secondaries = rs.members
    with pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=20_000) as client:
        def member(preference):
            return client.get_database(MARKER_DB, read_preference=preference).me.find_one()["member"]
        assert member(Primary()) == primary.address
        assert member(PrimaryPreferred()) == primary.address
        assert member(Secondary()) in {m.address for m in secondaries}
        assert member(SecondaryPreferred()) in {m.address for m in secondaries}
        assert member(Nearest()) in {m.address for m in rs.members}
        assert member(Secondary(max_staleness=120)) in {m.address for m in secondaries}


def test_invalid_read_preferences_are_refused_as_mongos_refuses_them(rs, rs_remold):
    remold = rs_remold()
    cases = [
        ({"mode": "secondary", "maxStalenessSeconds": 30}, 160),
        ({"mode": "secondary", "maxStalenessSeconds": -1}, 2),
        ({"mode": "primary", "maxStalenessSeconds": 120}, 2),
        ({"mode": "primary", "tags": [{"dc": "west"}]}, 2),
        ({"mode": "fastest"}, 9),
    ]
    with wire.connect(remold.host, remold.port) as sock:
        for preference, code in cases:
            reply = wire.command(sock, {"find": "me", "filter": {}, "$readPreference": preference},
                                 db=MARKER_DB)
            assert reply["ok"] == 0 and reply["code"] == code, (preference, reply)
        # The connection keeps serving.
        assert wire.command(sock, {"ping": 1})["ok"] == 1
    with pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=20_000) as client:
        with pytest.raises(OperationFailure) as refused:
            client.get_database(MARKER_DB, read_preference=Secondary(max_staleness=30)).me.find_one()
        assert refused.value.code == 160


# --------------------------------------------------------------------------
# Cursors.


def test_cursors_never_cross_members(rs, rs_remold, db_name):
    remold = rs_remold()
    for member in rs.members:
        member.direct_client()[db_name].docs.insert_many(
            [{"_id": i, "member": member.address} for i in range(60)])
    try:
        with pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=20_000, maxPoolSize=8) as client:
            secondaries = client.get_database(db_name, read_preference=Secondary())
            # Several cursors at once, their getMores interleaved over the pool.
            cursors = [secondaries.docs.find().batch_size(7) for _ in range(8)]
            seen = [[] for _ in cursors]
            for _ in range(60):
                for cursor, docs in zip(cursors, seen):
                    docs.append(next(cursor))
            for docs in seen:
                assert len(docs) == 60
                assert len({d["member"] for d in docs}) == 1, "a cursor crossed members"
                assert docs[0]["member"] != rs.members[0].address

            # A cursor on the primary outlives a primary switch: its getMores
            # still go to the member that holds it.
            cursor = client[db_name].docs.find().batch_size(5)
            first = [next(cursor) for _ in range(5)]
            rs.step_up(rs.members[1])
            wait_until_routed(remold, {"mode": "primary"}, {rs.members[1].address})
            rest = list(cursor)
            assert {d["member"] for d in first + rest} == {rs.members[0].address}
            assert len(first + rest) == 60
    finally:
        for member in rs.members:
            member.direct_client().drop_database(db_name)


# --------------------------------------------------------------------------
# Failover.


def run_writers(client: pymongo.MongoClient, db_name: str, during: Callable[[], None],
                insert: Callable[[pymongo.database.Database, int, int], None] | None = None,
                writers: int = WRITERS, before: float = 1.5, after: float = 2.0):
    """`writers` threads insert until `during` has run; returns what they saw."""
    stop = threading.Event()
    acked: list[list[tuple[str, float, float]]] = [[] for _ in range(writers)]
    errors: list[tuple[int, str]] = []
    database = client[db_name]
    insert = insert or (lambda db, i, n: db.things.insert_one({"_id": f"{i}-{n}", "w": i}))

    def write(i: int):
        n = 0
        while not stop.is_set():
            started = time.monotonic()
            try:
                insert(database, i, n)
                acked[i].append((f"{i}-{n}", started, time.monotonic()))
            except PyMongoError as exc:
                errors.append((i, f"{type(exc).__name__}: {str(exc)[:160]}"))
            n += 1

    threads = [threading.Thread(target=write, args=(i,), daemon=True) for i in range(writers)]
    for thread in threads:
        thread.start()
    time.sleep(before)
    during()
    time.sleep(after)
    stop.set()
    for thread in threads:
        thread.join(60)
    return acked, errors


def recovery_figures(acked, stepped_down: float, elected: float) -> dict:
    """Seconds from the election until every writer had a write acknowledged
    that it began after the step-down; the slowest single write."""
    per_writer = []
    for writes in acked:
        after = [done for _, began, done in writes if began >= stepped_down]
        assert after, "a writer never succeeded after the switch"
        per_writer.append(min(after) - elected)
    slowest = max(done - began for writes in acked for _, began, done in writes)
    return {"all_writers_back_s": round(max(per_writer), 3), "slowest_write_s": round(slowest, 3)}


# Pooled mode: the same failovers with the writers sharing 3 backend
# connections per member (one worker, so one pool): the pool drains from the
# old primary and fills toward the new one.
POOLED = ("--backend-pool-size", "3", "--threads", "1")


@pytest.mark.parametrize("mode", [(), POOLED], ids=["per-client", "pooled"])
def test_primary_switch_under_write_load_loses_nothing(rs, rs_remold, db_name, mode):
    remold = rs_remold(*mode)
    times = {}
    with pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=30_000, maxPoolSize=WRITERS + 4) as client:
        def switch():
            times["down"], times["up"] = promote(rs, rs.members[1], db_name)
        acked, errors = run_writers(client, db_name, switch)
        assert errors == [], errors[:5]
        ids = [doc_id for writes in acked for doc_id, _, _ in writes]
        stored = [d["_id"] for d in rs.members[1].direct_client()[db_name].things.find({}, {"_id": 1})]
        assert len(stored) == len(set(stored))
        missing = set(ids) - set(stored)
        assert not missing, f"{len(missing)} acknowledged writes lost: {sorted(missing)[:5]}"
        # Nothing was written behind the new primary's back.
        assert len(stored) == len(ids), (len(stored), len(ids))
        figures = recovery_figures(acked, times["down"], times["up"])
        print(f"failover (step-down, catch-up, election): {len(ids)} writes acknowledged, "
              f"0 lost, 0 client errors, {figures}, no primary for "
              f"{times['up'] - times['down']:.3f} s")
        # The old primary refused what reached it after stepping down, and
        # remold sent those writes on to the new one.
        assert rs.members[1].counts["insert"] > 0
    for member in rs.members:
        member.direct_client().drop_database(db_name)


@pytest.mark.parametrize("mode", [(), POOLED], ids=["per-client", "pooled"])
def test_primary_lost_under_write_load(rs, rs_remold, db_name, mode):
    """The primary dies (its connections drop mid-request): drivers get a
    network error and retry; remold sends the retries to the new primary."""
    remold = rs_remold(*mode)
    times = {}
    with pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=30_000, maxPoolSize=WRITERS + 4) as client:
        def lose():
            old, new = rs.members[0], rs.members[2]
            times["down"] = time.monotonic()
            rs.stop(old)
            source, target = old.direct_client()[db_name], new.direct_client()[db_name]
            time.sleep(0.3)
            documents = list(source.things.find())
            target.things.drop()
            if documents:
                target.things.insert_many(documents)
            rs.step_up(new)
            times["up"] = time.monotonic()
        acked, errors = run_writers(client, db_name, lose)
        ids = [doc_id for writes in acked for doc_id, _, _ in writes]
        stored = {d["_id"] for d in rs.members[2].direct_client()[db_name].things.find({}, {"_id": 1})}
        missing = set(ids) - stored
        assert not missing, f"{len(missing)} acknowledged writes lost: {sorted(missing)[:5]}"
        figures = recovery_figures(acked, times["down"], times["up"])
        print(f"failover (primary lost): {len(ids)} writes acknowledged, 0 lost, "
              f"{len(errors)} client errors {errors[:3]}, {figures}")
        # A write the dying primary ran, whose reply was lost, is retried by
        # the driver. A real new primary knows the retry by its session's
        # transaction number and answers success; the stand-ins replicate no
        # session table, so here the retry meets its own document: a
        # duplicate key on an _id that is stored once. Nothing else.
        for _, error in errors:
            assert error.startswith("DuplicateKeyError"), errors[:5]
            doc_id = error.split('dup key: { _id: "')[1].split('"')[0]
            assert doc_id in stored
        assert len(errors) <= WRITERS
    for member in rs.members:
        member.direct_client().drop_database(db_name)


def bucket_rule(db: str) -> str:
    return (f"namespace: {db}.readings\npattern: bucket\nbucket:\n  collection: readings_buckets\n"
            "  meta: [sensor]\n  time: at\n  span: 1h\n  summaries:\n    temp: [sum, min, max]\n")


def comments_rule(db: str) -> str:
    return (f"namespace: {db}.comments\npattern: computed\ncomputed:\n  aggregates:\n"
            "    - target: posts\n      link: {from: postId, to: _id}\n      fields:\n"
            "        commentCount: count\n        lastCommentAt: {max: createdAt}\n")


def test_rules_keep_working_across_a_failover(rs, rs_remold, db_name, tmp_path):
    import datetime
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "readings.yaml").write_text(bucket_rule(db_name))
    (rules / "comments.yaml").write_text(comments_rule(db_name))
    remold = rs_remold("--rules", str(rules))
    base = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)

    def insert(db, i, n):
        at = base + datetime.timedelta(minutes=n)
        if i % 2:
            db.readings.insert_one({"sensor": f"s{i}", "at": at, "temp": float(n)})
        else:
            db.comments.insert_one({"_id": f"{i}-{n}", "postId": i % 4, "createdAt": at})

    times = {}
    with pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=30_000, maxPoolSize=12) as client:
        client[db_name].posts.insert_many([{"_id": post} for post in range(4)])

        def switch():
            times["down"], times["up"] = promote(rs, rs.members[2], db_name)
        acked, errors = run_writers(client, db_name, switch, insert=insert, writers=8)
        assert errors == [], errors[:5]
        readings = sum(len(acked[i]) for i in range(1, 8, 2))
        comments = sum(len(acked[i]) for i in range(0, 8, 2))
        db = client[db_name]
        # Read back through remold, from the new primary.
        assert db.readings.count_documents({}) == readings
        for sensor in range(1, 8, 2):
            expected = len(acked[sensor])
            assert db.readings.count_documents({"sensor": f"s{sensor}"}) == expected
            total = list(db.readings.aggregate([{"$match": {"sensor": f"s{sensor}"}},
                                                {"$group": {"_id": None, "sum": {"$sum": "$temp"}}}]))
            assert total[0]["sum"] == sum(range(expected))
        assert db.comments.count_documents({}) == comments
        for post in range(4):
            want = sum(len(acked[i]) for i in range(0, 8, 2) if i % 4 == post)
            got = db.posts.find_one({"_id": post}) or {}
            assert got.get("commentCount", 0) == want, (post, got, want)
        stored = rs.members[2].direct_client()[db_name]
        assert stored.readings_buckets.count_documents({}) > 0, "buckets are stored on the new primary"
        print(f"rules across failover: {readings} readings and {comments} comments acknowledged, "
              f"all read back, counts exact; {recovery_figures(acked, times['down'], times['up'])}")
    for member in rs.members:
        member.direct_client().drop_database(db_name)


# --------------------------------------------------------------------------
# Observability.


def test_metrics_and_readyz_follow_the_topology(rs, rs_remold):
    port = free_port()
    remold = rs_remold("--metrics-listen", f"127.0.0.1:{port}")
    address = ("127.0.0.1", port)
    wait_for(lambda: http_get(address, "/readyz")[:2] == (200, "ready\n"), 15, "/readyz 200")
    primary, *secondaries = rs.members
    # Ready once the primary is known; the secondaries may answer a moment later.
    samples = wait_for(lambda: (s := scrape(address)) and all(
        value(s, "remold_backend_members", address=m.address, state="secondary") == 1
        for m in secondaries) and s, 10, "both secondaries known")
    assert value(samples, "remold_backend_topology", type="ReplicaSetWithPrimary") == 1
    assert value(samples, "remold_backend_members", address=primary.address, state="primary") == 1

    landed(remold, {"mode": "secondary"}, 4)
    landed(remold, None, 2)
    samples = scrape(address)
    assert value(samples, "remold_routes_total", read_preference="secondary", member="secondary") == 4
    assert value(samples, "remold_routes_total", read_preference="primary", member="primary") >= 2

    rs.step_down()
    status, body, _ = wait_for(lambda: (r := http_get(address, "/readyz"))[0] == 503 and r, 10,
                               "/readyz 503 without a primary")
    assert body.startswith("not ready: backend replica set has no primary for "), body
    wait_for(lambda: value(scrape(address), "remold_backend_no_primary_seconds") > 0.2, 10,
             "no_primary_seconds to grow")
    rs.step_up(secondaries[0])
    wait_for(lambda: http_get(address, "/readyz")[:2] == (200, "ready\n"), 10, "/readyz 200 again")
    samples = scrape(address)
    assert value(samples, "remold_backend_no_primary_seconds") == 0
    assert value(samples, "remold_backend_members", address=secondaries[0].address, state="primary") == 1
    assert value(samples, "remold_backend_primary_changes_total") >= 1


def test_cluster_commands_answer_as_a_mongos(rs, rs_remold):
    remold = rs_remold()
    with pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=20_000) as client:
        hosts = ",".join(sorted(m.address for m in rs.members))
        wait_for(lambda: len(client.admin.command("listShards")["shards"][0]["host"].split(",")) == 3,
                 10, "every member known")
        shards = client.admin.command("listShards")["shards"]
        assert len(shards) == 1 and shards[0]["_id"] == "rs0" and shards[0]["state"] == 1
        assert ",".join(sorted(shards[0]["host"].removeprefix("rs0/").split(","))) == hosts
        assert list(client.config.shards.find()) == shards
        assert client.admin.command("isdbgrid")["isdbgrid"] == 1
        hello = client.admin.command("hello")
        assert hello["msg"] == "isdbgrid" and hello["isWritablePrimary"] is True
        assert "setName" not in hello and "hosts" not in hello


def in_transaction(sock, lsid: dict, doc_id: str, db: str, start: bool) -> dict:
    command = {"insert": "txn", "documents": [{"_id": doc_id}], "lsid": lsid,
               "txnNumber": Int64(1), "autocommit": False}
    if start:
        command["startTransaction"] = True
    return wire.command(sock, command, db=db)


def test_transaction_statements_stay_on_their_member(rs, rs_remold, db_name):
    remold = rs_remold()
    lsid = {"id": Binary(uuid.uuid4().bytes, 4)}
    with wire.connect(remold.host, remold.port) as first, wire.connect(remold.host, remold.port) as second:
        assert in_transaction(first, lsid, "a", db_name, start=True)["ok"] == 1
        rs.step_up(rs.members[1])
        wait_until_routed(remold, {"mode": "primary"}, {rs.members[1].address})
        # The next statement, on another connection, goes where the
        # transaction lives: the old primary, which refuses it. Nothing is
        # resent inside a transaction.
        reply = in_transaction(second, lsid, "b", db_name, start=False)
        assert reply["ok"] == 0 and reply["code"] == 10107, reply
        # Outside the transaction, writes go to the new primary.
        assert wire.command(second, {"insert": "txn", "documents": [{"_id": "c"}]}, db=db_name)["ok"] == 1
    assert [d["_id"] for d in rs.members[0].direct_client()[db_name].txn.find()] == ["a"]
    assert [d["_id"] for d in rs.members[1].direct_client()[db_name].txn.find()] == ["c"]
    for member in rs.members:
        member.direct_client().drop_database(db_name)


@pytest.fixture(scope="module")
def routers():
    with ShimReplicaSet(2, mongos=True) as cluster:
        for member in cluster.members:
            member.direct_client()[MARKER_DB].me.replace_one(
                {"_id": 1}, {"_id": 1, "member": member.address}, upsert=True)
        yield cluster


def test_mongos_backends_are_load_balanced_and_pinned(routers, private_remold, db_name):
    remold = private_remold(backend_uri=routers.uri(heartbeatFrequencyMS=500, serverSelectionTimeoutMS=15000))
    try:
        both = {m.address for m in routers.members}
        wait_for(lambda: landed(remold, None, 8) == both, 10, "sessions spread over both mongos")
        # The read preference goes through to the mongos, validated first.
        assert landed(remold, {"mode": "secondary"}, 16) == both
        with wire.connect(remold.host, remold.port) as sock:
            reply = wire.command(sock, {"find": "me", "$readPreference": {
                "mode": "secondary", "maxStalenessSeconds": 10}}, db=MARKER_DB)
            assert reply["code"] == 160, reply
            # listShards is the mongos's to answer (the stand-in does not know it).
            assert wire.command(sock, {"listShards": 1})["code"] == 59

        for member in routers.members:
            member.direct_client()[db_name].docs.insert_many(
                [{"_id": i, "member": member.address} for i in range(40)])
        with pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=20_000, maxPoolSize=8) as client:
            cursors = [client[db_name].docs.find().batch_size(6) for _ in range(8)]
            seen = [[next(cursor) for _ in range(40)] for cursor in cursors]
            for docs in seen:
                assert len({d["member"] for d in docs}) == 1, "a cursor crossed mongos"

        # A transaction stays on its mongos whichever connection carries it.
        used = set()
        for round_ in range(8):
            lsid = {"id": Binary(uuid.uuid4().bytes, 4)}
            with wire.connect(remold.host, remold.port) as a, wire.connect(remold.host, remold.port) as b:
                assert in_transaction(a, lsid, f"{round_}-a", db_name, start=True)["ok"] == 1
                assert in_transaction(b, lsid, f"{round_}-b", db_name, start=False)["ok"] == 1
            holders = [m.address for m in routers.members
                       if m.direct_client()[db_name].txn.count_documents({"_id": {"$regex": f"^{round_}-"}})]
            assert len(holders) == 1, f"transaction {round_} spread over {holders}"
            used.update(holders)
        assert used == both, "transactions are load-balanced too"
    finally:
        for member in routers.members:
            member.direct_client().drop_database(db_name)


def test_an_authenticated_session_stays_on_its_member(rs, rs_remold, db_name):
    """A client's credentials live on the backend connection its conversation
    ran on: after saslStart (the stand-ins refuse it; the conversation is what
    counts), the session's reads stay on that member whatever their
    preference, and when that member is no longer the primary a write ends the
    session (a network error the driver retries, authenticating again) instead
    of going unauthenticated to the new primary."""
    remold = rs_remold()
    primary, *secondaries = rs.members
    with wire.connect(remold.host, remold.port) as sock:
        wire.command(sock, {"saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": Binary(b"n,,n=u,r=abc")})
        for _ in range(6):
            reply = wire.command(sock, {"find": "me", "$readPreference": {"mode": "secondary"}}, db=MARKER_DB)
            assert reply["cursor"]["firstBatch"][0]["member"] == primary.address
        rs.step_up(secondaries[0])
        wait_until_routed(remold, {"mode": "primary"}, {secondaries[0].address})
        # Reads still served by the member it authenticated on.
        reply = wire.command(sock, {"find": "me", "$readPreference": {"mode": "secondary"}}, db=MARKER_DB)
        assert reply["cursor"]["firstBatch"][0]["member"] == primary.address
        with pytest.raises((wire.ConnectionClosed, OSError)):
            wire.command(sock, {"insert": "auth", "documents": [{"_id": 1}]}, db=db_name)
    # Nothing was written anywhere: the session ended before the insert was
    # sent (had the monitor not seen the switch yet, the old primary would
    # have refused it, with the same end).
    for member in rs.members:
        assert member.direct_client()[db_name].auth.count_documents({}) == 0
    # An unauthenticated session follows the primary.
    with wire.connect(remold.host, remold.port) as sock:
        assert wire.command(sock, {"insert": "auth", "documents": [{"_id": 2}]}, db=db_name)["ok"] == 1
    assert secondaries[0].direct_client()[db_name].auth.count_documents({}) == 1
    for member in rs.members:
        member.direct_client().drop_database(db_name)
