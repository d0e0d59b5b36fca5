"""The soak's subset workload (bench/soak/soak.sh): `soak.reviews`, whose rule
keeps each item of `soak.items` holding its 3 latest reviews (by `at`) in
recentReviews as {_id, author, rating, at}. Each client has 3 items
("cNN-itemK", written through remold at setup with an empty array) and
inserts reviews on them (`_id` "cNN-vSEQ", `at` growing), deletes them,
changes their rating (a copied field: a refill), moves them to another of
its items, and reads an item: its array must be the 3 latest of its reviews
as the client was told, unless a write on that item faulted (as for the
computed workload); at most about 30 live reviews a client. At the end
every review is checked through remold and on the backend directly, and
every item against its reviews on the backend.
"""
from __future__ import annotations

import datetime as dt

from soak_ledger import ABSENT, Ledger, Problem, compare

T0 = dt.datetime(2024, 1, 1)
ITEMS = 3
LIMIT = 3
LIVE = 30


def at(key: str) -> dt.datetime:
    return T0 + dt.timedelta(seconds=int(key.rsplit("-v", 1)[1]))


def subset(reviews: dict) -> list:
    """The array an item holding `reviews` (key -> rating) must have."""
    latest = sorted(reviews, key=lambda k: (at(k), k), reverse=True)[:LIMIT]
    return [{"_id": k, "author": k.split("-")[0], "rating": reviews[k], "at": at(k)} for k in latest]


class Reviews:
    name = "reviews"
    weight = 2

    def __init__(self, clients: int) -> None:
        self.ledger = Ledger()
        self.mine: dict[int, list] = {}
        self.tainted: set = set()
        self.items = [f"c{i:02d}-item{k}" for i in range(clients) for k in range(ITEMS)]

    def setup(self, db) -> None:
        db.items.insert_many([{"_id": i, "title": i, "recentReviews": []} for i in self.items])

    def _touch(self, out, key, *items) -> None:
        if out.faulted:
            self.tainted.update(items)
            self.tainted.update(s[0] for s in self.ledger.states(key) if s != ABSENT)

    def step(self, client) -> None:
        mine = self.mine.setdefault(client.index, [])
        coll = client.db.reviews
        items = [f"{client.tag}-item{k}" for k in range(ITEMS)]
        roll = client.rng.random()
        if not mine or (roll < 0.3 and len(mine) < LIVE):
            key, item, rating = f"{client.tag}-v{client.next_seq()}", client.rng.choice(items), client.rng.randint(1, 5)
            out = client.attempt("reviews.insert", lambda: coll.insert_one(
                {"_id": key, "itemId": item, "author": client.tag, "rating": rating, "at": at(key)}))
            self._touch(out, key, item)
            (self.ledger.acked if out.ok else self.ledger.unknown)(key, (item, rating))
            mine.append(key)
        elif roll < 0.45 or len(mine) >= LIVE:
            key = client.rng.choice(mine)
            out = client.attempt("reviews.delete", lambda: coll.delete_one({"_id": key}))
            self._touch(out, key)
            if not out.ok:
                self.ledger.unknown(key, ABSENT)
                return
            if out.result.deleted_count == 0 and ABSENT not in self.ledger.states(key):
                client.wrong("reviews delete", f"{key}: deleted nothing, possible {self.ledger.states(key)}")
            self.ledger.acked(key, ABSENT)
            mine.remove(key)
        elif roll < 0.7:
            key = client.rng.choice(mine)
            move = client.rng.random() < 0.4
            field, value = ("itemId", client.rng.choice(items)) if move else ("rating", client.rng.randint(1, 5))
            out = client.attempt("reviews.move" if move else "reviews.rate",
                                 lambda: coll.update_one({"_id": key}, {"$set": {field: value}}))
            self._touch(out, key, *([value] if move else []))
            after = {(value, s[1]) if move else (s[0], value) for s in self.ledger.states(key) if s != ABSENT}
            if not out.ok:
                for s in after:
                    self.ledger.unknown(key, s)
            elif out.result.matched_count == 1:
                self.ledger.acked_one_of(key, after)
            elif out.result.matched_count == 0 and ABSENT in self.ledger.states(key):
                self.ledger.acked(key, ABSENT)
                mine.remove(key)
            elif out.result.matched_count == 0:
                client.wrong("reviews update", f"{key}: matched nothing, possible {self.ledger.states(key)}")
        else:
            item = client.rng.choice(items)
            out = client.attempt("reviews.read_item", lambda: client.db.items.find_one({"_id": item}))
            if out.ok and item not in self.tainted:
                held = {k: s[1] for k in mine if (s := self.ledger.certain(k)) not in (None, ABSENT) and s[0] == item}
                if out.result.get("recentReviews") != subset(held):
                    client.wrong("reviews item", f"{item}: {out.result.get('recentReviews')}, "
                                                 f"expected {subset(held)}")

    def verify(self, remold_db, backend_db) -> tuple[list[Problem], dict]:
        keys = list(self.ledger.keys())
        problems = []
        on_backend = {}
        for where, db in (("reviews through remold", remold_db), ("reviews on the backend", backend_db)):
            found = {d["_id"]: (d.get("itemId"), d.get("rating")) for d in db.reviews.find()}
            problems += compare(self.ledger, found, keys, where)
            on_backend = found
        by_item: dict = {}
        for key, (item, rating) in on_backend.items():
            by_item.setdefault(item, {})[key] = rating
        drift = 0
        for item in backend_db.items.find({"_id": {"$in": self.items}}):
            want = subset(by_item.get(item["_id"], {}))
            if item.get("recentReviews") != want:
                kind = "drift" if item["_id"] in self.tainted else "derived"
                drift += kind == "drift"
                problems.append(Problem(kind, "items on the backend",
                                        f"{item['_id']}: {item.get('recentReviews')}, its reviews' {want}"))
        return problems, {"reviews": len(on_backend), "items drifted": drift}
