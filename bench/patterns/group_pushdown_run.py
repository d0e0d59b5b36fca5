"""The seed's hourly-average query on bucketed readings (bench/README.md):
sensor s3, one day, $group by $hour with $avg of temp, in one run:

  - from the buckets: through remold, the $group answered from each
    bucket's readings without unwinding them (patterns/bucket/group_pushdown.h);
  - unwinding: through remold, the same query with its lower time bound one
    millisecond early (no reading is there, so the answer is the same), which
    cuts a bucket and makes remold unwind the readings as before;
  - flat: the same query on a flat copy of the readings, directly.

Seeds 10 sensors x 7 days, a reading a minute (100,800 readings: 1,680
hourly buckets), checks the three answers agree, then times them in
rotating rounds and prints p50/p99 and each against the unwinding plan.

Usage: .venv/bin/python bench/patterns/group_pushdown_run.py [--build build] [--rounds 5] [--queries 40]
A backend: REMOLD_BENCH_BACKEND=mongodb://... (with credentials, e.g. a
DocumentDB's `scripts/install-documentdb.sh uri`: remold's own connections
and the client through it log in as that user), else a mongo-java-server is
started here.

make demo (examples/demo_readings.py) seeds and queries with day_batches(),
query() and same().
"""
from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import pymongo

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: the shared modules
from bench_processes import client_uri, percentile, start_backend, start_remold  # noqa: E402

DB = "remold_group_bench"
T0 = dt.datetime(2024, 3, 4)
RULE = """namespace: {db}.readings
pattern: bucket
bucket:
  collection: readings_buckets
  meta: [sensor]
  time: at
  span: 1h
  summaries:
    temp: [sum, min, max]
"""


def day_batches(sensors: int = 10, days: int = 7):
    """The seed's readings from T0, a day at a time: a reading a minute of each
    sensor s0, s1, ..., temp uniform in -5..35 (the same every run)."""
    rng = random.Random(3)
    for minute0 in range(0, days * 24 * 60, 1440):
        yield [{"sensor": f"s{s}", "at": T0 + dt.timedelta(minutes=m), "temp": round(rng.uniform(-5, 35), 2)}
               for m in range(minute0, minute0 + 1440) for s in range(sensors)]


def query(day: dt.datetime, early_ms: int = 0, sensor: str = "s3") -> list[dict]:
    """The hourly average of one sensor's temp over the day from `day`."""
    return [{"$match": {"sensor": sensor, "at": {"$gte": day - dt.timedelta(milliseconds=early_ms),
                                                 "$lt": day + dt.timedelta(days=1)}}},
            {"$group": {"_id": {"$hour": "$at"}, "avgTemp": {"$avg": "$temp"}}},
            {"$sort": {"_id": 1}}]


def same(a: list[dict], b: list[dict]) -> bool:
    return len(a) == len(b) and all(x["_id"] == y["_id"] and math.isclose(x["avgTemp"], y["avgTemp"], rel_tol=1e-9)
                                    for x, y in zip(a, b))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--queries", type=int, default=40)
    args = parser.parse_args()
    backend_proc = remold = None
    uri = os.environ.get("REMOLD_BENCH_BACKEND")
    if not uri:
        uri, backend_proc = start_backend()
    try:
        direct = pymongo.MongoClient(uri)
        direct.drop_database(DB)
        with tempfile.TemporaryDirectory() as rules:
            Path(rules, "readings.yaml").write_text(RULE.format(db=DB))
            remold, port = start_remold(args.build, uri, "--rules", rules)
            through = pymongo.MongoClient(client_uri(uri, port))[DB]["readings"]
            flat = direct[DB]["flat"]
            for batch in day_batches():
                through.insert_many([dict(d) for d in batch], ordered=False)
                flat.insert_many(batch, ordered=False)
            buckets = direct[DB]["readings_buckets"].count_documents({})
            print(f"group pushdown bench: 100,800 readings of 10 sensors over 7 days ({buckets:,} buckets), "
                  f"backend {uri.rpartition('@')[2] if '@' in uri else uri}")
            cases = {
                "from the buckets": lambda day: list(through.aggregate(query(day))),
                "unwinding": lambda day: list(through.aggregate(query(day, early_ms=1))),
                "flat, direct": lambda day: list(flat.aggregate(query(day))),
            }
            days = [T0 + dt.timedelta(days=d) for d in range(7)]
            answers = {name: run(days[2]) for name, run in cases.items()}
            assert len(answers["flat, direct"]) == 24, answers["flat, direct"]
            for name, answer in answers.items():
                assert same(answer, answers["flat, direct"]), (name, answer[:2], answers["flat, direct"][:2])
            samples: dict[str, list[float]] = {name: [] for name in cases}
            for r in range(args.rounds):
                order = list(cases)[r % len(cases):] + list(cases)[:r % len(cases)]
                for name in order:
                    for q in range(args.queries):
                        began = time.perf_counter()
                        cases[name](days[(r + q) % 7])
                        samples[name].append(time.perf_counter() - began)
            base = percentile(samples["unwinding"], 0.5)
            print(f"the seed's hourly average (sensor s3, one day): {args.queries} queries x {args.rounds} rounds, "
                  f"the three answers checked equal")
            for name, values in samples.items():
                p50, p99 = percentile(values, 0.5), percentile(values, 0.99)
                print(f"  {name:17} p50 {p50 * 1e3:8.2f} ms  p99 {p99 * 1e3:8.2f} ms  p50 vs unwinding "
                      f"{p50 / base:5.2f}x")
        direct.drop_database(DB)
    finally:
        if remold:
            remold.terminate()
            remold.wait(30)
        if backend_proc:
            backend_proc.stdin.close()
            backend_proc.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
