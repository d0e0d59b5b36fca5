"""The driver-matrix scenario with pymongo.

    python scenario.py PLAN_JSON

PLAN_JSON is {uri, db, compressed: {NAME: URI, ...}}; the steps, their
collections and the JSON printed on stdout are specified once, in
tests/e2e/python/test_driver_matrix.py, which runs this and judges what it
prints. Documents are printed as canonical Extended JSON, so their BSON types
survive. A step that fails is reported, not raised: the exit status is
non-zero only if the program itself breaks.

The same program runs with two pymongo releases: the e2e suite's own (the
venv of scripts/install-deps.sh, for the stand-in) and the newest
(requirements-latest.txt beside this file, in .venv-latest, for DocumentDB).
It uses nothing but pymongo's public API, so that both run it unchanged.
"""

from __future__ import annotations

import datetime as dt
import json
import sys

import pymongo
from bson import json_util
from bson.json_util import CANONICAL_JSON_OPTIONS
from pymongo import DeleteOne, InsertOne, ReplaceOne, UpdateMany, UpdateOne
from pymongo.errors import BulkWriteError, OperationFailure

T0 = dt.datetime(2024, 3, 4)  # naive: pymongo stores it as UTC
SELECTION_TIMEOUT_MS = 10_000


def bulk_ordered():
    return [
        InsertOne({"_id": 1, "k": "a", "n": 1}),
        InsertOne({"_id": 2, "k": "b", "n": 2}),
        InsertOne({"_id": 3, "k": "c", "n": 3}),
        UpdateOne({"_id": 1}, {"$inc": {"n": 10}}),
        UpdateMany({"n": {"$lt": 5}}, {"$set": {"flag": True}}),
        DeleteOne({"_id": 3}),
        ReplaceOne({"_id": 2}, {"k": "B", "n": 20}),
        UpdateOne({"_id": 4}, {"$set": {"k": "d"}}, upsert=True),
    ]


def bulk_unordered():
    return [
        InsertOne({"_id": 2, "k": "duplicate"}),
        InsertOne({"_id": 5, "k": "e", "n": 5}),
        UpdateOne({"_id": 2}, {"$set": {"u": True}}),
        DeleteOne({"_id": 1}),
    ]


def compressed_docs():
    return [{"_id": i, "text": f"row {i} " + "compressible " * 20} for i in range(20)]


def readings():
    return [{"sensor": f"s{1 + i % 2}", "at": T0 + dt.timedelta(minutes=10 * i), "temp": 20.25 + i}
            for i in range(12)]


def error_seen(exc: BaseException) -> dict:
    """An error as the driver hands it to the application."""
    details = getattr(exc, "details", None)
    return {"kind": type(exc).__name__, "code": getattr(exc, "code", None),
            "codeName": details.get("codeName") if isinstance(details, dict) else None,
            "message": str(exc)}


def step(fn) -> dict:
    try:
        return {"ok": True, **fn()}
    except Exception as exc:  # noqa: BLE001: every failure is reported
        return {"ok": False, "error": error_seen(exc)}


def crud(db) -> dict:
    coll = db["crud"]
    one = coll.insert_one({"_id": "a", "n": 1, "tags": ["x", "y"]})
    many = coll.insert_many([{"_id": "b", "n": 2}, {"_id": "c", "n": 3}])
    found_gte2 = list(coll.find({"n": {"$gte": 2}}).sort("_id", 1))
    u1 = coll.update_one({"_id": "a"}, {"$inc": {"n": 10}})
    um = coll.update_many({"n": {"$lt": 5}}, {"$set": {"small": True}})
    d1 = coll.delete_one({"_id": "b"})
    return {
        "insertOneId": one.inserted_id,
        "insertManyCount": len(many.inserted_ids),
        "foundGte2": found_gte2,
        "updateOne": {"matched": u1.matched_count, "modified": u1.modified_count},
        "updateMany": {"matched": um.matched_count, "modified": um.modified_count},
        "deleteOne": d1.deleted_count,
        "final": list(coll.find({}).sort("_id", 1)),
        "count": coll.count_documents({}),
    }


def cursor(db) -> dict:
    coll = db["cursor"]
    coll.insert_many([{"_id": i, "pad": "p" * 100} for i in range(250)])
    found = coll.find({}).sort("_id", 1).batch_size(50)
    ids, batches = [], []
    left = 0  # documents of the current batch not yet returned
    for doc in found:
        ids.append(doc["_id"])
        buffered = found.retrieved - len(ids)  # received, not yet returned
        if left == 0:
            batches.append(buffered + 1)
        left = buffered
    return {"ids": ids, "batches": batches}


def bulk_counts(inserted, matched, modified, deleted, upserted, write_errors) -> dict:
    return {"inserted": inserted, "matched": matched, "modified": modified, "deleted": deleted,
            "upserted": upserted,
            "writeErrors": [{"index": e["index"], "code": e["code"]} for e in write_errors]}


def bulk_write(coll, operations, ordered: bool) -> dict:
    try:
        r = coll.bulk_write(operations, ordered=ordered)
    except BulkWriteError as exc:  # carries the partial result
        d = exc.details
        return bulk_counts(d["nInserted"], d["nMatched"], d["nModified"], d["nRemoved"],
                           d["nUpserted"], d["writeErrors"])
    return bulk_counts(r.inserted_count, r.matched_count, r.modified_count, r.deleted_count,
                       r.upserted_count, [])


def bulk(db) -> dict:
    coll = db["bulk"]
    ordered = bulk_write(coll, bulk_ordered(), True)
    unordered = bulk_write(coll, bulk_unordered(), False)
    return {"ordered": ordered, "unordered": unordered,
            "final": list(coll.find({}).sort("_id", 1))}


def compressed(db_name: str, name: str, uri: str) -> dict:
    with pymongo.MongoClient(uri, serverSelectionTimeoutMS=SELECTION_TIMEOUT_MS) as client:
        coll = client[db_name][f"compressed_{name}"]
        inserted = len(coll.insert_many(compressed_docs()).inserted_ids)
        return {"inserted": inserted, "found": list(coll.find({}).sort("_id", 1))}


def bucket(db) -> dict:
    coll = db["readings"]
    inserted = []
    for doc in readings():
        inserted_id = coll.insert_one(dict(doc)).inserted_id
        inserted.append({"_id": inserted_id, **doc})
    return {"inserted": inserted, "found": list(coll.find({}).sort("at", 1))}


def refusal(db) -> dict:
    coll = db["readings"]

    def attempt():
        r = coll.update_one({"sensor": "s1"}, {"$set": {"temp": 99.5}})
        return {"matched": r.matched_count, "modified": r.modified_count}

    return {"attempt": step(attempt), "after": list(coll.find({}).sort("at", 1))}


def main(argv: list[str]) -> int:
    try:
        plan = json.loads(argv[1])
        uri, db_name, plans = plan["uri"], plan["db"], plan["compressed"]
    except (IndexError, ValueError, KeyError, TypeError):
        print('usage: scenario.py \'{"uri": ..., "db": ..., "compressed": {...}}\'',
              file=sys.stderr)
        return 2
    out: dict = {}
    with pymongo.MongoClient(uri, serverSelectionTimeoutMS=SELECTION_TIMEOUT_MS) as client:
        db = client[db_name]
        out["crud"] = step(lambda: crud(db))
        out["cursor"] = step(lambda: cursor(db))
        out["bulk"] = step(lambda: bulk(db))
        out["compression"] = {name: step(lambda name=name, u=u: compressed(db_name, name, u))
                              for name, u in plans.items()}
        out["bucket"] = step(lambda: bucket(db))
        out["refusal"] = step(lambda: refusal(db))
    print(json_util.dumps(out, json_options=CANONICAL_JSON_OPTIONS))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
