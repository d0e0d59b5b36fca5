"""One family per rule: the rule file, the documents and fields the generator
draws from, the plain collections set up beside the ruled one, and for
computed, subset and extended_reference the oracle that keeps what the rule
maintains on the flat copy.

Every family names its collections the same in both databases: ``c`` (ruled
through remold, plain on the flat side), ``o`` (plain everywhere: the
collection whose pipelines read ``c``), ``c2`` (a rename target) and, for
computed, subset and extended_reference, ``t`` (the rule's target, parent
or referenced collection; on the flat side
maintained by the family's ``maintain``, which recomputes it from the flat
source after every write).
"""
from __future__ import annotations

import datetime as dt
import math
import random

from bson.int64 import Int64

MISSING = object()
T0 = dt.datetime(2024, 3, 4)
LOGICAL = ("c", "o", "c2")


def pick(rng: random.Random, *choices):
    return rng.choice(choices)


def scalar(rng: random.Random):
    """A value of any common type, including the awkward ones."""
    return pick(rng, None, 0, 1, -1, 2.5, Int64(3), "a", "b", "", True, [], [1, 2], [None, "a"],
                {"x": 1}, T0 + dt.timedelta(minutes=rng.randrange(0, 180)))


def bson_order(value):
    """A sort key in BSON order for the types the computed family stores
    (numbers < strings < documents < arrays < booleans < dates), as $max uses."""
    if isinstance(value, bool):
        return (8, value)
    if isinstance(value, (int, float)):
        return (1, value)
    if isinstance(value, str):
        return (2, value)
    if isinstance(value, dt.datetime):
        return (9, value)
    return (4 if isinstance(value, list) else 3, repr(value))


def put(doc: dict, field: str, value) -> None:
    if value is not MISSING:
        doc[field] = value


class Family:
    name = ""
    join_fields: tuple = ()     # fields of c that pipelines from o join on
    fields: tuple = ()          # fields of c that filters, sorts and projections name
    loose: frozenset = frozenset()
    names = LOGICAL
    outputs: tuple = ()         # collections the rule writes besides c
    resyncable = True           # can a sequence go on from remold's state after a difference?
    field_order_oracle = True   # does the flat copy hold fields in the order MongoDB would?
    reads_forwarded = False     # does remold answer the rule's reads with the backend's own cursor?
    maintains_with_writes = False  # does remold write derived values with a statement's documents?
    empty_array_fields: tuple = ()  # fields whose values may be [] (written or left by $pull)

    def rules(self, db: str) -> dict[str, str]:
        raise NotImplementedError

    caps: set = set()           # the backend's capabilities (capabilities.probe)

    def document(self, rng: random.Random, ids) -> dict:
        raise NotImplementedError

    def value(self, rng: random.Random, field: str):
        return scalar(rng)

    def lookup_needs(self, field: str, form: str) -> set[str]:
        """Backend capabilities a $lookup into c joined on ``field`` needs
        beyond the form's own (``form``: "local" or "pipeline"): what the
        rule's view, run inside the $lookup's pipeline, asks of the backend."""
        return set()

    def setup(self, db) -> None:
        """Plain collections beside c, identical on both sides."""
        db.o.insert_many([{"_id": i, "k": v} for i, v in enumerate(self.join_values())])

    def join_values(self) -> list:
        return [None, 1, "a", 2.5, "s1"]

    def maintain(self, flat_db) -> None:
        """The oracle's part after a write on the flat side (nothing but for computed)."""

    def maintain_written(self, flat_db, written: list) -> None:
        """The oracle's part after one statement of a command of several, for
        what remold writes together with the statement's documents (a later
        statement of the command sees it); ``written``: the _ids of the
        documents the statement wrote whole (an insert's, a replacement's)."""

    def normalize_state(self, name: str, doc: dict) -> dict:
        return doc

    def returned(self, doc: dict) -> dict:
        """A document the flat side returns after writing it (findAndModify
        new: true), as a plain collection holding the oracle's values would."""
        return doc

    def seed(self, stored_db, flat_db) -> None:
        """Documents c holds before a sequence, written on the backend
        directly (``stored_db``: remold's database there) as the rule's
        collection may hold them, and on the flat side as remold shows them."""


class Bucket(Family):
    name = "bucket"
    fields = ("_id", "sensor", "at", "temp", "note")
    join_fields = ("sensor", "temp")
    empty_array_fields = ("note",)

    def rules(self, db):
        return {"c.yaml": "\n".join([
            f"namespace: {db}.c", "pattern: bucket", "bucket:", "  collection: c_buckets",
            "  meta: [sensor]", "  time: at", "  span: 1h", "  summaries:",
            "    temp: [sum, min, max]"]) + "\n"}

    def document(self, rng, ids):
        doc = {"_id": ids.next(rng)}
        put(doc, "sensor", pick(rng, "s1", "s1", "s2", "s2", None, MISSING, 3))
        put(doc, "at", self.value(rng, "at") if rng.random() < 0.97 else pick(rng, MISSING, "noon"))
        put(doc, "temp", self.value(rng, "temp") if rng.random() < 0.9 else MISSING)
        put(doc, "note", pick(rng, MISSING, MISSING, scalar(rng)))
        return doc

    def value(self, rng, field):
        if field == "at":
            return T0 + dt.timedelta(minutes=rng.randrange(0, 180))
        if field == "temp":
            if rng.random() < 0.03 and "nan_compare" in self.caps:
                return math.nan
            return pick(rng, rng.randrange(-5, 30), rng.randrange(-50, 300) / 10, Int64(7), None)
        if field == "sensor":
            return pick(rng, "s1", "s2", None, 3)
        return super().value(rng, field)

    def lookup_needs(self, field, form):
        # The view unwinds the buckets. A local-form join on the meta field
        # is matched before it; any other join reads the let variable after.
        if form == "local" and field == "sensor":
            return set()
        return {"lookup_let_after_unwind"}

    def whole_bucket_filters(self, rng):
        hour = T0 + dt.timedelta(hours=rng.randrange(0, 3))
        span = {"$gte": hour, "$lt": hour + dt.timedelta(hours=rng.randrange(1, 3))}
        return pick(rng, {"sensor": pick(rng, "s1", "s2", None)}, {"at": span},
                    {"sensor": pick(rng, "s1", "s2"), "at": span})


class Attribute(Family):
    name = "attribute"
    fields = ("_id", "name", "price", "category", "ram", "color", "tags", "made")
    join_fields = ("color", "ram", "category")
    empty_array_fields = ("tags",)

    def rules(self, db):
        return {"c.yaml": "\n".join([
            f"namespace: {db}.c", "pattern: attribute", "attribute:", "  array: specs",
            "  except: [name, price, category]"]) + "\n"}

    def lookup_needs(self, field, form):
        # The view rebuilds each document with a $filter ($$f.k) inside the
        # $lookup's pipeline, beside the join's let variable.
        return {"lookup_let_filter_vars"}

    def document(self, rng, ids):
        doc = {"_id": ids.next(rng)}
        for field in self.fields[1:]:
            if field in ("name", "price", "category") or rng.random() < 0.6:
                put(doc, field, self.value(rng, field))
        return doc

    def value(self, rng, field):
        if field == "name":
            return pick(rng, "laptop", "phone", "desk", None)
        if field in ("price", "ram"):
            return pick(rng, rng.randrange(0, 64), rng.randrange(0, 640) / 10, Int64(16), None,
                        [8, 16], "16")
        if field in ("category", "color"):
            return pick(rng, "a", "b", "s1", None, ["a", "b"], 1)
        if field == "tags":
            return pick(rng, [], ["x"], ["x", "y"], "x", None)
        if field == "made":
            return T0 + dt.timedelta(days=rng.randrange(0, 30))
        return super().value(rng, field)


class Computed(Family):
    name = "computed"
    reads_forwarded = True  # the documents are stored as written: a find goes as sent
    maintains_with_writes = True  # computed fields with an insert's or a replacement's document
    fields = ("_id", "pid", "stars", "at", "items", "note", "total", "itemCount")
    join_fields = ("pid", "stars")
    empty_array_fields = ("items", "note")
    loose = frozenset({"cnt", "ssum", "avg", "total", "itemCount"})
    names = LOGICAL + ("t",)
    outputs = ("t",)
    resyncable = False
    field_order_oracle = False  # the oracle $sets the computed fields where remold inserts them
    TARGETS = (1, 2, 3)

    def rules(self, db):
        return {"c.yaml": f"""\
namespace: {db}.c
pattern: computed
computed:
  aggregates:
    - target: t
      link: {{from: pid, to: _id}}
      fields:
        cnt: count
        ssum: {{sum: stars}}
        mx: {{max: at}}
      derived:
        avg: {{divide: [ssum, cnt]}}
  fields:
    total: {{sum: {{each: items, of: {{product: [price, qty]}}}}}}
    itemCount: {{count: items}}
  on_client_write: reject
"""}

    def setup(self, db):
        super().setup(db)
        db.t.insert_many([{"_id": i, "title": f"post {i}"} for i in self.TARGETS])

    def join_values(self):
        return [None, 1, 2, 3, 99]

    def document(self, rng, ids):
        doc = {"_id": ids.next(rng)}
        for field in ("pid", "stars", "at", "items", "note"):
            if field == "pid" or rng.random() < 0.8:
                put(doc, field, self.value(rng, field))
        return doc

    def value(self, rng, field):
        if field == "pid":
            return pick(rng, 1, 1, 2, 3, 99, None, [1, 2], MISSING)
        if field == "stars":
            return pick(rng, 1, 2, 3, 4, 5, None, 2.5)
        if field == "at":
            return T0 + dt.timedelta(minutes=rng.randrange(0, 10_000))
        if field == "items":
            return [self.item(rng) for _ in range(rng.randrange(0, 4))]
        if field in ("total", "itemCount"):
            return pick(rng, 0, 1, 12.5)
        return super().value(rng, field)

    def item(self, rng):
        item = {"sku": pick(rng, "a", "b")}
        put(item, "price", pick(rng, 1.5, 2.25, 10, MISSING, None))
        put(item, "qty", pick(rng, 1, 2, 3, MISSING))
        return item

    # -- the oracle: recompute what the rule maintains, from the flat source.

    @staticmethod
    def number(v) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    def row_values(self, doc: dict) -> dict:
        """total and itemCount as the rule computes them, MISSING where it
        cannot (items not an array, a price or qty neither a number nor
        null): an insert is refused then, and an update leaves the field out."""
        items = doc.get("items", MISSING)
        if items is MISSING or items is None:
            return {"total": 0, "itemCount": 0}
        if not isinstance(items, list):
            return {"total": MISSING, "itemCount": MISSING}
        total = 0
        for item in items:
            if not isinstance(item, dict):
                continue
            price, qty = item.get("price"), item.get("qty")
            if any(v is not None and not self.number(v) for v in (price, qty)):
                total = MISSING
                break
            if self.number(price) and self.number(qty):
                total += price * qty
        return {"total": total, "itemCount": len(items)}

    def returned(self, doc):
        values = self.row_values(doc)
        kept = {k: v for k, v in doc.items() if values.get(k, None) is not MISSING}
        return {**kept, **{k: v for k, v in values.items() if v is not MISSING}}

    def maintain_written(self, flat_db, written):
        """remold computes the fields of a document written whole as it
        writes it; an update by operators gets them after the command."""
        self.maintain_rows(flat_db, list(flat_db.c.find({"_id": {"$in": written}})) if written else [])

    def maintain(self, flat_db):
        sources = list(flat_db.c.find())
        self.maintain_rows(flat_db, sources)
        self.maintain_targets(flat_db, sources)

    def maintain_rows(self, flat_db, sources):
        for doc in sources:
            want = self.row_values(doc)
            assign = {k: v for k, v in want.items() if v is not MISSING}
            remove = {k: "" for k, v in want.items() if v is MISSING and k in doc}
            if remove or any(doc.get(k, MISSING) != v or type(doc.get(k)) is not type(v)
                             for k, v in assign.items()):
                update = {"$set": assign} if assign else {}
                if remove:
                    update["$unset"] = remove
                flat_db.c.update_one({"_id": doc["_id"]}, update)

    def maintain_targets(self, flat_db, sources):
        for target in flat_db.t.find():
            linked = [s for s in sources if "pid" in s and s["pid"] is not None
                      and not isinstance(s["pid"], (list, bool)) and s["pid"] == target["_id"]]
            stars = [s["stars"] for s in linked if self.number(s.get("stars"))]
            ats = [s["at"] for s in linked if s.get("at") is not None]
            values = {"cnt": len(linked), "ssum": sum(stars)}
            if ats:
                values["mx"] = max(ats, key=bson_order)
            if linked:
                values["avg"] = values["ssum"] / values["cnt"]
            unset = {k: "" for k in ("mx", "avg") if k not in values and k in target}
            if not unset and all(k in target and target[k] == v and type(target[k]) is type(v)
                                 for k, v in values.items()):
                continue
            update = {"$set": values}
            if unset:
                update["$unset"] = unset
            flat_db.t.update_one({"_id": target["_id"]}, update)

    def normalize_state(self, name, doc):
        """Targets: a count or sum of 0 equals none at all (a target no source
        ever linked to holds nothing); an absent extreme or average equals
        null, and an average of 0 (stars are never 0, so: no stars) equals none."""
        if name != "t":
            return doc
        out = dict(doc)
        for k in ("cnt", "ssum"):
            if out.get(k, 0) == 0:
                out.pop(k, None)
        for k in ("mx", "avg"):
            if out.get(k, MISSING) is None:
                out.pop(k)
        if out.get("avg", MISSING) == 0:
            out.pop("avg")
        return out


def sort_value(value, descending: bool):
    """A value's place in MongoDB's sort order (numbers < strings <
    documents < arrays... as bson_order), an array sorting by its largest
    element when descending and its smallest ascending, an empty one before
    null; missing is null."""
    if value is MISSING or value is None:
        return (0,)
    if isinstance(value, list):
        if not value:
            return (-1,)
        keys = [sort_value(v, descending) for v in value]
        return max(keys) if descending else min(keys)
    return bson_order(value)


class Subset(Family):
    name = "subset"
    reads_forwarded = True  # the documents are stored as written: a find goes as sent
    fields = ("_id", "pid", "stars", "at", "note")
    join_fields = ("pid", "stars")
    names = LOGICAL + ("t",)
    outputs = ("t",)
    resyncable = False
    LIMIT = 3
    TARGETS = (1, 2, 3)

    def rules(self, db):
        return {"c.yaml": f"""\
namespace: {db}.c
pattern: subset
subset:
  parent: t
  link: pid
  array: recent
  sort: {{at: -1}}
  limit: {self.LIMIT}
  fields: [stars, at]
"""}

    def setup(self, db):
        super().setup(db)
        db.t.insert_many([{"_id": i, "title": f"product {i}"} for i in self.TARGETS])

    def join_values(self):
        return [None, 1, 2, 3, 99]

    def document(self, rng, ids):
        doc = {"_id": ids.next(rng)}
        for field in ("pid", "stars", "at", "note"):
            if field == "pid" or rng.random() < 0.8:
                put(doc, field, self.value(rng, field))
        return doc

    def value(self, rng, field):
        if field == "pid":
            return pick(rng, 1, 1, 2, 3, 99, None, [1, 2], MISSING)
        if field == "stars":
            return pick(rng, 1, 2, 3, 4, 5, None, 2.5)
        if field == "at":
            # Minutes apart, from few enough values that ties happen.
            return T0 + dt.timedelta(minutes=rng.randrange(0, 30))
        return super().value(rng, field)

    # -- the oracle: each parent's first LIMIT children, from the flat source.

    def maintain(self, flat_db):
        children = list(flat_db.c.find())
        for parent in flat_db.t.find():
            linked = [c for c in children if "pid" in c and c["pid"] is not None
                      and not isinstance(c["pid"], (list, bool)) and c["pid"] == parent["_id"]]
            linked.sort(key=lambda c: (sort_value(c.get("at", MISSING), True), bson_order(c["_id"])),
                        reverse=True)
            want = [{k: v for k, v in c.items() if k in ("_id", "stars", "at")} for c in linked[:self.LIMIT]]
            if parent.get("recent", MISSING if not want else None) == want:
                continue
            flat_db.t.update_one({"_id": parent["_id"]}, {"$set": {"recent": want}})

    def normalize_state(self, name, doc):
        """Parents: no array equals an empty one (a parent no child ever
        linked to holds none)."""
        if name != "t" or doc.get("recent", MISSING) != []:
            return doc
        return {k: v for k, v in doc.items() if k != "recent"}


class ExtendedReference(Family):
    name = "extended_reference"
    reads_forwarded = True  # the documents are stored as written: a find goes as sent
    maintains_with_writes = True  # the copy with every write of the reference
    fields = ("_id", "cid", "total", "note")
    join_fields = ("cid", "total")
    names = LOGICAL + ("t",)
    field_order_oracle = False  # the oracle $sets the copy after the write
    CUSTOMERS = ({"_id": 1, "name": "ann", "addr": {"city": "Oslo"}},
                 {"_id": 2, "name": "bob", "addr": {"city": "Rome"}, "tier": "gold"},
                 {"_id": 3, "name": "cid"})

    def rules(self, db):
        return {"c.yaml": f"""\
namespace: {db}.c
pattern: extended_reference
extended_reference:
  reference: cid
  referenced: t
  into: cust
  fields: [name, addr]
  mode: frozen
  missing: null
"""}

    def setup(self, db):
        super().setup(db)
        db.t.insert_many([dict(c) for c in self.CUSTOMERS])

    def join_values(self):
        return [None, 1, 2, 3, 99]

    def document(self, rng, ids):
        doc = {"_id": ids.next(rng)}
        for field in ("cid", "total", "note"):
            if field == "cid" or rng.random() < 0.8:
                put(doc, field, self.value(rng, field))
        return doc

    def value(self, rng, field):
        if field == "cid":
            return pick(rng, 1, 1, 2, 3, 99, None, [1, 2], MISSING)
        if field == "total":
            return pick(rng, 1, 2, 3.5, None)
        return super().value(rng, field)

    # -- the oracle: each document's copy of the customer it references.

    def maintain_written(self, flat_db, written):
        """remold writes the copy with every write of the reference."""
        self.maintain(flat_db)

    def copy(self, doc: dict):
        """The copy `doc` should hold: a dict, None (a customer that does not
        exist), or MISSING (no reference)."""
        ref = doc.get("cid", MISSING)
        if ref is MISSING or ref is None or isinstance(ref, (list, bool)):
            return MISSING
        for c in self.CUSTOMERS:
            if c["_id"] == ref:
                return {k: v for k, v in c.items() if k in ("_id", "name", "addr")}
        return None

    def returned(self, doc):
        want = self.copy(doc)
        out = {k: v for k, v in doc.items() if k != "cust"}
        if want is not MISSING:
            out["cust"] = want
        return out

    def maintain(self, flat_db):
        for doc in flat_db.c.find():
            want = self.copy(doc)
            have = doc.get("cust", MISSING)
            if want is MISSING and have is not MISSING:
                flat_db.c.update_one({"_id": doc["_id"]}, {"$unset": {"cust": ""}})
            elif want is not MISSING and (have is MISSING or have != want):
                flat_db.c.update_one({"_id": doc["_id"]}, {"$set": {"cust": want}})


class Versioned(Family):
    """Documents of three versions: every sequence starts with some stored at
    the older ones (written on the backend directly, as before a release),
    which remold upgrades on every read and before every write that meets
    them; the flat side holds them upgraded. What the generator writes is
    stored at the current version (remold adds the version field, the
    oracle too)."""
    name = "versioned"
    fields = ("_id", "code", "tier", "n", "note")
    join_fields = ("code", "n")
    field_order_oracle = False  # remold adds the version field where the oracle's $set cannot tell
    reads_forwarded = True  # a find runs as one aggregate over the upgrade, its getMores forwarded
    CURRENT = 3
    STORED = (  # as an older release wrote them, and as version 3 reads them
        ({"_id": 10_000, "zip": 123, "n": 1, "note": "a", "legacy": 1},
         {"_id": 10_000, "code": "123", "n": 1, "note": "a", "tier": "std", "v": 3}),
        ({"_id": "s1", "v": None, "zip": 7.0, "n": 2, "code": "x"},
         {"_id": "s1", "code": "7", "n": 2, "tier": "std", "v": 3}),
        ({"_id": "s2", "v": 1, "zip": "z", "tier": "gold", "n": None},
         {"_id": "s2", "code": "z", "tier": "gold", "n": None, "v": 3}),
        ({"_id": "s3", "v": 2, "code": Int64(45), "tier": "std", "n": [1, 2], "legacy": "old"},
         {"_id": "s3", "code": "45", "tier": "std", "n": [1, 2], "v": 3}),
        ({"_id": "s4", "v": 2, "code": 2.5, "n": 2.5, "tier": None},
         {"_id": "s4", "code": 2.5, "n": 2.5, "tier": None, "v": 3}),
        ({"_id": "s5", "v": 1, "n": 1, "note": {"x": 1}},
         {"_id": "s5", "n": 1, "note": {"x": 1}, "tier": "std", "v": 3}),
        ({"_id": "s6", "v": 3, "code": "9", "n": 1},
         {"_id": "s6", "code": "9", "n": 1, "v": 3}),
    )

    def rules(self, db):
        return {"c.yaml": f"""\
namespace: {db}.c
pattern: versioned
versioned:
  field: v
  versions:
    - version: 1
    - version: 2
      upgrade:
        - rename: {{from: zip, to: code}}
        - default: {{field: tier, value: std}}
    - version: 3
      upgrade:
        - convert: {{field: code, to: string}}
        - remove: [legacy]
"""}

    def lookup_needs(self, field, form):
        # The view's upgrade stages ($map, $filter) run inside the $lookup's
        # pipeline, beside the join's let variable.
        return {"lookup_let_filter_vars"}

    def seed(self, stored_db, flat_db):
        stored_db.c.insert_many([dict(stored) for stored, _ in self.STORED])
        flat_db.c.insert_many([dict(read) for _, read in self.STORED])

    def document(self, rng, ids):
        doc = {"_id": ids.next(rng)}
        for field in self.fields[1:]:
            if rng.random() < 0.7:
                put(doc, field, self.value(rng, field))
        return doc

    def value(self, rng, field):
        if field == "code":
            return pick(rng, "7", "a", 7, Int64(45), 2.5, None, [1, 2], "s1")
        if field == "tier":
            return pick(rng, "std", "gold", None, 1)
        if field == "n":
            return pick(rng, 1, 2, 2.5, Int64(3), None, [1, 2], "a")
        return super().value(rng, field)

    def returned(self, doc):
        return doc if "v" in doc else {**doc, "v": self.CURRENT}

    def maintain(self, flat_db):
        """remold stores what a client writes at the current version."""
        flat_db.c.update_many({"v": {"$exists": False}}, {"$set": {"v": self.CURRENT}})

    def maintain_written(self, flat_db, written):
        self.maintain(flat_db)


FAMILIES = {f.name: f for f in (Bucket(), Attribute(), Computed(), Subset(), ExtendedReference(), Versioned())}
