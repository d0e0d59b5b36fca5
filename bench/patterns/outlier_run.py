"""What the outlier rule gives and costs (bench/README.md), in one run,
every operation through the same remold, on the same documents stored two
ways: books in a collection without a rule ("plain", forwarded as they
are), and the same books under an outlier rule on `buyers` (threshold
1000).

  - the pattern's point: $push of 1,000 buyers at a time ({customer, at})
    onto one bestseller. On the plain collection the document reaches 16 MiB
    and every further push fails (BSONObjectTooLarge); with the rule the
    pushes go on to --target buyers. Prints where the plain one failed, the
    count reached with the rule (read back from the stored form), and the
    latency of a push on both (the plain one's while it still worked);
  - what the common books cost: findOne by _id (the whole book), a find
    that leaves buyers out, a find by one buyer (multikey index), and a
    $push of one buyer, on books of 0..20 buyers, with the rule against the
    plain collection.

Rounds alternate the cases; prints p50 and p99 latency per case and the
ratio of the rule's to the plain one's.

Usage: .venv/bin/python bench/patterns/outlier_run.py [--build build] [--n 20000] [--ops 2000] [--rounds 3] [--target 600000]
A backend: REMOLD_BENCH_BACKEND=mongodb://[user:password@]host:port/..., else
a mongo-java-server is started here.
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

RULE = """namespace: {db}.books
pattern: outlier
outlier:
  array: buyers
  threshold: 1000
"""
T0 = dt.datetime(2024, 1, 1)
BATCH = 1000


def book(i: int) -> dict:
    return {"_id": i, "title": f"Book {i}", "price": 5 + i % 40,
            "buyers": [{"customer": f"c{(i * 31 + k) % 100000:07d}", "at": T0 + dt.timedelta(minutes=k)}
                       for k in range(i % 21)]}


def buyers(start: int, count: int) -> list[dict]:
    return [{"customer": f"c{i:07d}", "at": T0 + dt.timedelta(seconds=i)} for i in range(start, start + count)]


def stored_count(db, name: str, overflow: str, _id) -> int:
    """The buyers of one book as stored: embedded, in pages, in the tail."""
    stored = db[name].find_one({"_id": _id})
    n = len(stored.get("buyers", []))
    marker = stored.get("_remold_outlier")
    if marker:
        n += len(marker.get("tail", []))
        pages = db[overflow].aggregate([{"$match": {"parent": marker["key"], "seq": {"$lt": marker["pages"]}}},
                                        {"$group": {"_id": None, "n": {"$sum": {"$size": "$elements"}}}}])
        n += next(iter(pages), {"n": 0})["n"]
    return n


def push_until(collection, target: int) -> tuple[int, list[float], str | None]:
    """Pushes batches onto book 0 until `target` buyers or a failure:
    (buyers pushed, each push's latency, the failure)."""
    collection.insert_one({"_id": 0, "title": "The bestseller", "buyers": []})
    samples: list[float] = []
    pushed = 0
    while pushed < target:
        batch = buyers(pushed, BATCH)
        try:
            timed(samples, lambda: collection.update_one({"_id": 0}, {"$push": {"buyers": {"$each": batch}}}))
        except OperationFailure as failure:
            return pushed, samples, f"{failure.code} {str(failure)[:120]}"
        pushed += BATCH
    return pushed, samples, None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--n", type=int, default=20000, help="common books")
    parser.add_argument("--ops", type=int, default=2000, help="operations per case and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--target", type=int, default=600000, help="buyers pushed onto the bestseller")
    args = parser.parse_args()
    plain_name, ruled_name = "remold_outlier_plain", "remold_outlier_ruled"
    with ruled_session(args.build, {"books.yaml": RULE.format(db=ruled_name)}, [plain_name, ruled_name]) as session:
        direct, client, backend = session.direct, session.client, session.backend
        plain, ruled = client[plain_name].books, client[ruled_name].books
        print(f"outlier bench: backend {backend}")

        # The point: one bestseller, pushed past 16 MiB.
        reached_plain, plain_pushes, failure = push_until(plain, args.target)
        began = time.perf_counter()
        reached_ruled, ruled_pushes, ruled_failure = push_until(ruled, args.target)
        ruled_seconds = time.perf_counter() - began
        counted = stored_count(direct[ruled_name], "books", "books_overflow", 0)
        print(f"\n$push of {BATCH:,} buyers at a time onto one book")
        print(f"  plain collection: failed after {reached_plain:,} buyers: {failure}")
        print(f"  with the rule:    {reached_ruled:,} buyers pushed in {ruled_seconds:.1f} s, "
              f"{counted:,} stored, failure: {ruled_failure}")
        for name, values in (("plain (while it worked)", plain_pushes), ("with the rule", ruled_pushes)):
            print(f"  push latency {name:24s} p50 {percentile(values, 0.5) * 1e3:7.2f} ms   "
                  f"p99 {percentile(values, 0.99) * 1e3:7.2f} ms")
        for collection in (plain, ruled):
            collection.delete_one({"_id": 0})

        # The common books.
        for start in range(1, args.n + 1, 5000):
            batch = [book(i) for i in range(start, min(args.n + 1, start + 5000))]
            plain.insert_many([dict(d) for d in batch])
            ruled.insert_many(batch)
        for collection in (plain, ruled):
            collection.create_index("buyers.customer")
        print(f"\n{args.n:,} common books (0..20 buyers), {args.ops:,} operations x {args.rounds} rounds per case")
        rng = random.Random(1)

        def push_one(collection):
            i = rng.randrange(1, args.n + 1)
            return collection.update_one({"_id": i}, {"$push": {"buyers": {"customer": "new", "at": T0}}})

        comparisons = {
            "findOne by _id (the whole book)": lambda c: c.find_one({"_id": rng.randrange(1, args.n + 1)}),
            "findOne by _id, buyers left out": lambda c: c.find_one({"_id": rng.randrange(1, args.n + 1)},
                                                                    {"title": 1, "price": 1}),
            "find by one buyer (multikey index)": lambda c: list(c.find(
                {"buyers.customer": f"c{rng.randrange(100000):07d}"}, {"title": 1}).limit(10)),
            "$push of one buyer by _id": push_one,
        }
        for label, operation in comparisons.items():
            compare_rounds(label, {"plain": lambda: operation(plain), "with the rule": lambda: operation(ruled)},
                           args.rounds, args.ops, warm_up=50)
        for name in (plain_name, ruled_name):
            direct.drop_database(name)


if __name__ == "__main__":
    main()
