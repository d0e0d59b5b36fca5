"""The soak's attribute workload (bench/soak/soak.sh): `soak.products`, whose
fields but name, price and category the attribute rule stores as {k, v}
pairs of `specs`. Each client inserts products of its own (`_id` "cNN-aSEQ"
with the attributes owner, ram_gb and color), finds one by `_id` (it must
come back flat, ram_gb and color as last told), sets ram_gb (the rule's
multi-step attribute update; color never changes), queries its products by attributes
(`{owner, ram_gb: {$gte: 0}}`, rewritten to $elemMatch) and deletes them;
at most about 30 live products a client. At the end every product is
checked through remold (flat) and on the backend directly (as pairs, no
flat attribute left).
"""
from __future__ import annotations

from soak_ledger import ABSENT, Ledger, Problem, compare

LIVE = 30
COLORS = ("red", "green", "blue")


def color(key: str) -> str:
    return COLORS[int(key.rsplit("-a", 1)[1]) % 3]


def state(doc: dict):
    """ram_gb, the attribute updates change; a color other than the key's is a wrong value."""
    return doc.get("ram_gb") if doc.get("color") == color(doc["_id"]) else ("wrong color", doc.get("color"))


class Products:
    name = "products"
    weight = 2

    def __init__(self) -> None:
        self.ledger = Ledger()
        self.mine: dict[int, list] = {}
        self.written: dict[int, list] = {}

    def setup(self, db) -> None:
        pass

    def step(self, client) -> None:
        mine = self.mine.setdefault(client.index, [])
        coll = client.db.products
        roll = client.rng.random()
        if not mine or (roll < 0.3 and len(mine) < LIVE):
            seq = client.next_seq()
            key = f"{client.tag}-a{seq}"
            doc = {"_id": key, "name": f"product {seq}", "price": seq, "category": "soak",
                   "owner": client.tag, "ram_gb": seq % 64, "color": color(key)}
            out = client.attempt("products.insert", lambda: coll.insert_one(doc))
            (self.ledger.acked if out.ok else self.ledger.unknown)(key, state(doc))
            mine.append(key)
            self.written.setdefault(client.index, []).append(key)
        elif roll < 0.55:
            key = client.rng.choice(mine)
            out = client.attempt("products.find_by_id", lambda: coll.find_one({"_id": key}))
            if not out.ok:
                return
            doc = out.result
            if doc is not None and ("specs" in doc or doc.get("owner") != client.tag):
                client.wrong("products find_one", f"{key}: not unfolded: {doc}")
            found = ABSENT if doc is None else state(doc)
            if found not in self.ledger.states(key):
                client.wrong("products find_one", f"{key}: {found!r}, possible {self.ledger.states(key)}")
        elif roll < 0.8:
            key = client.rng.choice(mine)
            ram = client.next_seq()
            out = client.attempt("products.set_attribute",
                                 lambda: coll.update_one({"_id": key}, {"$set": {"ram_gb": ram}}))
            if not out.ok:
                self.ledger.unknown(key, ram)
            elif out.result.matched_count == 1:
                self.ledger.acked(key, ram)
            elif ABSENT in self.ledger.states(key):
                self.ledger.acked(key, ABSENT)
                mine.remove(key)
            else:
                client.wrong("products update", f"{key}: matched nothing, possible {self.ledger.states(key)}")
        elif roll < 0.95 or len(mine) >= LIVE:
            key = client.rng.choice(mine)
            out = client.attempt("products.delete", lambda: coll.delete_one({"_id": key}))
            if not out.ok:
                self.ledger.unknown(key, ABSENT)
                return
            if out.result.deleted_count == 0 and ABSENT not in self.ledger.states(key):
                client.wrong("products delete", f"{key}: deleted nothing, possible {self.ledger.states(key)}")
            self.ledger.acked(key, ABSENT)
            mine.remove(key)
        else:
            query = {"owner": client.tag, "ram_gb": {"$gte": 0}}
            out = client.attempt("products.find_by_attribute",
                                 lambda: {d["_id"]: state(d) for d in coll.find(query).batch_size(10)})
            if out.ok:
                for problem in compare(self.ledger, out.result, self.written[client.index], "products query"):
                    client.wrong("products by attribute", str(problem))

    def verify(self, remold_db, backend_db) -> tuple[list[Problem], dict]:
        keys = list(self.ledger.keys())
        flat = {d["_id"]: state(d) for d in remold_db.products.find()}
        problems = compare(self.ledger, flat, keys, "products through remold")
        stored = {}
        for doc in backend_db.products.find():
            pairs = {p.get("k"): p.get("v") for p in doc.get("specs", [])}
            if "ram_gb" in doc or "owner" in doc or set(pairs) != {"owner", "ram_gb", "color"}:
                problems.append(Problem("wrong value", "products on the backend", f"not in pair form: {doc}"))
            stored[doc["_id"]] = state({"_id": doc["_id"], **pairs})
        problems += compare(self.ledger, stored, keys, "products on the backend")
        return problems, {"products": len(stored)}
