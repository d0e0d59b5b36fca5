"""The subset rule end to end: unmodified pymongo through remold with a
rules directory, checked against the documents read directly on the backend.

The rule (one file, on the children):

    reviews -> products.recentReviews   the first 5 reviews of each product
                                        by {at: -1} (ties: _id, descending),
                                        entries {_id, author, rating, at}

The oracle is the reviews as the backend holds them after the writes (read
with ``direct_client``): each product's first 5 are recomputed here in
Python and compared with the stored array. Nothing depends on a quirk of the
stand-in backend (mongo-java-server serialises writes, so races come from
remold's own interleaving of several clients' multi-step writes; against a
real mongod, REMOLD_TEST_BACKEND_URI, they are real).

Sections: 1. 8 concurrent clients over 12 products (two of them hot):
inserts (one and many), deletes (one, many, findOneAndDelete), updates of
copied fields, of the order, of fields not copied, moves to another
product, replacements, upserts, findOneAndUpdate; 2. targeted cases (ties,
eviction and refill, reviews without a product or with an array of
products, a product created after its reviews, drop refused, explain);
3. `remold reconcile` reports a tampered subset and --fix repairs it.

``REMOLD_TEST_SUBSET_SCALE`` (default 1.0) scales the operation count.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import subprocess
from types import SimpleNamespace
from typing import Any

import pytest
from bson import ObjectId, json_util
from pymongo import DeleteOne, InsertOne, ReturnDocument, UpdateOne
from pymongo.errors import OperationFailure

from concurrent_clients import report, run_clients
from conftest import require_binary
from support import projection_keeps_document_order

SCALE = float(os.environ.get("REMOLD_TEST_SUBSET_SCALE", "1"))
REVIEW_OPS = max(200, int(6_000 * SCALE))
LIMIT = 5
FIELDS = ["author", "rating", "at"]
PRODUCTS = [f"p{k:02d}" for k in range(12)]
HOT = PRODUCTS[:2]
AUTHORS = [f"author-{k}" for k in range(6)]
T0 = dt.datetime(2025, 3, 1)
INVALID_OPTIONS = 72


def reviews_rule(db: str) -> str:
    return f"""namespace: {db}.reviews
pattern: subset
subset:
  parent: products
  link: productId
  array: recentReviews
  sort: {{at: -1}}
  limit: {LIMIT}
  fields: [{", ".join(FIELDS)}]
"""


@pytest.fixture
def subset_env(tmp_path, private_remold, make_client, direct_client, db_name):
    rules_dir = tmp_path / "rules"
    rules_dir.mkdir()
    (rules_dir / "reviews.yaml").write_text(reviews_rule(db_name))
    remold = private_remold(extra_args=("--rules", str(rules_dir)))
    client = make_client(remold.uri)
    yield SimpleNamespace(
        remold=remold,
        rules_dir=rules_dir,
        db=client[db_name],
        direct=direct_client[db_name],
        make_client=lambda: make_client(remold.uri),
        name=db_name,
    )
    direct_client.drop_database(db_name)


def show(doc: Any) -> str:
    return json_util.dumps(doc, sort_keys=True)


def sort_key(review: dict):
    # {at: -1, _id: -1}: newest first, ties by the larger _id first.
    return (review.get("at") or dt.datetime.min, review["_id"])


def expected_subset(reviews: list[dict], pid) -> list[dict]:
    mine = [r for r in reviews if r.get("productId") == pid and not isinstance(r.get("productId"), list)]
    mine.sort(key=sort_key, reverse=True)
    return [{k: r[k] for k in ["_id", *FIELDS] if k in r} for r in mine[:LIMIT]]


def subset_problems(direct) -> tuple[list[str], int]:
    # Sorted on the server: DocumentDB's unsorted cursor of several batches
    # returns documents updated before the read again (docs/backends.md, 8).
    reviews = list(direct.reviews.find().sort("_id", 1))
    problems = []
    checked = 0
    for product in direct.products.find().sort("_id", 1):
        checked += 1
        want = expected_subset(reviews, product["_id"])
        have = product.get("recentReviews", [])
        if have != want:
            problems.append(f"product {product['_id']}: recentReviews {show(have)}, expected {show(want)}")
    return problems, checked


def assert_subsets(env, what: str) -> int:
    problems, checked = subset_problems(env.direct)
    if problems:
        log = env.remold.stderr().strip().splitlines()
        raise AssertionError(report(problems, what) + "\nremold stderr (last 10):\n" + "\n".join(log[-10:]))
    return checked


def seed_products(env) -> None:
    env.direct.products.insert_many([{"_id": p, "name": f"product {p}", "price": 10 + k}
                                     for k, p in enumerate(PRODUCTS)])
    env.direct.reviews.create_index([("productId", 1), ("at", -1)])


def new_review(rng: random.Random) -> dict:
    pid = rng.choice(HOT) if rng.random() < 0.4 else rng.choice(PRODUCTS)
    return {
        "_id": ObjectId(),
        "productId": pid,
        "author": rng.choice(AUTHORS),
        "rating": rng.randint(1, 5),
        # Seconds only, so that ties on `at` happen and _id decides them.
        "at": T0 + dt.timedelta(seconds=rng.randrange(400)),
        "text": "x" * rng.randrange(20),
    }


def some_review(db, rng: random.Random):
    """A review of a (likely hot) product, or None."""
    pid = rng.choice(HOT) if rng.random() < 0.5 else rng.choice(PRODUCTS)
    found = list(db.reviews.find({"productId": pid}, {"_id": 1}).sort("at", -1).limit(8))
    return rng.choice(found)["_id"] if found else None


def review_step(db, rng: random.Random, op: str) -> None:
    if op == "insert":
        db.reviews.insert_one(new_review(rng))
    elif op == "insert_many":
        db.reviews.insert_many([new_review(rng) for _ in range(rng.randint(2, 4))], ordered=rng.random() < 0.5)
    elif op == "bulk":
        rid = some_review(db, rng)
        ops = [InsertOne(new_review(rng))]
        if rid is not None:
            ops.append(UpdateOne({"_id": rid}, {"$set": {"rating": rng.randint(1, 5)}}))
            ops.append(DeleteOne({"_id": rid}))
        db.reviews.bulk_write(ops, ordered=rng.random() < 0.5)
    elif op == "delete":
        rid = some_review(db, rng)
        if rid is not None:
            db.reviews.delete_one({"_id": rid})
    elif op == "delete_many":
        db.reviews.delete_many({"productId": rng.choice(PRODUCTS), "author": rng.choice(AUTHORS),
                                "rating": {"$lte": 2}})
    elif op == "find_one_and_delete":
        db.reviews.find_one_and_delete({"productId": rng.choice(HOT)}, sort=[("at", -1)])
    elif op == "rate":
        rid = some_review(db, rng)
        if rid is not None:
            db.reviews.update_one({"_id": rid}, {"$set": {"rating": rng.randint(1, 5)}})
    elif op == "retime":
        rid = some_review(db, rng)
        if rid is not None:
            db.reviews.update_one({"_id": rid}, {"$set": {"at": T0 + dt.timedelta(seconds=rng.randrange(400))}})
    elif op == "move":
        rid = some_review(db, rng)
        if rid is not None:
            db.reviews.update_one({"_id": rid}, {"$set": {"productId": rng.choice(PRODUCTS)}})
    elif op == "text":
        rid = some_review(db, rng)
        if rid is not None:
            db.reviews.update_one({"_id": rid}, {"$set": {"text": "edited"}})
    elif op == "replace":
        rid = some_review(db, rng)
        if rid is not None:
            r = new_review(rng)
            del r["_id"]
            db.reviews.replace_one({"_id": rid}, r)
    elif op == "upsert":
        r = new_review(rng)
        db.reviews.update_one({"_id": r.pop("_id")}, {"$set": r}, upsert=True)
    elif op == "fam":
        db.reviews.find_one_and_update({"productId": rng.choice(HOT)}, {"$inc": {"rating": 1}},
                                       sort=[("at", -1)], return_document=ReturnDocument.AFTER)
    elif op == "unset_author":
        rid = some_review(db, rng)
        if rid is not None:
            db.reviews.update_one({"_id": rid}, {"$unset": {"author": ""}})
    elif op == "read":
        db.products.find_one({"_id": rng.choice(PRODUCTS)})
    else:
        raise AssertionError(op)


REVIEW_MIX = [
    ("insert", 30), ("insert_many", 6), ("bulk", 3), ("delete", 10), ("delete_many", 2),
    ("find_one_and_delete", 3), ("rate", 8), ("retime", 6), ("move", 6), ("text", 4),
    ("replace", 3), ("upsert", 4), ("fam", 3), ("unset_author", 2), ("read", 10),
]


def test_concurrent_clients_keep_every_subset_exact(subset_env):
    env = subset_env
    seed_products(env)
    errors, tally, seconds = run_clients(env.make_client, env.name, 8, REVIEW_OPS, REVIEW_MIX, review_step, seed=14)
    assert not errors, "\n".join(errors[:3])
    checked = assert_subsets(env, f"after {REVIEW_OPS} operations from 8 clients")
    n_reviews = env.direct.reviews.count_documents({})
    print(f"\n{REVIEW_OPS} operations from 8 clients in {seconds:.1f} s: {tally}; "
          f"{checked} products, {n_reviews} reviews, every subset exact")
    # What a reader of the product sees through remold: the same array.
    for pid in HOT:
        assert env.db.products.find_one({"_id": pid}) == env.direct.products.find_one({"_id": pid})
    assert n_reviews > 100, "the mix must leave reviews behind for the check to mean something"


HOT_OPS = max(200, int(3_000 * SCALE))


def hot_step(db, rng: random.Random, op: str) -> None:
    """Every client on one product holding about LIMIT + 3 reviews, so that
    nearly every write changes its subset: pushes, pulls and refills meet."""
    if op == "insert":
        db.reviews.insert_one({"productId": "hot", "rating": rng.randint(1, 5),
                               "at": T0 + dt.timedelta(seconds=rng.randrange(60))})
    elif op == "delete":
        db.reviews.delete_one({"productId": "hot", "at": {"$gte": T0 + dt.timedelta(seconds=rng.randrange(60))}})
    elif op == "retime":
        db.reviews.update_one({"productId": "hot", "rating": rng.randint(1, 5)},
                              {"$set": {"at": T0 + dt.timedelta(seconds=rng.randrange(60))}})
    elif op == "away":
        db.reviews.update_one({"productId": "hot"}, {"$set": {"productId": "cold"}})
    elif op == "back":
        db.reviews.update_one({"productId": "cold"}, {"$set": {"productId": "hot"}})
    else:
        raise AssertionError(op)


def test_one_hot_product_every_client_at_once(subset_env):
    env = subset_env
    env.direct.products.insert_many([{"_id": "hot"}, {"_id": "cold"}])
    env.db.reviews.insert_many([{"productId": "hot", "rating": k % 5 + 1, "at": T0 + dt.timedelta(seconds=k)}
                                for k in range(LIMIT + 3)])
    mix = [("insert", 4), ("delete", 4), ("retime", 3), ("away", 1), ("back", 1)]
    errors, tally, seconds = run_clients(env.make_client, env.name, 8, HOT_OPS, mix, hot_step, seed=15)
    assert not errors, "\n".join(errors[:3])
    assert_subsets(env, f"after {HOT_OPS} operations on one product from 8 clients")
    print(f"\n{HOT_OPS} operations on one product from 8 clients in {seconds:.1f} s: {tally}")


def stacked_env(tmp_path, private_remold, make_client, direct_client, db_name, lower: str, section: str):
    """A remold whose reviews rule is the stack [subset, <lower>], with the
    lower rule's `section` appended to the rule file."""
    rules_dir = tmp_path / "rules"
    rules_dir.mkdir()
    (rules_dir / "reviews.yaml").write_text(reviews_rule(db_name).replace(
        "pattern: subset", f"pattern: [subset, {lower}]") + section)
    remold = private_remold(extra_args=("--rules", str(rules_dir)))
    return SimpleNamespace(remold=remold, rules_dir=rules_dir, db=make_client(remold.uri)[db_name],
                           direct=direct_client[db_name], make_client=lambda: make_client(remold.uri), name=db_name)


def test_stacked_over_a_computed_count(tmp_path, private_remold, make_client, direct_client, db_name):
    """`pattern: [subset, computed]`: one rule file keeps each product's
    recent reviews and its review count; the subset's writes run through
    the computed rule."""
    env = stacked_env(tmp_path, private_remold, make_client, direct_client, db_name, "computed", """computed:
  aggregates:
    - target: products
      link: productId
      fields:
        reviewCount: count
""")
    try:
        seed_products(env)
        ops = max(200, int(2_000 * SCALE))
        errors, tally, seconds = run_clients(env.make_client, env.name, 8, ops, REVIEW_MIX, review_step, seed=16)
        assert not errors, "\n".join(errors[:3])
        assert_subsets(env, f"stacked over a count, after {ops} operations from 8 clients")
        reviews = list(env.direct.reviews.find().sort("_id", 1))
        wrong = []
        for product in env.direct.products.find().sort("_id", 1):
            count = sum(1 for r in reviews if r.get("productId") == product["_id"])
            if product.get("reviewCount", 0) != count:
                wrong.append(f"product {product['_id']}: reviewCount {product.get('reviewCount')}, expected {count}")
        assert not wrong, report(wrong, "review counts")
        print(f"\n{ops} operations from 8 clients in {seconds:.1f} s: subsets and counts exact")
    finally:
        direct_client.drop_database(db_name)


def test_ties_eviction_and_refill(subset_env):
    env = subset_env
    env.direct.products.insert_one({"_id": "p", "name": "lamp"})
    same = T0 + dt.timedelta(seconds=5)
    ids = [ObjectId() for _ in range(8)]
    # Eight reviews at the same instant: _id decides, the largest first.
    env.db.reviews.insert_many([{"_id": i, "productId": "p", "author": "a", "rating": 3, "at": same} for i in ids])
    product = env.direct.products.find_one({"_id": "p"})
    assert [e["_id"] for e in product["recentReviews"]] == sorted(ids, reverse=True)[:LIMIT]
    # An older one is pushed and sliced away at once.
    env.db.reviews.insert_one({"_id": ObjectId(), "productId": "p", "rating": 1, "at": T0})
    assert_subsets(env, "after an older review")
    # Deleting three of the five embedded: refilled from the reviews left.
    for i in sorted(ids, reverse=True)[:3]:
        env.db.reviews.delete_one({"_id": i})
    assert_subsets(env, "after deleting embedded reviews")
    # Deleting one that is not embedded changes nothing (and needs no refill).
    env.db.reviews.delete_one({"at": T0})
    assert_subsets(env, "after deleting a review not embedded")
    # Everything gone: an empty array.
    env.db.reviews.delete_many({"productId": "p"})
    assert env.direct.products.find_one({"_id": "p"})["recentReviews"] == []


def test_links_that_name_no_single_product(subset_env):
    env = subset_env
    env.direct.products.insert_many([{"_id": 1}, {"_id": 2}])
    env.db.reviews.insert_many([
        {"_id": "none", "rating": 5, "at": T0},                       # no product
        {"_id": "null", "productId": None, "rating": 5, "at": T0},    # null
        {"_id": "many", "productId": [1, 2], "rating": 5, "at": T0},  # an array of products
        {"_id": "ghost", "productId": 99, "rating": 5, "at": T0},     # a product that does not exist
        {"_id": "one", "productId": 1, "rating": 4, "at": T0},
    ])
    assert env.direct.products.count_documents({}) == 2, "no product is created for a review"
    assert_subsets(env, "after reviews with odd links")
    # The review moves from the array to a single product, and back.
    env.db.reviews.update_one({"_id": "many"}, {"$set": {"productId": 2}})
    assert_subsets(env, "after a move from an array")
    env.db.reviews.update_one({"_id": "many"}, {"$set": {"productId": [2]}})
    assert_subsets(env, "after a move into an array")


def test_an_entry_sorted_by_an_array_keeps_its_place_when_another_is_pushed(subset_env):
    """A review whose `at` is an array sorts by its latest date (a find's
    order); $push's $sort would put it after every single date, so a parent
    holding such an entry is refilled rather than pushed to."""
    env = subset_env
    env.direct.products.insert_one({"_id": "p"})
    minutes = lambda m: T0 + dt.timedelta(minutes=m)
    env.db.reviews.insert_one({"_id": 1, "productId": "p", "rating": 3, "at": [minutes(1), minutes(10)]})
    env.db.reviews.insert_one({"_id": 2, "productId": "p", "rating": 4, "at": minutes(5)})
    env.db.reviews.insert_many([{"_id": 3, "productId": "p", "at": minutes(20)},
                                {"_id": 4, "productId": "p", "at": minutes(2)}])
    want = list(env.direct.reviews.find({"productId": "p"}, {"productId": 0})
                .sort([("at", -1), ("_id", -1)]).limit(LIMIT))
    assert [r["_id"] for r in want] == [3, 1, 2, 4], "the server's own order, the rule's"
    assert env.direct.products.find_one({"_id": "p"})["recentReviews"] == want


def test_product_created_after_its_reviews_and_reconcile(subset_env, tmp_path):
    env = subset_env
    env.db.reviews.insert_many([{"_id": k, "productId": "late", "rating": k, "at": T0 + dt.timedelta(seconds=k)}
                                for k in range(7)])
    env.direct.products.insert_one({"_id": "late", "name": "written after its reviews"})
    env.direct.products.insert_one({"_id": "tampered", "recentReviews": [{"_id": "gone"}]})
    config = tmp_path / "remold.yaml"
    config.write_text(f"backend: {env.remold.backend_uri}\nrules: {env.rules_dir}\n")
    binary = require_binary()

    def reconcile(*args):
        return subprocess.run([str(binary), "reconcile", "--config", str(config), *args],
                              capture_output=True, text=True, timeout=120)

    checked = reconcile()
    assert checked.returncode == 1, checked.stdout + checked.stderr
    lines = [line for line in checked.stdout.splitlines() if line.startswith(f"{env.name}.products")]
    assert len(lines) == 2, checked.stdout
    assert any('"late"' in line for line in lines) and any('"tampered"' in line for line in lines)
    assert f"rule reviews: {env.name}.products: 2 checked, 2 drifted, 0 fixed" in checked.stdout

    fixed = reconcile("--fix")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert fixed.stdout.count("=> fixed") == 2, fixed.stdout
    assert_subsets(env, "after reconcile --fix")
    assert env.direct.products.find_one({"_id": "tampered"})["recentReviews"] == []
    again = reconcile()
    assert again.returncode == 0 and "0 drifted" in again.stdout, again.stdout


def test_explain_shows_the_follow_ups(subset_env):
    env = subset_env
    out = subprocess.run([str(require_binary()), "explain", "--rules", str(env.rules_dir), "--db", env.name,
                          json_util.dumps({"insert": "reviews", "documents": [{"_id": 1, "productId": "p"}]})],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    follow_ups = [line for line in out.stdout.splitlines() if line.startswith("  - ")]
    assert len(follow_ups) == 3, out.stdout
    assert f"{env.name}.products.recentReviews" in follow_ups[0] and "$slice 5" in follow_ups[0]
    assert "refill" in follow_ups[2] and "sort {at: -1, _id: -1}" in follow_ups[2]


def test_drop_refused_while_reviews_exist_and_retryable_writes(subset_env):
    env = subset_env
    env.direct.products.insert_one({"_id": "p"})
    env.db.reviews.insert_one({"productId": "p", "rating": 2, "at": T0})
    with pytest.raises(OperationFailure) as refused:
        env.db.reviews.drop()
    assert refused.value.code == INVALID_OPTIONS
    assert "subset rule 'reviews'" in str(refused.value) and "recentReviews" in str(refused.value)
    # pymongo retries writes by default: a single delete and update keep
    # their txnNumber (one findAndModify); a delete of many is not retryable.
    env.db.reviews.delete_many({"productId": "p"})
    assert env.direct.products.find_one({"_id": "p"})["recentReviews"] == []
    env.db.reviews.drop()
    assert "reviews" not in env.direct.list_collection_names()


def test_an_entry_keeps_the_review_s_field_order(subset_env):
    """An entry's fields come in the review's own order, not the rule's
    `fields` order (docs/patterns/subset.md; issue 28), whether the entry was embedded from
    the inserted review or read back to refill the subset. A read-back
    entry is in the order the backend returns a projection of the review:
    the document's on MongoDB and DocumentDB, the projection's on
    mongo-java-server (docs/backends.md), where that case is skipped."""
    db, direct = subset_env.db, subset_env.direct
    db.products.insert_one({"_id": 1})
    fields = list(reversed(FIELDS))  # the review's own order: the rule's, reversed
    for i in range(LIMIT + 1):
        values = {"author": f"a{i}", "rating": i % 5, "at": T0 + dt.timedelta(minutes=i), "text": "t"}
        db.reviews.insert_one({"_id": i, "productId": 1, **{f: values[f] for f in fields if f in values}})

    def check(what: str) -> None:
        for entry in direct.products.find_one({"_id": 1})["recentReviews"]:
            own = [f for f in direct.reviews.find_one({"_id": entry["_id"]}) if f == "_id" or f in FIELDS]
            assert list(entry) == own, f"{what}: entry {list(entry)}, review {own}"

    check("embedded on insert")
    if not projection_keeps_document_order(direct):
        pytest.skip("the backend returns a projection in its own field order (mongo-java-server): "
                    "a read-back entry follows it")
    db.reviews.delete_one({"_id": LIMIT})  # the newest goes: the oldest is read back in
    check("after a refill")


def attribute_review_step(db, rng: random.Random, op: str) -> None:
    """The review mix, but for its upsert, which sets no attribute: the
    attribute rule refuses an upsert setting one (72, docs/patterns/stacking.md)."""
    if op != "upsert":
        return review_step(db, rng, op)
    r = new_review(rng)
    del r["text"]
    db.reviews.update_one({"_id": r.pop("_id")}, {"$set": r}, upsert=True)


def test_stacked_over_an_attribute_rule(tmp_path, private_remold, make_client, direct_client, db_name):
    """`pattern: [subset, attribute]`: the reviews store their sparse fields as
    {k, v} pairs, and the products keep their recent reviews; the subset's
    writes and reads of the reviews run through the attribute rule."""
    env = stacked_env(tmp_path, private_remold, make_client, direct_client, db_name, "attribute", """attribute:
  array: attrs
  except: [productId, at, author, rating]
""")
    try:
        seed_products(env)
        ops = max(200, int(2_000 * SCALE))
        errors, tally, seconds = run_clients(env.make_client, env.name, 8, ops, REVIEW_MIX, attribute_review_step,
                                             seed=17)
        assert not errors, "\n".join(errors[:3])
        assert_subsets(env, f"stacked over an attribute rule, after {ops} operations from 8 clients")
        stored = list(env.direct.reviews.find({"attrs.k": "text"}).limit(1))
        assert stored and "text" not in stored[0], "the attribute rule stored `text` as a pair"
        through = {r["_id"]: r for r in env.db.reviews.find().sort("_id", 1)}
        for r in env.direct.reviews.find().sort("_id", 1):
            want = {k: v for k, v in r.items() if k != "attrs"}
            want.update({p["k"]: p["v"] for p in r.get("attrs", [])})
            assert through[r["_id"]] == want
        print(f"\n{ops} operations from 8 clients in {seconds:.1f} s: {tally}; subsets exact, reviews read as written")
    finally:
        direct_client.drop_database(db_name)
