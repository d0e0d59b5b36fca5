"""make demo, readings: the seed's experiment on the example bucket rule.

  run(rule, through, direct, explain, sensors, days, queries) -> ReadingsFigures
  report(figures) -> list[str]

The readings are bench/patterns/group_pushdown_run.py's (a reading a minute of each
sensor, temp in -5..35), inserted a day at a time through remold into the
rule's logical collection (stored as buckets) and directly into a plain
collection `<collection>_flat` on the backend, indexed on {meta..., time}
as an application querying by sensor and time would index it. Then the
hourly average of one sensor over one day (group_pushdown_run.query) runs
both ways, in alternating rounds; run() raises AssertionError when the
counts or the two answers disagree. `explain(command)` gives the backend
commands remold plans for a command on the rule's database (remold_explain).
`through` and `direct` are the rule's database through remold and on the
backend. Both collections are dropped first.
"""
from __future__ import annotations

import datetime as dt
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pymongo.database import Database

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH / "lib"))  # bench/lib: the shared modules
sys.path.insert(0, str(BENCH / "patterns"))  # group_pushdown_run: the readings
from bench_processes import percentile  # noqa: E402
from group_pushdown_run import T0, day_batches, query, same  # noqa: E402

from collection_figures import CollectionFigures, figures  # noqa: E402
from example_rules import BucketNames  # noqa: E402


@dataclass(frozen=True)
class ReadingsFigures:
    rule: BucketNames
    sensors: int
    days: int
    readings: int
    insert_through_s: float
    insert_flat_s: float
    flat: CollectionFigures
    buckets: CollectionFigures
    sensor: str
    day: dt.datetime
    hours: int
    p50_through_ms: float
    p50_flat_ms: float
    timed_queries: int
    plan: list[dict]  # what remold sends for the hourly average


def flat_name(rule: BucketNames) -> str:
    return f"{rule.collection}_flat"


def check_shape(rule: BucketNames) -> None:
    """The seed's readings are {sensor, at, temp}: the rule must bucket them so."""
    if rule.meta != ["sensor"] or rule.time != "at" or "temp" not in rule.summarised:
        raise ValueError(f"the demo's readings are {{sensor, at, temp}}: the bucket rule on "
                         f"{rule.db}.{rule.collection} needs meta [sensor], time at and summaries of temp "
                         f"(it has meta {rule.meta}, time {rule.time}, summaries of {rule.summarised})")


def run(rule: BucketNames, through: Database, direct: Database, explain: Callable[[dict], list[dict]],
        sensors: int = 10, days: int = 7, queries: int = 20) -> ReadingsFigures:
    check_shape(rule)
    logical, flat = through[rule.collection], direct[flat_name(rule)]
    logical.drop()
    flat.drop()
    flat.create_index([(field, 1) for field in rule.meta] + [(rule.time, 1)])
    insert_through = insert_flat = 0.0
    for batch in day_batches(sensors, days):
        began = time.perf_counter()
        logical.insert_many([dict(d) for d in batch], ordered=False)
        insert_through += time.perf_counter() - began
        began = time.perf_counter()
        flat.insert_many(batch, ordered=False)
        insert_flat += time.perf_counter() - began
    readings = sensors * days * 24 * 60
    assert logical.count_documents({}) == readings, (logical.count_documents({}), readings)
    flat_figures, bucket_figures = figures(direct, flat.name), figures(direct, rule.buckets)
    assert flat_figures.documents == readings, flat_figures

    sensor = f"s{min(3, sensors - 1)}"
    query_days = [T0 + dt.timedelta(days=d) for d in range(days)]
    day = query_days[len(query_days) // 2]
    answer = list(logical.aggregate(query(day, sensor=sensor)))
    expected = list(flat.aggregate(query(day, sensor=sensor)))
    assert len(expected) == 24 and same(answer, expected), (answer[:2], expected[:2])

    samples: dict[str, list[float]] = {"through": [], "flat": []}
    runs = {"through": logical, "flat": flat}
    for q in range(queries):
        order = ["through", "flat"] if q % 2 == 0 else ["flat", "through"]
        for name in order:
            began = time.perf_counter()
            list(runs[name].aggregate(query(query_days[q % days], sensor=sensor)))
            samples[name].append(time.perf_counter() - began)
    return ReadingsFigures(rule, sensors, days, readings, insert_through, insert_flat, flat_figures,
                           bucket_figures, sensor, day, len(answer),
                           percentile(samples["through"], 0.5) * 1e3,
                           percentile(samples["flat"], 0.5) * 1e3, queries,
                           explain({"aggregate": rule.collection, "pipeline": query(day, sensor=sensor),
                                    "cursor": {}}))


def stages(plan: list[dict]) -> str:
    """The plan's commands, each as `aggregate on C: $a, $b` (its stages), joined by '; '."""
    return "; ".join(f"{name} on {command[name]}" + (
        ": " + ", ".join(next(iter(stage)) for stage in command["pipeline"]) if "pipeline" in command else "")
        for command in plan for name in [next(iter(command))])


def report(f: ReadingsFigures) -> list[str]:
    r = f.rule
    flat_ns, bucket_ns = f"{r.db}.{flat_name(r)}", f"{r.db}.{r.buckets}"
    rows = [("flat, directly", flat_ns, f.flat, f.insert_flat_s),
            ("buckets, through remold", bucket_ns, f.buckets, f.insert_through_s)]
    lines = [f"readings ({r.db}.{r.collection}, bucket rule): {f.readings:,} readings, a minute apart, "
             f"of {f.sensors} sensors over {f.days} day(s)",
             f"  {'':24} {'collection':24} {'documents':>10} {'indexes':>8} {'index entries':>14} "
             f"{'data bytes':>12} {'inserted in':>12}"]
    for label, ns, c, seconds in rows:
        lines.append(f"  {label:24} {ns:24} {c.documents:>10,} {c.indexes:>8} {c.index_entries:>14,} "
                     f"{c.data_bytes:>12,} {seconds:>10.1f} s")
    lines.append(f"  (index entries: documents x indexes, the backend reporting no entry counts; indexes: "
                 f"flat {', '.join(f.flat.index_names)}; buckets {', '.join(f.buckets.index_names)})")
    lines.append(f"  hourly average of {f.sensor} on {f.day:%Y-%m-%d} ({f.hours} hours, both answers equal), "
                 f"p50 of {f.timed_queries} each:")
    lines.append(f"    through remold, from the buckets  {f.p50_through_ms:8.2f} ms")
    lines.append(f"    flat, directly                    {f.p50_flat_ms:8.2f} ms")
    lines.append(f"  remold sends (remold explain): {stages(f.plan)}")
    return lines
