"""The bucket rule end to end: unmodified pymongo through remold with a rules
directory, checked against the bucket collection read directly on the backend.

Every test writes its own rule files (naming its own database) into a temp
directory and starts a private remold with ``--rules``. The readings have the
shape ``{_id, sensor, at, temp}``; the rule keeps hourly buckets per sensor
with count/sum/min/max summaries of ``temp``:

    {sensor, start, m: [{_id, at, temp}, ...], count, sum: {temp}, min: {temp}, max: {temp}}

(``start`` and ``m`` are the rule's defaults for ``bucket_time`` and
``measurements``.) Expected results are computed in Python from what the test
inserted, never from what remold returns.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import threading
import time
from collections import defaultdict
from typing import Iterable, Optional

import bson
import pymongo
import pytest
from bson import ObjectId, json_util
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from pymongo.errors import BulkWriteError, OperationFailure, WriteError

import wire
from support import CommandLog, run_explain

HOUR = dt.timedelta(hours=1)
MINUTE = dt.timedelta(minutes=1)
# Naive datetimes are UTC to pymongo (and come back naive), hour-aligned.
T0 = dt.datetime(2024, 3, 4)

LOAD_SENSORS = [f"sensor-{k:02d}" for k in range(10)]
LOAD_MINUTES = 7 * 24 * 60  # one reading a minute for 7 days
LOAD_READINGS = len(LOAD_SENSORS) * LOAD_MINUTES  # 100,800
LOAD_BUCKETS = len(LOAD_SENSORS) * 7 * 24  # 1,680
REL_TOL = 1e-9

BUCKET_KEYS = {"sensor", "start", "m", "count", "bytes", "sum", "min", "max"}


# --------------------------------------------------------------------------
# Rules, remold, data.


def rule_yaml(db: str, collection: str, buckets: str, *, meta: Iterable[str] = ("sensor",),
              time_field: str = "at", span: str = "1h", summaries: Optional[dict] = None,
              max_count: Optional[int] = None, extra: Iterable[str] = ()) -> str:
    """``extra``: more lines of the ``bucket:`` section, e.g. ``"max_bytes: 4096"``."""
    if summaries is None:
        summaries = {"temp": ["sum", "min", "max"]}
    lines = [
        f"namespace: {db}.{collection}",
        "pattern: bucket",
        "bucket:",
        f"  collection: {buckets}",
        f"  meta: [{', '.join(meta)}]",
        f"  time: {time_field}",
        f"  span: {span}",
    ]
    if summaries:
        lines.append("  summaries:")
        for field, kinds in summaries.items():
            lines.append(f"    {field}: [{', '.join(kinds)}]")
    if max_count is not None:
        lines.append(f"  max_count: {max_count}")
    lines += [f"  {line}" for line in extra]
    return "\n".join(lines) + "\n"


@pytest.fixture
def bucket_db(db_name, direct_client):
    """The test's own database name; dropped on the backend afterwards."""
    yield db_name
    direct_client.drop_database(db_name)


@pytest.fixture
def rules_remold(tmp_path, private_remold):
    """start(rules: {file name: yaml text}) -> a private remold serving those rules."""
    def start(rules: dict[str, str]):
        rules_dir = tmp_path / "rules"
        rules_dir.mkdir(exist_ok=True)
        for name, text in rules.items():
            (rules_dir / name).write_text(text)
        remold = private_remold(extra_args=("--rules", str(rules_dir)))
        remold.rules_dir = rules_dir
        return remold
    return start


def reading(sensor: str, at: dt.datetime, temp, **extra) -> dict:
    doc = {"_id": ObjectId(), "sensor": sensor, "at": at, "temp": temp}
    doc.update(extra)
    return doc


def minute_load(seed: int = 1680) -> list[dict]:
    """10 sensors x 7 days x one reading a minute, sensor-major, time order per sensor."""
    rng = random.Random(seed)
    return [reading(sensor, T0 + i * MINUTE, round(rng.uniform(-5.0, 35.0), 2))
            for sensor in LOAD_SENSORS for i in range(LOAD_MINUTES)]


def hour_start(at: dt.datetime) -> dt.datetime:
    return at.replace(minute=0, second=0, microsecond=0)


def expected_buckets(readings: Iterable[dict]) -> dict:
    """(sensor, start) -> the bucket document a correct bucket rule stores,
    measurements in insertion order (``readings`` is in insertion order)."""
    buckets: dict = {}
    for r in readings:
        key = (r["sensor"], hour_start(r["at"]))
        b = buckets.get(key)
        if b is None:
            b = buckets[key] = {"sensor": key[0], "start": key[1], "m": [], "count": 0,
                                "bytes": 0, "sum": {"temp": 0.0}, "min": {"temp": math.inf},
                                "max": {"temp": -math.inf}}
        measurement = {k: v for k, v in r.items() if k != "sensor"}
        b["m"].append(measurement)
        b["count"] += 1
        # Its BSON bytes, and 9 for its array element's type byte and index key.
        b["bytes"] += len(bson.encode(measurement)) + 9
        b["sum"]["temp"] += r["temp"]
        b["min"]["temp"] = min(b["min"]["temp"], r["temp"])
        b["max"]["temp"] = max(b["max"]["temp"], r["temp"])
    return buckets


def bucket_differences(actual_docs: list[dict], expected: dict, what: str) -> list[str]:
    """Compares bucket documents (ignoring _id; measurement order as inserted;
    ``sum`` within REL_TOL since a batch legitimately adds in another order)."""
    problems = []
    actual: dict = {}
    for doc in actual_docs:
        key = (doc.get("sensor"), doc.get("start"))
        if key in actual:
            problems.append(f"{what}: two buckets for {key}")
        actual[key] = doc
    missing = set(expected) - set(actual)
    extra = set(actual) - set(expected)
    if missing:
        problems.append(f"{what}: {len(missing)} buckets missing, e.g. {sorted(missing)[:3]}")
    if extra:
        problems.append(f"{what}: {len(extra)} unexpected buckets, e.g. {sorted(extra)[:3]}")
    for key in sorted(set(actual) & set(expected)):
        got = {k: v for k, v in actual[key].items() if k != "_id"}
        want = expected[key]
        if set(got) != BUCKET_KEYS:
            problems.append(f"{what} {key}: fields {sorted(got)}, expected {sorted(BUCKET_KEYS)}")
            continue
        for field in ("sensor", "start", "count", "bytes", "min", "max"):
            if got[field] != want[field]:
                problems.append(f"{what} {key}: {field} = {got[field]!r}, expected {want[field]!r}")
        if got["m"] != want["m"]:
            problems.append(f"{what} {key}: measurements differ: got {len(got['m'])} "
                            f"(first {got['m'][:2]}), expected {len(want['m'])} (first {want['m'][:2]})")
        if not (isinstance(got["sum"], dict) and
                math.isclose(got["sum"].get("temp", math.nan), want["sum"]["temp"], rel_tol=REL_TOL)):
            problems.append(f"{what} {key}: sum = {got['sum']!r}, expected {want['sum']!r}")
        if len(problems) > 20:
            problems.append("...")
            break
    return problems


def backend_honours_aggregate_batch_size(direct_client, db: str, collection: str) -> bool:
    """Does the backend return at most batchSize documents in an aggregate's
    first batch? (A capability: without it no getMore can be observed.)"""
    reply = direct_client[db].command("aggregate", collection, pipeline=[],
                                      cursor={"batchSize": 2})
    cursor = reply["cursor"]
    if cursor["id"]:
        direct_client[db].command("killCursors", collection, cursors=[cursor["id"]])
    return len(cursor["firstBatch"]) <= 2


def backend_supports_explain(direct_client, db: str) -> bool:
    try:
        direct_client[db].command("explain", {"find": "no_such_collection", "filter": {}},
                                  verbosity="queryPlanner")
        return True
    except OperationFailure:
        return False


# --------------------------------------------------------------------------
# The load: 100,800 readings, one insert command per reading.


def test_minute_readings_one_insert_per_command(bucket_db, rules_remold, direct_client):
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets")})
    readings = minute_load()
    assert len(readings) == LOAD_READINGS
    by_sensor = defaultdict(list)
    for r in readings:
        by_sensor[r["sensor"]].append(r)

    # One thread (and one client) per sensor, each inserting its readings in
    # time order: the order within every bucket is the order of insertion.
    errors: list[str] = []
    counts: dict[str, int] = {}

    def insert_all(sensor: str):
        client = pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=10_000)
        coll = client[bucket_db]["readings"]
        done = 0
        try:
            for r in by_sensor[sensor]:
                result = coll.insert_one(r)
                if not result.acknowledged or result.inserted_id != r["_id"]:
                    errors.append(f"{sensor}: insert_one returned {result.inserted_id!r}")
                    return
                done += 1
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(f"{sensor}: after {done} inserts: {exc!r}")
        finally:
            counts[sensor] = done
            client.close()

    started = time.monotonic()
    threads = [threading.Thread(target=insert_all, args=(s,)) for s in LOAD_SENSORS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    print(f"\n{LOAD_READINGS} insert_one calls through remold in {elapsed:.1f}s "
          f"({LOAD_READINGS / elapsed:.0f}/s, {len(threads)} threads)")
    assert not errors, f"insert errors: {errors[:5]}\nremold stderr:\n{remold.stderr()[-3000:]}"
    assert sum(counts.values()) == LOAD_READINGS

    # Exactly one bucket per sensor per hour, counted on the backend.
    buckets_coll = direct_client[bucket_db]["readings_buckets"]
    assert buckets_coll.count_documents({}) == LOAD_BUCKETS
    # Nothing went to the logical collection itself.
    assert direct_client[bucket_db]["readings"].count_documents({}) == 0

    # Every bucket holds exactly what a correct bucket rule stores.
    expected = expected_buckets(readings)
    assert len(expected) == LOAD_BUCKETS
    problems = bucket_differences(list(buckets_coll.find()), expected, "bucket")
    assert not problems, "\n".join(problems)

    # find on the logical collection returns exactly the readings inserted.
    client = pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=10_000)
    try:
        started = time.monotonic()
        found = list(client[bucket_db]["readings"].find())
        print(f"find of {len(found)} readings through remold in {time.monotonic() - started:.1f}s")
        assert client[bucket_db]["readings"].estimated_document_count() == LOAD_READINGS
    finally:
        client.close()
    assert len(found) == LOAD_READINGS
    found_by_id = {d["_id"]: d for d in found}
    assert len(found_by_id) == LOAD_READINGS, "find returned some _id twice"
    wrong = [(r, found_by_id.get(r["_id"])) for r in readings if found_by_id.get(r["_id"]) != r]
    assert not wrong, f"{len(wrong)} readings differ, e.g. inserted {wrong[0][0]} found {wrong[0][1]}"

    # Hourly averages of one sensor for one day from the bucket summaries
    # (read directly) equal the averages of the raw readings inserted.
    sensor, day = "sensor-03", T0 + dt.timedelta(days=2)
    summaries = list(buckets_coll.find(
        {"sensor": sensor, "start": {"$gte": day, "$lt": day + dt.timedelta(days=1)}},
        {"start": 1, "count": 1, "sum": 1}).sort("start", 1))
    assert [b["start"] for b in summaries] == [day + h * HOUR for h in range(24)]
    raw = defaultdict(list)
    for r in by_sensor[sensor]:
        if day <= r["at"] < day + dt.timedelta(days=1):
            raw[hour_start(r["at"])].append(r["temp"])
    for b in summaries:
        temps = raw[b["start"]]
        assert b["count"] == len(temps) == 60
        from_summary = b["sum"]["temp"] / b["count"]
        from_raw = sum(temps) / len(temps)
        assert math.isclose(from_summary, from_raw, rel_tol=REL_TOL), \
            f"{sensor} {b['start']}: average {from_summary} from summaries, {from_raw} from readings"


def test_minute_readings_insert_many_gives_identical_buckets(bucket_db, rules_remold,
                                                             direct_client):
    """The same load in insert_many batches of 1,000, ordered (default) and
    unordered, stores the same buckets as one insert per reading (the expected
    buckets are the ones test_minute_readings_one_insert_per_command checks
    against the single-insert load)."""
    remold = rules_remold({
        "ordered.yaml": rule_yaml(bucket_db, "ordered", "ordered_buckets"),
        "unordered.yaml": rule_yaml(bucket_db, "unordered", "unordered_buckets"),
    })
    readings = minute_load()
    expected = expected_buckets(readings)
    # Ordered: sensor-major (runs of one bucket, cut by the batch boundaries).
    # Unordered: time-major, all sensors interleaved inside each batch.
    interleaved = sorted(readings, key=lambda r: (r["at"], r["sensor"]))
    log = CommandLog()
    client = pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=10_000,
                                 event_listeners=[log])
    try:
        for name, load, ordered in (("ordered", readings, True),
                                    ("unordered", interleaved, False)):
            log.clear()
            coll = client[bucket_db][name]
            started = time.monotonic()
            for k in range(0, len(load), 1000):
                batch = load[k:k + 1000]
                if ordered:
                    result = coll.insert_many(batch)
                else:
                    result = coll.insert_many(batch, ordered=False)
                assert result.inserted_ids == [r["_id"] for r in batch]
            print(f"\n{name}: {len(load)} readings in batches of 1000 in "
                  f"{time.monotonic() - started:.1f}s")
            replies = [e.reply for e in log.succeeded_events if e.command_name == "insert"]
            assert len(replies) == len(load) // 1000 + (1 if len(load) % 1000 else 0)
            assert all(r.get("n") == 1000 or r.get("n") == len(load) % 1000 for r in replies), \
                [r for r in replies if r.get("n") not in (1000, len(load) % 1000)][:3]
            assert not any("writeErrors" in r for r in replies)

            docs = list(direct_client[bucket_db][f"{name}_buckets"].find())
            assert len(docs) == LOAD_BUCKETS
            problems = bucket_differences(docs, expected, f"{name} bucket")
            assert not problems, "\n".join(problems)
            assert client[bucket_db][name].count_documents({}) == LOAD_READINGS
    finally:
        client.close()

    # And the two batch loads agree with each other bucket for bucket.
    ordered = {(d["sensor"], d["start"]): {k: v for k, v in d.items() if k != "_id"}
               for d in direct_client[bucket_db]["ordered_buckets"].find()}
    unordered = {(d["sensor"], d["start"]): {k: v for k, v in d.items() if k != "_id"}
                 for d in direct_client[bucket_db]["unordered_buckets"].find()}
    assert ordered.keys() == unordered.keys()
    for key in ordered:
        a, b = ordered[key], unordered[key]
        assert {k: a[k] for k in a if k != "sum"} == {k: b[k] for k in b if k != "sum"}, key
        assert math.isclose(a["sum"]["temp"], b["sum"]["temp"], rel_tol=REL_TOL), key


# --------------------------------------------------------------------------
# Reads.

READ_SENSORS = ["s0", "s1", "s2", "s3"]
READ_HOURS = 6


def read_dataset(seed: int = 7) -> list[dict]:
    """4 sensors x 6 hours x one reading a minute, with a non-meta string field."""
    rng = random.Random(seed)
    docs = []
    for i in range(READ_HOURS * 60):
        for sensor in READ_SENSORS:
            temp = round(rng.uniform(-5.0, 35.0), 2)
            docs.append(reading(sensor, T0 + i * MINUTE, temp,
                                status="warn" if temp > 30 else "ok"))
    return docs


def project(doc: dict, projection: Optional[dict]) -> dict:
    if not projection:
        return dict(doc)
    include = [k for k, v in projection.items() if v and k != "_id"]
    if include:
        out = {k: doc[k] for k in include if k in doc}
        if projection.get("_id", 1):
            out["_id"] = doc["_id"]
        return out
    return {k: v for k, v in doc.items() if k not in projection}


def py_sort(docs: list[dict], sort: Optional[list]) -> list[dict]:
    out = list(docs)
    for field, direction in reversed(sort or []):
        out.sort(key=lambda d: d[field], reverse=direction < 0)
    return out


@pytest.fixture
def read_setup(bucket_db, rules_remold, direct_client, make_client):
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets")})
    docs = read_dataset()
    log = CommandLog()
    client = make_client(remold.uri, event_listeners=[log])
    coll = client[bucket_db]["readings"]
    coll.insert_many(docs)
    assert direct_client[bucket_db]["readings_buckets"].count_documents({}) == \
        len(READ_SENSORS) * READ_HOURS
    return {"remold": remold, "docs": docs, "coll": coll, "log": log, "client": client,
            "db": bucket_db}


def find_cases():
    t = lambda minutes: T0 + minutes * MINUTE  # noqa: E731
    return [
        ("everything by _id", {}, None, [("_id", 1)], 0, 0),
        ("sensor and a range crossing two bucket boundaries",
         {"sensor": "s1", "at": {"$gte": t(90), "$lt": t(200)}}, lambda d: d["sensor"] == "s1"
         and t(90) <= d["at"] < t(200), [("at", 1)], 0, 0),
        ("$gt/$lte on exact bucket boundaries",
         {"at": {"$gt": t(60), "$lte": t(180)}}, lambda d: t(60) < d["at"] <= t(180),
         [("at", 1), ("sensor", 1)], 0, 0),
        ("$in on the meta field, summary range, sort/skip/limit/projection",
         {"sensor": {"$in": ["s0", "s3"]}, "temp": {"$gt": 25}},
         lambda d: d["sensor"] in ("s0", "s3") and d["temp"] > 25,
         [("temp", -1), ("_id", 1)], 3, 20),
        ("$or of a bucket predicate and a summary predicate",
         {"$or": [{"sensor": "s2", "at": {"$lt": t(30)}}, {"temp": {"$lte": -4}}]},
         lambda d: (d["sensor"] == "s2" and d["at"] < t(30)) or d["temp"] <= -4,
         [("at", 1), ("sensor", 1)], 0, 0),
        ("non-meta field and an open-ended range", {"status": "warn", "at": {"$gte": t(300)}},
         lambda d: d["status"] == "warn" and d["at"] >= t(300), [("at", -1), ("sensor", -1)], 0, 0),
        ("exact time", {"at": t(125)}, lambda d: d["at"] == t(125), [("sensor", 1)], 0, 0),
        ("a temperature band", {"temp": {"$gte": 10, "$lte": 10.5}},
         lambda d: 10 <= d["temp"] <= 10.5, [("_id", 1)], 0, 0),
        ("no match", {"sensor": "nope"}, lambda d: False, None, 0, 0),
        ("skip past a bucket, limit into the next", {"sensor": "s3"},
         lambda d: d["sensor"] == "s3", [("at", 1)], 55, 70),
    ]


@pytest.mark.parametrize("projection", [None, {"_id": 0, "sensor": 1, "temp": 1},
                                        {"status": 0, "_id": 0}])
def test_find_filter_sort_skip_limit_projection(read_setup, projection):
    docs, coll = read_setup["docs"], read_setup["coll"]
    for name, flt, pred, sort, skip, limit in find_cases():
        expected = [d for d in docs if pred is None or pred(d)]
        expected = py_sort(expected, sort)
        if skip:
            expected = expected[skip:]
        if limit:
            expected = expected[:limit]
        expected = [project(d, projection) for d in expected]
        cursor = coll.find(flt, projection, skip=skip, limit=limit)
        if sort:
            cursor = cursor.sort(sort)
        got = list(cursor)
        if sort:
            assert got == expected, f"{name}: {len(got)} documents, expected {len(expected)}"
        else:
            key = lambda d: json_util.dumps(d, sort_keys=True)  # noqa: E731
            assert sorted(got, key=key) == sorted(expected, key=key), name


def test_find_one(read_setup):
    docs, coll = read_setup["docs"], read_setup["coll"]
    target = docs[777]
    assert coll.find_one({"_id": target["_id"]}) == target
    coldest = py_sort([d for d in docs if d["sensor"] == "s2"], [("temp", 1), ("_id", 1)])[0]
    assert coll.find_one({"sensor": "s2"}, sort=[("temp", 1), ("_id", 1)]) == coldest
    assert coll.find_one({"sensor": "s2", "at": T0 - HOUR}) is None


def test_find_cursor_reports_logical_namespace(read_setup):
    coll, log, db = read_setup["coll"], read_setup["log"], read_setup["db"]
    log.clear()
    got = list(coll.find({"sensor": "s1"}).sort("at", 1))
    assert len(got) == READ_HOURS * 60
    replies = [e.reply for e in log.succeeded_events if e.command_name in ("find", "getMore")]
    assert replies
    for reply in replies:
        assert reply["cursor"]["ns"] == f"{db}.readings", reply["cursor"]["ns"]


def test_getmore_across_batches(read_setup, direct_client):
    coll, log, db, docs = read_setup["coll"], read_setup["log"], read_setup["db"], read_setup["docs"]
    if not backend_honours_aggregate_batch_size(direct_client, db, "readings_buckets"):
        pytest.skip("the backend's aggregate ignores cursor.batchSize: no getMore to observe")
    log.clear()
    expected = py_sort([d for d in docs if d["sensor"] != "s0"], [("at", 1), ("sensor", 1)])
    got = list(coll.find({"sensor": {"$ne": "s0"}}, batch_size=100).sort([("at", 1), ("sensor", 1)]))
    assert got == expected
    started = [e.command for e in log.started_events if e.command_name == "getMore"]
    replies = {e.command_name: [] for e in log.succeeded_events}
    for e in log.succeeded_events:
        replies[e.command_name].append(e.reply)
    assert len(started) >= len(expected) // 100 - 1, f"only {len(started)} getMore commands"
    assert all(g["collection"] == "readings" for g in started)
    first = replies["find"][0]["cursor"]
    assert first["ns"] == f"{db}.readings" and len(first["firstBatch"]) == 100
    for reply in replies["getMore"]:
        assert reply["cursor"]["ns"] == f"{db}.readings"
        assert len(reply["cursor"]["nextBatch"]) <= 100

    # A cursor closed early is killed through its logical namespace.
    log.clear()
    cursor = coll.find({}, batch_size=10)
    assert len([next(cursor) for _ in range(15)]) == 15
    cursor.close()
    kills = [e for e in log.succeeded_events if e.command_name == "killCursors"]
    assert kills and kills[0].reply.get("ok") == 1.0
    # The connection is still in order afterwards.
    assert coll.count_documents({}) == len(docs)


def test_count_documents_and_estimated_count(read_setup):
    docs, coll = read_setup["docs"], read_setup["coll"]
    assert coll.estimated_document_count() == len(docs)
    assert coll.count_documents({}) == len(docs)
    for name, flt, pred, _sort, skip, limit in find_cases():
        n = len([d for d in docs if pred is None or pred(d)])
        assert coll.count_documents(flt) == n, name
        if skip or limit:
            want = max(0, min(n - skip, limit or n))
            assert coll.count_documents(flt, skip=skip, limit=limit) == want, name


def test_distinct(read_setup):
    docs, coll = read_setup["docs"], read_setup["coll"]
    assert sorted(coll.distinct("sensor")) == READ_SENSORS
    assert sorted(coll.distinct("status")) == ["ok", "warn"]
    window = {"sensor": "s1", "at": {"$gte": T0 + 50 * MINUTE, "$lt": T0 + 75 * MINUTE}}
    want = {d["temp"] for d in docs if d["sensor"] == "s1"
            and T0 + 50 * MINUTE <= d["at"] < T0 + 75 * MINUTE}
    got = coll.distinct("temp", window)
    assert len(got) == len(want) and set(got) == want
    assert sorted(coll.distinct("sensor", {"status": "warn", "at": {"$lt": T0 + HOUR}})) == \
        sorted({d["sensor"] for d in docs if d["status"] == "warn" and d["at"] < T0 + HOUR})
    assert coll.distinct("sensor", {"sensor": "nope"}) == []


def test_aggregate_runs_client_pipeline_after_unpack(read_setup):
    docs, coll = read_setup["docs"], read_setup["coll"]
    lo, hi = T0 + 45 * MINUTE, T0 + 250 * MINUTE

    # Hourly statistics for one sensor over a range crossing bucket boundaries.
    got = list(coll.aggregate([
        {"$match": {"sensor": "s1", "at": {"$gte": lo, "$lt": hi}}},
        {"$group": {"_id": {"$hour": "$at"}, "n": {"$sum": 1}, "avg": {"$avg": "$temp"},
                    "min": {"$min": "$temp"}, "max": {"$max": "$temp"}}},
        {"$sort": {"_id": 1}},
    ]))
    groups = defaultdict(list)
    for d in docs:
        if d["sensor"] == "s1" and lo <= d["at"] < hi:
            groups[d["at"].hour].append(d["temp"])
    assert [g["_id"] for g in got] == sorted(groups)
    for g in got:
        temps = groups[g["_id"]]
        assert g["n"] == len(temps) and g["min"] == min(temps) and g["max"] == max(temps)
        assert math.isclose(g["avg"], sum(temps) / len(temps), rel_tol=REL_TOL)

    # Per-sensor counts, the hottest readings, a computed field matched late.
    assert list(coll.aggregate([{"$group": {"_id": "$sensor", "n": {"$sum": 1}}},
                                {"$sort": {"_id": 1}}])) == \
        [{"_id": s, "n": READ_HOURS * 60} for s in READ_SENSORS]
    hottest = py_sort(docs, [("temp", -1), ("_id", 1)])[:5]
    assert list(coll.aggregate([{"$sort": {"temp": -1, "_id": 1}}, {"$limit": 5},
                                {"$project": {"_id": 1, "sensor": 1, "temp": 1}}])) == \
        [{"_id": d["_id"], "sensor": d["sensor"], "temp": d["temp"]} for d in hottest]
    hot_f = len([d for d in docs if d["temp"] * 1.8 + 32 > 90])
    assert list(coll.aggregate([
        {"$addFields": {"f": {"$add": [{"$multiply": ["$temp", 1.8]}, 32]}}},
        {"$match": {"f": {"$gt": 90}}}, {"$count": "n"}])) == [{"n": hot_f}]
    assert list(coll.aggregate([{"$match": {"sensor": "nope"}}])) == []


def group_dataset(seed: int = 11) -> list[dict]:
    """The seed's shape (sensors x hours, a reading a minute) with the values
    $group must treat as it would on a flat collection: temps as doubles
    and ints, null, missing and a string, and readings without a sensor."""
    rng = random.Random(seed)
    docs = []
    for i in range(2 * 24 * 60 // 5):  # two days, a reading every 5 minutes
        for sensor in READ_SENSORS[:3]:
            k = rng.random()
            temp = (None if k < 0.03 else "n/a" if k < 0.05 else rng.randint(-5, 35) if k < 0.3
                    else round(rng.uniform(-5.0, 35.0), 2))
            doc = reading(sensor, T0 + i * 5 * MINUTE, temp)
            if k > 0.97:
                del doc["temp"]
            if k < 0.01:
                del doc["sensor"]
            docs.append(doc)
    return docs


def same_groups(got: list[dict], want: list[dict]) -> bool:
    """Equal, floats to REL_TOL (the same numbers summed grouped otherwise)."""
    def close(a, b):
        if isinstance(a, float) or isinstance(b, float):
            return isinstance(a, (int, float)) and isinstance(b, (int, float)) and \
                math.isclose(a, b, rel_tol=REL_TOL, abs_tol=1e-9)
        if isinstance(a, dict) and isinstance(b, dict):
            return list(a) == list(b) and all(close(a[k], b[k]) for k in a)
        return type(a) is type(b) and a == b
    return len(got) == len(want) and all(close(g, w) for g, w in zip(got, want))


def backend_groups_as_mongodb(db) -> bool:
    """Whether the backend's $min skips nulls and a missing field of an _id
    document is left out, as MongoDB's $group does."""
    probe = db["probe_group"]
    probe.insert_many([{"g": 1, "t": None}, {"g": 1, "t": 5}])
    got = list(probe.aggregate([{"$group": {"_id": {"g": "$g", "m": "$missing"}, "lo": {"$min": "$t"}}}]))
    probe.drop()
    return got == [{"_id": {"g": 1}, "lo": 5}]


def test_group_answered_from_buckets_equals_flat(bucket_db, rules_remold, direct_client, make_client):
    """$group pipelines the buckets answer without unwinding (golden cases
    bucket/group_*) give what the same pipeline gives on a flat copy of the
    readings, field order and types included; and so do their unwound
    neighbours."""
    if not backend_groups_as_mongodb(direct_client[bucket_db]):
        pytest.skip("the backend's $group departs from MongoDB's on a plain collection ($min counts "
                    "a null, a missing field of an _id document becomes null): no flat answer to "
                    "compare with (DocumentDB: docs/backends.md)")
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets")})
    docs = group_dataset()
    make_client(remold.uri)[bucket_db]["readings"].insert_many(docs)
    ruled = make_client(remold.uri)[bucket_db]["readings"]
    flat = direct_client[bucket_db]["flat"]
    flat.insert_many(docs)
    day = T0 + dt.timedelta(days=1)
    stats = {"n": {"$sum": 1}, "avg": {"$avg": "$temp"}, "lo": {"$min": "$temp"}, "hi": {"$max": "$temp"},
             "total": {"$sum": "$temp"}}
    pipelines = {
        "the seed's hourly average (one sensor, one day)": [
            {"$match": {"sensor": "s1", "at": {"$gte": day, "$lt": day + dt.timedelta(days=1)}}},
            {"$group": {"_id": {"$hour": "$at"}, **stats}}, {"$sort": {"_id": 1}}],
        "per sensor and day, every bucket": [
            {"$group": {"_id": {"sensor": "$sensor", "y": {"$year": "$at"}, "d": {"$dayOfYear": "$at"}},
                        **stats}}, {"$sort": {"_id.sensor": 1, "_id.d": 1}}],
        "one group of everything, constants in the key": [
            {"$group": {"_id": {"all": 1, "on": True}, **stats, "twice": {"$sum": 2}}}],
        "a meta $in and an aligned range, by sensor": [
            {"$match": {"sensor": {"$in": ["s0", "s2"]}, "at": {"$gte": T0 + 3 * HOUR}}},
            {"$group": {"_id": "$sensor", **stats}}, {"$sort": {"_id": 1}}],
        "unwound: a range that cuts buckets": [
            {"$match": {"at": {"$gte": T0 + 90 * MINUTE}}},
            {"$group": {"_id": "$sensor", **stats}}, {"$sort": {"_id": 1}}],
        "unwound: a key finer than the span": [
            {"$match": {"sensor": "s2", "at": {"$lt": T0 + 2 * HOUR}}},
            {"$group": {"_id": {"$minute": "$at"}, "n": {"$sum": 1}}}, {"$sort": {"_id": 1}}],
    }
    wrong = []
    for name, pipeline in pipelines.items():
        got, want = list(ruled.aggregate(pipeline)), list(flat.aggregate(pipeline))
        if not want or not same_groups(got, want):
            wrong.append(f"{name}:\n  through remold {got[:3]}\n  flat           {want[:3]}")
    assert not wrong, "\n".join(wrong)


# --------------------------------------------------------------------------
# Pushdown: a meta + time-range read touches only the candidate buckets.


def test_meta_time_range_find_reads_only_candidate_buckets(bucket_db, rules_remold,
                                                           direct_client, make_client):
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets")})
    docs = [reading(s, T0 + i * MINUTE, round(10 + (i % 17) * 0.5, 1))
            for s in ("s1", "s2", "s3") for i in range(5 * 60)]
    coll = make_client(remold.uri)[bucket_db]["readings"]
    coll.insert_many(docs)
    buckets = direct_client[bucket_db]["readings_buckets"]
    assert buckets.count_documents({}) == 15

    lo, hi = T0 + 30 * MINUTE, T0 + 150 * MINUTE  # crosses two bucket boundaries
    flt = {"sensor": "s1", "at": {"$gte": lo, "$lt": hi}}
    expected = [d for d in docs if d["sensor"] == "s1" and lo <= d["at"] < hi]

    # 1. The backend pipeline remold builds starts with a $match on the bucket
    #    fields that selects exactly the 3 candidate buckets of 15.
    commands = run_explain(remold.rules_dir, bucket_db, {"find": "readings", "filter": flt})
    assert len(commands) == 1 and commands[0].get("aggregate") == "readings_buckets", commands
    first_stage = commands[0]["pipeline"][0]
    assert "$match" in first_stage, f"no bucket-level $match first: {commands[0]['pipeline']}"
    candidates = list(buckets.find(first_stage["$match"], {"sensor": 1, "start": 1}))
    assert sorted((b["sensor"], b["start"]) for b in candidates) == \
        [("s1", T0), ("s1", T0 + HOUR), ("s1", T0 + 2 * HOUR)]

    # 2. Black box: buckets outside the candidates are not read at all. A
    #    (deliberately inconsistent) bucket whose start is outside the range
    #    but whose measurement falls inside it must not show up; nor one whose
    #    max.temp summary rules it out for a temperature query.
    buckets.insert_many([
        {"sensor": "s1", "start": T0 + 10 * HOUR, "count": 1,
         "m": [{"_id": "outside-bucket", "at": lo + MINUTE, "temp": 12.0}],
         "sum": {"temp": 12.0}, "min": {"temp": 12.0}, "max": {"temp": 12.0}},
        {"sensor": "s9", "start": T0 + HOUR, "count": 1,
         "m": [{"_id": "summary-says-cold", "at": T0 + 70 * MINUTE, "temp": 99.0}],
         "sum": {"temp": 10.0}, "min": {"temp": 10.0}, "max": {"temp": 10.0}},
    ])
    got = list(coll.find(flt).sort("at", 1))
    assert got == expected
    assert coll.count_documents(flt) == len(expected)
    assert list(coll.find({"temp": {"$gt": 50}})) == []

    # 3. Where the backend explains, the bucket collection scan examines only
    #    the candidate buckets (through the index remold ensured).
    if backend_supports_explain(direct_client, bucket_db):
        plan = direct_client[bucket_db].command(
            "explain", {"aggregate": "readings_buckets", "pipeline": [first_stage], "cursor": {}},
            verbosity="executionStats")
        examined = _find_key(plan, "totalDocsExamined")
        assert examined is not None and examined <= 3, f"docs examined: {examined}"


def _find_key(doc, key):
    if isinstance(doc, dict):
        if key in doc:
            return doc[key]
        values = doc.values()
    elif isinstance(doc, list):
        values = doc
    else:
        return None
    for v in values:
        found = _find_key(v, key)
        if found is not None:
            return found
    return None


def test_explain_of_bucketed_find_describes_the_buckets(bucket_db, rules_remold, direct_client,
                                                        make_client):
    """explain through remold must describe what really runs (the bucket
    collection), or refuse clearly; never explain the empty logical name."""
    if not backend_supports_explain(direct_client, bucket_db):
        pytest.skip("the backend has no explain command")
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets")})
    client = make_client(remold.uri)
    client[bucket_db]["readings"].insert_one(reading("s1", T0, 20.0))
    flt = {"sensor": "s1", "at": {"$gte": T0, "$lt": T0 + HOUR}}
    try:
        plan = client[bucket_db].command("explain", {"find": "readings", "filter": flt},
                                         verbosity="queryPlanner")
    except OperationFailure as exc:
        assert "bucket" in str(exc), f"refused without saying why: {exc}"
        return
    assert "readings_buckets" in json_util.dumps(plan), \
        f"explain does not describe the bucket collection: {json_util.dumps(plan)[:2000]}"


def test_summary_pushdown_keeps_decimal_array_and_large_int64_values(bucket_db, rules_remold,
                                                                     make_client):
    """Summary predicates pushed down to buckets must not lose readings whose
    values the summaries do not describe exactly (Decimal128, arrays, int64
    beyond double precision). A rule may instead refuse such a reading at
    insert, with a write error naming the field; then it is simply absent."""
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets")})
    coll = make_client(remold.uri)[bucket_db]["readings"]
    big = 2 ** 62
    docs = [
        {"_id": 1, "sensor": "dec", "at": T0, "temp": Decimal128("30")},
        {"_id": 2, "sensor": "arr", "at": T0, "temp": [10.0, 30.0]},
        {"_id": 3, "sensor": "mix", "at": T0, "temp": 10.0},
        {"_id": 4, "sensor": "mix", "at": T0 + MINUTE, "temp": Decimal128("31")},
        {"_id": 5, "sensor": "big", "at": T0, "temp": Int64(big + 1)},
        {"_id": 6, "sensor": "big", "at": T0 + MINUTE, "temp": Int64(big)},
        {"_id": 7, "sensor": "dbl", "at": T0, "temp": 5.0},
    ]
    # One batch: the summaries of each bucket are computed from the batch.
    accepted = {d["_id"] for d in docs}
    try:
        coll.insert_many(docs, ordered=False)
    except BulkWriteError as exc:
        for error in exc.details["writeErrors"]:
            doc = docs[error["index"]]
            assert isinstance(doc["temp"], (Decimal128, list)), f"{doc} refused: {error}"
            assert "temp" in error["errmsg"], f"the refusal does not name the field: {error}"
            accepted.discard(doc["_id"])
    cases = [
        ({}, [1, 2, 3, 4, 5, 6, 7]),
        ({"temp": {"$gt": 20}}, [1, 2, 4, 5, 6]),
        ({"temp": 30}, [1, 2]),
        ({"temp": {"$gte": 31, "$lt": 32}}, [4]),
        ({"temp": big}, [6]),
        ({"temp": {"$gte": big, "$lt": big + 1}}, [6]),
        ({"temp": {"$lt": 6}}, [7]),
    ]
    wrong = []
    for flt, want in cases:
        want = [i for i in want if i in accepted]
        got = sorted(d["_id"] for d in coll.find(flt))
        if got != want:
            wrong.append(f"find {flt}: got _ids {got}, expected {want}")
        n = coll.count_documents(flt)
        if n != len(want):
            wrong.append(f"count_documents {flt}: got {n}, expected {len(want)}")
    assert not wrong, "\n".join(wrong)


def test_readings_without_or_with_null_meta_read_back_as_written(bucket_db, rules_remold, make_client,
                                                                 direct_client):
    """A reading without the meta field comes back without it, and one whose
    meta field is null comes back with null: they go to buckets of their
    own. `{sensor: null}` matches both, `$exists` and `$type: "null"` tell
    them apart, as on the flat documents."""
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets")})
    coll = make_client(remold.uri)[bucket_db]["readings"]
    missing = {"_id": 1, "at": T0, "temp": 1.0}
    null = {"_id": 2, "sensor": None, "at": T0 + MINUTE, "temp": 2.0}
    missing_too = {"_id": 3, "at": T0 + 2 * MINUTE, "temp": 3.0}
    for doc in (missing, null, missing_too):
        coll.insert_one(doc)
    assert direct_client[bucket_db]["readings_buckets"].count_documents({}) == 2
    found = {d["_id"]: d for d in coll.find()}
    for doc in (missing, null, missing_too):
        assert found[doc["_id"]] == doc
    assert sorted(d["_id"] for d in coll.find({"sensor": None})) == [1, 2, 3]
    assert sorted(d["_id"] for d in coll.find({"sensor": {"$exists": False}})) == [1, 3]
    assert sorted(d["_id"] for d in coll.find({"sensor": {"$type": "null"}})) == [2]


# --------------------------------------------------------------------------
# Writes.


def test_time_field_errors_ordered_insert(bucket_db, rules_remold, direct_client, make_client):
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets")})
    coll = make_client(remold.uri)[bucket_db]["readings"]
    good = [reading("s1", T0, 1.0), reading("s2", T0, 2.0), reading("s1", T0 + MINUTE, 3.0)]
    no_time = {"_id": ObjectId(), "sensor": "s1", "temp": 4.0}
    after = reading("s1", T0 + 2 * MINUTE, 5.0)
    with pytest.raises(BulkWriteError) as info:
        coll.insert_many(good + [no_time, after])
    details = info.value.details
    assert details["nInserted"] == 3
    assert [e["index"] for e in details["writeErrors"]] == [3]
    assert "at" in details["writeErrors"][0]["errmsg"]
    # Ordered: everything before the bad document is stored, nothing after it.
    assert sorted(coll.find(), key=lambda d: (d["at"], d["sensor"])) == \
        sorted(good, key=lambda d: (d["at"], d["sensor"]))
    assert direct_client[bucket_db]["readings"].count_documents({}) == 0

    # The same for a time field that is not a date.
    for bad_at in ("2024-03-04T00:00:00Z", 1709510400000, None):
        bad = {"_id": ObjectId(), "sensor": "s3", "at": bad_at, "temp": 0.0}
        with pytest.raises(BulkWriteError) as info:
            coll.insert_many([reading("s3", T0, 6.0), bad, reading("s3", T0, 7.0)])
        assert info.value.details["nInserted"] == 1
        assert [e["index"] for e in info.value.details["writeErrors"]] == [1]
    assert coll.count_documents({"sensor": "s3"}) == 3

    # insert_one of a bad document: a write error at index 0, nothing stored.
    before = coll.count_documents({})
    with pytest.raises(WriteError) as info:
        coll.insert_one({"sensor": "s1", "temp": 9.0})
    assert info.value.details["index"] == 0 and "at" in info.value.details["errmsg"]
    assert coll.count_documents({}) == before


def test_time_field_errors_unordered_insert(bucket_db, rules_remold, direct_client, make_client):
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets")})
    coll = make_client(remold.uri)[bucket_db]["readings"]
    batch = [
        reading("s1", T0, 1.0),                                        # 0
        {"_id": ObjectId(), "sensor": "s1", "temp": 2.0},              # 1 no time
        reading("s2", T0 + HOUR, 3.0),                                 # 2
        {"_id": ObjectId(), "sensor": "s2", "at": "noon", "temp": 4.0},  # 3 string
        reading("s1", T0 + MINUTE, 5.0),                               # 4
        {"_id": ObjectId(), "sensor": "s1", "at": 17, "temp": 6.0},    # 5 number
        reading("s2", T0 + HOUR + MINUTE, 7.0),                        # 6
    ]
    with pytest.raises(BulkWriteError) as info:
        coll.insert_many(batch, ordered=False)
    details = info.value.details
    assert details["nInserted"] == 4
    assert [e["index"] for e in details["writeErrors"]] == [1, 3, 5]
    for e in details["writeErrors"]:
        assert "at" in e["errmsg"], e
    stored = [batch[i] for i in (0, 2, 4, 6)]
    assert sorted(coll.find(), key=lambda d: (d["sensor"], d["at"])) == \
        sorted(stored, key=lambda d: (d["sensor"], d["at"]))
    buckets = {(b["sensor"], b["start"]): b["count"]
               for b in direct_client[bucket_db]["readings_buckets"].find()}
    assert buckets == {("s1", T0): 2, ("s2", T0 + HOUR): 2}


def backend_stops_ordered_updates_at_first_error(direct_client, db: str) -> bool:
    coll = direct_client[db]["ordered_probe"]
    coll.insert_one({"_id": 1, "m": "not an array"})
    coll.database.command("update", coll.name, ordered=True, updates=[
        {"q": {"_id": 1}, "u": {"$push": {"m": 1}}},
        {"q": {"_id": 2}, "u": {"$push": {"m": 1}}, "upsert": True}])
    stopped = coll.count_documents({"_id": 2}) == 0
    coll.drop()
    return stopped


def test_backend_write_errors_map_to_client_indexes(bucket_db, rules_remold, direct_client,
                                                    make_client):
    """A bucket upsert that fails on the backend fails exactly the readings it
    carried, reported at the client's own indexes; the others are unaffected."""
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets")})
    coll = make_client(remold.uri)[bucket_db]["readings"]
    # A bucket the backend cannot $push into: every reading for it fails.
    direct_client[bucket_db]["readings_buckets"].insert_one(
        {"sensor": "broken", "start": T0, "m": "not an array", "count": 0, "bytes": 0})

    def r(sensor, i):
        return {"_id": f"{sensor}-{i}", "sensor": sensor, "at": T0 + i * MINUTE, "temp": float(i)}

    def stored():
        return sorted(d["_id"] for d in coll.find({"sensor": {"$ne": "broken"}}))

    # Unordered: the broken bucket's readings (coalesced or not) fail, at
    # their indexes; all the others are stored.
    with pytest.raises(BulkWriteError) as info:
        coll.insert_many([r("s1", 0), r("broken", 1), r("s1", 2), r("s2", 3)], ordered=False)
    assert info.value.details["nInserted"] == 3
    assert [e["index"] for e in info.value.details["writeErrors"]] == [1]
    assert stored() == ["s1-0", "s1-2", "s2-3"]
    with pytest.raises(BulkWriteError) as info:
        coll.insert_many([r("broken", 10), r("s1", 11), r("broken", 12)], ordered=False)
    assert info.value.details["nInserted"] == 1
    assert [e["index"] for e in info.value.details["writeErrors"]] == [0, 2]
    assert stored() == ["s1-0", "s1-11", "s1-2", "s2-3"]

    if not backend_stops_ordered_updates_at_first_error(direct_client, bucket_db):
        pytest.skip("the backend does not stop an ordered update at its first error")
    # Ordered: the first failing reading is reported, nothing after it is stored.
    with pytest.raises(BulkWriteError) as info:
        coll.insert_many([r("s3", 20), r("broken", 21), r("s3", 22), r("s4", 23)])
    assert info.value.details["nInserted"] == 1
    assert [e["index"] for e in info.value.details["writeErrors"]] == [1]
    assert stored() == ["s1-0", "s1-11", "s1-2", "s2-3", "s3-20"]
    with pytest.raises(BulkWriteError) as info:
        coll.insert_many([r("broken", 30), r("broken", 31), r("s3", 32)])
    assert info.value.details["nInserted"] == 0
    assert [e["index"] for e in info.value.details["writeErrors"]] == [0]
    assert stored() == ["s1-0", "s1-11", "s1-2", "s2-3", "s3-20"]


def test_ordered_whole_batch_failure_takes_later_readings_out(bucket_db, rules_remold, direct_client,
                                                              make_client):
    """An ordered insert is coalesced across its batch (one statement per
    bucket); when a bucket's statement fails, the readings after its first
    one that an earlier statement stored are taken out of their bucket
    again (count, bytes and sums too): the client gets exactly what an
    ordered insert reports, and exactly that is stored."""
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets")})
    coll = make_client(remold.uri)[bucket_db]["readings"]
    buckets = direct_client[bucket_db]["readings_buckets"]
    buckets.insert_one({"sensor": "broken", "start": T0, "m": "not an array", "count": 0, "bytes": 0})

    def r(sensor, i, temp):
        return {"_id": f"{sensor}-{i}", "sensor": sensor, "at": T0 + i * MINUTE, "temp": temp}

    coll.insert_many([r("s1", 0, 5.5), r("s1", 1, 7)])
    before = buckets.find_one({"sensor": "s1"})
    # s1 (2, 4, 5) and broken (3), in the order of their first readings;
    # broken fails: 4 and 5 were stored in s1's bucket and are taken out.
    with pytest.raises(BulkWriteError) as info:
        coll.insert_many([r("s1", 2, 1.25), r("broken", 3, 0), r("s1", 4, -40), r("s1", 5, 99)])
    assert info.value.details["nInserted"] == 1
    assert [e["index"] for e in info.value.details["writeErrors"]] == [1]
    assert sorted(d["_id"] for d in coll.find({"sensor": "s1"})) == ["s1-0", "s1-1", "s1-2"]
    bucket = buckets.find_one({"sensor": "s1"})
    assert [m["_id"] for m in bucket["m"]] == ["s1-0", "s1-1", "s1-2"]
    assert bucket["count"] == 3
    assert math.isclose(bucket["sum"]["temp"], 5.5 + 7 + 1.25, rel_tol=REL_TOL)
    # min and max stay as they were: still bounds of what is left.
    assert bucket["min"]["temp"] <= 1.25 and bucket["max"]["temp"] >= 7
    # bytes: what the three readings take, as if 4 and 5 never came.
    one_more = bucket["bytes"] - before["bytes"]
    assert 0 < one_more < 60, bucket["bytes"]
    # The bucket takes readings again as usual.
    coll.insert_many([r("s1", 6, 8)])
    assert buckets.find_one({"sensor": "s1"})["count"] == 4


def test_max_count_starts_new_buckets_and_loses_nothing(bucket_db, rules_remold, direct_client,
                                                        make_client):
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets",
                                                      max_count=5)})
    coll = make_client(remold.uri)[bucket_db]["readings"]
    buckets = direct_client[bucket_db]["readings_buckets"]
    inserted = []

    # One at a time: the sixth reading of the hour opens a second bucket.
    for i in range(12):
        doc = reading("s1", T0 + i * MINUTE, float(i))
        coll.insert_one(doc)
        inserted.append(doc)
        assert buckets.count_documents({}) == i // 5 + 1
    assert sorted(b["count"] for b in buckets.find()) == [2, 5, 5]

    # Batches, ordered and unordered, into the same hour and another sensor.
    batch = [reading("s1", T0 + (20 + i) * MINUTE, 100.0 + i) for i in range(13)]
    coll.insert_many(batch)
    inserted += batch
    mixed = [reading("s1" if i % 3 else "s2", T0 + (40 + i) * MINUTE, -float(i))
             for i in range(17)]
    coll.insert_many(mixed, ordered=False)
    inserted += mixed

    docs = list(buckets.find())
    sensor_of = {d["_id"]: d["sensor"] for d in inserted}
    stored_ids = [m["_id"] for b in docs for m in b["m"]]
    assert sorted(stored_ids) == sorted(d["_id"] for d in inserted), "measurements lost or doubled"
    for b in docs:
        temps = [m["temp"] for m in b["m"]]
        assert 1 <= b["count"] <= 5 and b["count"] == len(b["m"]), b
        assert b["start"] == T0
        assert b["min"]["temp"] == min(temps) and b["max"]["temp"] == max(temps), b
        assert math.isclose(b["sum"]["temp"], sum(temps), rel_tol=REL_TOL, abs_tol=1e-12), b
        assert all(sensor_of[m["_id"]] == b["sensor"] for m in b["m"]), b
    per_sensor = defaultdict(int)
    for d in inserted:
        per_sensor[d["sensor"]] += 1
    for sensor, n in per_sensor.items():
        assert sum(b["count"] for b in docs if b["sensor"] == sensor) == n
        # Full buckets everywhere but (at most) the ones still filling.
        assert len([b for b in docs if b["sensor"] == sensor]) >= math.ceil(n / 5)

    assert coll.count_documents({}) == len(inserted)
    assert coll.estimated_document_count() == len(inserted)
    assert sorted(coll.find(), key=lambda d: d["_id"]) == sorted(inserted, key=lambda d: d["_id"])


def insert_hot_readings(remold, db: str, threads: int, per_thread: int, **fields) -> list[dict]:
    """Readings of sensor "hot", one a second, inserted one by one from
    `threads` clients at once (each with its own connection); returns them
    once all were acknowledged."""
    errors: list[str] = []
    inserted: list[dict] = []

    def insert(k: int):
        client = pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=10_000)
        try:
            for i in range(per_thread):
                doc = reading("hot", T0 + (k * per_thread + i) * dt.timedelta(seconds=1), float(k), **fields)
                client[db]["readings"].insert_one(doc)
                inserted.append(doc)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))
        finally:
            client.close()

    workers = [threading.Thread(target=insert, args=(k,)) for k in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert not errors, errors[:3]
    return inserted


def test_max_count_under_concurrent_inserts(bucket_db, rules_remold, direct_client):
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets",
                                                      max_count=5)})
    threads, per_thread = 8, 25
    inserted = insert_hot_readings(remold, bucket_db, threads, per_thread)
    docs = list(direct_client[bucket_db]["readings_buckets"].find())
    assert all(1 <= b["count"] == len(b["m"]) <= 5 for b in docs), [b["count"] for b in docs]
    assert sorted(m["_id"] for b in docs for m in b["m"]) == sorted(d["_id"] for d in inserted)
    assert len(docs) >= threads * per_thread // 5


def _bucket_index(direct_client, db, collection, key):
    for index in direct_client[db][collection].list_indexes():
        if list(index["key"].items()) == key:
            return index
    return None


def test_bucket_index_is_ensured(bucket_db, rules_remold, direct_client, make_client):
    remold = rules_remold({
        "readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets"),
        "capped.yaml": rule_yaml(bucket_db, "capped", "capped_buckets", meta=("site", "sensor"),
                                 max_count=10),
    })
    client = make_client(remold.uri)
    client[bucket_db]["readings"].insert_one(reading("s1", T0, 1.0))
    client[bucket_db]["capped"].insert_one(reading("s1", T0, 1.0, site="north"))

    index = _bucket_index(direct_client, bucket_db, "readings_buckets", [("sensor", 1), ("start", 1)])
    assert index is not None, list(direct_client[bucket_db]["readings_buckets"].list_indexes())
    # Not unique: a full bucket (max_bytes, max_count) starts another with the same start.
    assert not index.get("unique"), index
    assert index["name"] == "remold_bucket_sensor_start_multi", index
    capped = _bucket_index(direct_client, bucket_db, "capped_buckets",
                           [("site", 1), ("sensor", 1), ("start", 1)])
    assert capped is not None, list(direct_client[bucket_db]["capped_buckets"].list_indexes())

    # Dropped through remold, the index comes back with the next insert.
    client[bucket_db]["readings"].drop()
    client[bucket_db]["readings"].insert_one(reading("s1", T0, 2.0))
    assert _bucket_index(direct_client, bucket_db, "readings_buckets",
                         [("sensor", 1), ("start", 1)]) is not None


def test_delete_whole_buckets(bucket_db, rules_remold, direct_client, make_client):
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets")})
    coll = make_client(remold.uri)[bucket_db]["readings"]
    docs = [reading(s, T0 + i * MINUTE, float(i % 50)) for s in ("s1", "s2") for i in range(180)]
    coll.insert_many(docs)
    buckets = direct_client[bucket_db]["readings_buckets"]
    assert buckets.count_documents({}) == 6

    # Two whole hours of s1: n is the number of readings removed.
    result = coll.delete_many({"sensor": "s1", "at": {"$gte": T0 + HOUR, "$lt": T0 + 3 * HOUR}})
    assert result.deleted_count == 120
    remaining = [d for d in docs if not (d["sensor"] == "s1" and d["at"] >= T0 + HOUR)]
    assert sorted(coll.find(), key=lambda d: d["_id"]) == sorted(remaining, key=lambda d: d["_id"])
    assert buckets.count_documents({}) == 4

    # Nothing matching: n = 0.
    assert coll.delete_many({"sensor": "s1", "at": {"$gte": T0 + 5 * HOUR,
                                                    "$lt": T0 + 6 * HOUR}}).deleted_count == 0
    # Every bucket of a sensor.
    assert coll.delete_many({"sensor": "s2"}).deleted_count == 180
    assert coll.count_documents({}) == 60
    assert buckets.count_documents({}) == 1


def test_partial_delete_is_refused(bucket_db, rules_remold, direct_client, make_client):
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets")})
    coll = make_client(remold.uri)[bucket_db]["readings"]
    docs = [reading(s, T0 + i * MINUTE, float(i % 50)) for s in ("s1", "s2") for i in range(120)]
    coll.insert_many(docs)
    buckets = direct_client[bucket_db]["readings_buckets"]
    before = sorted(buckets.find(), key=lambda b: (b["sensor"], b["start"]))

    refused = [
        ("range cutting through a bucket", lambda: coll.delete_many(
            {"sensor": "s1", "at": {"$gte": T0 + 30 * MINUTE, "$lt": T0 + 2 * HOUR}})),
        ("filter on a measurement field", lambda: coll.delete_many({"temp": {"$gt": 10}})),
        ("filter on _id", lambda: coll.delete_many({"_id": docs[0]["_id"]})),
        ("delete_one", lambda: coll.delete_one({"sensor": "s1"})),
        ("find_one_and_delete", lambda: coll.find_one_and_delete({"sensor": "s1"})),
    ]
    for name, op in refused:
        with pytest.raises(OperationFailure) as info:
            op()
        message = str(info.value)
        assert "bucket" in message, f"{name}: the error does not say why: {message}"
        assert sorted(buckets.find(), key=lambda b: (b["sensor"], b["start"])) == before, \
            f"{name} changed the buckets"
    assert coll.count_documents({}) == len(docs)


def test_refusal_quoting_a_field_name_that_is_not_utf8_is_valid_utf8(bucket_db, rules_remold, make_client):
    # BSON lets a key hold any bytes, and remold's refusal quotes the field
    # it refuses. A driver that decodes replies strictly (the Node.js
    # driver validates UTF-8 by default) must still read the refusal: the
    # quote comes back with U+FFFD. Decoded strictly here (pymongo itself
    # decodes command replies with "replace").
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets")})
    make_client(remold.uri)[bucket_db]["readings"].insert_one(reading("s1", T0, 1.0))
    body = bson.encode({"delete": "readings", "deletes": [{"q": {"teXmp": {"$gt": 10}}, "limit": 0}],
                        "$db": bucket_db})
    body = body.replace(b"teXmp", b"te\xffmp")  # the same length: the sizes hold
    sock = wire.connect(*remold.address)
    try:
        reply = wire.roundtrip(sock, wire.op_msg(body)).docs[0]  # bson.decode: strict UTF-8
    finally:
        sock.close()
    assert reply["ok"] == 0 and reply["code"] == 72, reply
    assert "(got 'te\ufffdmp')" in reply["errmsg"], reply
    assert make_client(remold.uri)[bucket_db]["readings"].count_documents({}) == 1


def test_updates_are_refused(bucket_db, rules_remold, direct_client, make_client):
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets")})
    coll = make_client(remold.uri)[bucket_db]["readings"]
    docs = [reading("s1", T0 + i * MINUTE, float(i)) for i in range(90)]
    coll.insert_many(docs)
    buckets = direct_client[bucket_db]["readings_buckets"]
    before = sorted(buckets.find(), key=lambda b: b["start"])

    operations = [
        ("update_one", lambda: coll.update_one({"_id": docs[0]["_id"]}, {"$set": {"temp": 99.0}})),
        ("update_many", lambda: coll.update_many({}, {"$inc": {"temp": 1}})),
        ("upsert", lambda: coll.update_one({"sensor": "s9"}, {"$set": {"temp": 1.0}}, upsert=True)),
        ("replace_one", lambda: coll.replace_one({"_id": docs[1]["_id"]}, {"sensor": "s1"})),
        ("find_one_and_update", lambda: coll.find_one_and_update({"sensor": "s1"},
                                                                 {"$set": {"temp": 0.0}})),
        ("find_one_and_replace", lambda: coll.find_one_and_replace({"sensor": "s1"},
                                                                   {"sensor": "s1", "temp": 0.0})),
        ("bulk_write UpdateOne", lambda: coll.bulk_write([pymongo.UpdateOne(
            {"sensor": "s1"}, {"$set": {"temp": 0.0}})])),
    ]
    for name, op in operations:
        with pytest.raises(OperationFailure) as info:
            op()
        message = str(info.value)
        assert "bucket" in message and "not supported" in message, \
            f"{name}: the error does not say why: {message}"
        assert sorted(buckets.find(), key=lambda b: b["start"]) == before, f"{name} changed buckets"
    assert sorted(coll.find(), key=lambda d: d["at"]) == docs


def test_drop_of_logical_collection_drops_buckets(bucket_db, rules_remold, direct_client,
                                                  make_client):
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets")})
    client = make_client(remold.uri)
    coll = client[bucket_db]["readings"]
    coll.insert_many([reading("s1", T0 + i * MINUTE, 1.0) for i in range(100)])
    assert "readings_buckets" in direct_client[bucket_db].list_collection_names()

    coll.drop()
    assert "readings_buckets" not in direct_client[bucket_db].list_collection_names()
    assert list(coll.find()) == []
    assert coll.count_documents({}) == 0
    assert coll.estimated_document_count() == 0
    # Dropping again (nothing there) is not an error either.
    coll.drop()

    again = reading("s1", T0, 5.0)
    coll.insert_one(again)
    assert list(coll.find()) == [again]
    assert direct_client[bucket_db]["readings_buckets"].count_documents({}) == 1


def test_insert_without_id_gets_one(bucket_db, rules_remold, make_client):
    """A raw insert command without _id (no driver adds it): MongoDB gives
    every document an _id, so the readings read back must have one."""
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets")})
    db = make_client(remold.uri)[bucket_db]
    reply = db.command("insert", "readings", documents=[
        {"sensor": "s1", "at": T0, "temp": 1.0}, {"sensor": "s1", "at": T0 + MINUTE, "temp": 2.0}])
    assert reply["n"] == 2
    found = list(db["readings"].find().sort("at", 1))
    assert [d["temp"] for d in found] == [1.0, 2.0]
    ids = [d.get("_id") for d in found]
    assert all(i is not None for i in ids) and len(set(ids)) == 2, found


def test_find_returns_id_first(bucket_db, rules_remold, make_client):
    """MongoDB always returns _id as the first field of a stored document."""
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets")})
    coll = make_client(remold.uri)[bucket_db]["readings"]
    doc = reading("s1", T0, 1.5)
    coll.insert_one(doc)
    found = coll.find_one()
    assert found == doc
    assert list(found)[0] == "_id", f"field order {list(found)}"


# --------------------------------------------------------------------------
# Issue 11: regressions found trying the bucket rule as a new user would.
# An oracle is a plain collection on the backend given the same operations.


def _oracle(direct_client, db: str, docs: list[dict]):
    oracle = direct_client[db]["oracle"]
    oracle.insert_many([dict(d) for d in docs])
    return oracle


def _by_id(docs) -> list[dict]:
    return sorted(docs, key=lambda d: d["_id"])


def _bson_of(docs) -> list[bytes]:
    """Byte-exact forms: field order and number types count (7 == 7.0 in Python)."""
    return [bson.encode(d) for d in docs]


def test_duplicate_id_is_not_enforced_unique_as_documented(bucket_db, rules_remold, make_client):
    """docs/patterns/bucket.md says it: like MongoDB's time-series collections, a bucketed
    collection does not enforce _id uniqueness. A second reading with a stored
    _id is stored too, and both read back."""
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets")})
    coll = make_client(remold.uri)[bucket_db]["readings"]
    first = reading("s1", T0, 1.0)
    again = dict(first, at=T0 + 2 * HOUR, temp=2.0)  # another bucket
    same_bucket = dict(first, at=T0 + MINUTE, temp=3.0)
    coll.insert_one(first)
    coll.insert_one(again)
    coll.insert_many([same_bucket])
    found = list(coll.find({"_id": first["_id"]}).sort("at", 1))
    assert found == [first, same_bucket, again]
    assert coll.count_documents({"_id": first["_id"]}) == 3


def test_reading_with_a_field_outside_fields_gets_a_write_error(bucket_db, rules_remold,
                                                                direct_client, make_client):
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets",
                                                      extra=["fields: [_id, at, temp]"])})
    coll = make_client(remold.uri)[bucket_db]["readings"]
    docs = [reading("s1", T0 + i * MINUTE, float(i)) for i in range(4)]
    docs[1]["humidity"] = 40
    docs[3]["note"] = "x"
    with pytest.raises(BulkWriteError) as info:
        coll.insert_many(docs, ordered=False)
    details = info.value.details
    assert details["nInserted"] == 2
    assert [(e["index"], e["code"]) for e in details["writeErrors"]] == [(1, 2), (3, 2)]
    for error, field in zip(details["writeErrors"], ("humidity", "note")):
        message = error["errmsg"]
        assert f"'{field}'" in message and "'readings'" in message, message
        assert f"{bucket_db}.readings" in message, message
    stored = [docs[0], docs[2]]
    oracle = _oracle(direct_client, bucket_db, stored)
    assert _bson_of(_by_id(coll.find())) == _bson_of(_by_id(oracle.find()))

    # Ordered: the batch stops at the reading that would lose a field.
    with pytest.raises(BulkWriteError) as info:
        coll.insert_many([reading("s2", T0, 1.0, extra=1), reading("s2", T0, 2.0)])
    assert info.value.details["nInserted"] == 0
    assert coll.count_documents({"sensor": "s2"}) == 0


def test_extra_fields_drop_drops_them_as_the_rule_says(bucket_db, rules_remold, make_client):
    remold = rules_remold({"readings.yaml": rule_yaml(
        bucket_db, "readings", "readings_buckets",
        extra=["fields: [_id, at, temp]", "extra_fields: drop"])})
    coll = make_client(remold.uri)[bucket_db]["readings"]
    doc = reading("s1", T0, 1.0, humidity=40)
    coll.insert_one(doc)
    assert list(coll.find()) == [{k: v for k, v in doc.items() if k != "humidity"}]


def test_max_bytes_caps_bucket_size(bucket_db, rules_remold, direct_client, make_client):
    """Three 6 MB readings in one hour: never a bucket over 16 MB. Each is
    larger than the default max_bytes (125 KB), so each gets a bucket of its own."""
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets")})
    coll = make_client(remold.uri)[bucket_db]["readings"]
    big = [reading("s1", T0 + i * MINUTE, float(i), blob="x" * (6 * 1024 * 1024)) for i in range(3)]
    for doc in big:
        coll.insert_one(doc)
    buckets = list(direct_client[bucket_db]["readings_buckets"].find())
    assert len(buckets) == 3
    assert all(len(bson.encode(b)) < 16 * 1024 * 1024 for b in buckets)
    oracle = _oracle(direct_client, bucket_db, big)
    # One at a time: mongod caps a batch at 16 MB; the stand-in backend's
    # aggregate ignores batchSize and would answer all three in one reply.
    for doc in big:
        assert list(coll.find({"_id": doc["_id"]})) == list(oracle.find({"_id": doc["_id"]}))
    assert coll.count_documents({}) == oracle.count_documents({}) == 3


def test_max_bytes_starts_new_buckets(bucket_db, rules_remold, direct_client, make_client):
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets",
                                                      extra=["max_bytes: 2048"])})
    coll = make_client(remold.uri)[bucket_db]["readings"]
    docs = [reading("s1", T0 + i * MINUTE, float(i), note="n" * (i * 10)) for i in range(40)]
    for doc in docs[:10]:
        coll.insert_one(doc)
    coll.insert_many(docs[10:25])
    coll.insert_many(docs[25:], ordered=False)
    buckets = list(direct_client[bucket_db]["readings_buckets"].find())
    assert len(buckets) > 1
    for b in buckets:
        measured = sum(len(bson.encode(m)) + 9 for m in b["m"])
        assert b["bytes"] == measured <= 2048, b["bytes"]
        assert b["count"] == len(b["m"])
    oracle = _oracle(direct_client, bucket_db, docs)
    assert _by_id(coll.find()) == _by_id(oracle.find())
    assert coll.count_documents({}) == len(docs)


def test_max_bytes_under_concurrent_inserts(bucket_db, rules_remold, direct_client):
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets",
                                                      extra=["max_bytes: 1024"])})
    threads, per_thread = 6, 25
    inserted = insert_hot_readings(remold, bucket_db, threads, per_thread, note="p" * 100)
    docs = list(direct_client[bucket_db]["readings_buckets"].find())
    for b in docs:
        assert b["bytes"] == sum(len(bson.encode(m)) + 9 for m in b["m"]) <= 1024, b["bytes"]
    assert sorted(m["_id"] for b in docs for m in b["m"]) == sorted(d["_id"] for d in inserted)


def test_reading_too_large_for_any_bucket_is_refused(bucket_db, rules_remold, direct_client,
                                                     make_client):
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets")})
    coll = make_client(remold.uri)[bucket_db]["readings"]
    huge = reading("s1", T0, 1.0, blob="x" * (16 * 1024 * 1024 - 1024))
    with pytest.raises(WriteError) as info:
        coll.insert_one(huge)
    assert info.value.code == 10334
    assert "'readings'" in str(info.value) and f"{bucket_db}.readings" in str(info.value)
    assert coll.count_documents({}) == 0
    assert direct_client[bucket_db]["readings_buckets"].count_documents({}) == 0


def test_meta_values_keep_their_type(bucket_db, rules_remold, direct_client, make_client):
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets")})
    coll = make_client(remold.uri)[bucket_db]["readings"]
    values = [7.0, 7, Int64(7), Decimal128("7"), 7.5, {"site": "n", "no": 7},
              {"site": "n", "no": 7.0}, "7"]
    docs = [reading(v, T0 + i * MINUTE, float(i)) for i, v in enumerate(values)]
    # One at a time (the first 7.0 makes a bucket the others would join on
    # value equality), then the same values again in one batch.
    for doc in docs:
        coll.insert_one(doc)
    batch = [reading(v, T0 + (20 + i) * MINUTE, float(i)) for i, v in enumerate(values)]
    coll.insert_many(batch, ordered=False)
    oracle = _oracle(direct_client, bucket_db, docs + batch)
    assert _bson_of(_by_id(coll.find())) == _bson_of(_by_id(oracle.find()))
    # Queries match by value, as on the plain collection.
    for query in ({"sensor": 7}, {"sensor": Decimal128("7")}, {"sensor": {"site": "n", "no": 7}}):
        assert _bson_of(_by_id(coll.find(query))) == _bson_of(_by_id(oracle.find(query)))


def test_delete_many_with_explicit_and(bucket_db, rules_remold, direct_client, make_client):
    """Filters.and of the Java driver sends an explicit $and."""
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets")})
    coll = make_client(remold.uri)[bucket_db]["readings"]
    docs = [reading(s, T0 + i * MINUTE, float(i)) for s in ("s1", "s2") for i in range(240)]
    coll.insert_many(docs)
    oracle = _oracle(direct_client, bucket_db, docs)
    for query in (
        {"$and": [{"sensor": "s1"}, {"at": {"$gte": T0 + HOUR}}, {"at": {"$lt": T0 + 3 * HOUR}}]},
        {"$and": [{"$and": [{"sensor": "s2"}]}, {"at": {"$lt": T0 + HOUR}}]},
    ):
        got = coll.delete_many(query).deleted_count
        want = oracle.delete_many(query).deleted_count
        assert got == want > 0, query
        assert _by_id(coll.find()) == _by_id(oracle.find())
    # A conjunct that cuts through a bucket is refused, as at the top level.
    with pytest.raises(OperationFailure) as info:
        coll.delete_many({"$and": [{"sensor": "s1"}, {"at": {"$gte": T0 + 30 * MINUTE}}]})
    assert info.value.code == 72
    assert _by_id(coll.find()) == _by_id(oracle.find())


def test_find_projection_operators_are_refused_clearly(bucket_db, rules_remold, make_client):
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets")})
    coll = make_client(remold.uri)[bucket_db]["readings"]
    coll.insert_one(reading("s1", T0, 1.0, tags=["a", "b", "c"]))
    for operator, query, projection in (
        ("$slice", {}, {"tags": {"$slice": 2}}),
        ("$elemMatch", {}, {"tags": {"$elemMatch": {"$eq": "a"}}}),
        ("positional '$'", {"tags": "b"}, {"tags.$": 1}),
    ):
        with pytest.raises(OperationFailure) as info:
            list(coll.find(query, projection))
        assert info.value.code == 72, info.value
        message = str(info.value)
        assert operator in message and "'readings'" in message, message
        assert f"{bucket_db}.readings" in message, message


def test_catalog_commands_on_the_logical_collection(bucket_db, rules_remold, direct_client,
                                                    make_client):
    remold = rules_remold({"readings.yaml": rule_yaml(bucket_db, "readings", "readings_buckets")})
    db = make_client(remold.uri)[bucket_db]
    direct = direct_client[bucket_db]

    # Before anything exists: as on a missing collection (mongod: NamespaceNotFound,
    # naming the collection asked about; drivers read it as no indexes).
    def outcome(run):
        try:
            return "ok", run()["cursor"]["firstBatch"]
        except OperationFailure as exc:
            assert "readings_buckets" not in str(exc), exc
            return "error", exc.code
    assert outcome(lambda: db.command("listIndexes", "readings")) == \
        outcome(lambda: direct.command("listIndexes", "missing"))
    assert list(db["readings"].list_indexes()) == list(direct["missing"].list_indexes()) == []

    # create prepares the bucket collection and its index, and answers like create.
    assert db.command("create", "readings")["ok"] == 1.0
    assert "readings_buckets" in direct.list_collection_names()
    assert _bucket_index(direct_client, bucket_db, "readings_buckets",
                         [("sensor", 1), ("start", 1)]) is not None
    # Again: as a plain collection answers on this backend (a mongod before
    # 7.0: NamespaceExists, naming the logical collection; a mongos, or 7.0
    # and later, DocumentDB among them: ok, the options being the same).
    direct.create_collection("oracle")

    def created_again(run):
        try:
            return "ok", run()["ok"]
        except OperationFailure as exc:
            assert "readings_buckets" not in str(exc), exc
            return "error", exc.code
    oracle = created_again(lambda: direct.command("create", "oracle"))
    assert oracle in (("ok", 1.0), ("error", 48)), oracle
    assert created_again(lambda: db.command("create", "readings")) == oracle
    with pytest.raises(OperationFailure) as info:
        db.command("create", "readings", capped=True, size=4096)
    assert info.value.code == 72 and "capped" in str(info.value)

    # listIndexes: those of the bucket collection, which serve it.
    listed = list(db["readings"].list_indexes())
    assert [i["name"] for i in listed] == \
        [i["name"] for i in direct["readings_buckets"].list_indexes()]
    db["readings"].insert_one(reading("s1", T0, 1.0))

    for name, args in (("createIndexes", {"indexes": [{"key": {"temp": 1}, "name": "temp_1"}]}),
                       ("dropIndexes", {"index": "*"}), ("collStats", {}),
                       ("validate", {}), ("collMod", {})):
        with pytest.raises(OperationFailure) as info:
            db.command(name, "readings", **args)
        assert info.value.code == 115, (name, info.value)
        message = str(info.value)
        assert name in message and f"{bucket_db}.readings_buckets" in message, message
        assert "'readings'" in message, message
    assert [i["name"] for i in db["readings"].list_indexes()] == [i["name"] for i in listed]
    assert db["readings"].count_documents({}) == 1
