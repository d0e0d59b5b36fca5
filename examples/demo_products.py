"""make demo, products: a query by an attribute on the example attribute rule.

  run(rule, through, direct, explain, products, queries) -> ProductsFigures
  report(figures) -> list[str]

Inserts `products` products ({_id, name, price, category} and 3 of 8 sparse
attributes each, the same every run) through remold into the rule's
collection (attributes stored as {k, v} pairs, one index) and directly into
a plain collection `<collection>_flat` on the backend with one index per
attribute, as an application querying any attribute would need. Then finds
the products with ram_gb >= 32 (sorted by _id) through remold, on the flat
collection directly, and as remold rewrites it (`explain(command)`, the
backend commands remold plans: remold_explain) directly on the stored
collection, in rotating order; run() raises AssertionError when the answers
differ (field order included). Both collections are dropped first.
"""
from __future__ import annotations

import json
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pymongo.database import Database

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench" / "lib"))  # bench/lib: the shared modules
from bench_processes import percentile  # noqa: E402

from collection_figures import CollectionFigures, figures  # noqa: E402
from example_rules import AttributeNames  # noqa: E402

FIXED = ("name", "price", "category")
ATTRIBUTES = {"ram_gb": [8, 16, 32, 64], "screen_in": [13, 14, 15, 16, 17], "color": ["black", "silver", "blue"],
              "storage_gb": [256, 512, 1024], "cores": [4, 8, 12, 16], "weight_kg": [1.1, 1.4, 1.8, 2.3],
              "battery_wh": [45, 60, 75, 99], "refresh_hz": [60, 90, 120, 144]}
QUERY = {"ram_gb": {"$gte": 32}}


@dataclass(frozen=True)
class ProductsFigures:
    rule: AttributeNames
    flat: CollectionFigures
    stored: CollectionFigures
    matched: int
    p50_ms: dict[str, float]  # "through", "flat", "rewritten"
    timed_queries: int
    rewritten: dict  # the filter remold sends for QUERY


def flat_name(rule: AttributeNames) -> str:
    return f"{rule.collection}_flat"


def check_shape(rule: AttributeNames) -> None:
    """The demo's products have fixed fields FIXED and attributes ATTRIBUTES: the rule must say so."""
    fixed_ok = set(FIXED) <= set(rule.fixed) and not set(ATTRIBUTES) & set(rule.fixed) if rule.fixed \
        else set(ATTRIBUTES) <= set(rule.attributes) and not set(FIXED) & set(rule.attributes)
    if not fixed_ok:
        raise ValueError(f"the demo's products have fixed fields {list(FIXED)} and attributes "
                         f"{list(ATTRIBUTES)}: the attribute rule on {rule.db}.{rule.collection} "
                         f"(except {rule.fixed}, fields {rule.attributes}) does not treat them so")


def catalogue(products: int) -> list[dict]:
    rng = random.Random(5)
    return [{"_id": i, "name": f"product {i}", "price": rng.randrange(100, 3000),
             "category": rng.choice(["laptop", "tablet", "monitor"]),
             **{name: rng.choice(ATTRIBUTES[name]) for name in rng.sample(sorted(ATTRIBUTES), 3)}}
            for i in range(products)]


def run(rule: AttributeNames, through: Database, direct: Database, explain: Callable[[dict], list[dict]],
        products: int = 2000, queries: int = 20) -> ProductsFigures:
    check_shape(rule)
    stored, flat = through[rule.collection], direct[flat_name(rule)]
    stored.drop()
    flat.drop()
    for name in ATTRIBUTES:
        flat.create_index(name)
    docs = catalogue(products)
    stored.insert_many([dict(d) for d in docs])
    flat.insert_many(docs)

    answer = list(stored.find(QUERY).sort("_id", 1))
    expected = list(flat.find(QUERY).sort("_id", 1))
    assert expected and [list(d.items()) for d in answer] == [list(d.items()) for d in expected], \
        (answer[:2], expected[:2])
    finds = [c for c in explain({"find": rule.collection, "filter": QUERY, "sort": {"_id": 1}}) if "find" in c]
    assert len(finds) == 1 and finds[0]["find"] == rule.collection, finds
    rewritten = finds[0]["filter"]

    runs = {"through": (stored, QUERY), "flat": (flat, QUERY), "rewritten": (direct[rule.collection], rewritten)}
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for q in range(queries):
        for name in list(runs)[q % 3:] + list(runs)[:q % 3]:
            collection, query = runs[name]
            began = time.perf_counter()
            list(collection.find(query).sort("_id", 1))
            samples[name].append(time.perf_counter() - began)
    return ProductsFigures(rule, figures(direct, flat.name), figures(direct, rule.collection),
                           len(answer),
                           {name: percentile(values, 0.5) * 1e3 for name, values in samples.items()},
                           queries, rewritten)


def report(f: ProductsFigures) -> list[str]:
    r = f.rule
    return [
        f"products ({r.db}.{r.collection}, attribute rule): {f.stored.documents:,} products, each with 3 of "
        f"{len(ATTRIBUTES)} attributes",
        f"  {'':27} {'collection':22} {'documents':>10} {'indexes':>8}",
        f"  {'flat, directly':27} {r.db + '.' + flat_name(r):22} {f.flat.documents:>10,} {f.flat.indexes:>8}"
        f"   ({', '.join(f.flat.index_names)})",
        f"  {'attributes, through remold':27} {r.db + '.' + r.collection:22} {f.stored.documents:>10,} "
        f"{f.stored.indexes:>8}   ({', '.join(f.stored.index_names)})",
        f"  find {json.dumps(QUERY)} sorted by _id: {f.matched:,} products, both answers equal; "
        f"p50 of {f.timed_queries} each:",
        f"    through remold                           {f.p50_ms['through']:8.2f} ms",
        f"    flat, directly                           {f.p50_ms['flat']:8.2f} ms",
        f"    as remold rewrites it, directly          {f.p50_ms['rewritten']:8.2f} ms",
        f"  remold sends (remold explain): find on {r.collection} with filter {json.dumps(f.rewritten)}",
    ]
