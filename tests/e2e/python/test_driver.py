"""Unmodified pymongo through remold: CRUD, cursors, indexes, errors, big documents.

Every client connects with a plain ``mongodb://host:port/`` string (no
``directConnection``), so pymongo runs full topology discovery against the
handshake reply remold gives.
"""

from __future__ import annotations

import os
import threading
from collections import Counter, defaultdict
from contextlib import contextmanager

import bson
import pytest
from bson.binary import Binary
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument
from pymongo import ASCENDING, DESCENDING, IndexModel
from pymongo.errors import BulkWriteError, OperationFailure

from support import CommandLog


@contextmanager
def maybe_session(client):
    """An explicit session when the deployment supports sessions, else None.

    Cursors on a real mongod belong to the session that created them, so a
    later killCursors/getMore must use the same lsid.
    """
    hello = client.admin.command("isMaster")
    if hello.get("logicalSessionTimeoutMinutes") is None:
        yield None
        return
    with client.start_session() as session:
        yield session


def test_topology_discovery_sees_one_mongos(client, proxy_only):
    client.admin.command("ping")
    description = client.topology_description
    assert description.topology_type_name == "Sharded"
    servers = description.server_descriptions()
    assert list(servers) == [(client.address[0], client.address[1])]
    assert servers[client.address].server_type_name == "Mongos"


def test_insert_one_and_insert_many(db):
    result = db.items.insert_one({"_id": "one", "v": 1})
    assert result.acknowledged and result.inserted_id == "one"

    docs = [{"v": i} for i in range(2, 12)]
    result = db.items.insert_many(docs)
    assert result.acknowledged and len(result.inserted_ids) == 10
    assert result.inserted_ids == [d["_id"] for d in docs]

    found = {d["_id"]: d["v"] for d in db.items.find()}
    assert found == {"one": 1, **{d["_id"]: d["v"] for d in docs}}


def test_find_with_sort_projection_limit(db):
    db.items.insert_many([{"_id": i, "a": (i * 37) % 101, "g": i % 5, "junk": "x" * i}
                          for i in range(60)])
    got = list(db.items.find({"g": {"$lt": 3}}, {"_id": 0, "a": 1, "g": 1})
               .sort([("a", DESCENDING)]).limit(7))
    expected = sorted(({"a": (i * 37) % 101, "g": i % 5} for i in range(60) if i % 5 < 3),
                      key=lambda d: -d["a"])[:7]
    assert got == expected
    assert all(list(d) == ["a", "g"] for d in got)


def test_cursor_with_many_getmore_batches(db, make_client):
    db.items.insert_many([{"_id": i, "pad": "p" * 50} for i in range(1000)])
    log = CommandLog()
    c = make_client(event_listeners=[log])
    got = [d["_id"] for d in c[db.name].items.find().sort("_id", ASCENDING).batch_size(100)]
    assert got == list(range(1000))

    get_mores = [e for e in log.succeeded_events if e.command_name == "getMore"]
    assert len(get_mores) >= 3, f"expected >= 3 getMore batches, saw {len(get_mores)}"
    assert not [e for e in log.failed_events if e.command_name in ("find", "getMore")]
    batch_sizes = [len(e.reply["cursor"]["nextBatch"]) for e in get_mores]
    assert all(0 < n <= 100 for n in batch_sizes[:-1]), batch_sizes
    assert sum(batch_sizes) == 900


def test_explicit_killcursors_on_live_cursor(db, client):
    db.items.insert_many([{"_id": i} for i in range(50)])
    with maybe_session(client) as session:
        first = db.command("find", "items", batchSize=5, session=session)
        cursor_id = first["cursor"]["id"]
        assert cursor_id != 0 and len(first["cursor"]["firstBatch"]) == 5

        more = db.command("getMore", cursor_id, collection="items", batchSize=5, session=session)
        assert more["cursor"]["id"] == cursor_id
        assert [d["_id"] for d in more["cursor"]["nextBatch"]] == list(range(5, 10))

        killed = db.command("killCursors", "items", cursors=[cursor_id], session=session)
        assert killed["ok"] == 1
        assert list(killed["cursorsKilled"]) == [cursor_id]
        assert list(killed["cursorsNotFound"]) == []

        with pytest.raises(OperationFailure) as info:
            db.command("getMore", cursor_id, collection="items", session=session)
        assert info.value.code == 43  # CursorNotFound

        unknown = bson.Int64(cursor_id + 987_654_321)
        killed = db.command("killCursors", "items", cursors=[unknown], session=session)
        assert list(killed["cursorsKilled"]) == []
        assert list(killed["cursorsNotFound"]) == [unknown]


def test_cursor_close_kills_server_cursor(db, make_client):
    db.items.insert_many([{"_id": i} for i in range(50)])
    log = CommandLog()
    c = make_client(event_listeners=[log])
    cursor = c[db.name].items.find().sort("_id", ASCENDING).batch_size(5)
    assert next(cursor)["_id"] == 0
    cursor_id = cursor.cursor_id
    assert cursor_id
    cursor.close()

    kills = [e for e in log.succeeded_events if e.command_name == "killCursors"]
    assert len(kills) == 1, log.names(log.started_events)
    assert list(kills[0].reply["cursorsKilled"]) == [cursor_id]
    assert not log.failed_events


def test_update_one_update_many_replace(db):
    db.items.insert_many([{"_id": i, "g": i % 3, "n": 0} for i in range(9)])

    r = db.items.update_one({"_id": 4}, {"$inc": {"n": 5}, "$set": {"tag": "four"}})
    assert (r.matched_count, r.modified_count, r.upserted_id) == (1, 1, None)

    r = db.items.update_many({"g": 0}, {"$inc": {"n": 1}})
    assert (r.matched_count, r.modified_count) == (3, 3)

    r = db.items.update_many({"g": 0}, {"$set": {"g": 0}})
    assert (r.matched_count, r.modified_count) == (3, 0)

    r = db.items.replace_one({"_id": 7}, {"replaced": True})
    assert (r.matched_count, r.modified_count) == (1, 1)

    r = db.items.update_one({"_id": "absent"}, {"$set": {"x": 1}})
    assert (r.matched_count, r.modified_count, r.upserted_id) == (0, 0, None)

    docs = {d["_id"]: d for d in db.items.find()}
    assert docs[4] == {"_id": 4, "g": 1, "n": 5, "tag": "four"}
    assert [docs[i]["n"] for i in (0, 3, 6)] == [1, 1, 1]
    assert docs[7] == {"_id": 7, "replaced": True}
    assert docs[1] == {"_id": 1, "g": 1, "n": 0}
    assert len(docs) == 9


def test_delete_one_delete_many(db):
    db.items.insert_many([{"_id": i, "g": i % 4} for i in range(20)])
    assert db.items.delete_one({"g": 1}).deleted_count == 1
    assert db.items.delete_many({"g": 2}).deleted_count == 5
    assert db.items.delete_many({"g": 99}).deleted_count == 0
    assert db.items.delete_one({"_id": 100}).deleted_count == 0
    assert db.items.delete_one({"_id": 3}).deleted_count == 1
    remaining = Counter(d["g"] for d in db.items.find().sort("_id", 1))
    assert remaining == {0: 5, 1: 4, 3: 4}
    assert db.items.find_one({"_id": 3}) is None


def test_upsert(db):
    r = db.items.update_one({"k": "new"}, {"$set": {"v": 1}, "$setOnInsert": {"born": True}},
                            upsert=True)
    assert r.matched_count == 0 and isinstance(r.upserted_id, bson.ObjectId)
    assert db.items.find_one({"_id": r.upserted_id}) == {
        "_id": r.upserted_id, "k": "new", "v": 1, "born": True}

    r = db.items.update_one({"k": "new"}, {"$set": {"v": 2}, "$setOnInsert": {"born": False}},
                            upsert=True)
    assert (r.matched_count, r.modified_count, r.upserted_id) == (1, 1, None)

    r = db.items.update_one({"_id": 42}, {"$inc": {"n": 1}}, upsert=True)
    assert r.upserted_id == 42

    r = db.items.replace_one({"_id": "r"}, {"whole": "doc"}, upsert=True)
    assert r.upserted_id == "r"

    r = db.items.update_many({"k": "many"}, {"$set": {"m": 1}}, upsert=True)
    assert r.upserted_id is not None

    assert db.items.find_one({"k": "new"})["born"] is True
    assert db.items.find_one({"_id": 42}) == {"_id": 42, "n": 1}
    assert db.items.find_one({"_id": "r"}) == {"_id": "r", "whole": "doc"}
    assert db.items.count_documents({}) == 4


def test_aggregate_match_group_sort(db):
    rows = [{"_id": i, "cat": "abcd"[i % 4], "qty": i, "ok": i % 3 != 0} for i in range(40)]
    db.items.insert_many(rows)
    got = list(db.items.aggregate([
        {"$match": {"ok": True}},
        {"$group": {"_id": "$cat", "total": {"$sum": "$qty"}, "n": {"$sum": 1},
                    "top": {"$max": "$qty"}}},
        {"$sort": {"total": -1}},
    ]))
    expected = defaultdict(lambda: {"total": 0, "n": 0, "top": None})
    for r in rows:
        if r["ok"]:
            e = expected[r["cat"]]
            e["total"] += r["qty"]
            e["n"] += 1
            e["top"] = max(e["top"] or 0, r["qty"])
    want = sorted(({"_id": k, **v} for k, v in expected.items()), key=lambda d: -d["total"])
    assert got == want


def test_count_estimated_count_distinct(db):
    db.items.insert_many([{"_id": i, "color": ["red", "green", "blue"][i % 3], "size": i % 7}
                          for i in range(70)])
    assert db.items.count_documents({}) == 70
    assert db.items.count_documents({"color": "red"}) == 24
    assert db.items.count_documents({"size": {"$gte": 5}}, skip=3, limit=10) == 10
    assert db.items.estimated_document_count() == 70
    assert db.empty.estimated_document_count() == 0
    assert sorted(db.items.distinct("color")) == ["blue", "green", "red"]
    assert sorted(db.items.distinct("size", {"color": "blue"})) == list(range(7))
    assert db.items.distinct("nothere") == []


def test_create_index_create_indexes_list_indexes(db):
    db.items.insert_one({"a": 1, "b": 2, "c": 3, "d": 4})
    assert db.items.create_index("a") == "a_1"
    names = db.items.create_indexes([
        IndexModel([("b", DESCENDING)], name="b_desc"),
        IndexModel([("c", ASCENDING), ("d", ASCENDING)], unique=True),
    ])
    assert names == ["b_desc", "c_1_d_1"]

    indexes = {ix["name"]: ix for ix in db.items.list_indexes()}
    assert set(indexes) == {"_id_", "a_1", "b_desc", "c_1_d_1"}
    assert list(indexes["a_1"]["key"].items()) == [("a", 1)]
    assert list(indexes["b_desc"]["key"].items()) == [("b", -1)]
    assert list(indexes["c_1_d_1"]["key"].items()) == [("c", 1), ("d", 1)]
    assert indexes["c_1_d_1"].get("unique") is True
    assert not indexes["a_1"].get("unique", False)
    assert set(db.items.index_information()) == set(indexes)


DUP_CASES = {
    # ordered: stops at the first duplicate (index 2).
    "ordered": (True, [1, 2, 2, 3], [2]),
    # unordered: every duplicate reported at the client's original index.
    "unordered": (False, [1, 1, 2, 3, 3, 4, 1], [1, 4, 6]),
}


def _dup_key_details(database, ordered, keys):
    coll = database.dups
    coll.create_index("k", unique=True)
    with pytest.raises(BulkWriteError) as info:
        coll.insert_many([{"_id": i, "k": k} for i, k in enumerate(keys)], ordered=ordered)
    stored = sorted(d["_id"] for d in coll.find().sort("_id", 1))
    return info.value.details, stored


@pytest.mark.parametrize("case", sorted(DUP_CASES))
def test_duplicate_key_errors_match_backend(case, client, direct_client, db_name):
    ordered, keys, bad_indexes = DUP_CASES[case]
    try:
        via_proxy, stored_proxy = _dup_key_details(client[db_name], ordered, keys)
        direct_client.drop_database(db_name)
        direct, stored_direct = _dup_key_details(direct_client[db_name], ordered, keys)
    finally:
        direct_client.drop_database(db_name)

    # MongoDB's own shape, at the client's statement indexes.
    assert [(e["index"], e["code"]) for e in via_proxy["writeErrors"]] == [
        (i, 11000) for i in bad_indexes]
    # Exactly what the backend says when asked directly (same names, same ops).
    assert via_proxy == direct
    assert stored_proxy == stored_direct


def test_15mb_document_round_trip_is_byte_identical(db, direct_client):
    blob = os.urandom(15 * 1024 * 1024)
    doc = {"_id": "big", "head": "start", "blob": Binary(blob), "tail": list(range(10))}
    encoded = bson.encode(doc)
    assert 15 * 1024 * 1024 < len(encoded) < 16 * 1024 * 1024

    db.big.insert_one(RawBSONDocument(encoded))
    raw_opts = CodecOptions(document_class=RawBSONDocument)
    via_proxy = db.get_collection("big", codec_options=raw_opts).find_one({"_id": "big"})
    assert via_proxy is not None
    assert via_proxy.raw == encoded

    stored = direct_client[db.name].get_collection("big", codec_options=raw_opts).find_one()
    assert stored.raw == encoded


def test_30mb_insert_many_travels_in_one_message(db, make_client):
    """Well above the 16 MiB document limit, below the 48 MB message limit."""
    log = CommandLog()
    coll = make_client(event_listeners=[log])[db.name].chunks
    docs = [{"_id": i, "data": os.urandom(1024 * 1024)} for i in range(30)]
    assert coll.insert_many(docs).inserted_ids == list(range(30))
    inserts = [e for e in log.started_events if e.command_name == "insert"]
    assert len(inserts) == 1, "pymongo split the batch; the test no longer covers one big message"
    assert list(coll.find().sort("_id", ASCENDING)) == docs


def test_16_concurrent_clients_interleaved(db, make_client):
    n_clients, n_ops = 16, 30
    barrier = threading.Barrier(n_clients)
    errors: list[str] = []
    coll_name = db.items.name

    def worker(t: int) -> None:
        try:
            c = make_client(maxPoolSize=2)
            coll = c[db.name][coll_name]
            barrier.wait(timeout=30)
            for i in range(n_ops):
                key = f"t{t}-{i}"
                coll.insert_one({"_id": key, "t": t, "i": i, "n": 0})
                got = coll.find_one({"_id": key})
                assert got == {"_id": key, "t": t, "i": i, "n": 0}, got
                r = coll.update_one({"_id": key}, {"$inc": {"n": i + t + 1}})
                assert (r.matched_count, r.modified_count) == (1, 1)
                assert coll.find_one({"_id": key}, {"n": 1}) == {"_id": key, "n": i + t + 1}
                if i % 10 == 9:
                    mine = sorted(d["i"] for d in coll.find({"t": t}, {"i": 1}))
                    assert mine == list(range(i + 1)), mine
        except Exception as exc:  # collected and asserted by the main thread
            errors.append(f"client {t}: {exc!r}")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(n_clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not any(th.is_alive() for th in threads), "a client thread hung"
    assert errors == []

    # Sorted on the server: an unsorted cursor of several batches returns a
    # document updated before the read again on DocumentDB (docs/backends.md, 8).
    docs = list(db.items.find().sort("_id", 1))
    assert len(docs) == n_clients * n_ops
    assert Counter(d["t"] for d in docs) == {t: n_ops for t in range(n_clients)}
    assert all(d["n"] == d["i"] + d["t"] + 1 for d in docs)
