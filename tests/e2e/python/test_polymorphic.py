"""The polymorphic rule (patterns/polymorphic/): several logical collections
(articles, videos, podcasts) stored in one collection, `content`, each
document with its type in a discriminator field.

Every expected answer comes from an oracle: the same operations run on flat
plain collections of the backend (`articles_oracle`, `videos_oracle`,
`podcasts_oracle`), never from what remold answers. Eight clients write and
read the three types at once; then every read of every logical collection
is compared with its oracle, and the stored collection, read directly and
through remold (the unified query), holds every document with its type.
Indexes, refusals, the catalog, joins from plain collections and the
adoption of a collection written before the rule (`remold migrate`) follow.
"""
from __future__ import annotations

import copy
import random
import threading
import time
import traceback
import uuid
from pathlib import Path
from types import SimpleNamespace

import pymongo
import pymongo.errors
import pytest
from bson.int64 import Int64
from pymongo import ReturnDocument
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure, WriteError

from concurrent_clients import STAND_IN_SORT_RACE
from conftest import NO_PROXY
from migration_support import drop_database_after_kills
from test_rules import run_remold

pytestmark = pytest.mark.skipif(NO_PROXY, reason="needs remold's rules")

# logical collection -> discriminator value
TYPES = {"articles": "ARTICLE", "videos": "VIDEO", "podcasts": "PODCAST"}
ID_BASE = {"articles": 1_000_000, "videos": 2_000_000, "podcasts": 3_000_000}
TAGS = ["red", "green", "blue", "news", "howto"]
CLIENTS = 8
TOTAL_OPS = 2_000
SEED_PER_OWNER = 20


def rule_text(db: str, name: str, value: str, *, field: str | None = "type", collection: str = "content",
              extra: str = "") -> str:
    text = f"namespace: {db}.{name}\npattern: polymorphic\npolymorphic:\n  collection: {collection}\n"
    if field is not None:
        text += f"  field: {field}\n"
    return text + f"  value: {value}\n" + extra


def write_rules(rules: Path, db: str) -> Path:
    rules.mkdir(exist_ok=True)
    (rules / "articles.yaml").write_text(rule_text(db, "articles", "ARTICLE"))
    (rules / "videos.yaml").write_text(rule_text(db, "videos", "VIDEO", field=None))  # the default field
    (rules / "podcasts.yaml").write_text(rule_text(db, "podcasts", "PODCAST"))
    return rules


@pytest.fixture
def poly(private_remold, direct_client, db_name, tmp_path):
    """remold with the three rules; `db` through it, `direct` the backend's."""
    rules = write_rules(tmp_path / "rules", db_name)
    remold = private_remold(extra_args=("--rules", str(rules)))
    client = pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=10_000)
    try:
        yield SimpleNamespace(remold=remold, rules=rules, db=client[db_name], direct=direct_client[db_name],
                              client=client, uri=remold.uri, name=db_name)
    finally:
        client.close()
        drop_database_after_kills(direct_client, db_name)


# --------------------------------------------------------------------------
# What the backend itself answers as MongoDB does, probed on plain
# collections: what it lacks is not exercised (skipped by capability).

_CAPABILITIES: dict = {}


def capabilities(direct_client) -> set[str]:
    key = tuple(direct_client.address or ("?", 0))
    if key in _CAPABILITIES:
        return _CAPABILITIES[key]
    name = f"e2e_py_poly_probe_{uuid.uuid4().hex[:8]}"
    db = direct_client[name]
    found: set[str] = set()
    try:
        db.p.insert_one({"_id": 1, "a": 1})
        try:
            db.p.update_one({"_id": 1}, [{"$set": {"b": 1}}])
            db.p.update_one({"_id": 1}, [{"$replaceWith": {"_id": "$_id", "c": "$a"}}])
            if db.p.find_one({"_id": 1}) == {"_id": 1, "c": 1}:
                found.add("pipeline_updates")
        except OperationFailure:
            pass
        db.u.create_index("s", unique=True, partialFilterExpression={"t": "a"})
        db.u.insert_one({"t": "a", "s": 1})
        try:
            db.u.insert_one({"t": "b", "s": 1})
            try:
                db.u.insert_one({"t": "a", "s": 1})
            except DuplicateKeyError:
                found.add("partial_unique")
        except DuplicateKeyError:
            pass
        try:
            if len(list(db.p.aggregate([{"$unionWith": "u"}]))) == 3:
                found.add("union_with")
        except OperationFailure:
            pass
        try:
            db.create_collection("v", validator={"$or": [{"t": {"$ne": "a"}}, {"$jsonSchema": {"required": ["x"]}}]})
            db.v.insert_one({"t": "b"})
            try:
                db.v.insert_one({"t": "a"})
            except OperationFailure as refused:
                if refused.code == 121:
                    found.add("validators")
        except OperationFailure:
            pass
        try:
            db.i.create_index("a")
            db.i.create_index("b")
            db.command("dropIndexes", "i", index=["a_1", "b_1"])
            if sorted(db.i.index_information()) == ["_id_"]:
                found.add("drop_index_list")
        except OperationFailure:
            pass
    finally:
        direct_client.drop_database(name)
    _CAPABILITIES[key] = found
    return found


# --------------------------------------------------------------------------
# Comparing answers: field order and BSON types included.


def canon(value):
    if isinstance(value, dict):
        return ("doc", tuple((k, canon(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return ("arr", tuple(canon(v) for v in value))
    return (type(value).__name__, value)


def summarize(result):
    if isinstance(result, pymongo.results.InsertOneResult):
        return ("inserted", canon(result.inserted_id))
    if isinstance(result, pymongo.results.InsertManyResult):
        return ("inserted", canon(result.inserted_ids))
    if isinstance(result, pymongo.results.UpdateResult):
        return ("updated", result.matched_count, result.modified_count, canon(result.upserted_id))
    if isinstance(result, pymongo.results.DeleteResult):
        return ("deleted", result.deleted_count)
    return canon(result)


def outcome(call):
    """What a call answered, as comparable data: its result or its error."""
    for attempt in range(10):
        try:
            return summarize(call())
        except BulkWriteError as exc:
            d = exc.details
            return ("BulkWriteError", d.get("nInserted"), d.get("nMatched"), d.get("nModified"),
                    d.get("nRemoved"), d.get("nUpserted"),
                    tuple((e["index"], e["code"]) for e in d.get("writeErrors", [])))
        except OperationFailure as exc:
            if STAND_IN_SORT_RACE in str(exc) and attempt < 9:
                continue  # the stand-in's sort of live documents; nothing was written
            return (type(exc).__name__, exc.code)


def sorted_values(values: list) -> list:
    """distinct's values in one order. Which of equal numbers of different
    types (3 and Int64(3)) distinct keeps is the one it met first, which the
    physical order decides: they are compared by value."""
    def key(v):
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return ("number", float(v), "")
        return (type(v).__name__, 0.0, repr(v))
    return sorted(values, key=key)


def everything(collection, query=None) -> list[dict]:
    """Sorted by _id on the server (DocumentDB's unsorted cursors of several
    batches repeat updated documents: docs/backends.md)."""
    return list(collection.find(query or {}).sort("_id", 1))


def first_difference(got: list, want: list):
    for g, w in zip(got, want):
        if canon(g) != canon(w):
            return g, w
    return f"lengths {len(got)} vs {len(want)}"


# --------------------------------------------------------------------------
# 1. Three types in one collection under eight clients.


class Client:
    """One client of the application: it writes and reads documents of its
    own (`owner: k`, _ids in its own range), so that each operation's answer
    is determined, and runs each on remold's logical collection and on the
    oracle's flat one."""

    def __init__(self, k: int, uri: str, direct_uri: str, db: str, caps: set, seeded: dict):
        self.k = k
        self.rng = random.Random(7919 * (k + 1))
        self.client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=10_000)
        self.direct = pymongo.MongoClient(direct_uri, serverSelectionTimeoutMS=10_000)
        self.db, self.oracle = self.client[db], self.direct[db]
        self.caps = caps
        self.ids = {t: list(seeded[t]) for t in TYPES}
        self.next = {t: len(seeded[t]) for t in TYPES}
        self.wrong: list[str] = []
        self.tally: dict[str, int] = {}

    def close(self):
        self.client.close()
        self.direct.close()

    # Documents, filters and updates of this client.

    def fresh(self, t: str) -> int:
        _id = ID_BASE[t] + self.k * 10_000 + self.next[t]
        self.next[t] += 1
        self.ids[t].append(_id)
        return _id

    def pick(self, t: str) -> int:
        return self.rng.choice(self.ids[t])

    def doc(self, t: str, _id=None) -> dict:
        return make_doc(self.rng, t, self.k, _id)

    def update(self) -> dict:
        rng = self.rng
        return rng.choice([
            lambda: {"$set": {"title": f"edited {rng.randrange(100)}", "meta.rating": rng.randrange(5)}},
            lambda: {"$inc": {"n": rng.choice([1, -2, 5]), "views": 1}},
            lambda: {"$unset": {rng.choice(["meta", "tags", "title", "slug"]): ""}},
            lambda: {"$push": {"tags": rng.choice(TAGS)}},
            lambda: {"$set": {"slug": f"s{rng.randrange(12)}"}, "$inc": {"n": 1}},
            lambda: {"$addToSet": {"tags": rng.choice(TAGS)}, "$set": {"edited": True}},
            lambda: {"$set": {"meta": {"lang": rng.choice(["en", "fr"]), "rating": Int64(rng.randrange(5))}}},
            lambda: {"$min": {"n": rng.randrange(100)}},
            lambda: {"$mul": {"n": 2}},
        ])()

    def pipeline(self) -> list:
        rng = self.rng
        return rng.choice([
            [{"$set": {"n2": {"$add": [{"$ifNull": ["$n", 0]}, 1]}}}],
            [{"$unset": ["title"]}],
            [{"$replaceWith": {"_id": "$_id", "owner": "$owner", "slug": "$slug", "n": 0}}],
            [{"$project": {"owner": 1, "n": 1, "tags": 1}}],
            [{"$addFields": {"summary": {"$concat": [{"$ifNull": ["$slug", ""]}, "-x"]}}},
             {"$set": {"n": {"$multiply": [{"$ifNull": ["$n", 1]}, 3]}}}],
        ])

    def filter_of_mine(self) -> dict:
        rng = self.rng
        extra = rng.choice([{}, {"n": {"$gte": rng.randrange(100)}}, {"n": {"$lt": rng.randrange(100)}},
                            {"tags": rng.choice(TAGS)}, {"slug": f"s{rng.randrange(12)}"},
                            {"meta.lang": rng.choice(["en", "fr", None])}, {"title": {"$exists": False}},
                            {"$or": [{"n": {"$lt": 10}}, {"tags": {"$size": 2}}]}])
        return {"owner": self.k, **extra}

    # Running one operation on both sides.

    def both(self, t: str, what: str, call) -> None:
        got = outcome(lambda: call(self.db[t]))
        want = outcome(lambda: call(self.oracle[f"{t}_oracle"]))
        if got != want:
            self.wrong.append(f"client {self.k}, {what} on {t}:\n      remold {got}\n      oracle {want}")

    def step(self, op: str) -> None:
        rng, k = self.rng, self.k
        t = rng.choice(list(TYPES))
        self.tally[op] = self.tally.get(op, 0) + 1
        if op == "insert_one":
            doc = self.doc(t, self.pick(t) if rng.random() < 0.08 else self.fresh(t))  # sometimes a used _id
            self.both(t, f"insert_one {doc}", lambda c: c.insert_one(copy.deepcopy(doc)))
        elif op == "insert_many":
            docs = [self.doc(t, self.fresh(t)) for _ in range(rng.randint(1, 5))]
            if rng.random() < 0.3:  # an _id this type already holds
                docs.insert(rng.randrange(len(docs) + 1), self.doc(t, self.pick(t)))
            ordered = rng.random() < 0.5
            self.both(t, f"insert_many ordered={ordered} {[d['_id'] for d in docs]}",
                      lambda c: c.insert_many(copy.deepcopy(docs), ordered=ordered))
        elif op == "update_one":
            upsert = rng.random() < 0.2
            filt = {"_id": self.fresh(t) if upsert and rng.random() < 0.7 else self.pick(t)}
            if rng.random() < 0.3:
                filt["n"] = {"$gte": rng.randrange(100)}
            if upsert:
                filt["owner"] = k
            update = self.update()
            self.both(t, f"update_one {filt} {update} upsert={upsert}",
                      lambda c: c.update_one(filt, update, upsert=upsert))
        elif op == "update_many":
            filt, update = self.filter_of_mine(), self.update()
            upsert = rng.random() < 0.15
            if upsert:  # matches nothing: the upsert inserts, with an _id of this client's
                filt = {"owner": k, "slug": f"u{rng.randrange(10 ** 6)}"}
                update = dict(update, **{"$setOnInsert": {"_id": self.fresh(t)}})
                if "slug" in update.get("$set", {}) or "slug" in update.get("$unset", {}):
                    update = {"$inc": {"n": 1}, "$setOnInsert": update["$setOnInsert"]}
            self.both(t, f"update_many {filt} {update} upsert={upsert}",
                      lambda c: c.update_many(filt, update, upsert=upsert))
        elif op == "replace_one":
            upsert = rng.random() < 0.25
            filt = {"_id": self.fresh(t) if upsert and rng.random() < 0.7 else self.pick(t)}
            replacement = self.doc(t)
            self.both(t, f"replace_one {filt} upsert={upsert}",
                      lambda c: c.replace_one(filt, copy.deepcopy(replacement), upsert=upsert))
        elif op == "pipeline_update":
            if "pipeline_updates" not in self.caps:
                self.tally[op] -= 1
                return self.step("update_one")
            pipeline = self.pipeline()
            if rng.random() < 0.5:
                filt = {"_id": self.pick(t)}
                self.both(t, f"update_one {filt} {pipeline}", lambda c: c.update_one(filt, pipeline))
            else:
                filt = self.filter_of_mine()
                self.both(t, f"update_many {filt} {pipeline}", lambda c: c.update_many(filt, pipeline))
        elif op == "find_one_and_update":
            upsert = rng.random() < 0.15
            filt = {"_id": self.fresh(t), "owner": k} if upsert else self.filter_of_mine()
            update = self.update()
            if "pipeline_updates" in self.caps and rng.random() < 0.2:
                update = self.pipeline()
            projection = rng.choice([None, {"slug": 1, "n": 1}, {"tags": 0, "meta": 0}, {"_id": 0, "n": 1}])
            returned = rng.choice([ReturnDocument.BEFORE, ReturnDocument.AFTER])
            self.both(t, f"find_one_and_update {filt} {update} {projection} {returned} upsert={upsert}",
                      lambda c: c.find_one_and_update(filt, update, projection=projection,
                                                      sort=[("n", 1), ("_id", 1)], return_document=returned,
                                                      upsert=upsert))
        elif op == "find_one_and_replace":
            upsert = rng.random() < 0.15
            filt = {"_id": self.fresh(t), "owner": k} if upsert else {"owner": k, "slug": f"s{rng.randrange(12)}"}
            replacement = self.doc(t)
            projection = rng.choice([None, {"slug": 1, "title": 1}, {"owner": 0}])
            returned = rng.choice([ReturnDocument.BEFORE, ReturnDocument.AFTER])
            self.both(t, f"find_one_and_replace {filt} {projection} {returned} upsert={upsert}",
                      lambda c: c.find_one_and_replace(filt, copy.deepcopy(replacement), projection=projection,
                                                       sort=[("_id", -1)], return_document=returned,
                                                       upsert=upsert))
        elif op == "find_one_and_delete":
            filt = {"owner": k, "n": {"$lt": rng.randrange(100)}}
            projection = rng.choice([None, {"slug": 1}, {"tags": 0}])
            self.both(t, f"find_one_and_delete {filt} {projection}",
                      lambda c: c.find_one_and_delete(filt, projection=projection, sort=[("n", -1), ("_id", 1)]))
        elif op == "delete_one":
            filt = {"_id": self.pick(t)}
            if rng.random() < 0.3:
                filt["n"] = {"$gte": 50}
            self.both(t, f"delete_one {filt}", lambda c: c.delete_one(filt))
        elif op == "delete_many":
            filt = {"owner": k, **rng.choice([{"n": {"$gte": 90 + rng.randrange(10)}},
                                              {"slug": f"s{rng.randrange(12)}", "n": {"$lt": 30}}])}
            self.both(t, f"delete_many {filt}", lambda c: c.delete_many(filt))
        elif op == "failing_update":  # $inc of a string: a write error on both sides
            filt = {"_id": self.pick(t)}
            self.both(t, f"update_one {filt} $inc title", lambda c: c.update_one(filt, {"$inc": {"title": 1}}))
        elif op == "read":
            query = self.filter_of_mine()
            projection = rng.choice([None, {"slug": 1, "n": 1}, {"meta": 0, "tags": 0}])
            skip, limit = rng.choice([(0, 0), (2, 5), (0, 3)])
            self.both(t, f"find {query} {projection} skip={skip} limit={limit}",
                      lambda c: list(c.find(query, projection).sort([("n", 1), ("_id", 1)]).skip(skip)
                                     .limit(limit)))
            self.both(t, f"count_documents {query}", lambda c: c.count_documents(query))
            self.both(t, f"distinct slug {query}", lambda c: sorted_values(c.distinct("slug", query)))
            self.both(t, f"find_one {query}", lambda c: c.find_one(query, sort=[("_id", -1)]))
        else:
            raise AssertionError(op)


def make_doc(rng: random.Random, t: str, owner: int, _id=None) -> dict:
    doc = {} if _id is None else {"_id": _id}
    doc["owner"] = owner
    doc["slug"] = f"s{rng.randrange(12)}"
    doc["n"] = rng.randrange(100)
    if rng.random() < 0.8:
        doc["title"] = f"{t[:-1]} {rng.randrange(1000)}"
    if rng.random() < 0.7:
        doc["tags"] = rng.sample(TAGS, rng.randrange(0, 3))
    if rng.random() < 0.6:
        doc["meta"] = {"lang": rng.choice(["en", "fr", None]), "rating": rng.choice([1, 2.5, Int64(3)])}
    if t == "articles":
        doc["words"] = rng.randrange(100, 3000)
    elif t == "videos":
        doc["duration"] = round(rng.random() * 600, 2)
    else:
        doc["episodes"] = [rng.randrange(50) for _ in range(rng.randrange(3))]
        doc["explicit"] = rng.random() < 0.2
    return doc


MIX = [("insert_one", 14), ("insert_many", 8), ("update_one", 14), ("update_many", 6), ("replace_one", 5),
       ("pipeline_update", 5), ("find_one_and_update", 8), ("find_one_and_replace", 4),
       ("find_one_and_delete", 4), ("delete_one", 5), ("delete_many", 2), ("failing_update", 2), ("read", 14)]

COUNT_FILTERS = [{}, {"n": {"$gte": 50}}, {"tags": "red"}, {"meta.lang": "en"}, {"meta.lang": None},
                 {"owner": {"$in": [1, 2]}}, {"title": {"$exists": False}}, {"tags": {"$size": 0}},
                 {"$or": [{"slug": "s1"}, {"n": {"$lt": 5}}]}, {"_id": {"$gte": 2_030_000}}]
DISTINCT = [("slug", {}), ("tags", {}), ("meta.lang", {}), ("owner", {"n": {"$gte": 40}}), ("meta.rating", {}),
            ("n", {"owner": 3})]
PIPELINES = [
    [{"$match": {"n": {"$gte": 10}}}, {"$group": {"_id": "$slug", "c": {"$sum": 1}, "s": {"$sum": "$n"}}},
     {"$sort": {"_id": 1}}],
    [{"$project": {"slug": 1, "twice": {"$multiply": [{"$ifNull": ["$n", 0]}, 2]}}}, {"$sort": {"_id": 1}}],
    [{"$sort": {"n": -1, "_id": 1}}, {"$limit": 7}],
    [{"$group": {"_id": None, "c": {"$sum": 1}, "max": {"$max": "$n"}, "min": {"$min": "$_id"}}}],
    [{"$unwind": "$tags"}, {"$group": {"_id": "$tags", "c": {"$sum": 1}}}, {"$sort": {"_id": 1}}],
    [{"$match": {"owner": {"$lt": 4}}}, {"$count": "total"}],
    [{"$replaceRoot": {"newRoot": "$$ROOT"}}, {"$sort": {"_id": 1}}, {"$skip": 3}, {"$limit": 20}],
    [{"$addFields": {"fields": {"$size": {"$objectToArray": "$$ROOT"}}}},
     {"$group": {"_id": "$fields", "c": {"$sum": 1}}}, {"$sort": {"_id": 1}}],
]


def seed(database, oracle) -> dict:
    """SEED_PER_OWNER documents of each type per client, through remold and into the oracles."""
    rng = random.Random(11)
    ids: dict = {t: {k: [] for k in range(CLIENTS)} for t in TYPES}
    for t in TYPES:
        docs = []
        for k in range(CLIENTS):
            for i in range(SEED_PER_OWNER):
                _id = ID_BASE[t] + k * 10_000 + i
                ids[t][k].append(_id)
                docs.append(make_doc(rng, t, k, _id))
        database[t].insert_many(copy.deepcopy(docs))
        oracle[f"{t}_oracle"].insert_many(copy.deepcopy(docs))
    return ids


def test_three_types_in_one_collection_under_eight_clients(poly, backend, direct_client):
    caps = capabilities(direct_client)
    db, direct = poly.db, poly.direct
    for t in TYPES:  # an index each, so that each client's writes meet its own documents
        assert db[t].create_index("owner") == "owner_1"
        direct[f"{t}_oracle"].create_index("owner")
    ids = seed(db, direct)
    clients = [Client(k, poly.uri, backend.direct_uri, poly.name, caps, {t: ids[t][k] for t in TYPES})
               for k in range(CLIENTS)]
    errors: list[str] = []
    barrier = threading.Barrier(CLIENTS)
    mix = [(op, w) for op, w in MIX]
    total = sum(w for _, w in mix)

    def run(client: Client) -> None:
        barrier.wait()
        try:
            for _ in range(TOTAL_OPS // CLIENTS):
                x = client.rng.randrange(total)
                for op, w in mix:
                    if x < w:
                        break
                    x -= w
                client.step(op)
        except BaseException:  # noqa: BLE001 - reported below
            errors.append(f"client {client.k}: {traceback.format_exc()}")

    threads = [threading.Thread(target=run, args=(c,)) for c in clients]
    started = time.monotonic()
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(900)
        assert not any(thread.is_alive() for thread in threads), "a client is still running after 900 s"
    finally:
        for c in clients:
            c.close()
    seconds = time.monotonic() - started
    assert not errors, "\n".join(errors[:3])
    wrong = [w for c in clients for w in c.wrong]

    # Every read of every logical collection, as its oracle answers.
    problems = []
    total_docs = 0
    for t in TYPES:
        through, oracle = db[t], direct[f"{t}_oracle"]
        got, want = everything(through), everything(oracle)
        total_docs += len(want)
        if canon(got) != canon(want):
            problems.append(f"{t}: find() {len(got)} vs {len(want)} documents; first difference "
                            f"{first_difference(got, want)}")
        if list(through.find().sort("_id", 1).batch_size(7)) != want:
            problems.append(f"{t}: find() in batches of 7")
        for query in COUNT_FILTERS:
            a, b = through.count_documents(query), oracle.count_documents(query)
            if a != b:
                problems.append(f"{t}: count_documents {query}: {a} vs {b}")
            # (Not the length of an unsorted find: DocumentDB's repeats updated documents.)
            a, b = db.command("count", t, query=query)["n"], oracle.count_documents(query)
            if a != b:
                problems.append(f"{t}: count {query}: {a} vs {b} (the oracle's count command: "
                                f"{direct.command('count', f'{t}_oracle', query=query)['n']})")
        if through.estimated_document_count() != len(want):
            problems.append(f"{t}: estimated_document_count {through.estimated_document_count()} vs {len(want)}")
        for key, query in DISTINCT:
            a, b = sorted_values(through.distinct(key, query)), sorted_values(oracle.distinct(key, query))
            if a != b:
                problems.append(f"{t}: distinct {key} {query}: {a[:8]} vs {b[:8]}")
        for pipeline in PIPELINES:
            a, b = list(through.aggregate(pipeline)), list(oracle.aggregate(pipeline))
            if canon(a) != canon(b):
                problems.append(f"{t}: aggregate {pipeline}: {first_difference(a, b)}")
    assert not wrong and not problems, (
        f"{len(wrong)} answers of the clients differ from the oracle's:\n  " + "\n  ".join(wrong[:10])
        + f"\n{len(problems)} reads afterwards differ:\n  " + "\n  ".join(problems[:12]))

    # The stored collection holds every document once, with its type.
    stored = everything(direct.content)
    assert len(stored) == total_docs
    by_type: dict = {}
    for doc in stored:
        by_type.setdefault(doc.get("type"), []).append(doc)
    assert sorted(by_type, key=str) == sorted(TYPES.values())
    for t, value in TYPES.items():
        want = {d["_id"]: d for d in everything(direct[f"{t}_oracle"])}
        got = {d["_id"]: {k: v for k, v in d.items() if k != "type"} for d in by_type[value]}
        assert got == want, t
    # The unified query: content through remold is a plain collection.
    unified = everything(db.content)
    assert canon(unified) == canon(stored)
    assert db.content.count_documents({"type": "VIDEO"}) == len(by_type["VIDEO"])
    assert sorted(db.content.distinct("type")) == sorted(TYPES.values())
    tally: dict = {}
    for c in clients:
        for op, n in c.tally.items():
            tally[op] = tally.get(op, 0) + n
    print(f"\npolymorphic: {sum(tally.values())} operations from {CLIENTS} clients in {seconds:.1f} s "
          f"({'with' if 'pipeline_updates' in caps else 'without'} pipeline updates): {tally}; "
          f"{total_docs} documents in content, every answer as the oracle's")


# --------------------------------------------------------------------------
# 2. Indexes.

INDEX_FIELDS = ("key", "name", "unique", "partialFilterExpression", "sparse", "expireAfterSeconds")


def app_indexes(collection) -> dict:
    """name -> what an application set (key order, options), as listIndexes says."""
    return {ix["name"]: {k: canon(v) for k, v in ix.items() if k in INDEX_FIELDS}
            for ix in collection.list_indexes()}


def stored_indexes(direct) -> dict:
    return {ix["name"]: ix for ix in direct.content.list_indexes()}


def plain(value):
    """SON and nested SON as plain dicts (for comparisons that ignore order)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def test_indexes_are_partial_indexes_of_the_stored_collection(poly, direct_client):
    caps = capabilities(direct_client)
    db, direct = poly.db, poly.direct
    articles, oracle = db.articles, direct.articles_oracle
    calls = [
        (([("slug", 1)],), {"unique": True}),
        (([("owner", 1), ("n", -1)],), {}),
        (("title",), {"partialFilterExpression": {"n": {"$gt": 5}}}),
        (("words",), {"sparse": True}),
        (([("n", 1), ("title", -1)],), {"name": "by_n_title"}),
    ]
    for args, kwargs in calls:
        assert articles.create_index(*args, **kwargs) == oracle.create_index(*args, **kwargs)
    # The same index again: no change, the same name (as a flat collection answers).
    assert articles.create_index([("slug", 1)], unique=True) == "slug_1"
    db.videos.create_index("slug")
    db.content.create_index("owner")  # the stored collection's own index (a plain collection)

    stored = stored_indexes(direct)
    assert set(stored) == {"_id_", "articles.slug_1", "articles.owner_1_n_-1", "articles.title_1",
                           "articles.words_1", "articles.by_n_title", "videos.slug_1", "owner_1"}, sorted(stored)
    assert plain(stored["articles.slug_1"]["partialFilterExpression"]) == {"type": "ARTICLE"}
    assert stored["articles.slug_1"].get("unique") is True
    assert plain(stored["articles.title_1"]["partialFilterExpression"]) == {"type": "ARTICLE", "n": {"$gt": 5}}
    assert plain(stored["articles.words_1"]["partialFilterExpression"]) == {"type": "ARTICLE",
                                                                             "words": {"$exists": True}}
    assert not stored["articles.words_1"].get("sparse"), stored["articles.words_1"]
    assert plain(stored["articles.owner_1_n_-1"]["key"]) == {"owner": 1, "n": -1}
    assert list(stored["articles.owner_1_n_-1"]["key"]) == ["owner", "n"]
    assert plain(stored["videos.slug_1"]["partialFilterExpression"]) == {"type": "VIDEO"}

    # The application's names and options, as the oracle lists them; each
    # type sees its own indexes only.
    assert app_indexes(articles) == app_indexes(oracle)
    assert articles.index_information().keys() == oracle.index_information().keys()
    assert set(app_indexes(db.videos)) == {"_id_", "slug_1"}
    assert set(app_indexes(db.podcasts)) == {"_id_"}

    # Unique within the type: a video may have an article's slug.
    articles.insert_one({"_id": 1, "slug": "hello", "n": 1})
    oracle.insert_one({"_id": 1, "slug": "hello", "n": 1})
    for c in (articles, oracle):
        with pytest.raises(DuplicateKeyError) as duplicate:
            c.insert_one({"_id": 2, "slug": "hello"})
        assert duplicate.value.code == 11000
    pair = [{"_id": 3, "slug": "other"}, {"_id": 4, "slug": "other"}]
    got = outcome(lambda: articles.insert_many(copy.deepcopy(pair)))
    assert got == outcome(lambda: oracle.insert_many(copy.deepcopy(pair)))
    assert got[0] == "BulkWriteError" and got[-1] == ((1, 11000),), got
    assert outcome(lambda: articles.update_one({"_id": 3}, {"$set": {"slug": "hello"}})) == \
        outcome(lambda: oracle.update_one({"_id": 3}, {"$set": {"slug": "hello"}}))
    assert everything(articles) == everything(oracle)
    assert [d["_id"] for d in everything(articles)] == [1, 3]
    if "partial_unique" in caps:
        db.videos.insert_one({"_id": 10, "slug": "hello"})
        db.podcasts.insert_one({"_id": 11, "slug": "hello"})
        assert db.videos.find_one({"slug": "hello"}) == {"_id": 10, "slug": "hello"}

    # Refused: a sparse compound index (a partial index cannot say it).
    with pytest.raises(OperationFailure) as refused:
        articles.create_index([("a", 1), ("b", 1)], sparse=True)
    print(f"\nsparse compound index refused: {refused.value.code} {refused.value}")
    assert "articles.a_1_b_1" not in stored_indexes(direct)

    # Dropped by name, by key, by a list of names, all: as the oracle.
    for c in (articles, oracle):
        c.drop_index("slug_1")
        c.drop_index([("owner", 1), ("n", -1)])
    assert app_indexes(articles) == app_indexes(oracle)
    assert "articles.slug_1" not in stored_indexes(direct)
    assert outcome(lambda: articles.drop_index("nope_1")) == outcome(lambda: oracle.drop_index("nope_1"))
    if "drop_index_list" in caps:
        for c in (db, direct):
            c.command("dropIndexes", "articles" if c is db else "articles_oracle", index=["title_1", "words_1"])
        assert app_indexes(articles) == app_indexes(oracle)
        assert set(app_indexes(articles)) == {"_id_", "by_n_title"}
    articles.drop_indexes()
    # (By name on the oracle: mongo-java-server's dropIndexes "*" fails on
    # one collection while another of the database has an index whose name
    # has a dot, as content's have.)
    for name in oracle.index_information():
        if name != "_id_":
            oracle.drop_index(name)
    assert app_indexes(articles) == app_indexes(oracle)
    assert set(stored_indexes(direct)) == {"_id_", "videos.slug_1", "owner_1"}
    # The videos' index and documents are untouched.
    assert set(app_indexes(db.videos)) == {"_id_", "slug_1"}
    # dropIndexes "*" through the command, on videos.
    db.command("dropIndexes", "videos", index="*")
    assert set(stored_indexes(direct)) == {"_id_", "owner_1"}
    assert [d["_id"] for d in everything(articles)] == [1, 3]


def test_unique_index_creation_meets_duplicates_of_its_type_only(poly, direct_client):
    caps = capabilities(direct_client)
    if "partial_unique" not in caps:
        pytest.skip("the backend enforces a partial unique index over every document (mongo-java-server)")
    db, direct = poly.db, poly.direct
    db.articles.insert_many([{"_id": 1, "slug": "a"}, {"_id": 2, "slug": "b"}])
    db.videos.insert_many([{"_id": 3, "slug": "a"}, {"_id": 4, "slug": "a"}])
    assert db.articles.create_index("slug", unique=True) == "slug_1"  # the videos' duplicates are not its own
    with pytest.raises(OperationFailure) as duplicate:
        db.videos.create_index("slug", unique=True)
    direct.videos_oracle.insert_many([{"_id": 3, "slug": "a"}, {"_id": 4, "slug": "a"}])
    with pytest.raises(OperationFailure) as oracle:
        direct.videos_oracle.create_index("slug", unique=True)
    assert duplicate.value.code == oracle.value.code == 11000
    assert "videos.slug_1" not in stored_indexes(direct)


# --------------------------------------------------------------------------
# 3. Refusals and the documented difference.


def test_writes_naming_the_discriminator_are_refused(poly, direct_client):
    caps = capabilities(direct_client)
    db, direct = poly.db, poly.direct
    articles = db.articles
    articles.insert_one({"_id": 1, "slug": "a", "n": 1})

    with pytest.raises(WriteError) as refused:
        articles.insert_one({"_id": 2, "type": "VIDEO"})
    assert refused.value.code == 2, refused.value.details
    with pytest.raises(BulkWriteError) as bulk:
        articles.insert_many([{"_id": 3}, {"_id": 4, "type": "ARTICLE"}, {"_id": 5}], ordered=False)
    assert bulk.value.details["nInserted"] == 2, bulk.value.details
    assert [(e["index"], e["code"]) for e in bulk.value.details["writeErrors"]] == [(1, 2)]
    with pytest.raises(BulkWriteError) as bulk:
        articles.insert_many([{"_id": 6}, {"_id": 7, "type": None}, {"_id": 8}], ordered=True)
    assert bulk.value.details["nInserted"] == 1, bulk.value.details
    assert [(e["index"], e["code"]) for e in bulk.value.details["writeErrors"]] == [(1, 2)]
    articles.insert_one({"_id": 9, "meta": {"type": "nested is not the discriminator"}})
    assert [d["_id"] for d in everything(articles)] == [1, 3, 5, 6, 9]

    writes = [
        lambda: articles.update_one({"_id": 1}, {"$set": {"type": "VIDEO"}}),
        lambda: articles.update_many({}, {"$unset": {"type": ""}}),
        lambda: articles.update_one({"_id": 1}, {"$rename": {"slug": "type"}}),
        lambda: articles.update_one({"type": "ARTICLE"}, {"$set": {"x": 1}}),
        lambda: articles.update_many({"$or": [{"n": 1}, {"type": {"$exists": True}}]}, {"$set": {"x": 1}}),
        lambda: articles.replace_one({"_id": 1}, {"slug": "b", "type": "VIDEO"}),
        lambda: articles.update_one({"_id": 20}, {"$set": {"n": 1}, "$setOnInsert": {"type": "VIDEO"}},
                                    upsert=True),
        lambda: articles.find_one_and_update({"_id": 1}, {"$set": {"type": "VIDEO"}}),
        lambda: articles.find_one_and_replace({"_id": 1}, {"type": "VIDEO"}),
        lambda: articles.find_one_and_delete({"type": "ARTICLE"}),
        lambda: articles.delete_many({"type": "VIDEO"}),
        lambda: articles.delete_one({"type": "ARTICLE"}),
    ]
    if "pipeline_updates" in caps:
        writes.append(lambda: articles.update_one({"_id": 1}, [{"$set": {"type": "VIDEO"}}]))
    for i, write in enumerate(writes):
        with pytest.raises(OperationFailure) as refused:
            write()
        assert refused.value.code == 2, (i, refused.value.details)
    # Nothing changed.
    assert articles.find_one({"_id": 1}) == {"_id": 1, "slug": "a", "n": 1}
    assert [d["_id"] for d in everything(articles)] == [1, 3, 5, 6, 9]
    assert {d.get("type") for d in direct.content.find()} == {"ARTICLE"}


def test_reads_naming_the_discriminator_answer_as_a_flat_collection(poly):
    """A logical collection's documents have no discriminator: a read that
    names it answers as it would on the flat collection."""
    db, direct = poly.db, poly.direct
    docs = [{"_id": i, "slug": f"s{i % 3}", "n": i} for i in range(6)]
    db.articles.insert_many(copy.deepcopy(docs))
    db.videos.insert_many([{"_id": 100 + i, "slug": "v", "n": i} for i in range(3)])
    direct.articles_oracle.insert_many(copy.deepcopy(docs))
    through, oracle = db.articles, direct.articles_oracle
    reads = [
        lambda c: list(c.find({"type": "ARTICLE"})),
        lambda c: list(c.find({"type": {"$exists": False}}).sort("_id", 1)),
        lambda c: list(c.find({}, {"type": 1}).sort("_id", 1)),
        lambda c: list(c.find({}, {"slug": 1, "type": 1}).sort("_id", 1)),
        lambda c: c.count_documents({"type": {"$exists": True}}),
        lambda c: c.count_documents({"type": {"$ne": "VIDEO"}}),
        lambda c: c.distinct("type"),
        lambda c: list(c.aggregate([{"$group": {"_id": "$type", "c": {"$sum": 1}}}])),
        lambda c: list(c.aggregate([{"$match": {"type": "VIDEO"}}])),
        lambda c: list(c.aggregate([{"$project": {"t": "$type", "slug": 1}}, {"$sort": {"_id": 1}}])),
        lambda c: list(c.find({"$expr": {"$eq": ["$type", "ARTICLE"]}})),
    ]
    for i, read in enumerate(reads):
        got, want = outcome(lambda: read(through)), outcome(lambda: read(oracle))
        assert got == want, (i, got, want)


def test_commands_on_the_stored_collection_are_refused(poly):
    db, name = poly.db, poly.name
    db.articles.insert_one({"_id": 1})
    db.plain.insert_one({"_id": 1})
    with pytest.raises(OperationFailure) as refused:
        db.articles.rename("renamed")
    assert refused.value.code == 72, refused.value.details
    with pytest.raises(OperationFailure) as refused:
        db.plain.rename("videos")
    assert refused.value.code == 72, refused.value.details
    assert db.plain.find_one() == {"_id": 1}
    for command in ({"collStats": "articles"}, {"validate": "articles"}, {"collMod": "articles"},
                    {"dataSize": f"{name}.articles"}):
        with pytest.raises(OperationFailure) as refused:
            db.command(command)
        assert refused.value.code == 115, (command, refused.value.details)
        assert f"{name}.content" in str(refused.value), (command, str(refused.value))
    assert db.articles.find_one() == {"_id": 1}


def test_id_is_unique_across_the_types_of_the_stored_collection(poly):
    """The documented difference from separate collections: content's _id index."""
    db, direct = poly.db, poly.direct
    db.articles.insert_one({"_id": 50, "slug": "a"})
    with pytest.raises(DuplicateKeyError) as duplicate:
        db.videos.insert_one({"_id": 50, "slug": "v"})
    assert duplicate.value.code == 11000
    with pytest.raises(BulkWriteError) as bulk:
        db.podcasts.insert_many([{"_id": 51}, {"_id": 50}, {"_id": 52}], ordered=False)
    assert [(e["index"], e["code"]) for e in bulk.value.details["writeErrors"]] == [(1, 11000)]
    # An upsert of a video with that _id matches no video, and its insert fails:
    # the article is left as it was.
    with pytest.raises(DuplicateKeyError):
        db.videos.update_one({"_id": 50}, {"$set": {"slug": "x"}}, upsert=True)
    with pytest.raises(DuplicateKeyError):
        db.videos.replace_one({"_id": 50}, {"slug": "y"}, upsert=True)
    assert db.videos.find_one({"_id": 50}) is None
    assert db.videos.update_one({"_id": 50}, {"$set": {"slug": "x"}}).matched_count == 0
    assert db.videos.delete_one({"_id": 50}).deleted_count == 0
    assert db.videos.find_one_and_delete({"_id": 50}) is None
    assert db.articles.find_one({"_id": 50}) == {"_id": 50, "slug": "a"}
    assert direct.content.find_one({"_id": 50}) == {"_id": 50, "slug": "a", "type": "ARTICLE"}
    assert sorted(d["_id"] for d in db.podcasts.find()) == [51, 52]


def test_cursors_and_counts_of_a_logical_collection(poly):
    db, name = poly.db, poly.name
    db.articles.insert_many([{"_id": i, "n": i % 4} for i in range(25)])
    db.videos.insert_many([{"_id": 100 + i, "n": i % 4} for i in range(10)])
    reply = db.command("find", "articles", filter={}, sort={"_id": 1}, batchSize=4)
    cursor = reply["cursor"]
    assert cursor["ns"] == f"{name}.articles"
    assert cursor["firstBatch"] == [{"_id": i, "n": i % 4} for i in range(4)]
    more = db.command("getMore", cursor["id"], collection="articles", batchSize=10)["cursor"]
    assert more["ns"] == f"{name}.articles"
    assert more["nextBatch"] == [{"_id": i, "n": i % 4} for i in range(4, 14)]
    killed = db.command("killCursors", "articles", cursors=[more["id"]])
    assert killed["cursorsKilled"] == [more["id"]], killed
    # An aggregate's cursor: its first batch as the backend's for a flat
    # collection (mongo-java-server ignores an aggregate's batchSize).
    poly.direct.articles_oracle.insert_many([{"_id": i, "n": i % 4} for i in range(25)])
    pipeline = [{"$match": {"n": 1}}, {"$sort": {"_id": 1}}]
    reply = db.command("aggregate", "articles", pipeline=pipeline, cursor={"batchSize": 2})["cursor"]
    want = poly.direct.command("aggregate", "articles_oracle", pipeline=pipeline, cursor={"batchSize": 2})["cursor"]
    assert reply["ns"] == f"{name}.articles"
    assert reply["firstBatch"] == want["firstBatch"]
    assert bool(reply["id"]) == bool(want["id"])
    rest = db.command("getMore", reply["id"], collection="articles")["cursor"]["nextBatch"] if reply["id"] else []
    assert [d["_id"] for d in reply["firstBatch"] + rest] == [1, 5, 9, 13, 17, 21]
    partial = db.articles.find().sort("_id", 1).batch_size(3)
    assert next(partial) == {"_id": 0, "n": 0}
    partial.close()
    assert db.articles.count_documents({"n": 1}) == 6
    assert db.command("count", "articles")["n"] == 25
    assert db.command("count", "articles", query={"n": 2}, skip=1, limit=3)["n"] == 3
    assert db.articles.estimated_document_count() == 25
    assert db.videos.estimated_document_count() == 10
    assert db.articles.find_one({"_id": 100}) is None


def test_the_stored_collection_is_a_plain_collection_through_remold(poly):
    """content through remold is forwarded as it is: what is written there
    with a type is a document of that type's logical collection."""
    db, direct = poly.db, poly.direct
    db.articles.insert_one({"_id": 1, "slug": "a"})
    db.content.insert_many([{"_id": 2, "slug": "v", "type": "VIDEO"}, {"_id": 3, "slug": "none"},
                            {"_id": 4, "slug": "other", "type": "OTHER"}])
    assert everything(db.videos) == [{"_id": 2, "slug": "v"}]
    assert everything(db.articles) == [{"_id": 1, "slug": "a"}]
    assert everything(db.content) == everything(direct.content)
    assert everything(db.content) == [{"_id": 1, "slug": "a", "type": "ARTICLE"},
                                      {"_id": 2, "slug": "v", "type": "VIDEO"}, {"_id": 3, "slug": "none"},
                                      {"_id": 4, "slug": "other", "type": "OTHER"}]
    db.content.update_one({"_id": 1}, {"$set": {"type": "PODCAST"}})  # a plain write: moves it
    assert everything(db.articles) == []
    assert everything(db.podcasts) == [{"_id": 1, "slug": "a"}]
    assert db.content.delete_many({"type": {"$in": ["VIDEO", "PODCAST"]}}).deleted_count == 2
    assert everything(db.videos) == everything(db.podcasts) == []
    assert db.content.count_documents({}) == 2


# --------------------------------------------------------------------------
# 4. Catalog.


def test_catalog_lists_creates_and_drops_logical_collections(poly):
    db, direct = poly.db, poly.direct
    assert "articles" not in db.list_collection_names()  # no content yet
    db.create_collection("articles")
    assert "content" in direct.list_collection_names()
    names = db.list_collection_names()
    for name in ("articles", "videos", "podcasts", "content"):
        assert names.count(name) == 1, names
    [entry] = list(db.list_collections(filter={"name": "articles"}))
    assert entry["name"] == "articles" and entry.get("type", "collection") == "collection", entry
    assert db.articles.find_one() is None

    db.articles.insert_many([{"_id": i, "slug": f"a{i}"} for i in range(5)])
    db.videos.insert_many([{"_id": 100 + i, "slug": f"v{i}"} for i in range(4)])
    db.articles.create_index("slug")
    db.videos.create_index("slug")
    videos_before = everything(db.videos)
    db.articles.drop()
    assert "content" in direct.list_collection_names()
    assert direct.content.count_documents({"type": "ARTICLE"}) == 0
    assert not [name for name in stored_indexes(direct) if name.startswith("articles.")]
    assert "videos.slug_1" in stored_indexes(direct)
    assert everything(db.videos) == videos_before
    assert everything(db.articles) == []
    assert db.articles.count_documents({}) == 0
    # The logical collection can be written again.
    db.articles.insert_one({"_id": 1, "slug": "again"})
    assert everything(db.articles) == [{"_id": 1, "slug": "again"}]
    assert set(app_indexes(db.articles)) == {"_id_"}
    db.drop_collection("videos")
    assert everything(db.videos) == []
    assert everything(db.articles) == [{"_id": 1, "slug": "again"}]


# --------------------------------------------------------------------------
# 5. Joins from plain collections.


def test_lookup_and_union_with_answer_as_the_oracle(poly, direct_client):
    caps = capabilities(direct_client)
    db, direct = poly.db, poly.direct
    rng = random.Random(5)
    articles = [{"_id": i, "slug": f"s{i % 5}", "n": rng.randrange(10)} for i in range(20)]
    videos = [{"_id": 100 + i, "slug": f"s{i % 7}", "n": rng.randrange(10)} for i in range(15)]
    db.articles.insert_many(copy.deepcopy(articles))
    db.videos.insert_many(copy.deepcopy(videos))
    direct.articles_oracle.insert_many(copy.deepcopy(articles))
    direct.videos_oracle.insert_many(copy.deepcopy(videos))
    direct.orders.insert_many([{"_id": 1000 + i, "article": i % 25, "slug": f"s{i % 8}"} for i in range(30)])

    def both(collection: str, pipeline_for) -> None:
        oracle_collection = {"articles": "articles_oracle", "videos": "videos_oracle"}.get(collection, collection)
        got = list(db[collection].aggregate(pipeline_for({"articles": "articles", "videos": "videos"})))
        want = list(direct[oracle_collection].aggregate(pipeline_for({"articles": "articles_oracle",
                                                                      "videos": "videos_oracle"})))
        assert canon(got) == canon(want), first_difference(got, want)

    both("orders", lambda n: [{"$lookup": {"from": n["articles"], "localField": "article", "foreignField": "_id",
                                           "as": "a"}}, {"$sort": {"_id": 1}}])
    both("orders", lambda n: [{"$lookup": {"from": n["videos"], "let": {"s": "$slug"},
                                           "pipeline": [{"$match": {"$expr": {"$eq": ["$slug", "$$s"]}}},
                                                        {"$project": {"n": 1}}, {"$sort": {"_id": 1}}],
                                           "as": "v"}}, {"$sort": {"_id": 1}}])
    both("orders", lambda n: [{"$lookup": {"from": n["articles"], "pipeline": [{"$match": {"n": {"$gt": 7}}},
                                                                                 {"$sort": {"_id": 1}}],
                                           "as": "big"}}, {"$sort": {"_id": 1}}, {"$limit": 3}])
    # Between two logical collections of the same stored collection.
    both("articles", lambda n: [{"$lookup": {"from": n["videos"], "localField": "slug", "foreignField": "slug",
                                             "as": "v"}}, {"$sort": {"_id": 1}}])
    both("articles", lambda n: [{"$lookup": {"from": n["articles"], "localField": "slug", "foreignField": "slug",
                                             "as": "same"}}, {"$project": {"k": {"$size": "$same"}}},
                                {"$sort": {"_id": 1}}])
    if "union_with" not in caps:
        print("\nthe backend has no $unionWith: its cases are skipped")
        return
    both("orders", lambda n: [{"$unionWith": n["articles"]}, {"$sort": {"_id": 1}}])
    both("orders", lambda n: [{"$unionWith": {"coll": n["videos"], "pipeline": [{"$match": {"n": {"$lt": 5}}}]}},
                              {"$group": {"_id": "$slug", "c": {"$sum": 1}}}, {"$sort": {"_id": 1}}])
    both("articles", lambda n: [{"$unionWith": n["videos"]}, {"$sort": {"_id": 1}}])
    both("videos", lambda n: [{"$match": {"n": {"$gt": 3}}}, {"$unionWith": {"coll": n["articles"],
                                                                              "pipeline": [{"$match": {"n": 2}}]}},
                              {"$project": {"slug": 1}}, {"$sort": {"_id": 1}}])


# --------------------------------------------------------------------------
# 6. Adoption of a collection written before the rule.


def refused_with_117(read) -> bool:
    try:
        read()
    except OperationFailure as refused:
        assert refused.code == 117, refused.details
        assert "remold migrate --rule articles" in str(refused), str(refused)
        return True
    return False


def wait_until(what: str, check, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.1)


def test_adoption_of_articles_written_before_the_rule(private_remold, backend, direct_client, db_name, tmp_path):
    direct = direct_client[db_name]
    # No empty array: the stand-in never finds such a document unchanged
    # (docs/backends.md), and `--to flat` deletes each source under that guard.
    seeded = [{"_id": i, "slug": f"s{i % 4}", "n": i, "tags": ["x"] * (i % 3 + 1)} for i in range(40)]
    direct.articles.insert_many(copy.deepcopy(seeded))
    rules = write_rules(tmp_path / "rules", db_name)
    try:
        remold = private_remold(extra_args=("--rules", str(rules)))
        db = pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=10_000)[db_name]
        db.videos.insert_one({"_id": 1000, "slug": "v"})  # another type is served meanwhile
        wait_until("reads of articles refused (117)", lambda: refused_with_117(lambda: list(db.articles.find())))
        for read in (lambda: db.articles.count_documents({}), lambda: db.articles.find_one({"_id": 1}),
                     lambda: list(db.articles.aggregate([{"$match": {"n": 1}}])),
                     lambda: db.articles.distinct("slug")):
            assert refused_with_117(read)
        assert everything(db.videos) == [{"_id": 1000, "slug": "v"}]

        migrated = run_remold("migrate", "--rules", str(rules), "--rule", "articles", "--backend", backend.uri,
                              timeout=120)
        assert migrated.returncode == 0, migrated.stdout + migrated.stderr
        assert direct.articles.count_documents({}) == 0
        stored = everything(direct.content, {"type": "ARTICLE"})
        assert [{k: v for k, v in d.items() if k != "type"} for d in stored] == seeded

        def reads_all() -> bool:
            try:
                return everything(db.articles) == seeded
            except OperationFailure as refused:
                assert refused.code == 117, refused.details
                return False

        wait_until("articles read after the migration", reads_all)
        assert db.articles.count_documents({"n": {"$gte": 20}}) == 20
        db.articles.insert_one({"_id": 40, "slug": "new", "n": 40})
        assert everything(db.videos) == [{"_id": 1000, "slug": "v"}]

        back = run_remold("migrate", "--rules", str(rules), "--rule", "articles", "--backend", backend.uri,
                          "--to", "flat", timeout=120)
        assert back.returncode == 0, back.stdout + back.stderr
        assert everything(direct.articles) == seeded + [{"_id": 40, "slug": "new", "n": 40}]
        assert direct.content.count_documents({"type": "ARTICLE"}) == 0
        assert everything(direct.content) == [{"_id": 1000, "slug": "v", "type": "VIDEO"}]
        # The articles are written before the rule again: their reads are refused.
        wait_until("reads of articles refused again after --to flat",
                   lambda: refused_with_117(lambda: db.articles.count_documents({})))
        db.client.close()
    finally:
        drop_database_after_kills(direct_client, db_name)


def test_migrate_to_flat_under_live_writes_keeps_every_acknowledged_update(private_remold, backend, direct_client,
                                                                         db_name, tmp_path):
    """`remold migrate --to flat` while the application still writes through
    the rule: an update remold acknowledged (matched 1) is in the document
    that ends in the flat collection. (One the move had already taken
    matches nothing, and is not counted.)"""
    rules = write_rules(tmp_path / "rules", db_name)
    direct = direct_client[db_name]
    n_docs, writers = 2_000, 4
    try:
        remold = private_remold(extra_args=("--rules", str(rules)))
        client = pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=10_000)
        client[db_name].articles.insert_many([{"_id": i, "n": 0, "pad": "x" * 100} for i in range(n_docs)])
        counted = [[0] * n_docs for _ in range(writers)]
        errors: list[str] = []
        stop = threading.Event()

        def write(k: int) -> None:
            rng = random.Random(k)
            articles = pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=10_000)[db_name].articles
            while not stop.is_set():
                i = rng.randrange(n_docs)
                try:
                    if articles.update_one({"_id": i}, {"$inc": {"n": 1}}).matched_count:
                        counted[k][i] += 1
                except OperationFailure as refused:
                    if refused.code != 117:
                        errors.append(f"writer {k}: {refused.code} {refused}")
                        return
            articles.database.client.close()

        threads = [threading.Thread(target=write, args=(k,)) for k in range(writers)]
        for thread in threads:
            thread.start()
        time.sleep(0.3)
        back = run_remold("migrate", "--rules", str(rules), "--rule", "articles", "--backend", backend.uri,
                          "--to", "flat", "--batch", "50", timeout=300)
        stop.set()
        for thread in threads:
            thread.join(60)
        client.close()
        assert not errors, errors[:3]
        assert back.returncode == 0, back.stdout + back.stderr
        flat = {d["_id"]: d["n"] for d in direct.articles.find()}
        assert direct.content.count_documents({"type": "ARTICLE"}) == 0
        assert sorted(flat) == list(range(n_docs))
        acknowledged = [sum(c[i] for c in counted) for i in range(n_docs)]
        lost = [(i, acknowledged[i], flat[i]) for i in range(n_docs) if flat[i] < acknowledged[i]]
        assert not lost, (f"{len(lost)} document(s) lost acknowledged increments (_id, acknowledged, stored): "
                          f"{lost[:8]}; {sum(acknowledged)} increments acknowledged in all")
    finally:
        drop_database_after_kills(direct_client, db_name)


# --------------------------------------------------------------------------
# The loader's checks.


@pytest.mark.parametrize("case", ["other_field", "same_value", "stored_is_logical", "other_pattern",
                                  "no_value", "no_collection"])
def test_check_refuses_rules_that_cannot_share_a_stored_collection(tmp_path, case):
    rules = write_rules(tmp_path / "rules", "cms")
    assert run_remold("check", str(rules)).returncode == 0
    if case == "other_field":
        (rules / "videos.yaml").write_text(rule_text("cms", "videos", "VIDEO", field="kind"))
    elif case == "same_value":
        (rules / "videos.yaml").write_text(rule_text("cms", "videos", "ARTICLE"))
    elif case == "stored_is_logical":
        (rules / "notes.yaml").write_text(rule_text("cms", "notes", "NOTE", collection="articles"))
    elif case == "other_pattern":
        (rules / "readings.yaml").write_text("namespace: cms.readings\npattern: bucket\nbucket:\n"
                                             "  collection: content\n  meta: [sensor]\n  time: at\n  span: 1h\n")
    elif case == "no_value":
        (rules / "videos.yaml").write_text("namespace: cms.videos\npattern: polymorphic\npolymorphic:\n"
                                           "  collection: content\n")
    elif case == "no_collection":
        (rules / "videos.yaml").write_text("namespace: cms.videos\npattern: polymorphic\npolymorphic:\n"
                                           "  value: VIDEO\n")
    result = run_remold("check", str(rules))
    assert result.returncode == 1, f"exit {result.returncode}: {result.stdout}{result.stderr}"
    assert result.stderr.strip(), result.stdout


VALIDATED = {
    "articles": ("ARTICLE", """  validator:
    $jsonSchema:
      required: [title]
      additionalProperties: false
      properties:
        _id: {}
        title: {bsonType: string}
        words: {bsonType: [int, long], minimum: 0}
"""),
    "videos": ("VIDEO", """  validator: {seconds: {$gt: 0}}
"""),
    "podcasts": ("PODCAST", ""),
}


def test_a_write_that_breaks_its_type_s_validator_fails_as_mongodb_fails_it(private_remold, direct_client, db_name,
                                                                          tmp_path):
    """Each type's validator holds for its own documents, from the first
    write through remold: 121 DocumentValidationFailure for an insert, an
    update, a replacement, an upsert and a findAndModify that break it, as a
    collection with that validator answers; the other types' documents are
    held to their own validators only."""
    rules = tmp_path / "rules"
    rules.mkdir()
    for name, (value, validator) in VALIDATED.items():
        (rules / f"{name}.yaml").write_text(rule_text(db_name, name, value) + validator)
    direct = direct_client[db_name]
    if "validators" not in capabilities(direct_client):
        # An engine without collection validators (mongo-java-server has no
        # collMod; DocumentDB without documentdb.enableSchemaValidation):
        # the writes are refused with its error, none stored unvalidated.
        remold = private_remold(extra_args=("--rules", str(rules)))
        db = pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=10_000)[db_name]
        try:
            for write in (lambda: db.articles.insert_one({"_id": 1, "title": "ok"}),
                          lambda: db.podcasts.insert_one({"_id": 2}),
                          lambda: db.videos.update_one({"_id": 3}, {"$set": {"seconds": 0}}, upsert=True)):
                with pytest.raises(OperationFailure) as refused:
                    write()
                print(f"\nrefused without validators: {refused.value.code} {refused.value}")
            assert direct.content.count_documents({}) == 0
        finally:
            db.client.close()
        return
    # The oracle: a plain collection per type with the same validator.
    direct.create_collection("articles_oracle", validator={"$jsonSchema": {
        "required": ["title"], "additionalProperties": False,
        "properties": {"_id": {}, "title": {"bsonType": "string"}, "words": {"bsonType": ["int", "long"], "minimum": 0}}}})
    direct.create_collection("videos_oracle", validator={"seconds": {"$gt": 0}})
    remold = private_remold(extra_args=("--rules", str(rules)))
    db = pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=10_000)[db_name]
    try:
        def both(name, call):
            got = outcome(lambda: call(db[name]))
            want = outcome(lambda: call(direct[name + "_oracle"]))
            assert got == want, (name, got, want)
            return got

        both("articles", lambda c: c.insert_one({"_id": 1, "title": "ok", "words": 10}))
        for bad in ({"_id": 2}, {"_id": 3, "title": 5}, {"_id": 4, "title": "x", "extra": 1},
                    {"_id": 5, "title": "x", "words": -1}):
            got = both("articles", lambda c: c.insert_one(dict(bad)))
            assert "121" in repr(got), got
        assert both("articles", lambda c: c.update_one({"_id": 1}, {"$set": {"words": -5}}))
        assert both("articles", lambda c: c.update_one({"_id": 1}, {"$unset": {"title": ""}}))
        assert both("articles", lambda c: c.replace_one({"_id": 1}, {"words": 3}))
        assert both("articles", lambda c: c.update_one({"_id": 9}, {"$set": {"words": 1}}, upsert=True))
        assert both("articles", lambda c: c.find_one_and_update({"_id": 1}, {"$set": {"title": 7}}))
        assert both("articles", lambda c: c.update_one({"_id": 1}, {"$set": {"words": 20}}))
        both("videos", lambda c: c.insert_one({"_id": 11, "seconds": 30}))
        assert "121" in repr(both("videos", lambda c: c.insert_one({"_id": 12, "seconds": 0})))
        # A video need not have a title, and a podcast has no validator.
        db.podcasts.insert_one({"_id": 21, "anything": True})
        assert everything(db.articles) == everything(direct.articles_oracle)
        assert everything(db.videos) == everything(direct.videos_oracle)
        assert everything(db.podcasts) == [{"_id": 21, "anything": True}]
    finally:
        db.client.close()
