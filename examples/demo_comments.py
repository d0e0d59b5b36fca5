"""make demo, comments: a post's comment count kept by the example computed rule.

  run(rule, through, direct, posts, comments, queries) -> CommentsFigures
  report(figures) -> list[str]

Through remold: inserts `posts` posts into the rule's target and `comments`
comments (each on a random post, the same every run) into its source, in
batches of 100; deletes the comments marked spam (about one in ten) with a
deleteMany; moves every comment of the first post to the second with an
updateMany. Then checks, for every post, that the count the rule maintains
equals the comments counted on the backend, and each {max: F} field the
latest F of them (absent when none is left); run() raises AssertionError
otherwise. Finally times reading a post with its count both ways: one find
through remold, against a find and a count directly (the source indexed on
its link). `through` and `direct` are the source's database through remold
and on the backend; the target may be in another database of the same
clients. Source and target are dropped first.
"""
from __future__ import annotations

import datetime as dt
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from pymongo.database import Database

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench" / "lib"))  # bench/lib: the shared modules
from bench_processes import percentile  # noqa: E402

from example_rules import CountNames  # noqa: E402

T0 = dt.datetime(2024, 3, 4)


@dataclass(frozen=True)
class CommentsFigures:
    rule: CountNames
    posts: int
    inserted: int
    deleted: int
    moved: int
    shown_post: dict
    shown_counted: int
    p50_through_ms: float
    p50_direct_ms: float
    timed_queries: int


def post_ids(posts: int) -> list[str]:
    return [f"p{i}" for i in range(posts)]


def comments_of(rule: CountNames, posts: int, comments: int) -> list[dict]:
    """Comments on random posts, with the source fields the rule's other fields read."""
    rng = random.Random(7)
    ids = post_ids(posts)

    def inputs(i: int) -> dict:
        value = {"sum": 1, "latest": f"author {i % 5}"}
        return {field: value.get(kind, T0 + dt.timedelta(minutes=i)) for field, kind in rule.inputs.items()}
    return [{rule.link_from: rng.choice(ids), "text": f"comment {i}", "spam": rng.random() < 0.1, **inputs(i)}
            for i in range(comments)]


def run(rule: CountNames, through: Database, direct: Database, posts: int = 20, comments: int = 1000,
        queries: int = 20) -> CommentsFigures:
    source, target = through[rule.collection], through.client[rule.target_db][rule.target]
    direct_source = direct[rule.collection]
    direct_target = direct.client[rule.target_db][rule.target]
    source.delete_many({})  # maintained: leaves nothing for the drop to refuse
    source.drop()
    target.drop()
    direct_source.create_index(rule.link_from)
    ids = post_ids(posts)
    target.insert_many([{rule.link_to: pid, "title": f"post {pid}"} if rule.link_to != "_id"
                        else {"_id": pid, "title": f"post {pid}"} for pid in ids])
    docs = comments_of(rule, posts, comments)
    for start in range(0, len(docs), 100):
        source.insert_many(docs[start:start + 100])
    deleted = source.delete_many({"spam": True}).deleted_count
    moved = source.update_many({rule.link_from: ids[0]}, {"$set": {rule.link_from: ids[1]}}).modified_count

    for pid in ids:
        post = direct_target.find_one({rule.link_to: pid})
        counted = direct_source.count_documents({rule.link_from: pid})
        assert post.get(rule.count_field) == counted, (pid, post, counted)
        for field, source_field in rule.maxima.items():
            latest = list(direct_source.find({rule.link_from: pid}).sort(source_field, -1).limit(1))
            assert post.get(field) == (latest[0][source_field] if latest else None), (pid, field, post, latest)
    assert direct_target.find_one({rule.link_to: ids[0]}).get(rule.count_field) == 0

    shown = ids[1]
    samples: dict[str, list[float]] = {"through": [], "direct": []}
    for q in range(queries):
        pid = ids[q % posts]
        for name in (["through", "direct"] if q % 2 == 0 else ["direct", "through"]):
            began = time.perf_counter()
            if name == "through":
                target.find_one({rule.link_to: pid})
            else:
                direct_target.find_one({rule.link_to: pid})
                direct_source.count_documents({rule.link_from: pid})
            samples[name].append(time.perf_counter() - began)
    return CommentsFigures(rule, posts, comments, deleted, moved, target.find_one({rule.link_to: shown}),
                           direct_source.count_documents({rule.link_from: shown}),
                           percentile(samples["through"], 0.5) * 1e3, percentile(samples["direct"], 0.5) * 1e3,
                           queries)


def report(f: CommentsFigures) -> list[str]:
    r = f.rule
    first, second = post_ids(f.posts)[:2]
    maxima = "".join(f", and {field} the latest {source}" for field, source in r.maxima.items())
    return [
        f"comments ({r.db}.{r.collection}, computed rule): {f.posts} posts in {r.target_db}.{r.target}; through "
        f"remold {f.inserted:,} comments inserted, {f.deleted:,} deleted (spam), {f.moved:,} moved from {first} "
        f"to {second}",
        f"  every post's {r.count_field} equals its comments counted on the backend{maxima}",
        f"  post {second}: {f.shown_post}   comments counted: {f.shown_counted}",
        f"  a post with its count, p50 of {f.timed_queries} each:",
        f"    through remold, one find         {f.p50_through_ms:8.2f} ms",
        f"    directly, a find and a count     {f.p50_direct_ms:8.2f} ms",
    ]
