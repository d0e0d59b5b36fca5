"""Runs a sequence on both sides, operation by operation, and judges every
difference: equal outcomes pass; a remold error (or write error) where the
flat side succeeded is a refusal, documented or not (``table.Table``);
anything else is an unexplained difference. After each write the state of
the collections it may change is compared too. After a documented refusal
(and, for bucket and attribute, after a difference in a document write) the
flat side is resynchronised from remold's view so the rest of the sequence
still tests something; otherwise the sequence stops at its first difference
that changed state, so later operations do not report its consequences.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

from pymongo import IndexModel
from pymongo.errors import BulkWriteError, OperationFailure, PyMongoError

from .compare import canon, field_order_differs, show
from .execute import Outcome, read_all, run
from .families import Family
from .table import Table


@dataclass
class Difference:
    index: int
    op: dict
    cls: tuple          # (family, command or stages, what differs): one class per bug
    detail: str


@dataclass
class Stats:
    sequences: int = 0
    operations: int = 0
    seconds: float = 0.0
    covered: Counter = field(default_factory=Counter)     # command or stage -> times both answered
    refusals: Counter = field(default_factory=Counter)    # documented refusals by kind
    documented: Counter = field(default_factory=Counter)  # documented differences ("differs:") by kind
    differences: Counter = field(default_factory=Counter) # unexplained, by class
    skipped: int = 0      # operations the backend cannot judge (see Harness.absent_before)


CRUD = ("insert", "update", "delete", "findAndModify")


def names_of(op: dict) -> list[str]:
    return [*op["stages"], op["label"]]


def label(op: dict) -> str:
    return "+".join(names_of(op)) if op["stages"] else op["label"]


class Harness:
    def __init__(self, family: Family, remold_db, flat_db, table: Table, capabilities: set[str]):
        self.f, self.r, self.flat, self.table = family, remold_db, flat_db, table
        self.backend = flat_db.client  # the backend itself, for a reset remold refuses
        self.caps = capabilities

    def reset(self) -> None:
        """Fresh databases on both sides: remold's dropped through remold so
        that it forgets what it knew (sequences end with a dropDatabase that is
        judged like any operation), or on the backend if remold fails it."""
        try:
            self.r.client.drop_database(self.r.name)
        except OperationFailure:
            self.backend.drop_database(self.r.name)
        self.flat.client.drop_database(self.flat.name)
        assert not self.backend[self.r.name].list_collection_names(), "remold's database survived its drop"
        for db in (self.r, self.flat):
            self.f.setup(db)
        self.f.seed(self.backend[self.r.name], self.flat)
        self.f.maintain(self.flat)
        self.in_sync = True
        self.updated = False  # no document updated in place yet (see field_order)

    def run(self, ops: list[dict], stats: Optional[Stats] = None,
            stop_class: Optional[tuple] = None) -> list[Difference]:
        """Runs ``ops`` on fresh collections; returns the unexplained differences
        (stopping at the first of ``stop_class`` if given)."""
        self.reset()
        found: list[Difference] = []
        for index, op in enumerate(ops):
            for d in self.step(index, op, stats):
                found.append(d)
                if stop_class is not None and d.cls == stop_class:
                    return found
            if not self.in_sync:
                break  # the rest of the sequence would only show consequences
        return found

    def step(self, index: int, op: dict, stats: Optional[Stats]) -> list[Difference]:
        loose, names = self.f.loose, self.f.names
        if "$group" in op["stages"] or any("$group" in stage for stage in op["cmd"].get("pipeline", ())):
            # Of equal numbers (7 and Int64(7)), which one a group's _id
            # holds depends on the order the group met them in, MongoDB's too
            # (a plain aggregate lists no stages: its pipeline says).
            loose = loose | {"_id"}
        if self.absent_before(op):
            if stats:
                stats.skipped += 1
            return []  # the backend would create c where MongoDB does not: not judged
        got = run(self.r, op, names, loose, self.caps)
        if self.f.maintains_with_writes and op["kind"] == "write" and len(self.statements(op)) > 1:
            want = self.run_flat_statements(op, names, loose)
        else:
            want = run(self.flat, op, names, loose, self.caps, self.f.returned)
        if op["kind"] == "write" and not want.error:
            self.f.maintain(self.flat)
            self.updated |= op["label"] in ("update", "findAndModify") or "$merge" in op["stages"]
        if stats:
            stats.operations += 1
        diffs = []
        got.statements = want.statements = self.statements(op)
        if self.same(got, want, multi=self.partial(op, got) and self.partial(op, want)):
            order = self.field_order(got, want, loose)
            if order:
                diffs.append(Difference(index, op, (self.f.name, label(op), "field order differs"), order))
            if op["kind"] == "write" and self.partial(op, got):
                self.resync()  # which documents a failed multi-document write changed is unspecified
            elif op["kind"] == "write":
                diffs += self.state_check(index, op)
            if stats and not got.failed and not diffs:
                for name in names_of(op):
                    stats.covered[name] += 1
            return self.count(diffs, stats)
        if self.estimated(op, got, want):
            if stats:
                stats.documented["count without a query (count, collStats): the backend's estimate (docs/backends.md)"] += 1
            return []
        if self.repeated(op, got, want):
            if stats:
                stats.documented["a cursor without a sort returned a document twice: the backend's "
                                 "(docs/backends.md, 8)"] += 1
            return []
        refusal = self.refusal(got, want)
        if refusal is not None:
            where = self.table.documents_refusal(names_of(op), self.f.name, refusal)
            if where is not None:  # documented (even where the flat side fails otherwise)
                if stats:
                    stats.refusals[f"{where} refused ({', '.join(map(str, refusal))})"] += 1
                self.resync()
                return []
        else:
            kind = self.difference_kind(got, want)
            where = kind and self.table.documents_difference(names_of(op), self.f.name)
            if where:  # the table's cell says how this rule differs here
                if stats:
                    stats.documented[f"{where}: {kind}"] += 1
                self.resync()
                return []
        if refusal is not None or (got.failed and not want.failed):
            what = f"remold refused ({got.codes()}), not documented in the table of docs/what-works.md"
        elif want.failed and not got.failed:
            what = f"flat failed ({want.codes()}), remold succeeded"
        elif got.failed and want.failed:
            what = f"different errors (remold {got.codes()}, flat {want.codes()})"
        else:
            what = "different results"
        detail = f"remold: {got.brief()}\n    flat:   {want.brief()}"
        diffs.append(Difference(index, op, (self.f.name, label(op), what), detail))
        if op["kind"] == "write":
            self.after_difference(op, refused=got.error is not None)
        return self.count(diffs, stats)

    @staticmethod
    def statements(op: dict) -> list:
        cmd = op["cmd"]
        for key in ("updates", "deletes", "documents"):
            if isinstance(cmd.get(key), list):
                return cmd[key]
        return []

    def run_flat_statements(self, op: dict, names: tuple, loose: frozenset) -> Outcome:
        """A write of several statements on the flat side, one statement at a
        time, with the oracle's part for what remold writes together with a
        statement's documents (``Family.maintain_written``): a later
        statement of the same command sees it (its filter on a computed
        field, say). What remold maintains after the command, the oracle
        maintains after it too. The replies are merged as one write
        command's (indexes of the statements; an ordered write stops at its
        first error)."""
        cmd = op["cmd"]
        key = next(k for k in ("updates", "deletes", "documents") if isinstance(cmd.get(k), list))
        ordered = cmd.get("ordered", True)
        n, upserted, errors = 0, [], []
        for i, statement in enumerate(cmd[key]):
            # The documents it writes whole: an insert's, a replacement's
            # (the one its filter matched, or the one it upserted).
            whole, before = [], None
            if key == "documents" and isinstance(statement, dict) and "_id" in statement:
                whole = [statement["_id"]]
            elif key == "updates" and cmd.get("update") == "c" and isinstance(statement.get("u"), dict) and \
                    not any(k.startswith("$") for k in statement["u"]):
                try:
                    whole = [d["_id"] for d in self.flat.c.find(statement.get("q", {}), {"_id": 1}).limit(1)]
                    before = {repr(d["_id"]) for d in self.flat.c.find({}, {"_id": 1})}
                except PyMongoError:
                    pass  # a filter the backend refuses: the statement fails the same way
            one = run(self.flat, dict(op, cmd={**cmd, key: [statement]}), names, loose, self.caps, self.f.returned)
            if one.error is not None:
                return one
            if before is not None:
                whole += [d["_id"] for d in self.flat.c.find({}, {"_id": 1}) if repr(d["_id"]) not in before]
            self.f.maintain_written(self.flat, whole)
            n += one.value[0] or 0
            upserted += [(i, _id) for _, _id in one.value[1]]
            errors += [(i, code) for _, code in one.write_errors]
            if one.write_errors and ordered:
                break
        return Outcome(value=(n, tuple(upserted)), write_errors=tuple(errors))

    @staticmethod
    def count(diffs, stats):
        if stats:
            for d in diffs:
                stats.differences[d.cls] += 1
        return diffs

    def absent_before(self, op: dict) -> bool:
        """On a backend whose no-op writes create the collection (MongoDB's do
        not): is c absent, so that the write cannot be judged?"""
        if "update_no_create" in self.caps or op["label"] not in ("update", "findAndModify", "delete"):
            return False
        return "c" not in self.flat.list_collection_names(filter={"name": "c"})

    def estimated(self, op: dict, got: Outcome, want: Outcome) -> bool:
        """A count without a query (the count command, collStats, the
        $collStats stage) that answered otherwise on the two sides, where a
        side's answer is not its exact count (the documents a $group counts,
        through remold on its side): the backend estimated it from its
        statistics (DocumentDB does), as it does for a plain collection.
        Exact counts that differ are a difference."""
        cmd, shape = op["cmd"], op["shape"]
        if got.failed or want.failed:
            return False
        if shape == "count" and op["label"] == "count" and not cmd.get("query"):
            name, as_answered = cmd["count"], lambda n: n
        elif shape == "collStats":
            name, as_answered = cmd["collStats"], lambda n: n
        elif shape == "collStatsStage":
            name, as_answered = cmd["aggregate"], lambda n: [n]
        else:
            return False
        try:
            exact = [db[name].count_documents({}) for db in (self.r, self.flat)]
        except PyMongoError:
            return False  # a side cannot count exactly: the answers stay a difference
        return exact[0] == exact[1] and (got.value, want.value) != tuple(as_answered(n) for n in exact)

    def repeated(self, op: dict, got: Outcome, want: Outcome) -> bool:
        """A cursor without a sort whose answers differ only in documents
        returned more than once: the backend's getMore returned a document
        updated before the read again (DocumentDB does, docs/backends.md 8).
        The plain collection's repeats are the backend's; so are remold's
        where its answer to a read is the backend's cursor (``reads_forwarded``).
        Other repeats through remold stay differences: remold's cursors are
        its own to get right."""
        if op["shape"] != "cursor" or got.failed or want.failed:
            return False
        once = sorted(set(want.value), key=repr)
        if sorted(set(got.value), key=repr) != once:
            return False
        if len(once) != len(want.value) and once == got.value:
            return True
        return self.f.reads_forwarded and len(once) != len(got.value)

    @staticmethod
    def over_several(statements: list, index: int) -> bool:
        return 0 <= index < len(statements) and bool(
            statements[index].get("multi") or statements[index].get("limit") == 0)

    @staticmethod
    def partial(op: dict, outcome: Outcome) -> bool:
        """A statement over several documents failed: MongoDB leaves open which
        of them it had already changed."""
        statements = op["cmd"].get("updates") or op["cmd"].get("deletes") or []
        return bool(outcome.write_errors) and any(
            st.get("multi") or st.get("limit") == 0 for st in statements)

    def same(self, a: Outcome, b: Outcome, multi: bool = False) -> bool:
        """``multi``: both failed in a statement over several documents, where
        MongoDB leaves open which document it reached first, so which error
        it reports: the failing statements are compared, not the codes."""
        if multi:
            # Up to the first statement over several documents that failed:
            # the same statements failed. After it, what the later statements
            # meet depends on which documents it had changed, which MongoDB
            # leaves open too.
            failed = sorted({i for i, _ in a.write_errors} | {i for i, _ in b.write_errors})
            cut = next((i for i in failed if self.over_several(a.statements, i)), None)
            if a.error != b.error:
                return False
            if cut is not None:
                return [i for i, _ in a.write_errors if i <= cut] == [i for i, _ in b.write_errors if i <= cut]
            if [i for i, _ in a.write_errors] != [i for i, _ in b.write_errors]:
                return False
        elif a.error != b.error or a.write_errors != b.write_errors:
            return False
        if a.write_errors and "write_error_counts" not in self.caps:
            return a.value[1:] == b.value[1:]  # the backend's n counts failed statements
        return a.value == b.value

    @staticmethod
    def difference_kind(got: Outcome, want: Outcome) -> Optional[str]:
        """What a table cell saying "differs:" covers: both sides answered, with
        other results; or remold accepted documents the flat side refused as
        duplicate keys only (a bucket rule does not enforce `_id`)."""
        if got.error is not None or want.error is not None or got.write_errors:
            return None
        if not want.write_errors:
            return "different results"
        if all(code == 11000 for _, code in want.write_errors):
            return "duplicate _id accepted"
        return None

    @staticmethod
    def refusal(got: Outcome, want: Outcome) -> Optional[tuple[int, ...]]:
        """The codes when remold refused: a command error's, or those of the
        write errors the flat side does not have (a refused statement of a
        bulk write is a write error at its index, each with its code)."""
        if got.error is not None:
            return (got.error,)
        extra = [code for index, code in got.write_errors if (index, code) not in want.write_errors]
        if extra and want.error is None:
            return tuple(sorted(set(extra)))
        return None

    def field_order(self, got: Outcome, want: Outcome, loose: frozenset) -> Optional[str]:
        if not self.f.field_order_oracle:
            return None
        if "field_order" not in self.caps and self.updated:
            return None  # the backend orders updated fields unlike MongoDB: nothing to compare with
        if not got.raw or not want.raw or len(got.raw) != len(want.raw):
            return None
        if self.table.reorders_fields(self.f.name):
            return None  # the table says this rule gives fields in another order
        # Documents alike but for their field order pair with their like
        # (the second key): a read without a sort may return them in either
        # order, and remold's own writes move documents. Alike as the
        # operation's answers were judged (`loose`: a $group's _id by value,
        # 7 with Int64(7); seed 3631 paired a group of 2 with another).
        key = lambda d: (repr(canon(d, loose)), show(d))
        for a, b in zip(sorted(got.raw, key=key), sorted(want.raw, key=key)):
            if field_order_differs(a, b):
                return f"remold: {show(a)}\n    flat:   {show(b)}"
        return None

    def state_check(self, index: int, op: dict) -> list[Difference]:
        diffs = []
        for name in self.touched(op):
            got = read_all(self.r, name, self.f.loose, self.f.normalize_state)
            want = read_all(self.flat, name, self.f.loose, self.f.normalize_state)
            if got != want:
                detail = f"{name} through remold: {show(got, 900)}\n    flat: {show(want, 900)}"
                diffs.append(Difference(index, op, (self.f.name, label(op), f"state of {name} differs after it"),
                                        detail))
        if diffs:
            self.after_difference(op)
        return diffs

    def after_difference(self, op: dict, refused: bool = False) -> None:
        """Go on from remold's state after a document write if the family's
        oracle allows it (flat copies of bucket and attribute collections are
        plain data). After a pipeline or catalog write, remold's stored form
        may be what its rule cannot read back, and a computed oracle recomputes
        from the source: going on would only show consequences, so the
        sequence stops here. A command remold refused changed nothing there:
        the flat side goes back to remold's state whatever the family."""
        if refused or (self.f.resyncable and not op["stages"] and op["label"] in CRUD):
            self.resync()
        else:
            self.in_sync = False

    def touched(self, op: dict) -> list[str]:
        """The collections a write may change: c, those it names, and the
        rule's own outputs (the computed target)."""
        named = {v.split(".", 1)[1] for v in op["cmd"].values() if isinstance(v, str) and "." in v}
        return [n for n in self.f.names if n == "c" or n in named or n in self.f.outputs]

    def resync(self) -> None:
        """Make the flat copy what remold shows (documents and indexes), so the
        sequence can go on. A collection exists if remold lists it or shows
        documents in it."""
        try:
            listed = set(self.r.list_collection_names())
        except Exception:
            listed = set()
        for name in self.f.names:
            try:
                docs = list(self.r[name].find())
            except Exception:
                docs = []
            try:
                indexes = [i for i in self.r[name].list_indexes() if i["name"] != "_id_"]
            except Exception:
                indexes = []
            self.flat.drop_collection(name)
            if name in listed or docs:
                if indexes:
                    # One createIndexes that creates the collection: DocumentDB
                    # builds the indexes of a collection it creates at once,
                    # and those of an existing one in a background job that
                    # runs every second.
                    self.flat[name].create_indexes([
                        IndexModel(list(index["key"].items()), name=index["name"], unique=bool(index.get("unique")),
                                   **{k: index[k] for k in self.f.resync_index_options if k in index})
                        for index in indexes])
                else:
                    self.flat.create_collection(name)
                if docs:
                    try:
                        self.flat[name].insert_many(docs, ordered=False)
                    except BulkWriteError:  # remold shows what no plain collection can hold
                        self.in_sync = False
