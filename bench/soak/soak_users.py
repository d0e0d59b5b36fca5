"""The soak's versioned workload (bench/soak/soak.sh): `soak.users`, whose rule
reads every user at version 3 (version 2 splits `name` into firstName and
lastName, version 3 renames `zip` to `postcode` as a string). Each client
inserts users of its own (`_id` "cNN-uSEQ"), half at version 1 as an older
application would ({schemaVersion: 1, name, zip}) and half at the current
version, finds one by `_id` (it must come back upgraded), finds one by its
postcode (unique to it; a renamed field: older users match too), sets the postcode (older
users are upgraded first) and deletes them; at most about 30 live users a
client. At the end every user is checked through remold and on the backend
directly (upgraded here when stored at an older version).
"""
from __future__ import annotations

from soak_ledger import ABSENT, Ledger, Problem, compare

LIVE = 30
FIRST = ("Ana", "Ben", "Cy", "Dee")
LAST = ("Rao", "Ito", "Lu")


def state(doc: dict):
    """(firstName, lastName, postcode) of a user as read at version 3; the
    document itself when it is not in that shape."""
    if doc.get("schemaVersion") != 3 or "name" in doc or "zip" in doc:
        return ("not upgraded", repr(doc))
    return (doc.get("firstName"), doc.get("lastName"), doc.get("postcode"))


def upgraded(stored: dict) -> dict:
    """What the rule reads for a user stored at version 1, 2 or 3."""
    doc = dict(stored)
    if doc.get("schemaVersion", 1) == 1:
        parts = doc.pop("name").split(" ")
        doc.update(firstName=parts[0], lastName=parts[-1], schemaVersion=2)
    if doc["schemaVersion"] == 2:
        doc["postcode"] = str(doc.pop("zip"))
        doc["schemaVersion"] = 3
    return doc


class Users:
    name = "users"
    weight = 2

    def __init__(self) -> None:
        self.ledger = Ledger()
        self.mine: dict[int, list] = {}

    def setup(self, db) -> None:
        pass

    def step(self, client) -> None:
        mine = self.mine.setdefault(client.index, [])
        coll = client.db.users
        roll = client.rng.random()
        if not mine or (roll < 0.3 and len(mine) < LIVE):
            seq = client.next_seq()
            key, first, last = f"{client.tag}-u{seq}", FIRST[seq % 4], LAST[seq % 3]
            zip_code = (client.index + 1) * 10_000_000 + seq  # unique to the user
            if client.rng.random() < 0.5:
                doc = {"_id": key, "schemaVersion": 1, "name": f"{first} {last}", "zip": zip_code}
            else:
                doc = {"_id": key, "firstName": first, "lastName": last, "postcode": str(zip_code)}
            out = client.attempt("users.insert", lambda: coll.insert_one(doc))
            (self.ledger.acked if out.ok else self.ledger.unknown)(key, (first, last, str(zip_code)))
            mine.append(key)
        elif roll < 0.5:
            key = client.rng.choice(mine)
            out = client.attempt("users.find_by_id", lambda: coll.find_one({"_id": key}))
            found = ABSENT if not out.ok or out.result is None else state(out.result)
            if out.ok and found not in self.ledger.states(key):
                client.wrong("users find_one", f"{key}: {found!r}, possible {self.ledger.states(key)}")
        elif roll < 0.65:
            key = client.rng.choice(mine)
            known = self.ledger.certain(key)
            if known in (None, ABSENT):
                return
            out = client.attempt("users.find_by_postcode", lambda: list(coll.find({"postcode": known[2]})))
            if out.ok and [(d["_id"], state(d)) for d in out.result] != [(key, known)]:
                client.wrong("users by postcode", f"{known[2]}: {out.result}, expected {key} {known}")
        elif roll < 0.85:
            key, code = client.rng.choice(mine), f"P{client.tag}-{client.next_seq()}"
            out = client.attempt("users.set_postcode", lambda: coll.update_one({"_id": key},
                                                                               {"$set": {"postcode": code}}))
            after = {(s[0], s[1], code) for s in self.ledger.states(key) if s != ABSENT}
            if not out.ok:
                for s in after:
                    self.ledger.unknown(key, s)
            elif out.result.matched_count == 1:
                self.ledger.acked_one_of(key, after)
            elif ABSENT in self.ledger.states(key):
                self.ledger.acked(key, ABSENT)
                mine.remove(key)
            else:
                client.wrong("users update", f"{key}: matched nothing, possible {self.ledger.states(key)}")
        else:
            key = client.rng.choice(mine)
            out = client.attempt("users.delete", lambda: coll.delete_one({"_id": key}))
            if not out.ok:
                self.ledger.unknown(key, ABSENT)
                return
            if out.result.deleted_count == 0 and ABSENT not in self.ledger.states(key):
                client.wrong("users delete", f"{key}: deleted nothing, possible {self.ledger.states(key)}")
            self.ledger.acked(key, ABSENT)
            mine.remove(key)

    def verify(self, remold_db, backend_db) -> tuple[list[Problem], dict]:
        keys = list(self.ledger.keys())
        through = {d["_id"]: state(d) for d in remold_db.users.find()}
        problems = compare(self.ledger, through, keys, "users through remold")
        stored = list(backend_db.users.find())
        older = sum(1 for d in stored if d.get("schemaVersion", 1) < 3)
        problems += compare(self.ledger, {d["_id"]: state(upgraded(d)) for d in stored}, keys,
                            "users on the backend")
        return problems, {"users": len(stored), "users stored older": older}
