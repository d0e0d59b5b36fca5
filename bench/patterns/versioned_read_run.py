"""What the versioned rule costs a read (bench/README.md): findOne by _id and
a find on a renamed field, through remold, on the same users stored three
ways, in one run:
  - plain: a collection without a rule (remold forwards the find as it is);
  - current: a versioned rule's collection, every user at the current version
    (the find runs as an aggregate over the upgrade, which changes nothing);
  - older: the same rule's collection, every user at the first version (each
    read upgrades what it returns; write_back off, so it stays older).
With --stacked, three more: the same users with their fields stored as
{k, v} pairs,
  - attribute: an attribute rule alone, users at the current version;
  - stacked current / stacked older: `pattern: [versioned, attribute]`,
    users at the current / first version (each read unfolds, then upgrades).
Rounds alternate the cases; prints p50 and p99 latency per case and the
ratio of each to plain.

Usage: .venv/bin/python bench/patterns/versioned_read_run.py [--build build] [--n 10000] [--reads 2000] [--rounds 3] [--stacked]
A backend: REMOLD_BENCH_BACKEND=mongodb://..., else a mongo-java-server is
started here.
"""
from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pymongo

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: the shared modules
from bench_processes import start_backend  # noqa: E402

RULE = """namespace: {db}.{name}
pattern: versioned
versioned:
  versions:
    - version: 1
    - version: 2
      upgrade:
        - compute: {{field: first, expression: {{part: {{of: name, by: " ", index: 0}}}}}}
        - compute: {{field: last, expression: {{part: {{of: name, by: " ", index: -1}}}}}}
        - remove: name
        - rename: {{from: zip, to: postcode}}
        - convert: {{field: postcode, to: string}}
        - move: {{fields: [street, city], into: address}}
"""


ATTRIBUTE = """namespace: {db}.{name}
pattern: attribute
attribute:
  except: [schemaVersion]
"""

STACKED = RULE.replace("pattern: versioned", "pattern: [versioned, attribute]") + """attribute:
  except: [schemaVersion]
"""


def folded(doc: dict) -> dict:
    """A user as an attribute rule with `except: [schemaVersion]` stores it."""
    fixed = {k: v for k, v in doc.items() if k in ("_id", "schemaVersion")}
    return dict(fixed, specs=[{"k": k, "v": v} for k, v in doc.items() if k not in fixed])


def first_version(i: int) -> dict:
    return {"_id": i, "name": f"First{i} Last{i % 97}", "zip": 10000 + i, "street": f"{i} Main",
            "city": ["Oslo", "Lima"][i % 2]}


def current_version(i: int) -> dict:
    return {"_id": i, "postcode": str(10000 + i), "first": f"First{i}", "last": f"Last{i % 97}",
            "schemaVersion": 2, "address": {"street": f"{i} Main", "city": ["Oslo", "Lima"][i % 2]}}


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--reads", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stacked", action="store_true")
    args = parser.parse_args()
    # name: (rule text or None, stored documents)
    cases = {"plain": (None, current_version), "current": (RULE, current_version), "older": (RULE, first_version)}
    if args.stacked:
        cases.update({"attribute": (ATTRIBUTE, lambda i: folded(current_version(i))),
                      "stacked_current": (STACKED, lambda i: folded(current_version(i))),
                      "stacked_older": (STACKED, lambda i: folded(first_version(i)))})
    backend_proc = remold = None
    uri = os.environ.get("REMOLD_BENCH_BACKEND")
    if not uri:
        uri, backend_proc = start_backend()
    try:
        direct = pymongo.MongoClient(uri)
        db = direct["remold_versioned_bench"]
        direct.drop_database(db.name)
        for name, (_, shape) in cases.items():
            for start in range(0, args.n, 5000):
                db[name].insert_many([shape(i) for i in range(start, min(args.n, start + 5000))])
        with tempfile.TemporaryDirectory() as rules:
            for name, (rule, _) in cases.items():
                if rule:
                    Path(rules, name + ".yaml").write_text(rule.format(db=db.name, name=name))
            remold = subprocess.Popen([str(Path(args.build, "remold")), "serve", "--backend", uri, "--listen",
                                       "127.0.0.1:0", "--rules", rules, "--log-level", "warn"],
                                      stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      text=True)
            port = None
            for line in remold.stdout:
                match = re.search(r"listening on [\d.]+:(\d+)", line)
                if match:
                    port = int(match.group(1))
                    break
            through = pymongo.MongoClient(f"mongodb://127.0.0.1:{port}/?directConnection=true")[db.name]
            rng = random.Random(1)
            queries = {
                "findOne by _id": lambda c: c.find_one({"_id": rng.randrange(args.n)}),
                "find on renamed field": lambda c: c.find_one({"postcode": str(10000 + rng.randrange(args.n))}),
            }
            print(f"versioned read bench: {args.n:,} users per collection, {args.reads:,} reads x {args.rounds} "
                  f"rounds, backend {uri}")
            for label, query in queries.items():
                samples: dict[str, list[float]] = {name: [] for name in cases}
                for name in samples:  # warm up
                    for _ in range(50):
                        query(through[name])
                reads = args.reads if label.startswith("findOne") else max(20, args.reads // 50)
                for round_index in range(args.rounds):
                    shift = round_index % len(samples)
                    order = list(samples)[shift:] + list(samples)[:shift]
                    for name in order:
                        collection = through[name]
                        for _ in range(reads):
                            began = time.perf_counter()
                            doc = query(collection)
                            samples[name].append(time.perf_counter() - began)
                            assert doc is not None and "postcode" in doc, (name, doc)
                plain_p50 = percentile(samples["plain"], 0.5)
                print(f"\n{label} ({reads} per round)")
                for name, values in samples.items():
                    p50, p99 = percentile(values, 0.5), percentile(values, 0.99)
                    print(f"  {name:15} p50 {p50 * 1e6:9.0f} us  p99 {p99 * 1e6:9.0f} us  "
                          f"p50 vs plain {p50 / plain_p50:6.2f}x")
        direct.drop_database(db.name)
    finally:
        if remold:
            remold.terminate()
            remold.wait(30)
        if backend_proc:
            backend_proc.stdin.close()
            backend_proc.wait(30)


if __name__ == "__main__":
    main()
