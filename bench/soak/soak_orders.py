"""The soak's extended reference workload (bench/soak/soak.sh): `soak.orders`,
whose synced rule copies {_id, name, city} of the order's customer from
`soak.customers` into `customer`, and syncs the copies when a customer
changes. Each client has 2 customers ("cNN-custK", written through remold at
setup) and inserts orders (`_id` "cNN-oSEQ"), moves them to its other
customer, deletes them, renames a customer (the fan-out to its orders), and
reads an order: its copy must be its customer as the client was told,
unless a write on that order or its customer faulted (failed, or was in
flight while the backend was down); at most about 20 live orders a client.
At the end every order is checked through remold and on the backend
directly, and every copy against its customer on the backend.
"""
from __future__ import annotations

from soak_ledger import ABSENT, Ledger, Problem, compare

CUSTOMERS = 2
LIVE = 20


def city(customer: str) -> str:
    return "Oslo" if customer.endswith("0") else "Lima"


class Orders:
    name = "orders"
    weight = 2

    def __init__(self, clients: int) -> None:
        self.ledger = Ledger()       # order -> customerId
        self.names = Ledger()        # customer -> name
        self.mine: dict[int, list] = {}
        self.tainted: set = set()    # orders whose copy a fault may have left behind
        self.customers = [f"c{i:02d}-cust{k}" for i in range(clients) for k in range(CUSTOMERS)]

    def setup(self, db) -> None:
        db.customers.insert_many([{"_id": c, "name": f"{c} v0", "city": city(c)} for c in self.customers])
        for c in self.customers:
            self.names.acked(c, f"{c} v0")

    def step(self, client) -> None:
        mine = self.mine.setdefault(client.index, [])
        coll = client.db.orders
        customers = [f"{client.tag}-cust{k}" for k in range(CUSTOMERS)]
        roll = client.rng.random()
        if not mine or (roll < 0.3 and len(mine) < LIVE):
            key, customer = f"{client.tag}-o{client.next_seq()}", client.rng.choice(customers)
            out = client.attempt("orders.insert", lambda: coll.insert_one(
                {"_id": key, "customerId": customer, "amount": client.seq}))
            (self.ledger.acked if out.ok else self.ledger.unknown)(key, customer)
            mine.append(key)
            if out.faulted:
                self.tainted.add(key)
        elif roll < 0.45 or len(mine) >= LIVE:
            key = client.rng.choice(mine)
            out = client.attempt("orders.delete", lambda: coll.delete_one({"_id": key}))
            if not out.ok:
                self.ledger.unknown(key, ABSENT)
                return
            if out.result.deleted_count == 0 and ABSENT not in self.ledger.states(key):
                client.wrong("orders delete", f"{key}: deleted nothing, possible {self.ledger.states(key)}")
            self.ledger.acked(key, ABSENT)
            mine.remove(key)
        elif roll < 0.6:
            key, customer = client.rng.choice(mine), client.rng.choice(customers)
            out = client.attempt("orders.move", lambda: coll.update_one({"_id": key},
                                                                        {"$set": {"customerId": customer}}))
            if out.faulted:
                self.tainted.add(key)
            if not out.ok:
                self.ledger.unknown(key, customer)
            elif out.result.matched_count == 1:
                self.ledger.acked(key, customer)
            elif ABSENT in self.ledger.states(key):
                self.ledger.acked(key, ABSENT)
                mine.remove(key)
            else:
                client.wrong("orders move", f"{key}: matched nothing, possible {self.ledger.states(key)}")
        elif roll < 0.75:
            customer = client.rng.choice(customers)
            name = f"{customer} v{client.next_seq()}"
            out = client.attempt("orders.rename_customer", lambda: client.db.customers.update_one(
                {"_id": customer}, {"$set": {"name": name}}))
            (self.names.acked if out.ok else self.names.unknown)(customer, name)
            if out.faulted:
                self.tainted.update(k for k in mine if customer in self.ledger.states(k))
        else:
            key = client.rng.choice(mine)
            out = client.attempt("orders.read", lambda: coll.find_one({"_id": key}))
            customer = self.ledger.certain(key)
            if not out.ok or key in self.tainted or customer in (None, ABSENT):
                return
            name = self.names.certain(customer)
            want = {"_id": customer, "name": name, "city": city(customer)}
            if out.result is None or (name is not None and out.result.get("customer") != want):
                client.wrong("orders read", f"{key}: {out.result}, expected the copy {want}")

    def verify(self, remold_db, backend_db) -> tuple[list[Problem], dict]:
        keys = list(self.ledger.keys())
        problems = []
        for where, db in (("orders through remold", remold_db), ("orders on the backend", backend_db)):
            found = {d["_id"]: d.get("customerId") for d in db.orders.find({}, {"customerId": 1})}
            problems += compare(self.ledger, found, keys, where)
        customers = {c["_id"]: c for c in backend_db.customers.find({"_id": {"$in": self.customers}})}
        problems += compare(self.names, {k: c.get("name") for k, c in customers.items()}, self.customers,
                            "customers on the backend")
        drift = orders = 0
        for order in backend_db.orders.find():
            orders += 1
            want = customers.get(order.get("customerId"))
            if order.get("customer") != want:
                kind = "drift" if order["_id"] in self.tainted else "derived"
                drift += kind == "drift"
                problems.append(Problem(kind, "orders on the backend",
                                        f"{order['_id']}: copy {order.get('customer')}, customer {want}"))
        return problems, {"orders": orders, "orders drifted": drift}
