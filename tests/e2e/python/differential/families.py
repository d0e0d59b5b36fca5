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
    # Backend capabilities an operation (by label) needs for this rule beyond
    # its own: where remold answers it with a form of its own that a backend
    # may answer unlike MongoDB.
    op_needs: dict = {}

    # Backend capabilities without which the rule cannot be judged at all
    # (the family is skipped).
    requires: tuple = ()

    def rules(self, db: str) -> dict[str, str]:
        raise NotImplementedError

    def configure(self, seed: int):
        """Settings of the rule the long run's seed chooses, before the rules
        are written: a note of what it chose, or None."""
        return None

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

    # What remold shows of an index (listIndexes) that the resync carries to
    # the flat copy besides its key, name and uniqueness.
    resync_index_options: tuple = ()

    def extra_operations(self, gen) -> list:
        """(make, weight) pairs the generator draws from besides its own
        (``gen``: the Generator, whose ``state`` dict the family may use)."""
        return []


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


class Polymorphic(Family):
    """c is a polymorphic rule's logical collection (discriminator value "C")
    stored in ``content``, which it shares with a second polymorphic rule's
    ``c3`` (value "O"); the flat side has plain ``c`` and ``c3``. Each
    sequence starts with documents of both types stored in content on the
    backend directly, and beside them documents no rule reads (another type,
    a null type, none): none of them may show through c, and no write on c
    may touch them. The generator writes and reads c3 too, with _ids apart
    from c's (content's _id index is shared by the types: a collision is a
    documented difference), names the discriminator field now and then (a
    document, a filter or an update naming it is refused with 2 by a write;
    a read sees no such field, as on the flat side), and builds unique,
    sparse and partial indexes on both collections (content holds them all).

    The oracle keeps the flat side's ``content`` as remold stores it: c's
    documents with type "C", c3's with type "O" and the untyped ones, rebuilt
    after every write and compared (field order aside) with remold's stored
    collection. remold lists c while content exists (after a drop of c too):
    the oracle keeps a flat c while the database holds c3."""
    name = "polymorphic"
    fields = ("_id", "title", "n", "tags", "at", "note")
    join_fields = ("title", "n")
    empty_array_fields = ("tags",)
    names = LOGICAL + ("c3", "content")
    outputs = ("c3", "content")
    reads_forwarded = True  # a find runs as one aggregate on content, its getMores forwarded
    op_needs = {
        # c exists while content does: create of c answers ok, as a mongos
        # and MongoDB 7.0 do (a mongod before 7.0 refuses it, 48).
        "create": ("create_existing_ok",),
        # remold drops the stored indexes by a list of names (MongoDB 4.2).
        "dropIndexes": ("drop_indexes_list",),
        "drop": ("drop_indexes_list",),  # c's indexes, dropped from content
    }
    resync_index_options = ("partialFilterExpression", "sparse")
    FIELD = "type"
    VALUES = {"c": "C", "c3": "O"}
    OTHER_BASE = 100_000  # c3's _ids: 100_001..., apart from c's (1..., 10_000, 10_001)
    SEED_C = ({"_id": 10_000, "title": "a", "n": 1, "note": "seeded"},
              {"_id": 10_001, "title": "s1", "n": 2.5, "tags": ["x"]})
    SEED_OTHER = ({"_id": 100_001, "title": "a", "n": 1, "len": 3},
                  {"_id": 100_002, "title": "s1", "n": 2.5, "tags": ["x"], "len": 7},
                  {"_id": 100_003, "title": None, "n": None})
    UNTYPED = ({"_id": "z1", "title": "a", "n": 1, "type": "Z"},   # a type no rule reads
               {"_id": "z2", "title": "s1", "n": 2.5, "type": None},
               {"_id": "z3", "title": "a", "n": 1})                 # no type at all

    def rules(self, db):
        def rule(name, value):
            return "\n".join([f"namespace: {db}.{name}", "pattern: polymorphic", "polymorphic:",
                              "  collection: content", f"  field: {self.FIELD}", f"  value: {value}"]) + "\n"
        return {"c.yaml": rule("c", self.VALUES["c"]), "c3.yaml": rule("c3", self.VALUES["c3"])}

    def seed(self, stored_db, flat_db):
        stored_db.content.insert_many(
            [{**d, self.FIELD: self.VALUES["c"]} for d in self.SEED_C]
            + [{**d, self.FIELD: self.VALUES["c3"]} for d in self.SEED_OTHER]
            + [dict(d) for d in self.UNTYPED])
        flat_db.c.insert_many([dict(d) for d in self.SEED_C])
        flat_db.c3.insert_many([dict(d) for d in self.SEED_OTHER])

    def maintain(self, flat_db):
        names = set(flat_db.list_collection_names())
        if "c3" not in names:
            return  # the database was dropped: content is gone on remold's side too
        if "c" not in names:
            flat_db.create_collection("c")  # remold lists c while content exists
        stored = ([{**d, self.FIELD: self.VALUES["c"]} for d in flat_db.c.find()]
                  + [{**d, self.FIELD: self.VALUES["c3"]} for d in flat_db.c3.find()]
                  + [dict(d) for d in self.UNTYPED])
        flat_db.drop_collection("content")
        flat_db.content.insert_many(stored)

    def document(self, rng, ids):
        doc = {"_id": ids.next(rng)}
        for field in self.fields[1:]:
            if field == "title" or rng.random() < 0.6:
                put(doc, field, self.value(rng, field))
        if rng.random() < 0.03:  # refused (2): a client does not write the discriminator
            doc[self.FIELD] = pick(rng, "C", "O", None)
        return doc

    def value(self, rng, field):
        if field == "title":
            return pick(rng, "a", "b", "s1", None, "", 1)
        if field == "n":
            return pick(rng, 1, 2, 2.5, Int64(3), None, "a", [1, 2])
        if field == "tags":
            return pick(rng, [], ["x"], ["x", "y"], "x", None)
        if field == "at":
            return T0 + dt.timedelta(minutes=rng.randrange(0, 180))
        if field == "len":
            return pick(rng, 1, 3, 7, None)
        return super().value(rng, field)

    # -- what the generator does besides its own operations on c

    def extra_operations(self, gen):
        return [(lambda: self.other_type(gen), 10), (lambda: self.discriminator(gen), 3),
                (lambda: self.indexes(gen), 3), (lambda: self.pipeline_update(gen), 3)]

    def pipeline_update(self, gen):
        """A pipeline update of c (the generator's own updates are operators
        and replacements); now and then one whose stages name the
        discriminator field (refused, 2)."""
        from .generator import op
        r = gen.rng
        f, g = gen.field(), gen.field()
        stage = pick(r, {"$set": {f: gen.value(f)}}, {"$set": {f: f"${g}"}}, {"$unset": f},
                     {"$set": {"copy": {"$ifNull": [f"${g}", "none"]}}},
                     {"$replaceWith": {"$mergeObjects": ["$$ROOT", {f: 1}]}})
        if r.random() < 0.25:
            stage = pick(r, {"$set": {self.FIELD: "O"}}, {"$set": {"t": f"${self.FIELD}"}},
                         {"$unset": self.FIELD}, {"$replaceWith": {"$mergeObjects": ["$$ROOT", {self.FIELD: "O"}]}})
        multi, upsert = r.random() < 0.4, r.random() < 0.15
        q = gen.upsert_filter(multi) if upsert else gen.statement_filter(multi)
        if r.random() < 0.3:
            cmd = {"findAndModify": "c", "query": gen.statement_filter(False), "sort": {"_id": 1},
                   "update": [stage], "new": r.random() < 0.5}
            return op("findAndModify", cmd, "fam", kind="write", capability="pipeline_update")
        return op("update", {"update": "c", "updates": [{"q": q, "u": [stage], "multi": multi, "upsert": upsert}]},
                  "write", kind="write", capability="pipeline_update")

    def other_id(self, gen, fresh: bool):
        used = gen.state.setdefault("other_ids", [d["_id"] for d in self.SEED_OTHER])
        if fresh:
            used.append(self.OTHER_BASE + len(used) + 1)
            return used[-1]
        return gen.rng.choice(used) if gen.rng.random() < 0.9 else self.OTHER_BASE + 99_999

    def other_document(self, gen):
        r = gen.rng
        doc = {"_id": self.other_id(gen, True)}
        for field in ("title", "n", "len", "tags"):
            if field == "title" or r.random() < 0.6:
                put(doc, field, self.value(r, field))
        if r.random() < 0.03:
            doc[self.FIELD] = pick(r, "C", "O")
        return doc

    def other_filter(self, gen):
        r = gen.rng
        f = pick(r, "title", "n", "len", "_id")
        v = self.other_id(gen, False) if f == "_id" else self.value(r, f)
        if isinstance(v, list) and "array_values" not in gen.caps:
            v = None
        return pick(r, {f: v}, {f: {"$exists": r.random() < 0.5}}, {f: {"$in": [v, None]}}, {})

    def other_type(self, gen):
        """Writes and reads of c3: content's other type."""
        from .generator import op
        r = gen.rng
        which = r.randrange(8)
        if which == 7:  # the stored collection read as a plain one: every type, with its discriminator
            return pick(r, op("count", {"count": "content", "query": {self.FIELD: pick(r, "C", "O", "Z", None)}},
                              "count"),
                        op("aggregate", {"aggregate": "content", "pipeline": [
                            {"$group": {"_id": f"${self.FIELD}", "n": {"$sum": 1}, "s": {"$sum": "$len"}}}],
                            "cursor": {}}, "cursor"))
        if which <= 1:
            docs = [self.other_document(gen) for _ in range(r.randrange(1, 4))]
            ordered = r.random() < 0.6 and "ordered_insert_stops" in gen.caps
            return op("insert", {"insert": "c3", "documents": docs, "ordered": ordered}, "write",
                      kind="write")
        if which == 2:
            multi = r.random() < 0.5
            q = self.other_filter(gen) if multi else {"_id": self.other_id(gen, False)}
            u = pick(r, {"$set": {"n": self.value(r, "n")}}, {"$inc": {"len": 1}},
                     {"$set": {"title": self.value(r, "title")}, "$unset": {"tags": ""}})
            upsert = r.random() < 0.2
            if upsert:
                q = {"$and": [{"_id": self.other_id(gen, r.random() < 0.5)}, q]}
            return op("update", {"update": "c3", "updates": [
                {"q": q, "u": u, "multi": multi, "upsert": upsert}]}, "write", kind="write")
        if which == 3:
            limit = pick(r, 0, 1)
            q = self.other_filter(gen) if limit == 0 else {"_id": self.other_id(gen, False)}
            return op("delete", {"delete": "c3", "deletes": [{"q": q, "limit": limit}]}, "write",
                      kind="write")
        if which == 4:
            return op("count", {"count": "c3", "query": self.other_filter(gen)}, "count")
        return op("find", {"find": "c3", "filter": self.other_filter(gen)}, "cursor")

    def discriminator(self, gen):
        """Operations on c naming the discriminator field: a read sees no such
        field (as the flat copy holds none); a write is refused (2)."""
        from .generator import op
        r = gen.rng
        v = pick(r, "C", "O", "Z", None, {"$exists": True}, {"$exists": False}, {"$ne": "C"})
        q = {self.FIELD: v}
        if r.random() < 0.3:
            q = {"$and": [{"title": self.value(r, "title")}, q]}
        which = r.randrange(10)
        if which == 0:
            return op("find", {"find": "c", "filter": q}, "cursor")
        if which == 1:
            return op("count", {"count": "c", "query": q}, "count")
        if which == 2:
            return op("distinct", {"distinct": "c", "key": self.FIELD, "query": {}}, "distinct")
        if which == 3:
            pipeline = pick(r, [{"$match": q}],
                            [{"$group": {"_id": f"${self.FIELD}", "n": {"$sum": 1}}}],
                            [{"$project": {self.FIELD: 1, "title": 1}}],
                            [{"$addFields": {"t": {"$ifNull": [f"${self.FIELD}", "none"]}}}])
            return op("aggregate", {"aggregate": "c", "pipeline": pipeline, "cursor": {}}, "cursor")
        if which == 4:
            stage = {"$lookup": {"from": "c", "localField": "k", "foreignField": self.FIELD, "as": "j"}}
            return op("aggregate", {"aggregate": "o", "pipeline": [
                stage, {"$unwind": {"path": "$j", "preserveNullAndEmptyArrays": True}}], "cursor": {}},
                "cursor", stages=["$lookup"], capability="lookup_local")
        if which == 5:
            return op("find", {"find": "c", "filter": {}, "projection": {self.FIELD: 1}}, "cursor")
        if which == 6:
            u = pick(r, {"$set": {self.FIELD: pick(r, "O", "C")}}, {"$unset": {self.FIELD: ""}},
                     {"$set": {"note": 1}})
            if self.FIELD in u.get("$set", u.get("$unset", {})):
                q = pick(r, q, {"_id": gen.ids.existing(r)})  # the update alone names it
            return op("update", {"update": "c", "updates": [
                {"q": q, "u": u, "multi": r.random() < 0.5, "upsert": r.random() < 0.2}]},
                "write", kind="write")
        if which == 7:
            return op("delete", {"delete": "c", "deletes": [{"q": q, "limit": 0}]}, "write", kind="write")
        if which == 8:
            return op("findAndModify", {"findAndModify": "c", "query": q, "sort": {"_id": 1},
                                        "update": {"$set": {"note": "fam"}}}, "fam", kind="write")
        return op("aggregate", {"aggregate": "c", "pipeline": [{"$sort": {self.FIELD: 1, "_id": 1}}],
                                "cursor": {}}, "cursor_ordered")

    def indexes(self, gen):
        """Unique, sparse and partial indexes on c and c3 (content holds both
        types' indexes: the same key on both must not collide), and
        dropIndexes by name."""
        from .generator import op
        r = gen.rng
        coll = "c" if r.random() < 0.7 else "c3"
        f = pick(r, "title", "n", "at") if coll == "c" else pick(r, "title", "n", "len")
        which = r.randrange(7)
        # One name, one key and options (the stand-in mishandles a name reused otherwise).
        if which == 0:
            spec = {"key": {f: 1}, "name": f"{f}_1"}
        elif which == 1:
            spec = {"key": {f: 1}, "name": f"{f}_u", "unique": True}
        elif which == 2:
            spec = {"key": {f: -1}, "name": f"{f}_su", "unique": True, "sparse": True}
        elif which == 3:
            spec = {"key": {f: 1, "_id": -1}, "name": f"{f}_p",
                    "partialFilterExpression": {"n": {"$exists": True}}}
        elif which == 6:  # refused: a partial index cannot say "one of the fields exists"
            spec = {"key": {f: 1, "at" if f != "at" else "n": 1}, "name": f"{f}_sc", "sparse": True}
        elif which == 4:
            name = pick(r, f"{f}_1", f"{f}_u", f"{f}_su", f"{f}_p", [f"{f}_1", f"{f}_u"])
            return op("dropIndexes", {"dropIndexes": coll, "index": name}, "ok", kind="write")
        else:
            return op("listIndexes", {"listIndexes": coll}, "listIndexes")
        # remold builds every index of c as a partial one on content: where the
        # backend's partial indexes hold every document, a unique one cannot be judged.
        return op("createIndexes", {"createIndexes": coll, "indexes": [spec]}, "ok", kind="write",
                  capability="partial_indexes" if len(spec) > 2 else None)



class ArrayAside(Family):
    """A rule that stores c's array ``ARRAY`` partly aside behind a hidden
    marker ``MARKER`` (patterns/array_aside/): the outlier's pages, the
    history's one document per element. Arrays of 0..12 elements cross the
    rule's bound all the time. Each sequence starts with documents written
    before the rule (long arrays stored whole, no marker, on the backend
    directly), which remold reads as they are. Besides the generator's own
    operations (whose fields include ``<array>.u`` and ``<array>.4``, an
    element aside), the family sends $push by _id (plain, $each,
    $position/$slice/$sort), updates of the array by other filters ($push,
    $addToSet, $pull, $pullAll, $pop, $set of the array or of an element,
    positional, $unset, $rename), findAndModify on it, reads filtered on
    elements ($elemMatch, $in, $size, $all, positions), projections of the
    array, distinct of it and pipelines unwinding it, $out and $merge of c
    into a plain collection, now and then the marker field named (refused,
    2) and a unique index on the array. The rule's own collection is not
    compared (remold lists it)."""
    # remold's guards (a document unchanged since read) must see an append:
    # the stand-in's $expr takes a shorter array for equal.
    requires: tuple = ("expr_array_equality",)
    names = LOGICAL + ("o3",)
    reads_forwarded = True  # the backend's own cursor: a find sent as is (its batches made whole) or one aggregate over the view
    op_needs = {
        # c's database holds the rule's collection and its indexes.
        "dropIndexes": ("drop_indexes_beside_others",),
    }
    ARRAY = ""
    MARKER = ""
    # Documents written before the rule; "ARRAY" stands for the array's name.
    SEED = ({"_id": 10_000, "title": "a", "n": 1, "ARRAY": [1, "a", 2, "b", 3, "c", 4, {"u": "a", "q": 1}]},
            {"_id": 10_001, "ARRAY": [{"u": "a", "q": 1}, {"u": "b"}, {"u": "c", "q": 2}, {"u": "a", "q": 3}],
             "title": "s1"},
            {"_id": 10_002, "title": "b", "ARRAY": [2, 1]})

    def __init__(self):
        a = self.ARRAY
        self.fields = ("_id", "title", "n", a, "note", f"{a}.u", f"{a}.4")
        self.join_fields = (a, "title", f"{a}.u")
        self.empty_array_fields = (a, f"{a}.u", f"{a}.4")

    def setting(self) -> tuple[str, int]:
        """The rule's bound, (its key in the rule file, its value): how many
        elements the document embeds (or keeps a copy of)."""
        raise NotImplementedError

    def rules(self, db):
        key, bound = self.setting()
        return {"c.yaml": "\n".join([
            f"namespace: {db}.c", f"pattern: {self.name}", f"{self.name}:", f"  array: {self.ARRAY}",
            f"  {key}: {bound}"]) + "\n"}

    def seed(self, stored_db, flat_db):
        for db in (stored_db, flat_db):
            db.c.insert_many([{(self.ARRAY if k == "ARRAY" else k): v for k, v in d.items()} for d in self.SEED])

    def join_values(self):
        return [None, 1, "a", 2.5, "b", "s1"]

    def element(self, rng, docs=None):
        """One element of the array: a scalar or a small document."""
        if docs is None:
            docs = rng.random() < 0.4
        if docs:
            e = {"u": pick(rng, "a", "b", "c")}
            put(e, "q", pick(rng, 1, 2, 3, MISSING))
            return e
        return pick(rng, 1, 2, 3, 4, "a", "b", "c", None, 2.5, Int64(2))

    def array(self, rng, n=None):
        """0..12 elements, mostly all scalars or all documents."""
        if n is None:
            n = pick(rng, 0, 1, 2, 3, 3, 4, 4, 5, 6, 7, 8, 9, 10, 11, 12)
        kind = rng.random()
        if kind < 0.45:
            return [self.element(rng, False) for _ in range(n)]
        if kind < 0.9:
            return [self.element(rng, True) for _ in range(n)]
        return [pick(rng, self.element(rng), [1, 2], []) for _ in range(n)]

    def document(self, rng, ids):
        doc = {"_id": ids.next(rng)}
        put(doc, "title", self.value(rng, "title"))
        if rng.random() < 0.6:
            doc["n"] = self.value(rng, "n")
        kind = rng.random()
        if kind < 0.86:
            doc[self.ARRAY] = self.array(rng)
        elif kind < 0.94:
            pass  # no array at all
        else:
            doc[self.ARRAY] = pick(rng, None, "a", 5, {"u": "a"})  # not an array
        if rng.random() < 0.4:
            doc["note"] = self.value(rng, "note")
        if rng.random() < 0.01:  # refused (2): the marker is remold's
            doc[self.MARKER] = pick(rng, 1, {"key": 1})
        return doc

    def value(self, rng, field):
        if field == "title":
            return pick(rng, "a", "b", "s1", None, "", 1)
        if field == "n":
            return pick(rng, 1, 2, 2.5, Int64(3), None, "a")
        if field == self.ARRAY:
            return self.element(rng) if rng.random() < 0.8 else self.array(rng)
        if field == f"{self.ARRAY}.u":
            return pick(rng, "a", "b", "c", None, 1)
        if field == f"{self.ARRAY}.4":
            return self.element(rng)
        return super().value(rng, field)

    # -- what the generator does besides its own operations

    def extra_operations(self, gen):
        return [(lambda: self.push_by_id(gen), 14), (lambda: self.array_update(gen), 10),
                (lambda: self.array_read(gen), 14), (lambda: self.array_aggregate(gen), 6),
                (lambda: self.array_fam(gen), 5), (lambda: self.out_of_c(gen), 1),
                (lambda: self.marker(gen), 1), (lambda: self.unique_index(gen), 1)]

    def elements(self, rng, low=0, high=5):
        docs = rng.random() < 0.4
        return [self.element(rng, docs) for _ in range(rng.randrange(low, high + 1))]

    def element_filter(self, gen) -> dict:
        """A filter on the array's elements (or on the array beside another field)."""
        r, a = gen.rng, self.ARRAY
        e, e2 = self.element(r), self.element(r)
        which = r.randrange(18)
        if which == 0:
            return {a: e}
        if which == 1:
            return {a: {"$elemMatch": pick(r, {"u": pick(r, "a", "b"), "q": {"$gte": 2}}, {"$gte": 2, "$lt": 4},
                                           {"$in": ["a", "c"]}, {"q": {"$exists": False}})}}
        if which == 2:
            return {a: {"$in": [e, e2]}}
        if which == 3:
            return {a: {"$size": r.randrange(0, 13)}}
        if which == 4:
            return {a: {"$all": [e, e2] if r.random() < 0.6 else [e]}}
        if which == 5:  # positional counts: more than k elements
            return {f"{a}.{r.randrange(0, 12)}": {"$exists": r.random() < 0.7}}
        if which == 6:
            return {f"{a}.{r.randrange(0, 12)}": e}
        if which == 7:
            return {f"{a}.u": pick(r, "a", "b", "c", {"$in": ["a", "b"]}, {"$exists": False})}
        if which == 8:
            return {a: pick(r, {"$exists": r.random() < 0.5}, {"$type": pick(r, "array", "string", "null")})}
        if which == 9:
            return {a: {"$not": {"$size": pick(r, 0, 3, 4)}}}
        if which == 10:
            return {"$or": [{a: e}, {"title": pick(r, "a", "b")}]}
        if which == 11:
            return {"title": pick(r, "a", "b", "s1"), a: e}
        if which == 12:
            return {a: pick(r, {"$nin": [e]}, {"$ne": e})}
        if which == 13 and "array_values" in gen.caps:
            return {a: self.array(r, r.randrange(0, 6))}  # the array as a whole
        if which == 14:
            size = {"$size": {"$cond": [{"$isArray": f"${a}"}, f"${a}", []]}}
            return {"$expr": {pick(r, "$gt", "$lte"): [size, r.randrange(0, 10)]}}
        if which == 15:
            return {f"{a}.q": {"$gte": 2}}
        if which == 16:
            return {"$and": [{a: {"$size": pick(r, 4, 5, 7)}}, {"title": {"$exists": True}}]}
        return gen.filter()

    def push_spec(self, rng, caps):
        """What a $push onto the array pushes: a value, $each, or $each with
        modifiers ($slice: 0 only where the backend empties the array)."""
        which = rng.randrange(9)
        if which <= 2:
            return self.element(rng)
        if which <= 4:
            return {"$each": self.elements(rng, 0, 6)}
        spec = {"$each": self.elements(rng, 0, 4)}
        if which == 5 or rng.random() < 0.2:
            spec["$position"] = pick(rng, 0, 1, 2, 3, 5, 10, -1, -4)
        if which == 6 or rng.random() < 0.2:
            spec["$slice"] = pick(rng, 0, 2, 3, 5, 8, -2, -5)
            if spec["$slice"] == 0 and "push_slice_zero" not in caps:
                spec["$slice"] = 1
        if which >= 7:
            docs = all(isinstance(v, dict) for v in spec["$each"]) and rng.random() < 0.7
            spec["$sort"] = {"u": pick(rng, 1, -1), "q": 1} if docs else pick(rng, 1, -1)
        return spec

    def push_by_id(self, gen):
        """A $push onto the array of one document by _id: onto the tail of an overflowed one."""
        from .generator import op
        r = gen.rng
        _id = gen.ids.existing(r)
        q = pick(r, {"_id": _id}, {"_id": _id}, {"_id": {"$eq": _id}}, {"$and": [{"_id": _id}, {"title": {"$ne": "b"}}]})
        u = {"$push": {self.ARRAY: self.push_spec(r, gen.caps)}}
        if r.random() < 0.25:
            u[pick(r, "$inc", "$set")] = {"pushes": 1}
        if r.random() < 0.1:
            cmd = {"findAndModify": "c", "query": q, "update": u, "new": r.random() < 0.5}
            if r.random() < 0.5:
                cmd["fields"] = pick(r, {self.ARRAY: 1}, {self.ARRAY: 0}, {"title": 1, self.ARRAY: 1})
            return op("findAndModify", cmd, "fam", kind="write")
        statements = [{"q": q, "u": u, "upsert": r.random() < 0.08}]
        if r.random() < 0.1 and "ordered_update_stops" in gen.caps:
            statements.append({"q": {"_id": gen.ids.existing(r)}, "u": {"$push": {self.ARRAY: self.push_spec(r, gen.caps)}}})
        return op("update", {"update": "c", "updates": statements}, "write", kind="write")

    def array_update(self, gen):
        """Updates that change the array, selected by other filters than one _id."""
        from .generator import op
        r, a = gen.rng, self.ARRAY
        e = self.element(r)
        which = r.randrange(16)
        q = self.element_filter(gen) if r.random() < 0.6 else gen.filter()
        if which == 0:
            u = {"$push": {a: self.push_spec(r, gen.caps)}}
        elif which == 1:
            u = {"$addToSet": {a: pick(r, e, {"$each": self.elements(r, 0, 4)})}}
        elif which == 2:
            u = {"$pull": {a: pick(r, e, {"$in": [e, self.element(r)]}, {"u": pick(r, "a", "b")},
                                   {"$gte": 2}, {"q": {"$exists": False}})}}
        elif which == 3:
            u = {"$pullAll": {a: self.elements(r, 1, 3)}}
        elif which == 4:
            u = {"$pop": {a: pick(r, 1, -1)}}
        elif which == 5:
            u = {"$set": {a: self.array(r)}}
        elif which == 6:
            u = {"$set": {f"{a}.{pick(r, 0, 2, 3, 4, 7, 13)}": e}}
        elif which == 7:
            u = {"$unset": {pick(r, a, a, f"{a}.1", f"{a}.5"): ""}}
        elif which == 8:
            u = {pick(r, "$inc", "$set"): {"pushes": 1}}
        elif which == 9:  # the positional operator: the filter names an element
            q = {a: pick(r, e, {"$elemMatch": {"u": pick(r, "a", "b")}}, {"$in": [e, self.element(r)]})}
            u = {"$set": {f"{a}.$": self.element(r)}}
        elif which == 10:
            u = {"$set": {f"{a}.$[x]": "x"}}
            return op("update", {"update": "c", "updates": [
                {"q": q, "u": u, "multi": True, "arrayFilters": [{"x": pick(r, e, {"$gte": 2})}]}]},
                "write", kind="write")
        elif which == 11:
            u = pick(r, {"$rename": {a: "moved"}}, {"$rename": {"note": a}})
        elif which == 12:
            u = {"$set": {"note": self.value(r, "note")}, "$push": {a: e}}
        elif which == 13:
            u = {"$inc": {f"{a}.$[]": 1}} if r.random() < 0.3 else {"$mul": {f"{a}.{pick(r, 0, 4)}": 2}}
        elif which == 14:  # a replacement selected by the array
            u = gen.f.document(r, gen.ids)
            u.pop("_id")
            return op("update", {"update": "c", "updates": [
                {"q": {"$and": [{"_id": gen.ids.existing(r)}, q]}, "u": u, "upsert": r.random() < 0.15}]},
                "write", kind="write")
        else:
            u = {"$addToSet": {a: e}, "$inc": {"pushes": 1}}
        multi = r.random() < 0.7
        upsert = r.random() < 0.08
        if upsert or not multi:  # one document: by _id (which one a filter meets first is unspecified)
            q = {"$and": [{"_id": gen.ids.existing(r)}, q]}
        return op("update", {"update": "c", "updates": [{"q": q, "u": u, "multi": multi, "upsert": upsert}]},
                  "write", kind="write")

    def array_fam(self, gen):
        """findAndModify that reads or changes the array."""
        from .generator import op
        r, a = gen.rng, self.ARRAY
        q = pick(r, {"_id": gen.ids.existing(r)}, self.element_filter(gen))
        cmd = {"findAndModify": "c", "query": q, "sort": {"_id": pick(r, 1, -1)}}
        if r.random() < 0.3:
            cmd["remove"] = True
        else:
            cmd["update"] = pick(r, {"$push": {a: self.push_spec(r, gen.caps)}}, {"$pull": {a: self.element(r)}},
                                 {"$set": {"note": "fam"}}, {"$pop": {a: 1}},
                                 {"title": "rep", a: self.array(r)}, {"$set": {f"{a}.4": "x"}})
            cmd["new"] = r.random() < 0.5
            if r.random() < 0.15:
                cmd["upsert"] = True
                cmd["query"] = {"$and": [{"_id": gen.ids.existing(r)}, q]}
        if r.random() < 0.5:
            cmd["fields"] = pick(r, {a: 1}, {a: 0}, {"title": 1}, {"_id": 0, a: 1}, {f"{a}.u": 1})
        return op("findAndModify", cmd, "fam", kind="write")

    def projection(self, gen):
        r, a = gen.rng, self.ARRAY
        p = pick(r, {a: 1}, {a: 0}, {"title": 1, "n": 1}, {a: 0, "note": 0}, {f"{a}.u": 1}, {"_id": 0, a: 1},
                 {"title": 0}, {f"{a}.q": 0, "title": 0}, None, None)
        if p is None and r.random() < 0.15:  # projection operators
            p = pick(r, {a: {"$slice": pick(r, 2, -2, [3, 4])}}, {a: {"$elemMatch": {"u": "a"}}})
        return p

    def array_read(self, gen):
        """Reads selecting by the array's elements: find (sorted, skipped, limited,
        projected), count, distinct."""
        from .generator import op
        r, a = gen.rng, self.ARRAY
        q = self.element_filter(gen)
        which = r.randrange(10)
        if which <= 5:
            cmd = {"find": "c", "filter": q}
            shape = "cursor"
            if r.random() < 0.5:
                shape = "cursor_ordered"
                sort = gen.sort()
                if r.random() < 0.2 and "sort_empty_array_ties" in gen.caps:
                    sort = {a: pick(r, 1, -1), "_id": 1}
                cmd["sort"] = sort
                if r.random() < 0.4:
                    cmd["skip"] = r.randrange(0, 4)
                if r.random() < 0.5:
                    cmd["limit"] = r.randrange(1, 6)
            p = self.projection(gen)
            if p:
                cmd["projection"] = p
            if r.random() < 0.3:
                cmd["batchSize"] = pick(r, 1, 2)
            return op("find", cmd, shape)
        if which <= 7:
            cmd = {"count": "c", "query": q}
            if r.random() < 0.2:
                cmd["limit"], cmd["skip"] = r.randrange(1, 4), r.randrange(0, 3)
            return op("count", cmd, "count")
        key = pick(r, a, a, f"{a}.u", f"{a}.4", "title", "n")
        return op("distinct", {"distinct": "c", "key": key, "query": pick(r, q, {})}, "distinct")

    def array_aggregate(self, gen):
        from .generator import op
        r, a = gen.rng, self.ARRAY
        q = self.element_filter(gen)
        guarded = {"$cond": [{"$isArray": f"${a}"}, f"${a}", []]}
        which = r.randrange(8)
        shape = "cursor"
        if which == 0:
            pipeline = [{"$match": q}, {"$unwind": f"${a}"}, {"$group": {"_id": f"${a}", "n": {"$sum": 1}}}]
        elif which == 1:
            pipeline = [{"$unwind": {"path": f"${a}", "includeArrayIndex": "i",
                                     "preserveNullAndEmptyArrays": r.random() < 0.5}},
                        {"$match": {"i": {"$gte": r.randrange(0, 5)}}}, {"$project": {a: 1, "i": 1}}]
        elif which == 2:
            pipeline = [{"$match": q}, {"$project": {"k": {"$size": guarded}, "last": {"$arrayElemAt": [guarded, -1]},
                                                     "mid": {"$slice": [guarded, 2, 3]}}}]
        elif which == 3:
            pipeline = [{"$match": q}, {"$project": {a: 1, "title": 1}}]
        elif which == 4:
            pipeline = [{"$match": q}, {"$sort": {"_id": 1}}, {"$skip": r.randrange(0, 3)},
                        {"$limit": r.randrange(1, 6)}]
            shape = "cursor_ordered"
        elif which == 5:
            # Accumulators whose result does not depend on the order documents
            # reach the group: DocumentDB feeds a $group after a $lookup and a
            # $sort in another order than the sort's (the view's $lookup
            # would make a $push differ from the flat side's).
            pipeline = [{"$group": {"_id": "$title", "most": {"$max": f"${a}"}, "least": {"$min": f"${a}"},
                                    "n": {"$sum": {"$size": guarded}}}}]
        elif which == 6:
            pipeline = [{"$match": q}, {"$unwind": f"${a}"}, {"$count": "n"}]
        else:
            pipeline = [{"$addFields": {"k": {"$size": guarded}}}, {"$match": {"k": {"$gt": self.setting()[1]}}},
                        {"$project": {"k": 1, "title": 1}}]
        return op("aggregate", {"aggregate": "c", "pipeline": pipeline, "cursor": {}}, shape)

    def out_of_c(self, gen):
        """$out of c (through the view) into a plain collection, and reads of it."""
        from .generator import op
        r = gen.rng
        if r.random() < 0.5:
            return op("find", {"find": "o3", "filter": {}}, "cursor")
        if r.random() < 0.5:
            pipeline = [{"$match": self.element_filter(gen)}, {"$out": "o3"}]
            return op("aggregate", {"aggregate": "c", "pipeline": pipeline, "cursor": {}}, "cursor",
                      kind="write", stages=["$out"], capability="out")
        pipeline = [{"$match": self.element_filter(gen)}, {"$project": {"title": 1, self.ARRAY: 1}},
                    {"$merge": {"into": "o3", "whenMatched": pick(r, "replace", "merge", "keepExisting")}}]
        return op("aggregate", {"aggregate": "c", "pipeline": pipeline, "cursor": {}}, "cursor",
                  kind="write", stages=["$merge"], capability="merge")

    def marker(self, gen):
        """Operations naming the marker field: a write is refused (2), a read
        filtered on it too; a projection or a later stage sees no such field."""
        from .generator import op
        r, m = gen.rng, self.MARKER
        which = r.randrange(6)
        if which == 0:
            return op("find", {"find": "c", "filter": {m: {"$exists": pick(r, True, False)}}}, "cursor")
        if which == 1:
            return op("find", {"find": "c", "filter": {}, "projection": {m: 1}}, "cursor")
        if which == 2:
            return op("aggregate", {"aggregate": "c", "pipeline": [
                {"$sort": {"_id": 1}}, {"$project": {"x": {"$ifNull": [f"${m}", "none"]}}}], "cursor": {}}, "cursor")
        if which == 3:
            return op("update", {"update": "c", "updates": [
                {"q": {"_id": gen.ids.existing(r)}, "u": {"$set": {f"{m}.pages": 0}}}]}, "write", kind="write")
        if which == 4:
            return op("count", {"count": "c", "query": {f"{m}.key": {"$exists": True}}}, "count")
        return op("insert", {"insert": "c", "documents": [{"_id": gen.ids.next(r), m: {"key": 1}}]}, "write",
                  kind="write")

    def unique_index(self, gen):
        """A unique index on the array: MongoDB holds every element of every
        document in it (beside the title, it builds on the seeded documents)."""
        from .generator import op
        r = gen.rng
        key = pick(r, {"title": 1, self.ARRAY: 1}, {"title": 1, self.ARRAY: 1}, {self.ARRAY: 1},
                   {f"{self.ARRAY}.u": 1})
        name = "_".join(key) + "_u"
        return op("createIndexes", {"createIndexes": "c", "indexes": [{"key": key, "name": name, "unique": True}]},
                  "ok", kind="write")


class Outlier(ArrayAside):
    """c's array ``buyers`` keeps its first THRESHOLD elements; the rest lives
    in pages of ``c_overflow`` (patterns/outlier/). The threshold is small so
    that arrays overflow all the time (a page of 3, a tail appended by
    $push)."""
    name = "outlier"
    ARRAY = "buyers"
    THRESHOLD = 3
    MARKER = "_remold_outlier"

    def setting(self):
        return "threshold", self.THRESHOLD


class History(ArrayAside):
    """Every element of c's array ``events`` is a document {_id, key, parent,
    seq, event} of ``c_history`` (patterns/history/); the document keeps a
    copy of its latest ``keep`` elements. ``keep`` is 2, or chosen by the
    long run's seed (0..3: the seed modulo 4), so that a copy of none, some
    or all of a short array is met. A $push by _id appends one history
    document per element; other writes on the array fold the document whole
    and move it aside again. The view looks the events up by the equality
    $lookup and orders them with $let, $filter and $map (the stand-in lacks
    $let: its expr_array_equality gap skips it first)."""
    name = "history"
    ARRAY = "events"
    MARKER = "_remold_history"
    keep = 2

    def configure(self, seed):
        self.keep = seed % 4
        return f"keep {self.keep}"

    def setting(self):
        return "keep", self.keep


FAMILIES = {f.name: f for f in (Bucket(), Attribute(), Computed(), Subset(), ExtendedReference(), Versioned(),
                                Polymorphic(), Outlier(), History())}
