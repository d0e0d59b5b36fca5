"""Migration rate of `remold migrate` against a plain copy of the same data,
in one run (bench/README.md).

Seeds N flat documents straight into the backend (--pattern attribute:
products; bucket: readings of 50 sensors over a day; versioned: users at
version 1), then times:
  - a plain copy: read every document and insert it into another collection,
    in batches of --batch (pymongo: find, insert_many);
  - `remold migrate` of a rule over the same documents, to the rule's form,
    with the same batch size (attribute: converted in place; bucket: moved
    into buckets of the bucket collection; versioned: upgraded in place).
Prints documents per second for each and their ratio.

Usage: .venv/bin/python bench/patterns/migrate_run.py [--build build] [--pattern attribute|bucket|versioned]
                                                      [--n 10000] [--batch 500]
A backend: REMOLD_BENCH_BACKEND=mongodb://..., else a mongo-java-server is
started here. On the stand-in, a guarded replacement ({_id, $expr}) scans the
collection (mongod finds it by _id), so rates there fall with N.
"""
from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pymongo

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: the shared modules
from bench_processes import start_backend  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--pattern", choices=["attribute", "bucket", "versioned"], default="attribute")
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args()
    backend_proc = None
    uri = os.environ.get("REMOLD_BENCH_BACKEND")
    if not uri:
        uri, backend_proc = start_backend()
    try:
        client = pymongo.MongoClient(uri)
        db = client["remold_migrate_bench"]
        client.drop_database(db.name)
        if args.pattern == "attribute":
            name = "products"
            docs = [{"_id": i, "name": f"p{i}", "price": i, "ram_gb": i % 64, "color": ["red", "blue"][i % 2],
                     "screen_in": 13 + i % 5} for i in range(args.n)]
            rule = (f"namespace: {db.name}.products\npattern: attribute\nattribute:\n"
                    "  fields: [ram_gb, color, screen_in]\n  migrating: true\n")
        elif args.pattern == "versioned":
            name = "users"
            docs = [{"_id": i, "name": f"First{i} Last{i % 97}", "zip": 10000 + i, "street": f"{i} Main",
                     "city": ["Oslo", "Lima"][i % 2]} for i in range(args.n)]
            rule = (f"namespace: {db.name}.users\npattern: versioned\nversioned:\n  versions:\n"
                    "    - version: 1\n    - version: 2\n      upgrade:\n"
                    "        - compute: {field: first, expression: {part: {of: name, by: \" \", index: 0}}}\n"
                    "        - compute: {field: last, expression: {part: {of: name, by: \" \", index: -1}}}\n"
                    "        - remove: name\n        - rename: {from: zip, to: postcode}\n"
                    "        - convert: {field: postcode, to: string}\n"
                    "        - move: {fields: [street, city], into: address}\n")
        else:
            name = "readings"
            start_at = datetime.datetime(2026, 3, 1)
            docs = [{"_id": i, "sensor": f"s{i % 50}", "at": start_at + datetime.timedelta(seconds=(i * 7919) % 86400),
                     "temp": (i % 400) / 10} for i in range(args.n)]
            rule = (f"namespace: {db.name}.readings\npattern: bucket\nbucket:\n  collection: readings_buckets\n"
                    "  meta: [sensor]\n  time: at\n  span: 1h\n  summaries:\n    temp: [sum, min, max]\n")
        for start in range(0, args.n, 5000):
            db[name].insert_many(docs[start:start + 5000])
        print(f"migrate bench: {args.n:,} flat {name}, batch {args.batch}, backend {uri}")

        began = time.monotonic()
        batch = []
        for doc in db[name].find().sort("_id", 1).batch_size(args.batch):
            batch.append(doc)
            if len(batch) == args.batch:
                db[name + "_copy"].insert_many(batch)
                batch = []
        if batch:
            db[name + "_copy"].insert_many(batch)
        copy_seconds = time.monotonic() - began

        with tempfile.TemporaryDirectory() as rules:
            Path(rules, name + ".yaml").write_text(rule)
            began = time.monotonic()
            result = subprocess.run([str(Path(args.build, "remold")), "migrate", "--backend", uri, "--rules", rules,
                                     "--rule", name, "--batch", str(args.batch)],
                                    capture_output=True, text=True)
            migrate_seconds = time.monotonic() - began
        if result.returncode != 0:
            raise SystemExit(f"remold migrate failed ({result.returncode}):\n{result.stdout}{result.stderr}")
        if args.pattern == "attribute":
            converted = db.products.count_documents({"specs": {"$exists": True}})
        elif args.pattern == "versioned":
            converted = db.users.count_documents({"schemaVersion": 2})
        else:
            assert db.readings.count_documents({}) == 0
            converted = next(db.readings_buckets.aggregate([{"$group": {"_id": None, "n": {"$sum": "$count"}}}]))["n"]
            print(f"into {db.readings_buckets.count_documents({}):,} buckets")
        assert converted == args.n, converted
        copy_rate, migrate_rate = args.n / copy_seconds, args.n / migrate_seconds
        print(f"plain copy      {copy_seconds:8.2f} s  {copy_rate:10,.0f} docs/s")
        print(f"remold migrate  {migrate_seconds:8.2f} s  {migrate_rate:10,.0f} docs/s")
        print(f"ratio migrate/copy: {migrate_rate / copy_rate:.3f}")
        client.drop_database(db.name)
    finally:
        if backend_proc:
            backend_proc.stdin.close()
            backend_proc.wait(30)


if __name__ == "__main__":
    main()
