"""What a bucket upsert costs the backend, against the collection's size
(bench/README.md, "bucket_bench"): the backend alone, no remold.

For 100, 1,000 and 5,000 buckets already stored (with the {sensor, start}
index the bucket rule ensures), times 200 unordered upserts that each push
40 readings into one bucket, as remold's bucket rewrite sends them, and
8,000 flat inserts of single readings (with their {sensor, at} index), and
prints the cost of each per reading. On a backend that finds the bucket
through the index, an upsert's cost does not grow with the number of
buckets; where it does, bucketed ingest loses to flat inserts as the
collection grows, whatever remold's own cost per reading.

Usage: .venv/bin/python bench/patterns/upsert_cost_run.py [--sizes 100,1000,5000]
A backend: REMOLD_BENCH_BACKEND=mongodb://..., else a mongo-java-server is
started here.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
from pathlib import Path

import pymongo

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: the shared modules
from bench_processes import start_backend  # noqa: E402

DB = "remold_upsert_cost"
T0 = dt.datetime(2026, 1, 1)
SENSORS = 10
UPSERTS = 200
PUSHED = 40
FLAT = 8000


def bucket_upserts(db, buckets: int) -> float:
    """Seconds for UPSERTS upserts, each pushing PUSHED readings, into a
    collection of `buckets` buckets."""
    db.buckets.drop()
    db.buckets.create_index([("sensor", 1), ("start", 1)])
    db.buckets.insert_many([{"sensor": f"s{i % SENSORS}", "start": T0 + dt.timedelta(hours=i // SENSORS),
                             "count": 1, "measurements": [{"temp": 1.0}]} for i in range(buckets)])
    hours = max(1, buckets // SENSORS)
    ops = [pymongo.UpdateOne({"sensor": f"s{i % SENSORS}", "start": T0 + dt.timedelta(hours=(i // SENSORS) % hours)},
                             {"$push": {"measurements": {"$each": [{"temp": 2.0}] * PUSHED}},
                              "$inc": {"count": PUSHED}}, upsert=True)
           for i in range(UPSERTS)]
    started = time.perf_counter()
    db.buckets.bulk_write(ops, ordered=False)
    return time.perf_counter() - started


def flat_inserts(db) -> float:
    """Seconds for FLAT single-reading inserts in one unordered insert_many."""
    db.flat.drop()
    db.flat.create_index([("sensor", 1), ("at", 1)])
    docs = [{"sensor": f"s{i % SENSORS}", "at": T0 + dt.timedelta(minutes=i), "temp": 1.0} for i in range(FLAT)]
    started = time.perf_counter()
    db.flat.insert_many(docs, ordered=False)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,5000", help="numbers of buckets stored before the upserts")
    args = parser.parse_args()
    uri = os.environ.get("REMOLD_BENCH_BACKEND")
    proc = None
    if not uri:
        uri, proc = start_backend()
    try:
        client = pymongo.MongoClient(uri, directConnection=True)
        db = client[DB]
        flat_inserts(db)  # warm-up (a JVM backend compiles as it goes)
        print(f"backend {uri}: {UPSERTS} upserts of {PUSHED} readings each, against {FLAT} flat inserts")
        print(f"{'buckets':>8} {'us/upsert':>10} {'us/reading (buckets)':>21} {'us/reading (flat)':>18}")
        for size in (int(s) for s in args.sizes.split(",")):
            upserts = bucket_upserts(db, size)
            flat = flat_inserts(db)
            print(f"{size:>8} {upserts / UPSERTS * 1e6:>10.0f} {upserts / (UPSERTS * PUSHED) * 1e6:>21.2f} "
                  f"{flat / FLAT * 1e6:>18.2f}", flush=True)
        client.drop_database(DB)
    finally:
        if proc:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
