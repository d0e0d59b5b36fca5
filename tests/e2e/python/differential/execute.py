"""Runs one operation on one side (remold's database or the flat database on
the backend) and reduces the reply to what a plain collection specifies: an
``Outcome`` with the error code, or the documents / counts / write results,
canonical where order is unspecified.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Optional

from pymongo.errors import OperationFailure, PyMongoError

from .compare import canon, canon_field, unordered_docs
from .generator import DB


@dataclass
class Outcome:
    error: Optional[int] = None        # command error code (ok: 0)
    value: Any = None                  # canonical result
    raw: Any = None                    # documents as returned (for the field-order check)
    write_errors: tuple = ()           # ((index, code), ...)
    statements: list = field(default_factory=list)  # a write's statements, set by the runner

    @property
    def failed(self) -> bool:
        return self.error is not None or bool(self.write_errors)

    def codes(self) -> str:
        if self.error is not None:
            return f"error {self.error}"
        return "write error " + ", ".join(str(c) for c in sorted({c for _, c in self.write_errors}))

    def brief(self) -> str:
        if self.error is not None:
            return f"error {self.error}"
        if self.write_errors:
            return f"writeErrors {list(self.write_errors)} with {self.value!r}"[:400]
        return repr(self.value)[:400]


def substitute(value, db: str):
    if isinstance(value, str) and value.startswith(DB + "."):
        return db + value[len(DB):]
    if isinstance(value, dict):
        return {k: substitute(v, db) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, db) for v in value]
    return value


def drain(db, reply: dict, collection: str) -> list:
    cursor = reply["cursor"]
    docs = list(cursor.get("firstBatch", []))
    cursor_id = cursor.get("id", 0)
    while cursor_id:
        more = db.command({"getMore": cursor_id, "collection": collection, "batchSize": 100})
        docs += more["cursor"].get("nextBatch", [])
        cursor_id = more["cursor"].get("id", 0)
    return docs


def run(db, op: dict, names: tuple, loose: frozenset, caps: set, fix_doc=None) -> Outcome:
    cmd = substitute(copy.deepcopy(op["cmd"]), db.name)
    target = db.client.admin if op["admin"] else db
    try:
        reply = target.command(cmd)
    except OperationFailure as exc:
        return Outcome(error=exc.code if exc.code is not None else -1)
    except PyMongoError as exc:  # a dropped connection is an answer too
        return Outcome(error=-2, value=str(exc))
    if fix_doc and op["shape"] == "fam" and reply.get("value") and op["cmd"].get("new"):
        reply["value"] = fix_doc(reply["value"])
    return shape(db, op, reply, names, loose, caps)


def shape(db, op: dict, reply: dict, names: tuple, loose: frozenset, caps: set) -> Outcome:
    kind = op["shape"]
    if kind in ("cursor", "cursor_ordered", "collStatsStage"):
        collection = op["cmd"].get("find") or op["cmd"].get("aggregate")
        docs = drain(db, reply, collection)
        if kind == "collStatsStage":
            return Outcome(value=sorted(d.get("count", {}).get("count", -1) for d in docs))
        value = [canon(d, loose) for d in docs] if kind == "cursor_ordered" else unordered_docs(docs, loose)
        return Outcome(value=value, raw=docs)
    if kind == "count":
        return Outcome(value=reply.get("n"))
    if kind == "distinct":
        values = reply.get("values", [])
        if "addtoset_as_distinct" not in caps:
            # remold answers distinct through a view with $addToSet, which
            # this backend (unlike MongoDB) makes drop null and keep 1 and 1L
            # apart: compare the values by number, without null.
            return Outcome(value=sorted({canon_field("v", v, frozenset({"v"})) for v in values
                                         if v is not None}, key=repr))
        # Of values equal as numbers (16 and Int64(16)), distinct returns
        # one, and which depends on the order it met them in (MongoDB's
        # too): numbers compare by value, each value still counted.
        return Outcome(value=sorted((canon_field("v", v, frozenset({"v"})) for v in values), key=repr))
    if kind == "write":
        errors = tuple((e.get("index"), e.get("code")) for e in reply.get("writeErrors", []))
        upserted = tuple((u.get("index"), canon(u.get("_id"))) for u in reply.get("upserted", []))
        # nModified is left out: docs/patterns/ documents it as approximate for
        # attribute and computed updates; the state check catches any real effect.
        return Outcome(value=(reply.get("n"), upserted), write_errors=errors)
    if kind == "fam":
        doc = reply.get("value")
        if "fam_last_error_object" not in caps:  # the backend's reply has none to compare with
            return Outcome(value=(canon(doc, loose),), raw=[doc] if doc else [])
        leo = reply.get("lastErrorObject", {})
        return Outcome(value=(canon(doc, loose), leo.get("n"), leo.get("updatedExisting"),
                              canon(leo.get("upserted"))), raw=[doc] if doc else [])
    if kind == "listCollections":
        docs = drain(db, reply, "$cmd.listCollections")
        return Outcome(value=sorted((d["name"], d.get("type", "collection")) for d in docs
                                    if d["name"] in names))
    if kind == "listIndexes":
        docs = drain(db, reply, op["cmd"]["listIndexes"])
        return Outcome(value=sorted((tuple(d["key"].items()), d["name"], bool(d.get("unique")))
                                    for d in docs))
    if kind == "collStats":
        return Outcome(value=reply.get("count"))
    return Outcome(value=None)


def read_all(db, name: str, loose: frozenset, normalize) -> Optional[list]:
    try:
        docs = list(db[name].find())
    except PyMongoError:
        return None
    return unordered_docs([normalize(name, d) for d in docs], loose)
