"""Seeded random operations for one family: writes, reads, pipelines from the
plain collection ``o`` reading the ruled ``c`` ($lookup in both forms and
nested, $unionWith, $facet, $graphLookup), $out/$merge into ``c``, and
catalog commands. An operation is plain data (a dict holding the command
document), so a sequence can be printed, shrunk and replayed.

Results are made deterministic where MongoDB leaves them open: a sort always
ends with ``_id``, skip/limit only come with a sort, single-document writes
select by ``_id``, joined arrays are unwound and compared as multisets.
"""
from __future__ import annotations

import random
from typing import Optional

from .families import MISSING, Family, pick

DB = "@DB"  # replaced by each side's database name (renameCollection names full namespaces)


class Ids:
    """_ids: mostly fresh integers, sometimes one already used (a duplicate key)."""

    def __init__(self):
        self.used: list = []

    def next(self, rng: random.Random):
        if self.used and rng.random() < 0.04:
            return rng.choice(self.used)
        value = len(self.used) + 1
        self.used.append(value)
        return value

    def existing(self, rng: random.Random):
        return rng.choice(self.used) if self.used and rng.random() < 0.9 else 10_000


def op(label: str, cmd: dict, shape: str, *, kind: str = "read", stages=(), capability=None,
       admin: bool = False) -> dict:
    """``capability``: what the backend must do as MongoDB does for the
    operation to be judged: None, a name, or a list of names."""
    return {"label": label, "cmd": cmd, "shape": shape, "kind": kind, "stages": list(stages),
            "capability": capability, "admin": admin}


def needs(o: dict) -> set[str]:
    cap = o["capability"]
    return set() if cap is None else {cap} if isinstance(cap, str) else set(cap)


class Generator:
    def __init__(self, family: Family, rng: random.Random, capabilities: set[str]):
        self.f, self.rng, self.caps = family, rng, capabilities
        family.caps = capabilities
        self.ids = Ids()
        self.weights = [
            (self.insert, 14), (self.find, 14), (self.count, 5), (self.distinct, 4),
            (self.aggregate, 8), (self.update, 8), (self.delete, 6), (self.find_and_modify, 4),
            (self.lookup, 8), (self.union_with, 3), (self.facet, 3), (self.graph_lookup, 2),
            (self.out_merge, 2), (self.catalog, 5),
        ]
        self.state: dict = {}  # the family's own (its extra operations')
        self.weights += family.extra_operations(self)

    def sequence(self, length: int) -> list[dict]:
        """``length`` operations, the last a dropDatabase (as a test's cleanup would)."""
        ops = []
        while len(ops) < length - 1:
            make = self.rng.choices([m for m, _ in self.weights], [w for _, w in self.weights])[0]
            o = make()
            if o is not None and needs(o) | set(self.f.op_needs.get(o["label"], ())) <= self.caps:
                ops.append(o)
        ops.append(op("dropDatabase", {"dropDatabase": 1}, "ok", kind="write"))
        return ops

    # -- values, filters, sorts

    def field(self, exclude=("_id",)) -> str:
        return self.rng.choice([f for f in self.f.fields if f not in exclude])

    def value(self, f: str, in_filter: bool = False):
        """A value for a filter or an update of ``f`` (never MISSING; in a
        filter, no array unless the backend matches array values as MongoDB does)."""
        if f == "_id":
            return self.ids.existing(self.rng)
        v = self.f.value(self.rng, f)
        if in_filter and isinstance(v, list) and "array_values" not in self.caps:
            return None
        return None if v is MISSING else v

    def filter(self) -> dict:
        r, f = self.rng, self.field(exclude=())
        v = self.value(f, in_filter=True)
        shape = r.randrange(12)
        if v is None and shape in (1, 5, 8) and "compare_null" not in self.caps:
            shape = 11  # the backend compares with null unlike MongoDB: ask equality instead
        if shape == 0:
            return {}
        if shape == 1:
            return {f: {"$gt": v}}
        if shape == 2:
            return {f: {"$in": [v, None if r.random() < 0.3 else self.value(f, in_filter=True)]}}
        if shape == 3:
            return {f: {"$exists": r.random() < 0.5}}
        if shape == 4:
            return {f: {"$ne": v}}
        if shape == 5:
            return {"$or": [{f: v}, {self.field(): {"$lte": v}}]}
        if shape == 6:
            return {f: {"$type": pick(r, "number", "string", "null", "array", "date")}}
        if shape == 7:
            return {f: {"$nin": [v]}}
        if shape == 8:
            return {"$and": [{f: {"$gte": v}}, {self.field(): {"$exists": True}}]}
        return {f: v}

    def sort(self) -> dict:
        # A backend that orders ties between empty arrays unlike MongoDB is
        # not asked to sort on fields that may hold one.
        exclude = ("_id",) if "sort_empty_array_ties" in self.caps else ("_id", *self.f.empty_array_fields)
        s = {self.field(exclude): self.rng.choice([1, -1])} if self.rng.random() < 0.8 else {}
        s["_id"] = self.rng.choice([1, -1])
        return s

    def projection(self) -> Optional[dict]:
        r = self.rng
        if r.random() < 0.6:
            return None
        fields = r.sample([f for f in self.f.fields if f != "_id"], 2)
        # A path and a path inside it ("buyers", "buyers.u") collide: MongoDB
        # refuses the projection (31249/31250), and DocumentDB's aggregate
        # $project accepts it where its find refuses: the inner one goes.
        fields = [f for f in fields if not any(f.startswith(g + ".") for g in fields)]
        if r.random() < 0.5:
            p = {f: 1 for f in fields}
            if r.random() < 0.3:
                p["_id"] = 0
            return p
        return {f: 0 for f in fields}

    def document(self) -> dict:
        """A family document, half the time with its fields (but _id) in another order."""
        doc = self.f.document(self.rng, self.ids)
        if self.rng.random() < 0.5:
            keys = [k for k in doc if k != "_id"]
            self.rng.shuffle(keys)
            doc = {"_id": doc["_id"], **{k: doc[k] for k in keys}}
        return doc

    # -- writes

    def insert(self):
        r = self.rng
        docs = [self.document() for _ in range(1 if r.random() < 0.5 else r.randrange(2, 6))]
        ordered = r.random() < 0.6 and "ordered_insert_stops" in self.caps
        return op("insert", {"insert": "c", "documents": docs, "ordered": ordered},
                  "write", kind="write")

    def update_doc(self) -> dict:
        r = self.rng
        if r.random() < 0.2:
            d = self.document()
            d.pop("_id")
            return d
        ops = {}
        for _ in range(r.randrange(1, 3)):
            name = pick(r, "$set", "$set", "$unset", "$inc", "$min", "$max", "$mul", "$push")
            f = self.field()
            if any(f in fields for fields in ops.values()):
                continue
            if name == "$unset":
                value = ""
            elif name in ("$inc", "$mul"):
                value = pick(r, 1, -2, 0.5)
            else:
                value = self.value(f)
            ops.setdefault(name, {})[f] = value
        return ops

    def statement_filter(self, multi: bool) -> dict:
        if multi:
            return self.filter()
        q = {"_id": self.ids.existing(self.rng)}
        if self.rng.random() < 0.3:
            q = {"$and": [q, self.filter()]}  # still one document at most
        return q

    def upsert_filter(self, multi: bool) -> dict:
        """An upsert names its _id: one the server would generate differs per side."""
        q = self.statement_filter(multi)
        return {"$and": [{"_id": self.ids.existing(self.rng)}, q]} if multi else q

    def update(self):
        r = self.rng
        statements = []
        for _ in range(1 if r.random() < 0.8 else 2):
            u = self.update_doc()
            multi = r.random() < 0.4 and any(k.startswith("$") for k in u)
            upsert = r.random() < 0.15
            statements.append({"q": self.upsert_filter(multi) if upsert else self.statement_filter(multi),
                               "u": u, "multi": multi, "upsert": upsert})
        # A backend that goes on after an ordered statement failed gets single statements.
        if "ordered_update_stops" not in self.caps:
            statements = statements[:1]
        return op("update", {"update": "c", "updates": statements, "ordered": r.random() < 0.7},
                  "write", kind="write")

    def delete(self):
        r = self.rng
        statements = []
        for _ in range(1 if r.random() < 0.85 else 2):
            if hasattr(self.f, "whole_bucket_filters") and r.random() < 0.6:
                statements.append({"q": self.f.whole_bucket_filters(r), "limit": 0})
            else:
                limit = pick(r, 0, 1)
                statements.append({"q": self.statement_filter(limit == 0), "limit": limit})
        return op("delete", {"delete": "c", "deletes": statements}, "write", kind="write")

    def find_and_modify(self):
        r = self.rng
        cmd = {"findAndModify": "c", "query": self.statement_filter(r.random() < 0.3),
               "sort": {"_id": 1}}
        if r.random() < 0.3:
            cmd["remove"] = True
        else:
            cmd["update"] = self.update_doc()
            cmd["new"] = r.random() < 0.5
            cmd["upsert"] = r.random() < 0.2
            if cmd["upsert"]:
                cmd["query"] = self.upsert_filter(True)
        return op("findAndModify", cmd, "fam", kind="write")

    # -- reads of c

    def find(self):
        r = self.rng
        cmd = {"find": "c", "filter": self.filter()}
        ordered = r.random() < 0.5
        if ordered:
            cmd["sort"] = self.sort()
            if r.random() < 0.3:
                cmd["skip"] = r.randrange(0, 4)
            if r.random() < 0.4:
                cmd["limit"] = r.randrange(1, 6)
        p = self.projection()
        if p:
            cmd["projection"] = p
        if r.random() < 0.3:
            cmd["batchSize"] = 2
        return op("find", cmd, "cursor_ordered" if ordered else "cursor")

    def count(self):
        if self.rng.random() < 0.3:
            return op("count", {"count": "c"}, "count")
        return op("count", {"count": "c", "query": self.filter()}, "count")

    def distinct(self):
        return op("distinct", {"distinct": "c", "key": self.field(exclude=()), "query": self.filter()},
                  "distinct")

    def aggregate(self):
        r = self.rng
        pipeline = [{"$match": self.filter()}]
        shape = "cursor"
        kind = r.randrange(4)
        if kind == 0:
            key = f"${self.field()}" if "group_arrays" in self.caps else None
            pipeline.append({"$group": {"_id": key, "n": {"$sum": 1},
                                        "s": {"$sum": f"${self.field()}"}}})
        elif kind == 1:
            pipeline += [{"$sort": self.sort()}, {"$skip": r.randrange(0, 3)},
                         {"$limit": r.randrange(1, 6)}]
            shape = "cursor_ordered"
        elif kind == 2:
            pipeline.append({"$group": {"_id": None, "n": {"$sum": 1}}})  # count_documents
        else:
            pipeline.append({"$project": {self.field(): 1, "x": {"$ifNull": [f"${self.field()}", "none"]}}})
        return op("aggregate", {"aggregate": "c", "pipeline": pipeline, "cursor": {}}, shape)

    # -- pipelines from o that read c

    def lookup_stage(self, depth: int = 0) -> tuple[dict, list[str], list[str]]:
        """A $lookup from o into c, its stage names, and the capabilities it needs."""
        r = self.rng
        f = self.rng.choice(self.f.join_fields)
        if r.random() < 0.5:
            return ({"$lookup": {"from": "c", "localField": "k", "foreignField": f, "as": "j"}},
                    ["$lookup"], ["lookup_local", *self.f.lookup_needs(f, "local")])
        inner = [{"$match": {"$expr": {"$eq": [f"${f}", "$$kk"]}}}]
        stages = ["$lookup"]
        caps = ["lookup_pipeline", *self.f.lookup_needs(f, "pipeline")]
        if depth == 0 and r.random() < 0.4:
            into, foreign = pick(r, "c", "o"), pick(r, f, "k")
            nested = {"$lookup": {"from": into, "localField": f, "foreignField": foreign, "as": "jj"}}
            inner.append(nested)  # unwound after the outer $lookup: its order is unspecified
            if into == "c":
                caps += self.f.lookup_needs(foreign, "local")
        elif r.random() < 0.5:
            inner.append({"$project": {f: 1, self.field(): 1}})
        return ({"$lookup": {"from": "c", "let": {"kk": "$k"}, "pipeline": inner, "as": "j"}},
                stages, caps)

    def lookup(self):
        stage, stages, cap = self.lookup_stage()
        pipeline = [stage, {"$unwind": {"path": "$j", "preserveNullAndEmptyArrays": True}}]
        if "jj" in str(stage):
            pipeline.append({"$unwind": {"path": "$j.jj", "preserveNullAndEmptyArrays": True}})
        return op("aggregate", {"aggregate": "o", "pipeline": pipeline, "cursor": {}}, "cursor",
                  stages=stages, capability=cap)

    def union_with(self):
        pipeline = [{"$unionWith": {"coll": "c", "pipeline": [{"$match": self.filter()}]}}]
        return op("aggregate", {"aggregate": "o", "pipeline": pipeline, "cursor": {}}, "cursor",
                  stages=["$unionWith"], capability="unionWith")

    def facet(self):
        stage, stages, cap = self.lookup_stage(depth=1)
        facet = {"$facet": {
            "joined": [stage, {"$unwind": "$j"}, {"$group": {"_id": "$j._id", "n": {"$sum": 1}}},
                       {"$sort": {"_id": 1}}],
            "all": [{"$count": "n"}]}}
        form = "facet" if "lookup_local" in cap else "facet_pipeline"
        return op("aggregate", {"aggregate": "o", "pipeline": [facet], "cursor": {}}, "cursor",
                  stages=["$facet", *stages], capability=[form, *cap])

    def graph_lookup(self):
        f = self.rng.choice(self.f.join_fields)
        pipeline = [{"$graphLookup": {"from": "c", "startWith": "$k", "connectFromField": f,
                                      "connectToField": f, "as": "g", "maxDepth": 1}},
                    {"$unwind": {"path": "$g", "preserveNullAndEmptyArrays": True}}]
        return op("aggregate", {"aggregate": "o", "pipeline": pipeline, "cursor": {}}, "cursor",
                  stages=["$graphLookup"], capability="graphLookup")

    def out_merge(self):
        r = self.rng
        source = [{"$match": {"_id": {"$lt": r.randrange(1, 5)}}},
                  {"$project": {f: "$k" for f in self.f.join_fields[:1]}}]
        if r.random() < 0.5:
            return op("aggregate", {"aggregate": "o", "pipeline": source + [{"$out": "c"}], "cursor": {}},
                      "cursor", kind="write", stages=["$out"], capability="out")
        merge = {"$merge": {"into": "c", "on": "_id",
                            "whenMatched": pick(r, "replace", "merge", "keepExisting"),
                            "whenNotMatched": "insert"}}
        return op("aggregate", {"aggregate": "o", "pipeline": source + [merge], "cursor": {}},
                  "cursor", kind="write", stages=["$merge"], capability="merge")

    # -- catalog

    def catalog(self):
        r = self.rng
        which = r.randrange(10)
        if which == 0:
            return op("listCollections", {"listCollections": 1, "nameOnly": r.random() < 0.5},
                      "listCollections")
        if which == 1:
            return op("listIndexes", {"listIndexes": "c"}, "listIndexes")
        if which == 2:
            f, direction = self.field(), r.choice([1, -1])
            # One name, one key: the stand-in mishandles a name reused for another key.
            return op("createIndexes", {"createIndexes": "c", "indexes": [
                {"key": {f: direction}, "name": f"{f}_{direction}"}]}, "ok", kind="write")
        if which == 3:
            return op("drop", {"drop": "c"}, "ok", kind="write")
        if which == 4:
            return op("create", {"create": "c"}, "ok", kind="write")
        if which == 5:
            src, dst = ("c", "c2") if r.random() < 0.6 else ("o", "c")
            return op("renameCollection", {"renameCollection": f"{DB}.{src}", "to": f"{DB}.{dst}",
                                           "dropTarget": r.random() < 0.3},
                      "ok", kind="write", admin=True, capability="renameCollection")
        if which == 6:
            return op("collStats", {"collStats": "c"}, "collStats", capability="collStats")
        if which == 7:
            return op("aggregate", {"aggregate": "c", "pipeline": [{"$collStats": {"count": {}}}],
                                    "cursor": {}}, "collStatsStage", stages=["$collStats"],
                      capability="collStatsStage")
        if which == 8:
            return op("count", {"count": "c"}, "count")  # estimatedDocumentCount
        return op("dropIndexes", {"dropIndexes": "c", "index": "*"}, "ok", kind="write")
