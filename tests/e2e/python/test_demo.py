"""`make demo` (examples/demo.py) at a small size: 2 sensors x 1 day of
readings, 200 products, 5 posts and 100 comments.

The parts' cores run through a remold with the example rules in front of
the suite's backend (database `demo`, dropped before and after), and their
figures are checked against what the seeded data implies, worked out here:
buckets per sensor and hour, the products a query matches, the comments
left on each post after the deletes and the move. The demo script itself
runs once as `make demo` runs it (its own backend and remold) and must
exit 0 with its three parts printed: each part raises when an answer
through remold differs from the plain collection's.
"""
from __future__ import annotations

import subprocess
import sys

import pymongo
import pytest

from conftest import REMOLD_BINARY, SOURCE_DIR, remold_environment

sys.path.insert(0, str(SOURCE_DIR / "examples"))
import demo_comments  # noqa: E402
import demo_products  # noqa: E402
import demo_readings  # noqa: E402
import example_rules  # noqa: E402
from remold_explain import explain  # noqa: E402

RULES = SOURCE_DIR / "examples" / "rules"


@pytest.fixture
def demo_dbs(private_remold, direct_client, proxy_only):
    """(database through a remold with the example rules, on the backend, explain) per rule."""
    rules = example_rules.load(RULES)
    dbs = {r.namespace.split(".")[0] for r in rules}
    for name in dbs:
        direct_client.drop_database(name)
    remold = private_remold(extra_args=("--rules", str(RULES)))
    through = pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=10_000)

    def parts(pattern: str):
        names = getattr(example_rules.by_pattern(rules, pattern), pattern)
        return (names, through[names.db], direct_client[names.db],
                lambda command: explain(REMOLD_BINARY, RULES, names.db, command))
    yield parts
    through.close()
    for name in dbs:
        direct_client.drop_database(name)


def test_readings_flat_against_buckets(demo_dbs):
    rule, through, direct, explain_in = demo_dbs("bucket")
    f = demo_readings.run(rule, through, direct, explain_in, sensors=2, days=1, queries=3)
    assert f.readings == f.flat.documents == 2 * 24 * 60
    assert f.buckets.documents == 2 * 24  # a bucket per sensor and hour
    assert (f.flat.indexes, f.buckets.indexes) == (2, 2)
    assert (f.flat.index_entries, f.buckets.index_entries) == (2 * 2880, 2 * 48)
    assert f.hours == 24 and f.sensor == "s1"
    assert [next(iter(c)) for c in f.plan] == ["aggregate"] and f.plan[0]["aggregate"] == rule.buckets
    assert "$unwind" not in {next(iter(stage)) for stage in f.plan[0]["pipeline"]}, f.plan
    assert any("buckets, through remold" in line for line in demo_readings.report(f))


def test_products_by_attribute(demo_dbs):
    rule, through, direct, explain_in = demo_dbs("attribute")
    f = demo_products.run(rule, through, direct, explain_in, products=200, queries=3)
    matching = [p for p in demo_products.catalogue(200) if p.get("ram_gb", 0) >= 32]
    assert f.matched == len(matching) > 0
    assert f.stored.documents == f.flat.documents == 200
    assert f.stored.indexes == 2 and f.flat.indexes == 1 + len(demo_products.ATTRIBUTES)
    assert f.rewritten == {rule.array: {"$elemMatch": {rule.key: "ram_gb", rule.value: {"$gte": 32}}}}
    assert set(f.p50_ms) == {"through", "flat", "rewritten"}


def test_post_with_its_comment_count(demo_dbs):
    rule, through, direct, _ = demo_dbs("computed")
    f = demo_comments.run(rule, through, direct, posts=5, comments=100, queries=3)
    comments = demo_comments.comments_of(rule, 5, 100)
    kept = [c for c in comments if not c["spam"]]
    assert f.inserted == 100 and f.deleted == len(comments) - len(kept)
    assert f.moved == sum(c[rule.link_from] == "p0" for c in kept)
    on_p1 = sum(c[rule.link_from] in ("p0", "p1") for c in kept)
    assert f.shown_post[rule.count_field] == f.shown_counted == on_p1
    assert through.client[rule.target_db][rule.target].find_one({rule.link_to: "p0"})[rule.count_field] == 0


def test_demo_script_runs_at_a_small_size(proxy_only):
    result = subprocess.run([sys.executable, str(SOURCE_DIR / "examples" / "demo.py"),
                             "--build", str(REMOLD_BINARY.parent), "--sensors", "2", "--days", "1",
                             "--products", "100", "--posts", "3", "--comments", "50", "--queries", "2"],
                            cwd=SOURCE_DIR, capture_output=True, text=True, timeout=120,
                            env=remold_environment(None))  # its own backend takes no credentials
    assert result.returncode == 0, result.stdout + result.stderr
    for part in ("readings (demo.readings, bucket rule): 2,880 readings",
                 "products (demo.products, attribute rule): 100 products",
                 "comments (demo.comments, computed rule): 3 posts"):
        assert part in result.stdout, result.stdout
