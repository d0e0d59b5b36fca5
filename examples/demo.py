"""make demo: what the example rules (examples/rules) change, measured.

Starts the in-memory backend (mongo-java-server) and remold in front of it
with the example rules (bench/lib/bench_processes.py), runs the three parts,
each against a plain collection on the backend, and prints their figures:

  - readings (demo_readings.py): the seed's experiment, documents and index
    entries of the readings flat against buckets, and the hourly average;
  - products (demo_products.py): a query by attribute;
  - comments (demo_comments.py): a post with its maintained comment count.

Each part checks that remold's answers equal the plain collection's and
stops the demo with an AssertionError otherwise.

Usage: .venv/bin/python examples/demo.py [--build build] [--sensors 10] [--days 7]
                                         [--products 2000] [--posts 20] [--comments 1000] [--queries 20]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pymongo

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "bench" / "lib"))  # bench/lib: the shared modules
from bench_processes import start_backend, start_remold  # noqa: E402

import demo_comments  # noqa: E402
import demo_products  # noqa: E402
import demo_readings  # noqa: E402
import example_rules  # noqa: E402
from remold_explain import explain  # noqa: E402

RULES = HERE / "rules"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default="build", help="the directory holding the remold binary")
    parser.add_argument("--sensors", type=int, default=10)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--products", type=int, default=2000)
    parser.add_argument("--posts", type=int, default=20)
    parser.add_argument("--comments", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=20, help="timed queries of each kind, each way")
    args = parser.parse_args()
    if args.posts < 2 or args.sensors < 1 or args.days < 1 or args.products < 1:
        parser.error("needs at least 2 posts, 1 sensor, 1 day and 1 product")
    rules = example_rules.load(RULES)
    bucket, attribute, computed = (example_rules.by_pattern(rules, p) for p in ("bucket", "attribute", "computed"))
    binary = Path(args.build, "remold")

    began = time.perf_counter()
    backend_uri, backend = start_backend()
    remold = None
    try:
        remold, port = start_remold(args.build, backend_uri, "--rules", str(RULES))
        through = pymongo.MongoClient(f"mongodb://127.0.0.1:{port}/?directConnection=true")
        direct = pymongo.MongoClient(backend_uri)
        print(f"make demo: remold with the rules of {RULES.relative_to(HERE.parent)} in front of mongo-java-server "
              f"(in memory); each part checks remold's answers against the backend's own\n")

        def explain_in(db: str):
            return lambda command: explain(binary, RULES, db, command)

        b, a, c = bucket.bucket, attribute.attribute, computed.computed
        print("\n".join(demo_readings.report(demo_readings.run(
            b, through[b.db], direct[b.db], explain_in(b.db), args.sensors, args.days, args.queries))) + "\n")
        print("\n".join(demo_products.report(demo_products.run(
            a, through[a.db], direct[a.db], explain_in(a.db), args.products, args.queries))) + "\n")
        print("\n".join(demo_comments.report(demo_comments.run(
            c, through[c.db], direct[c.db], args.posts, args.comments, args.queries))) + "\n")
        print(f"make demo took {time.perf_counter() - began:.0f} s")
    finally:
        if remold:
            remold.terminate()
            remold.wait(30)
        backend.stdin.close()
        backend.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
