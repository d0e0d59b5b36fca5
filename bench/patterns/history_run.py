"""What the history rule gives and costs (bench/README.md), in one run,
every operation through the same remold, on the same orders stored two
ways: in a collection without a rule ("plain", the application's own way:
every status change $pushed onto the order forever), and under a history
rule on `events` (keep 5: each event a document of `orders_history`, the
latest 5 copied in the order).

  - the pattern's point: $push of 1,000 events at a time onto one order.
    On the plain collection the order reaches 16 MiB and every further
    push fails (BSONObjectTooLarge); with the rule the pushes go on to
    --target events. Prints where the plain one failed, the count reached
    with the rule (read back from the history collection), and the latency
    of a push on both (the plain one's while it still worked);
  - what orders with a long history cost (--orders orders of --events
    events each): a $set of the order's status, a findOne that leaves the
    events out, the latest 10 events (plain: a $slice projection; with the
    rule: the application's own query of the history collection, by parent
    and seq), a $push of one event, and the whole order read back, with the
    rule against the plain collection.

Rounds alternate the cases; prints p50 and p99 latency per case and the
ratio of the rule's to the plain one's.

Usage: .venv/bin/python bench/patterns/history_run.py [--build build] [--orders 200] [--events 2000] [--ops 500] [--rounds 3] [--target 200000]
A backend: REMOLD_BENCH_BACKEND=mongodb://[user:password@]host:port/..., else
a mongo-java-server is started here (which lacks the rule's $lookup: use a
real engine).
"""
from __future__ import annotations

import argparse
import datetime as dt
import random
import sys
import time
from pathlib import Path

from pymongo.errors import OperationFailure

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: the shared modules
from run_helpers import compare_rounds, percentile, ruled_session, timed  # noqa: E402

RULE = """namespace: {db}.orders
pattern: history
history:
  array: events
  keep: 5
"""
T0 = dt.datetime(2024, 1, 1)
BATCH = 1000
STATUSES = ("placed", "paid", "packed", "shipped", "delayed", "delivered", "returned", "refunded")


def events(start: int, count: int) -> list[dict]:
    return [{"status": STATUSES[i % len(STATUSES)], "at": T0 + dt.timedelta(minutes=i), "by": f"user-{i % 97}",
             "note": f"status change {i:09d} recorded by the order service"} for i in range(start, start + count)]


def push_until(collection, target: int) -> tuple[int, list[float], str | None]:
    """Pushes batches onto order 0 until `target` events or a failure:
    (events pushed, each push's latency, the failure)."""
    collection.insert_one({"_id": 0, "customer": "c0", "status": "placed", "events": []})
    samples: list[float] = []
    pushed = 0
    while pushed < target:
        batch = events(pushed, BATCH)
        try:
            timed(samples, lambda: collection.update_one({"_id": 0}, {"$push": {"events": {"$each": batch}}}))
        except OperationFailure as failure:
            return pushed, samples, f"{failure.code} {str(failure)[:120]}"
        pushed += BATCH
    return pushed, samples, None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--orders", type=int, default=200)
    parser.add_argument("--events", type=int, default=2000, help="events per order")
    parser.add_argument("--ops", type=int, default=500, help="operations per case and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--target", type=int, default=200000, help="events pushed onto one order")
    args = parser.parse_args()
    plain_name, ruled_name = "remold_history_plain", "remold_history_ruled"
    with ruled_session(args.build, {"orders.yaml": RULE.format(db=ruled_name)}, [plain_name, ruled_name]) as session:
        direct, client, backend = session.direct, session.client, session.backend
        plain, ruled = client[plain_name].orders, client[ruled_name].orders
        history = client[ruled_name].orders_history  # a plain collection: the application reads it directly
        print(f"history bench: backend {backend}")

        # The point: one order, pushed past 16 MiB.
        reached_plain, plain_pushes, failure = push_until(plain, args.target)
        began = time.perf_counter()
        reached_ruled, ruled_pushes, ruled_failure = push_until(ruled, args.target)
        ruled_seconds = time.perf_counter() - began
        counted = direct[ruled_name].orders_history.count_documents({"parent": 0})
        print(f"\n$push of {BATCH:,} events at a time onto one order")
        print("  plain collection: " + (f"failed after {reached_plain:,} events: {failure}" if failure
                                          else f"took all {reached_plain:,} events (raise --target)"))
        print(f"  with the rule:    {reached_ruled:,} events pushed in {ruled_seconds:.1f} s, "
              f"{counted:,} history documents, failure: {ruled_failure}")
        for name, values in (("plain (while it worked)", plain_pushes), ("with the rule", ruled_pushes)):
            print(f"  push latency {name:24s} p50 {percentile(values, 0.5) * 1e3:7.2f} ms   "
                  f"p99 {percentile(values, 0.99) * 1e3:7.2f} ms")
        for collection in (plain, ruled):
            collection.delete_one({"_id": 0})

        # Orders with a long history.
        for i in range(1, args.orders + 1):
            order = {"_id": i, "customer": f"c{i}", "status": "placed", "events": events(i * 7, args.events)}
            plain.insert_one(dict(order))
            ruled.insert_one(order)
        print(f"\n{args.orders:,} orders of {args.events:,} events, {args.ops:,} operations x {args.rounds} "
              f"rounds per case")
        rng = random.Random(1)

        def any_order() -> int:
            return rng.randrange(1, args.orders + 1)

        def latest(collection):
            i = any_order()
            if collection is plain:
                return plain.find_one({"_id": i}, {"events": {"$slice": -10}})
            return list(history.find({"parent": i}, {"event": 1}).sort("seq", -1).limit(10))

        comparisons = {
            "$set of the order's status": lambda c: c.update_one({"_id": any_order()},
                                                                 {"$set": {"status": rng.choice(STATUSES)}}),
            "findOne, events left out": lambda c: c.find_one({"_id": any_order()}, {"customer": 1, "status": 1}),
            "the latest 10 events (rule: the history collection)": latest,
            "$push of one event": lambda c: c.update_one({"_id": any_order()},
                                                         {"$push": {"events": events(rng.randrange(10**6), 1)[0]}}),
            "the whole order": lambda c: c.find_one({"_id": any_order()}),
        }
        for label, operation in comparisons.items():
            compare_rounds(label, {"plain": lambda: operation(plain), "with the rule": lambda: operation(ruled)},
                           args.rounds, args.ops, warm_up=20)
        for name in (plain_name, ruled_name):
            direct.drop_database(name)


if __name__ == "__main__":
    main()
