"""The soak's pass-through workload (bench/soak/soak.sh): `soak.plain`, no rule,
forwarded by remold as it is. Each client inserts documents of its own
(`_id` "cNN-pSEQ", `client`, `v`, 100 bytes of padding), finds them by `_id`,
sets `v` to a fresh number, deletes them, and reads all of its documents
with a cursor of batches of 7 (several getMores); at most about 40 live
documents a client. A few documents are inserted without an `_id` (a raw
insert command: the server gives one) and with a unique `key`: a write
sent twice on the way would be stored twice. Every read is checked against
the Ledger (the states `v` may hold, or absent). At the end every document
is checked through remold and on the backend directly, and no `key` may be
stored twice.
"""
from __future__ import annotations

from collections import Counter

from soak_ledger import ABSENT, Ledger, Problem, compare

LIVE = 40
PRESENT = "present"
BATCH = 7


class Plain:
    name = "plain"
    weight = 3

    def __init__(self) -> None:
        self.ledger = Ledger()               # _id -> v
        self.keyed = Ledger()                # key -> PRESENT, of the documents inserted without _id
        self.mine: dict[int, list] = {}     # client -> its keys that may be present
        self.written: dict[int, list] = {}  # client -> every key it wrote

    def setup(self, db) -> None:
        pass

    def step(self, client) -> None:
        mine = self.mine.setdefault(client.index, [])
        coll = client.db.plain
        roll = client.rng.random()
        if roll < 0.03:
            key = f"{client.tag}-k{client.next_seq()}"
            out = client.attempt("plain.insert_without_id", lambda: client.db.command(
                {"insert": "plain", "documents": [{"key": key, "owner": client.index}]}))
            if out.ok and (out.result.get("n") != 1 or out.result.get("writeErrors")):
                client.wrong("plain insert without _id", f"{key}: {out.result}")
            (self.keyed.acked if out.ok else self.keyed.unknown)(key, PRESENT)
        elif not mine or (roll < 0.3 and len(mine) < LIVE):
            key = f"{client.tag}-p{client.next_seq()}"
            out = client.attempt("plain.insert", lambda: coll.insert_one(
                {"_id": key, "client": client.index, "v": 0, "pad": "x" * 100}))
            (self.ledger.acked if out.ok else self.ledger.unknown)(key, 0)
            mine.append(key)
            self.written.setdefault(client.index, []).append(key)
        elif roll < 0.55:
            key = client.rng.choice(mine)
            out = client.attempt("plain.find_by_id", lambda: coll.find_one({"_id": key}))
            if out.ok:
                found = ABSENT if out.result is None else out.result["v"]
                if found not in self.ledger.states(key):
                    client.wrong("plain find_one", f"{key}: {found!r}, possible {self.ledger.states(key)}")
        elif roll < 0.8:
            key, value = client.rng.choice(mine), client.next_seq()
            out = client.attempt("plain.update", lambda: coll.update_one({"_id": key}, {"$set": {"v": value}}))
            if not out.ok:
                self.ledger.unknown(key, value)
            elif out.result.matched_count == 1:
                self.ledger.acked(key, value)
            elif ABSENT in self.ledger.states(key):
                self.ledger.acked(key, ABSENT)
                mine.remove(key)
            else:
                client.wrong("plain update", f"{key}: matched nothing, possible {self.ledger.states(key)}")
        elif roll < 0.97 or len(mine) >= LIVE:
            key = client.rng.choice(mine)
            out = client.attempt("plain.delete", lambda: coll.delete_one({"_id": key}))
            if not out.ok:
                self.ledger.unknown(key, ABSENT)
                return
            if out.result.deleted_count == 0 and ABSENT not in self.ledger.states(key):
                client.wrong("plain delete", f"{key}: deleted nothing, possible {self.ledger.states(key)}")
            self.ledger.acked(key, ABSENT)
            mine.remove(key)
        else:
            out = client.attempt("plain.cursor", lambda: {
                d["_id"]: d["v"] for d in coll.find({"client": client.index}).sort("_id", 1).batch_size(BATCH)})
            if out.ok:
                for problem in compare(self.ledger, out.result, self.written[client.index], "plain cursor"):
                    client.wrong("plain cursor", str(problem))

    def verify(self, remold_db, backend_db) -> tuple[list[Problem], dict]:
        problems = []
        for where, db in (("plain through remold", remold_db), ("plain on the backend", backend_db)):
            docs = list(db.plain.find({}, {"v": 1, "key": 1}))
            found = {d["_id"]: d["v"] for d in docs if "key" not in d}
            problems += compare(self.ledger, found, list(self.ledger.keys()), where)
            keyed = Counter(d["key"] for d in docs if "key" in d)
            problems += [Problem("doubled", where, f"{k!r} stored {n} times") for k, n in keyed.items() if n > 1]
            problems += compare(self.keyed, dict.fromkeys(keyed, PRESENT), list(self.keyed.keys()),
                                where + ", inserted without _id")
        present = sum(1 for k in self.ledger.keys() if ABSENT not in self.ledger.states(k))
        return problems, {"plain documents": present, "plain inserted without _id": len(keyed)}
