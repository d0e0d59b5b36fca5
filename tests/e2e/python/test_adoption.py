"""Rules added to collections that already hold data (app/unconverted_data.h).

Documents written before a rule stay in the form the application wrote:
a bucket rule's reads do not see flat readings in the logical collection,
and an attribute rule's queries do not match attributes stored as plain
fields. remold must not answer from half the data without saying so:
`remold serve` counts them at start and warns per rule, and `remold check
DIR --backend URI` prints the counts and exits 1 until they are converted.
"""
from __future__ import annotations

import datetime
from pathlib import Path

import pymongo
import pytest

from conftest import NO_PROXY
from test_logging import wait_for_log
from test_metrics import scrape, start_observed, value
from test_rules import run_remold

pytestmark = pytest.mark.skipif(NO_PROXY, reason="asserts remold's own warnings")


def write_rules(rules: Path, db: str) -> None:
    rules.mkdir()
    (rules / "readings.yaml").write_text(
        f"namespace: {db}.readings\npattern: bucket\nbucket:\n  collection: readings_buckets\n"
        "  meta: [sensor]\n  time: at\n  span: 1h\n")
    # Every field but _id, the pair array and `name` is an attribute.
    (rules / "products.yaml").write_text(
        f"namespace: {db}.products\npattern: attribute\nattribute:\n  array: specs\n  except: [name]\n")
    # Only the listed fields are attributes.
    (rules / "items.yaml").write_text(
        f"namespace: {db}.items\npattern: attribute\nattribute:\n  array: specs\n  fields: [color, size]\n")


def seed_flat(direct_client, db: str) -> None:
    database = direct_client[db]
    at = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    database.readings.insert_many([{"sensor": "s1", "at": at + datetime.timedelta(minutes=i), "temp": 1.0}
                                   for i in range(60)])
    database.products.insert_many([
        {"_id": 1, "name": "laptop", "ram_gb": 16},
        {"_id": 2, "name": "phone", "ram_gb": 8},
        {"_id": 3, "name": "cable"},                                      # no attribute at all
        {"_id": 4, "name": "tablet", "specs": [{"k": "ram_gb", "v": 4}]},  # already folded
    ])
    database.items.insert_many([{"_id": 1, "color": "red"}, {"_id": 2, "weight": 3}])


def test_remold_says_which_rules_have_data_written_before_them(private_remold, backend, direct_client,
                                                               db_name, tmp_path):
    rules = tmp_path / "rules"
    write_rules(rules, db_name)
    seed_flat(direct_client, db_name)
    try:
        remold = private_remold(extra_args=("--rules", str(rules)))
        log = wait_for_log(remold, lambda text: text.count("written before the rule") >= 3)
        assert (f"rule 'readings' (bucket, {db_name}.readings): 60 document(s) written before the rule "
                "are not in its form") in log
        assert f"rule 'products' (attribute, {db_name}.products): 2 document(s)" in log
        assert f"rule 'items' (attribute, {db_name}.items): 1 document(s)" in log
        assert remold.alive()

        result = run_remold("check", str(rules), "--backend", backend.uri)
        assert result.returncode == 1, result.stdout + result.stderr
        assert f"rule 'readings' (bucket, {db_name}.readings): 60 document(s)" in result.stdout
        assert "remold check: 3 rule(s) have documents written before them" in result.stdout

        # Once they are in the rule's form (here: removed), nothing is reported.
        direct_client[db_name].readings.delete_many({})
        direct_client[db_name].products.delete_many({"ram_gb": {"$exists": True}})
        direct_client[db_name].items.delete_many({"color": {"$exists": True}})
        result = run_remold("check", str(rules), "--backend", backend.uri)
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.count("written before the rule\n") == 3
    finally:
        direct_client.drop_database(db_name)


def test_data_written_through_the_rules_is_not_reported(private_remold, backend, direct_client,
                                                       db_name, tmp_path):
    rules = tmp_path / "rules"
    write_rules(rules, db_name)
    try:
        remold = private_remold(extra_args=("--rules", str(rules)))
        with pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=10_000) as through:
            database = through[db_name]
            at = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
            database.readings.insert_many([{"sensor": "s1", "at": at, "temp": 1.0}])
            database.products.insert_many([{"_id": 1, "name": "laptop", "ram_gb": 16}, {"_id": 2, "name": "x"}])
            database.items.insert_many([{"_id": 1, "color": "red", "weight": 3}])
        result = run_remold("check", str(rules), "--backend", backend.uri)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "document(s) written before the rule" not in result.stdout
    finally:
        direct_client.drop_database(db_name)


def test_check_backend_usage_and_unreachable_backend(tmp_path, db_name):
    rules = tmp_path / "rules"
    write_rules(rules, db_name)
    assert run_remold("check", str(rules), "--backend").returncode == 2
    result = run_remold("check", str(rules), "--backend",
                        "mongodb://127.0.0.1:1/?connectTimeoutMS=500&serverSelectionTimeoutMS=1000")
    assert result.returncode == 1
    assert "remold check: backend:" in result.stderr


def test_a_rule_added_while_running_is_reported_too(private_remold, direct_client, db_name, tmp_path):
    rules = tmp_path / "rules"
    rules.mkdir()
    seed_flat(direct_client, db_name)
    try:
        remold = private_remold(extra_args=("--rules", str(rules), "--log-level", "info"))
        (rules / "readings.yaml").write_text(
            f"namespace: {db_name}.readings\npattern: bucket\nbucket:\n  collection: readings_buckets\n"
            "  meta: [sensor]\n  time: at\n  span: 1h\n")
        log = wait_for_log(remold, lambda text: "written before the rule" in text)
        assert f"rule 'readings' (bucket, {db_name}.readings): 60 document(s) written before the rule" in log
        # A reload that keeps the rule as it was does not report it again.
        (rules / "notes.txt").write_text("not a rule\n")
        wait_for_log(remold, lambda text: text.count("rules: loaded") >= 3)
        assert remold.stderr().count("written before the rule") == 1
    finally:
        direct_client.drop_database(db_name)


def test_a_dollar_prefixed_field_is_not_an_attribute_written_before_the_rule(private_remold, backend, direct_client,
                                                                             db_name, tmp_path):
    """A field whose name starts with "$" is no attribute (the rule stores it
    as written, by design): `remold check` must not count its document as
    written before the rule (issue 28)."""
    rules = tmp_path / "rules"
    write_rules(rules, db_name)
    try:
        try:
            direct_client[db_name].products.insert_one({"_id": 1, "name": "odd", "$price": 3})
        except pymongo.errors.PyMongoError as refused:
            pytest.skip(f"the backend refuses a field named '$price': {refused}")
        names = list(direct_client[db_name].products.aggregate([{"$project": {"_id": 0, "names": {"$filter": {
            "input": {"$objectToArray": "$$ROOT"}, "cond": {"$gte": ["$$this.k", {"$literal": "$"}]}}}}}]))
        if "$price" not in [pair["k"] for pair in names[0]["names"]]:
            pytest.skip("the backend reads a string value that starts with '$' as a field path in an expression "
                        "(mongo-java-server: docs/backends.md)")
        result = run_remold("check", str(rules), "--backend", backend.uri)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "document(s) written before the rule" not in result.stdout, result.stdout
        direct_client[db_name].products.insert_one({"_id": 2, "name": "flat", "$price": 3, "ram_gb": 8})
        result = run_remold("check", str(rules), "--backend", backend.uri)
        assert result.returncode == 1 and f"({'attribute'}, {db_name}.products): 1 document(s)" in result.stdout, \
            result.stdout
    finally:
        direct_client.drop_database(db_name)


def adoption_rules(rules: Path, db: str, bucket_extra: str = "") -> None:
    """A bucket, an attribute and a computed rule over collections that hold
    data already; none says `migrating`."""
    rules.mkdir()
    (rules / "readings.yaml").write_text(
        f"namespace: {db}.readings\npattern: bucket\nbucket:\n  collection: readings_buckets\n"
        f"  meta: [sensor]\n  time: at\n  span: 1h\n{bucket_extra}")
    (rules / "products.yaml").write_text(
        f"namespace: {db}.products\npattern: attribute\nattribute:\n  array: specs\n  except: [name]\n")
    (rules / "comments.yaml").write_text(
        f"namespace: {db}.comments\npattern: computed\ncomputed:\n  aggregates:\n    - target: posts\n"
        "      link: postId\n      fields:\n        commentCount: count\n")


def seed_before_rules(database) -> None:
    at = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    database.readings.insert_many([{"sensor": "s1", "at": at + datetime.timedelta(minutes=i), "temp": 1.0}
                                   for i in range(60)])
    database.products.insert_many([{"_id": 1, "name": "laptop", "ram_gb": 16}, {"_id": 2, "name": "desktop", "ram_gb": 32},
                                   {"_id": 3, "name": "cable"}])
    database.posts.insert_one({"_id": "p1", "title": "hello"})
    database.comments.insert_many([{"postId": "p1", "text": f"c{i}"} for i in range(3)])


def test_rules_over_existing_data_answer_right_or_refuse_clearly(private_remold, make_client, direct_client,
                                                                 backend, db_name, tmp_path):
    """Issue 28, item 1: rules added over data written before them, without
    `remold migrate` first. Each answers as the plain collection would, or
    refuses clearly, until the migration is done: the attribute rule
    matches both forms, the computed rule recomputes what a write touches,
    and the bucket rule refuses reads (117, naming `remold migrate`). Once
    a migration is done, remold sees it and serves the rule's form alone."""
    rules = tmp_path / "rules"
    adoption_rules(rules, db_name)
    seed_before_rules(direct_client[db_name])
    try:
        remold, metrics = start_observed(private_remold, "--rules", str(rules), "--log-level", "info")
        log = wait_for_log(remold, lambda text: text.count("written before the rule") >= 2
                           and "target(s) in" in text)
        samples = scrape(metrics)
        for rule, pattern, left in (("readings", "bucket", 60), ("products", "attribute", 2),
                                    ("comments", "computed", 1)):
            assert value(samples, "remold_rule_adoption", rule=rule, pattern=pattern, state="not_in_form") == 1
            assert value(samples, "remold_rule_unconverted_documents", rule=rule, pattern=pattern) == left
        assert (f"rule 'readings' (bucket, {db_name}.readings): 60 document(s) written before the rule are not "
                f"in its form: reads and deletes of {db_name}.readings are refused (117)") in log
        assert f"rule 'products' (attribute, {db_name}.products): 2 document(s)" in log
        assert f"rule 'comments' (computed, {db_name}.comments): 1 target(s) in {db_name}.posts" in log
        db = make_client(remold.uri)[db_name]

        # Attribute: the products written flat are found by their attributes.
        assert sorted(d["_id"] for d in db.products.find({"ram_gb": {"$gte": 16}})) == [1, 2]
        assert db.products.find_one({"_id": 1}) == {"_id": 1, "name": "laptop", "ram_gb": 16}
        db.products.insert_one({"_id": 4, "name": "tablet", "ram_gb": 8})
        assert direct_client[db_name].products.find_one({"_id": 4})["specs"] == [{"k": "ram_gb", "v": 8}]
        assert db.products.count_documents({"ram_gb": {"$exists": True}}) == 3

        # Computed: a comment written now counts the 3 written before.
        db.comments.insert_one({"postId": "p1", "text": "c3"})
        assert db.posts.find_one({"_id": "p1"})["commentCount"] == 4

        # Bucket: reads would miss 60 readings: refused, naming the remedy.
        for read in (lambda: db.readings.count_documents({}), lambda: list(db.readings.find({"sensor": "s1"})),
                     lambda: db.readings.distinct("sensor"),
                     lambda: list(db.products.aggregate([{"$lookup": {"from": "readings", "pipeline": [],
                                                                      "as": "r"}}]))):
            with pytest.raises(pymongo.errors.OperationFailure) as refused:
                read()
            assert refused.value.code == 117, refused.value.details
            assert "remold migrate --rule readings" in str(refused.value), refused.value.details
        at = datetime.datetime(2026, 1, 2, tzinfo=datetime.timezone.utc)
        db.readings.insert_one({"sensor": "s2", "at": at, "temp": 2.0})  # inserts go into buckets

        # The migrations, with the application's remold running: it sees each
        # one done and serves the rule's form alone.
        for rule, pattern in (("readings", "bucket"), ("products", "attribute"), ("comments", "computed")):
            result = run_remold("migrate", "--backend", backend.uri, "--rules", str(rules), "--rule", rule)
            assert result.returncode == 0, result.stdout + result.stderr
            done = f"rule '{rule}' ({pattern}, {db_name}.{rule}): nothing written before the rule is left"
            wait_for_log(remold, lambda text: done in text, timeout=30)
        samples = scrape(metrics)
        for rule, pattern in (("readings", "bucket"), ("products", "attribute"), ("comments", "computed")):
            assert value(samples, "remold_rule_adoption", rule=rule, pattern=pattern, state="in_form") == 1
        assert db.readings.count_documents({}) == 61
        assert sorted(d["_id"] for d in db.products.find({"ram_gb": {"$gte": 16}})) == [1, 2]
        assert direct_client[db_name].products.count_documents({"specs": {"$exists": False}, "ram_gb": {"$exists": True}}) == 0
        db.comments.insert_one({"postId": "p1", "text": "c4"})
        assert db.posts.find_one({"_id": "p1"})["commentCount"] == 5
        assert remold.alive()
    finally:
        direct_client.drop_database(db_name)


def test_migrating_false_serves_the_rules_form_alone_knowingly(private_remold, make_client, direct_client,
                                                               db_name, tmp_path):
    """The operator's word: `migrating: false` says every document is in the
    rule's form. remold then serves that form alone (a bucket rule reads its
    buckets, missing the readings written before it), and still warns of
    what it counted."""
    rules = tmp_path / "rules"
    adoption_rules(rules, db_name, bucket_extra="  migrating: false\n")
    seed_before_rules(direct_client[db_name])
    try:
        remold = private_remold(extra_args=("--rules", str(rules), "--log-level", "info"))
        log = wait_for_log(remold, lambda text: f"rule 'readings' (bucket, {db_name}.readings): 60" in text)
        assert "are not converted (`migrating: false`)" in log
        db = make_client(remold.uri)[db_name]
        assert db.readings.count_documents({}) == 0
    finally:
        direct_client.drop_database(db_name)
