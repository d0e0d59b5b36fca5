"""Ruled collections reached from elsewhere: $lookup, $unionWith, $facet,
views, $out/$merge, $graphLookup, renames, change streams, mapReduce,
bulkWrite. Unmodified pymongo through remold, checked against an oracle:
the same pipeline run directly on the backend over flat copies of the data
(plain collections with no rule), written with the same documents.

One database, three rules (bucket ``readings``, attribute ``products``,
computed ``comments`` -> ``posts``), and plain collections (``sensors``,
``orders``, ``sites``) that reach into them. Every read must answer as the
flat copy does; every refusal must carry the documented code and name the
rule (docs/what-works.md, "What works through remold").
"""

from __future__ import annotations

import datetime as dt
import uuid

import pymongo
import pytest
from bson import json_util
from pymongo.errors import OperationFailure

from conftest import start_remold
from support import run_explain

T0 = dt.datetime(2024, 3, 4)

RULES = {
    "readings.yaml": """namespace: {db}.readings
pattern: bucket
bucket:
  collection: readings_buckets
  meta: [sensor]
  time: at
  span: 1h
""",
    "products.yaml": """namespace: {db}.products
pattern: attribute
attribute:
  array: specs
  except: [name, price]
""",
    "comments.yaml": """namespace: {db}.comments
pattern: computed
computed:
  aggregates:
    - target: posts
      link: {{from: postId, to: _id}}
      fields:
        commentCount: count
""",
}

# Edge values on the join keys: arrays on either side, null, missing,
# numbers of two types, a value nobody has.
SENSORS = [
    {"_id": 1, "name": "s1", "site": "a"},
    {"_id": 2, "name": "s2", "site": "a"},
    {"_id": 3, "name": ["s1", "s3"], "site": "b"},
    {"_id": 4, "name": None, "site": "b"},
    {"_id": 5, "site": "c"},
    {"_id": 6, "name": 7, "site": "c"},
    {"_id": 7, "name": "nobody", "site": "a"},
]
READINGS = (
    [{"_id": i, "sensor": f"s{1 + i % 3}", "at": T0 + dt.timedelta(minutes=7 * i), "temp": 10 + i}
     for i in range(30)]
    + [{"_id": 100, "sensor": None, "at": T0, "temp": 1},  # the null group
       {"_id": 101, "sensor": 7, "at": T0, "temp": 2},
       {"_id": 102, "sensor": 7.5, "at": T0 + dt.timedelta(hours=3), "temp": 3}]
)
PRODUCTS = [
    {"_id": 1, "name": "laptop", "price": 900, "sku": "L-1", "ram_gb": 16, "color": "grey"},
    {"_id": 2, "name": "phone", "price": 500, "sku": "P-1", "ram_gb": 8},
    {"_id": 3, "name": "cable", "price": 5, "sku": ["C-1", "C-2"]},
    {"_id": 4, "name": "desk", "price": 200, "color": "oak"},
    {"_id": 5, "name": "tablet", "price": 400, "sku": "T-1", "ram_gb": 16, "sensor_id": "s2"},
]
ORDERS = [
    {"_id": 1, "sku": "L-1", "ram": 16},
    {"_id": 2, "sku": "C-2", "ram": 8},
    {"_id": 3, "sku": ["P-1", "T-1"]},
    {"_id": 4},
    {"_id": 5, "sku": None},
]
POSTS = [{"_id": p} for p in range(1, 5)]
COMMENTS = [{"_id": i, "postId": 1 + i % 3, "text": f"c{i}", "replyTo": i - 1 if i % 2 else None}
            for i in range(10)]
SITES = [{"_id": "a", "sensor": "s1"}, {"_id": "b", "sensor": "s2"}, {"_id": "c"}]

RULED = ("readings", "products", "comments")


class World:
    """The same data through remold (ruled) and directly on the backend (flat)."""

    def __init__(self, ruled_db, flat_db, direct_db, remold, rules_dir):
        self.rules_dir = rules_dir
        self.ruled = ruled_db
        self.flat = flat_db
        self.direct = direct_db
        self.remold = remold


@pytest.fixture(scope="module")
def world(backend, tmp_path_factory):
    db_name = f"e2e_py_references_{uuid.uuid4().hex[:8]}"
    flat_name = db_name + "_flat"
    rules_dir = tmp_path_factory.mktemp("reference_rules")
    for name, text in RULES.items():
        (rules_dir / name).write_text(text.format(db=db_name))
    remold = start_remold(backend.uri, extra_args=("--rules", str(rules_dir)))
    client = pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=10_000)
    direct = pymongo.MongoClient(backend.direct_uri, serverSelectionTimeoutMS=10_000)
    try:
        ruled, flat = client[db_name], direct[flat_name]
        # posts first: the computed rule maintains them.
        for target in (ruled, flat):
            target.posts.insert_many([dict(d) for d in POSTS])
        for name, docs in (("sensors", SENSORS), ("orders", ORDERS), ("sites", SITES),
                           ("readings", READINGS), ("products", PRODUCTS),
                           ("comments", COMMENTS)):
            ruled[name].insert_many([dict(d) for d in docs])
            flat[name].insert_many([dict(d) for d in docs])
        flat.posts.delete_many({})
        flat.posts.insert_many(list(client[db_name].posts.find()))
        yield World(ruled, flat, direct[db_name], remold, rules_dir)
    finally:
        direct.drop_database(db_name)
        direct.drop_database(flat_name)
        client.close()
        direct.close()
        remold.kill()
        remold.forget_stderr()


# Capabilities of the backend, probed on plain collections (never assumed):
# a stand-in may lack what MongoDB 4.4+ has. A test that needs one skips
# when the backend itself cannot run the pipeline on the flat copy.


def backend_keeps_lookup_variables(world) -> bool:
    """MongoDB keeps a $lookup's `let` variables through every stage of its
    pipeline; mongo-java-server loses them after $unwind + $project."""
    try:
        list(world.flat.sensors.aggregate([{"$lookup": {
            "from": "sites", "let": {"x": {"$ifNull": ["$site", None]}},
            "pipeline": [{"$unwind": {"path": "$sensor", "preserveNullAndEmptyArrays": True}},
                         {"$project": {"sensor": 1}},
                         {"$match": {"$expr": {"$eq": ["$$x", "$$x"]}}}],
            "as": "j"}}]))
        return True
    except OperationFailure:
        return False


def require(capable: bool, what: str):
    if not capable:
        pytest.skip(f"the backend cannot run {what} on a plain collection "
                    "(run against mongod with REMOLD_TEST_BACKEND_URI)")


def backend_runs_view_inside_lookup(world, collection: str, pipeline: list) -> bool:
    """Whether the backend itself runs the pipeline remold sends for this
    one (the rule's view inside a $lookup), straight on the stored data.
    mongo-java-server cannot run the attribute view inside a $lookup
    ("Failed to optimize pipeline"); mongod can."""
    [command] = run_explain(world.rules_dir, world.ruled.name,
                            {"aggregate": collection, "pipeline": pipeline, "cursor": {}})
    try:
        list(world.direct[collection].aggregate(command["pipeline"]))
        return True
    except OperationFailure:
        return False


def backend_has_unionwith(world) -> bool:
    try:
        list(world.flat.sensors.aggregate([{"$unionWith": "sites"}]))
        return True
    except OperationFailure:
        return False


def canon(value):
    """Order-free form: documents by sorted keys, arrays of documents sorted
    (a join's matches come in an order no plain collection promises)."""
    if isinstance(value, dict):
        return {k: canon(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        items = [canon(v) for v in value]
        if items and all(isinstance(v, dict) for v in items):
            items.sort(key=lambda v: json_util.dumps(v, sort_keys=True))
        return items
    return value


def both(world, collection: str, pipeline: list) -> tuple[list, list]:
    ruled = list(world.ruled[collection].aggregate(pipeline))
    flat = list(world.flat[collection].aggregate(pipeline))
    return ruled, flat


def assert_same(world, collection: str, pipeline: list, at_least: int = 1):
    ruled, flat = both(world, collection, pipeline)
    assert canon(ruled) == canon(flat), (
        f"{collection} {pipeline}\nthrough remold: {json_util.dumps(canon(ruled))}\n"
        f"flat copy:      {json_util.dumps(canon(flat))}")
    # The oracle must have found something, or the comparison proves nothing.
    assert sum(len(json_util.dumps(d)) for d in flat) > 0 and len(flat) >= at_least


# --------------------------------------------------------------------------
# Reads from elsewhere go through the view.


def test_lookup_equality_into_bucket_matches_readings(world):
    pipeline = [{"$lookup": {"from": "readings", "localField": "name",
                             "foreignField": "sensor", "as": "r"}}]
    assert_same(world, "sensors", pipeline, at_least=len(SENSORS))
    ruled, _ = both(world, "sensors", pipeline)
    s1 = next(d for d in ruled if d["_id"] == 1)
    assert len(s1["r"]) == 10, "sensor s1 has 10 readings; a $lookup into buckets found none"


def test_lookup_equality_null_and_missing_local_match_the_null_group(world):
    pipeline = [{"$match": {"_id": {"$in": [4, 5]}}},
                {"$lookup": {"from": "readings", "localField": "name",
                             "foreignField": "sensor", "as": "r"}}]
    assert_same(world, "sensors", pipeline, at_least=2)


def test_lookup_pipeline_form_into_bucket(world):
    require(backend_keeps_lookup_variables(world), "$lookup variables after $unwind")
    pipeline = [{"$lookup": {"from": "readings", "let": {"n": "$name"},
                             "pipeline": [{"$match": {"$expr": {"$eq": ["$sensor", "$$n"]}}},
                                          {"$match": {"temp": {"$gte": 20}}},
                                          {"$project": {"_id": 1, "temp": 1}}],
                             "as": "hot"}}]
    assert_same(world, "sensors", pipeline, at_least=len(SENSORS))


def test_lookup_inside_facet_into_bucket(world):
    pipeline = [{"$facet": {
        "count": [{"$count": "n"}],
        "joined": [{"$lookup": {"from": "readings", "localField": "name",
                                "foreignField": "sensor", "as": "r"}},
                   {"$project": {"n": {"$size": "$r"}}}]}}]
    assert_same(world, "sensors", pipeline)


def test_lookup_nested_in_lookup_into_bucket(world):
    pipeline = [
        {"$lookup": {"from": "sites", "let": {"site": "$site"},
                     "pipeline": [{"$match": {"$expr": {"$eq": ["$_id", "$$site"]}}},
                                  {"$lookup": {"from": "readings", "localField": "sensor",
                                               "foreignField": "sensor", "as": "r"}},
                                  {"$project": {"n": {"$size": "$r"}}}],
                     "as": "s"}}]
    assert_same(world, "sensors", pipeline, at_least=len(SENSORS))


def test_lookup_equality_on_an_attribute_matches(world):
    pipeline = [{"$lookup": {"from": "products", "localField": "sku", "foreignField": "sku",
                             "as": "p"}}]
    require(backend_runs_view_inside_lookup(world, "orders", pipeline),
            "the attribute view inside a $lookup")
    assert_same(world, "orders", pipeline, at_least=len(ORDERS))
    ruled, _ = both(world, "orders", pipeline)
    first = next(d for d in ruled if d["_id"] == 1)
    assert [p["name"] for p in first["p"]] == ["laptop"]
    assert "specs" not in first["p"][0], "joined products came back in their stored form"


def test_lookup_pipeline_form_on_an_attribute(world):
    require(backend_keeps_lookup_variables(world), "$lookup variables after $unwind")
    pipeline = [{"$lookup": {"from": "products", "let": {"ram": "$ram"},
                             "pipeline": [{"$match": {"$expr": {"$eq": ["$ram_gb", "$$ram"]}}},
                                          {"$project": {"name": 1, "color": 1}}],
                             "as": "same_ram"}}]
    assert_same(world, "orders", pipeline, at_least=len(ORDERS))


def test_lookup_from_ruled_into_ruled(world):
    pipeline = [{"$lookup": {"from": "readings", "localField": "sensor_id",
                             "foreignField": "sensor", "as": "r"}},
                {"$project": {"name": 1, "n": {"$size": "$r"}}}]
    assert_same(world, "products", pipeline, at_least=len(PRODUCTS))


def test_unionwith_bucket_and_attribute(world):
    require(backend_has_unionwith(world), "$unionWith")
    pipeline = [{"$project": {"_id": 1}}, {"$unionWith": "readings"},
                {"$unionWith": {"coll": "products", "pipeline": [{"$match": {"ram_gb": 16}}]}}]
    assert_same(world, "sensors", pipeline, at_least=len(SENSORS) + len(READINGS) + 2)


def test_lookup_into_computed_source(world):
    pipeline = [{"$lookup": {"from": "comments", "localField": "_id", "foreignField": "postId",
                             "as": "c"}}]
    assert_same(world, "posts", pipeline, at_least=len(POSTS))


def test_graphlookup_into_computed_source_is_served(world):
    pipeline = [{"$match": {"_id": 9}},
                {"$graphLookup": {"from": "comments", "startWith": "$replyTo",
                                  "connectFromField": "replyTo", "connectToField": "_id",
                                  "as": "thread"}}]
    assert_same(world, "comments", pipeline)


def test_view_on_a_bucket_collection_reads_readings(world):
    pipeline = [{"$match": {"temp": {"$gte": 30}}}]
    names = {}
    # The flat side first: it tells whether the backend has views at all.
    for side, db, source in (("flat", world.flat, "readings"), ("ruled", world.ruled, "readings")):
        try:
            db.command("create", "hot", viewOn=source, pipeline=pipeline)
        except OperationFailure as e:
            if side == "flat":
                pytest.skip(f"the backend has no views: {e}")
            raise
        names[side] = list(db.hot.find())
        if side == "flat" and len(names[side]) != sum(r["temp"] >= 30 for r in READINGS):
            db.drop_collection("hot")
            pytest.skip("the backend does not evaluate views")
    assert canon(names["ruled"]) == canon(names["flat"])


# --------------------------------------------------------------------------
# What cannot be served is refused, naming the rule.


def refused(call, code: int, rule: str):
    with pytest.raises(OperationFailure) as info:
        call()
    assert info.value.code == code, info.value.details
    assert f"rule '{rule}" in str(info.value), info.value.details
    return info.value


def test_out_and_merge_into_ruled_collections_are_refused(world):
    for target, rule in (("products", "products"), ("readings", "readings"),
                         ("readings_buckets", "readings"), ("comments", "comments"),
                         ("posts", "comments")):
        refused(lambda: list(world.ruled.orders.aggregate([{"$out": target}])), 72, rule)
        refused(lambda: list(world.ruled.orders.aggregate(
            [{"$merge": {"into": target}}])), 72, rule)
    # Nothing was created or changed behind the rules.
    assert "readings" not in world.direct.list_collection_names()
    assert world.direct.products.count_documents({}) == len(PRODUCTS)


def test_graphlookup_into_bucket_or_attribute_is_refused(world):
    for source in ("readings", "products"):
        refused(lambda: list(world.ruled.sensors.aggregate([{"$graphLookup": {
            "from": source, "startWith": "$name", "connectFromField": "sensor",
            "connectToField": "sensor", "as": "g"}}])), 115, source)


def test_rename_of_or_onto_a_ruled_collection_is_refused(world):
    admin = world.ruled.client.admin
    db = world.ruled.name
    refused(lambda: admin.command("renameCollection", f"{db}.products", to=f"{db}.items"),
            72, "products")
    refused(lambda: admin.command("renameCollection", f"{db}.orders",
                                  to=f"{db}.readings_buckets", dropTarget=True), 72, "readings")
    assert world.direct.products.count_documents({}) == len(PRODUCTS)
    assert world.direct.orders.count_documents({}) == len(ORDERS)


def test_change_streams_on_reshaped_collections_are_refused(world):
    refused(lambda: world.ruled.readings.watch(), 115, "readings")
    refused(lambda: world.ruled.products.watch(), 115, "products")
    error = refused(lambda: world.ruled.watch(), 115, "")
    assert "change streams on database" in str(error)


def test_mapreduce_and_bulkwrite_are_refused(world):
    refused(lambda: world.ruled.command(
        "mapReduce", "products", map="function(){emit(this.name, 1)}",
        reduce="function(k, v){return Array.sum(v)}", out={"inline": 1}), 115, "products")
    refused(lambda: world.ruled.command(
        "mapReduce", "orders", map="function(){emit(this.sku, 1)}",
        reduce="function(k, v){return Array.sum(v)}", out={"merge": "readings"}), 72, "readings")
    refused(lambda: world.ruled.client.admin.command({
        "bulkWrite": 1, "ops": [{"insert": 0, "document": {"a": 1}}],
        "nsInfo": [{"ns": f"{world.ruled.name}.products"}]}), 115, "products")


def test_collstats_of_the_logical_bucket_collection_is_refused(world):
    refused(lambda: list(world.ruled.readings.aggregate([{"$collStats": {"count": {}}}])),
            115, "readings")


# --------------------------------------------------------------------------
# The catalog.


def test_list_collections_lists_the_logical_bucket_collection(world):
    ruled = set(world.ruled.list_collection_names())
    flat = set(world.flat.list_collection_names())
    # The bucket collection is an ordinary collection and stays listed.
    assert ruled - {"readings_buckets"} == flat, (ruled, flat)
    assert world.ruled.list_collection_names(filter={"name": "readings"}) == ["readings"]
    assert world.ruled.list_collection_names(filter={"name": {"$in": ["readings", "nope"]}}) \
        == ["readings"]
    entry = next(world.ruled.list_collections(filter={"name": "readings"}))
    assert entry["type"] == "collection"
    # What the application asks before creating it finds it there.
    assert "readings" in world.ruled.list_collection_names()
