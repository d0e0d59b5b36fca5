"""What the polymorphic rule gives and costs (bench/README.md), in one run,
every operation through the same remold, on the same documents stored two
ways: three types (articles, videos, podcasts) in collections of their own
without a rule ("plain", forwarded as they are), and the same three types
under polymorphic rules, stored in one collection ("content").

  - the pattern's point: the 20 latest items of every type. The
    application's own way on plain collections: a find per type (sorted,
    limited) merged in the application; with the rule: one find on the
    stored collection;
  - what a type costs: findOne by _id, find by an indexed slug (a unique
    index created on the type through remold: a partial index of the
    stored collection), and insertOne, on a type's collection with the rule
    against the plain one.

Rounds alternate the cases; prints p50 and p99 latency per case and the
ratio of the rule's to the plain one's.

Usage: .venv/bin/python bench/patterns/polymorphic_run.py [--build build] [--n 30000] [--ops 2000] [--rounds 3]
A backend: REMOLD_BENCH_BACKEND=mongodb://[user:password@]host:port/..., else
a mongo-java-server is started here. With credentials in the URI, remold
gets them as its own user and the clients authenticate through it.
"""
from __future__ import annotations

import argparse
import datetime as dt
import random
import sys
from pathlib import Path

from pymongo.errors import OperationFailure

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: the shared modules
from run_helpers import compare_rounds, ruled_session  # noqa: E402

TYPES = {"articles": "ARTICLE", "videos": "VIDEO", "podcasts": "PODCAST"}
RULE = """namespace: {db}.{name}
pattern: polymorphic
polymorphic:
  collection: content
  value: {value}
"""
T0 = dt.datetime(2024, 1, 1)


def item(kind: str, i: int) -> dict:
    """The i-th item of a type: a few common fields and one of its own."""
    doc = {"_id": f"{kind[0]}{i}", "slug": f"{kind}-{i}", "title": f"Title {i} of {kind}",
           "at": T0 + dt.timedelta(seconds=i * 7 + list(TYPES).index(kind))}
    doc.update({"articles": {"words": 800 + i % 400}, "videos": {"seconds": 60 + i % 600},
                "podcasts": {"episode": i}}[kind])
    return doc


def index_names(plan) -> list[str]:
    """The indexes an explain's winning plan names, at any depth."""
    if isinstance(plan, dict):
        found = [plan["indexName"]] if isinstance(plan.get("indexName"), str) else []
        return found + [name for value in plan.values() for name in index_names(value)]
    if isinstance(plan, list):
        return [name for value in plan for name in index_names(value)]
    return []


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--n", type=int, default=30000, help="items in all, a third per type")
    parser.add_argument("--ops", type=int, default=2000, help="operations per case and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    per_type = args.n // len(TYPES)
    ruled_name = "remold_polymorphic_ruled"
    with ruled_session(args.build, {f"{name}.yaml": RULE.format(db=ruled_name, name=name, value=value) for name, value in TYPES.items()}, ["remold_polymorphic_plain", ruled_name]) as session:
        direct, client, backend = session.direct, session.client, session.backend
        plain = direct["remold_polymorphic_plain"]
        through_plain, through_ruled = client[plain.name], client[ruled_name]
        for name in TYPES:
            for start in range(0, per_type, 5000):
                batch = [item(name, i) for i in range(start, min(per_type, start + 5000))]
                through_plain[name].insert_many([dict(d) for d in batch])
                through_ruled[name].insert_many(batch)
            for side in (through_plain, through_ruled):
                side[name].create_index("slug", unique=True)
                side[name].create_index([("at", -1)])
        through_ruled.content.create_index([("at", -1)])  # the unified query's own index
        print(f"polymorphic bench: {per_type:,} items per type x {len(TYPES)} types, {args.ops:,} operations x "
              f"{args.rounds} rounds per case, backend {backend}")

        rng = random.Random(1)
        inserted = [per_type]

        def latest_each_type(db):
            merged = [doc for name in TYPES for doc in db[name].find().sort("at", -1).limit(20)]
            return sorted(merged, key=lambda d: d["at"], reverse=True)[:20]

        def latest_unified(db):
            return list(db.content.find().sort("at", -1).limit(20))

        def insert(db):
            inserted[0] += 1
            return db.articles.insert_one(item("articles", inserted[0]))

        comparisons = {
            "20 latest of every type": (lambda: latest_each_type(through_plain), lambda: latest_unified(through_ruled),
                                        "a find per type, merged", "one find on content"),
            "findOne by _id": (lambda: through_plain.videos.find_one({"_id": f"v{rng.randrange(per_type)}"}),
                               lambda: through_ruled.videos.find_one({"_id": f"v{rng.randrange(per_type)}"}),
                               "plain videos", "videos with the rule"),
            "find by slug (unique index)": (
                lambda: through_plain.videos.find_one({"slug": f"videos-{rng.randrange(per_type)}"}),
                lambda: through_ruled.videos.find_one({"slug": f"videos-{rng.randrange(per_type)}"}),
                "plain videos", "videos with the rule"),
            "insertOne": (lambda: insert(through_plain), lambda: insert(through_ruled),
                          "plain articles", "articles with the rule"),
        }
        expected_latest = [d["_id"] for d in latest_each_type(through_plain)]
        assert [d["_id"] for d in latest_unified(through_ruled)] == expected_latest
        for label, (mine, rules_way, mine_name, rule_name) in comparisons.items():
            compare_rounds(label, {mine_name: mine, rule_name: rules_way}, args.rounds, args.ops, warm_up=50,
                           width=28)
        stored = direct[ruled_name].content
        try:
            plan = stored.find({"type": "VIDEO", "slug": "videos-1"}).explain().get("queryPlanner", {})
            print(f"\nthe type's find by slug on {ruled_name}.content uses the index: "
                  f"{index_names(plan.get('winningPlan', plan)) or 'none (a collection scan)'}")
        except OperationFailure as exc:  # the stand-in has no explain
            print(f"\nthe type's find by slug on {ruled_name}.content: no explain on this backend ({exc.code})")
        for name in (plain.name, ruled_name):
            direct.drop_database(name)


if __name__ == "__main__":
    main()
