"""Migration rate of `remold migrate` against a plain copy of the same data,
in one run (bench/README.md).

Seeds N flat products straight into the backend, then times:
  - a plain copy: read every product and insert it into another collection,
    in batches of --batch (pymongo: find, insert_many);
  - `remold migrate` of an attribute rule over the same products, to the
    rule's form, with the same batch size.
Prints documents per second for each and their ratio.

Usage: .venv/bin/python bench/migrate_run.py [--build build] [--n 10000] [--batch 500]
A backend: REMOLD_BENCH_BACKEND=mongodb://..., else a mongo-java-server is
started here. On the stand-in, a guarded replacement ({_id, $expr}) scans the
collection (mongod finds it by _id), so rates there fall with N.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

import pymongo

SRC = Path(__file__).resolve().parents[1]


def start_backend() -> tuple[str, subprocess.Popen]:
    proc = subprocess.Popen(["java", "-cp", "tests/backend/lib/*:tests/backend/classes", "Launcher",
                             "127.0.0.1", "0"], cwd=SRC, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    for line in proc.stdout:
        match = re.match(r"listening (\S+):(\d+)$", line.strip())
        if match:
            return f"mongodb://{match.group(1)}:{match.group(2)}/", proc
    raise RuntimeError("backend did not start")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
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
        products = [{"_id": i, "name": f"p{i}", "price": i, "ram_gb": i % 64, "color": ["red", "blue"][i % 2],
                     "screen_in": 13 + i % 5} for i in range(args.n)]
        for start in range(0, args.n, 5000):
            db.products.insert_many(products[start:start + 5000])
        print(f"migrate bench: {args.n:,} flat products, batch {args.batch}, backend {uri}")

        began = time.monotonic()
        batch = []
        for doc in db.products.find().sort("_id", 1).batch_size(args.batch):
            batch.append(doc)
            if len(batch) == args.batch:
                db.products_copy.insert_many(batch)
                batch = []
        if batch:
            db.products_copy.insert_many(batch)
        copy_seconds = time.monotonic() - began

        with tempfile.TemporaryDirectory() as rules:
            Path(rules, "products.yaml").write_text(
                f"namespace: {db.name}.products\npattern: attribute\nattribute:\n"
                "  fields: [ram_gb, color, screen_in]\n  migrating: true\n")
            began = time.monotonic()
            result = subprocess.run([str(Path(args.build, "remold")), "migrate", "--backend", uri, "--rules", rules,
                                     "--rule", "products", "--batch", str(args.batch)],
                                    capture_output=True, text=True)
            migrate_seconds = time.monotonic() - began
        if result.returncode != 0:
            raise SystemExit(f"remold migrate failed ({result.returncode}):\n{result.stdout}{result.stderr}")
        converted = db.products.count_documents({"specs": {"$exists": True}})
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
