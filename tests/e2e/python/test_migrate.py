"""`remold migrate` on an attribute rule, online (tools/migrate/migrate.h).

Products are written flat, straight to the backend, before the rule exists.
remold then serves them under the rule with `migrating: true` while an
application writes and reads through it the whole time, and every read is
compared with a flat oracle collection that receives the same writes. The
migration is killed halfway, resumed from its checkpoint, finished, and
run back with --to flat (the rule then `migrating: to_flat`) while the
application still runs. Through all of it, no read may differ from the
oracle.
"""
from __future__ import annotations

import random
import re
import signal
import time
from pathlib import Path

import pymongo
import pytest

from conftest import BACKEND_URI_ENV, NO_PROXY
from migration_support import Application, drop_database_after_kills, kill_once_past, start_migrate
from test_logging import wait_for_log
from test_rules import run_remold

pytestmark = pytest.mark.skipif(NO_PROXY, reason="runs remold migrate against remold's rules")

N_PRODUCTS = 1500
COLORS = ["red", "blue", "$grey", None]

# Filters an application runs on attributes, and on fixed fields next to them.
QUERIES = [
    {"ram_gb": {"$gte": 32}},
    {"color": "red"},
    {"color": None},
    {"ram_gb": {"$exists": False}},
    {"color": {"$ne": "red"}},
    {"ram_gb": {"$in": [1, 2, 3]}, "price": {"$lt": 500}},
    {"$or": [{"ram_gb": 7}, {"name": "p11"}]},
    {"price": {"$gte": 1400}},
]


def flat_product(i: int, rng: random.Random) -> dict:
    doc = {"_id": i, "name": f"p{i}", "price": i}
    if rng.random() < 0.9:
        doc["ram_gb"] = rng.randrange(64)
    color = rng.choice(COLORS)
    if color is not None:
        doc["color"] = color
    return doc


def rule_file(rules: Path, db: str, migrating: str = "true") -> None:
    rules.mkdir(exist_ok=True)
    (rules / "products.yaml").write_text(
        f"namespace: {db}.products\npattern: attribute\nattribute:\n  array: specs\n"
        f"  except: [name, price]\n  migrating: {migrating}\n")


class Products(Application):
    """Writes products through remold and to the oracle, and checks reads
    against it (the queries in turn)."""

    def __init__(self, through: pymongo.collection.Collection, oracle: pymongo.collection.Collection):
        super().__init__()
        self.through, self.oracle = through, oracle
        self.rng = random.Random(7)
        self.next_id = N_PRODUCTS
        self.next_query = 0
        self.transient: list[list[str]] = []  # differences gone on the next read (the stand-in's)

    def write_once(self) -> None:
        with self.lock:
            kind = self.rng.random()
            if kind < 0.3:
                doc = flat_product(self.next_id, self.rng)
                self.next_id += 1
                self.through.insert_one(dict(doc))
                self.oracle.insert_one(doc)
            elif kind < 0.7:
                target = {"_id": self.rng.randrange(self.next_id)}
                update = {"$set": {"ram_gb": self.rng.randrange(64)}}
                assert self.through.update_one(target, update).matched_count == \
                    self.oracle.update_one(target, update).matched_count
            elif kind < 0.8:
                target = {"price": {"$lt": self.rng.randrange(40)}}
                update = {"$inc": {"ram_gb": 1}}
                assert self.through.update_many(target, update).matched_count == \
                    self.oracle.update_many(target, update).matched_count
            elif kind < 0.9:
                target = {"_id": self.rng.randrange(self.next_id)}
                update = {"$set": {"price": self.rng.randrange(2000)}}  # a fixed field
                self.through.update_one(target, update)
                self.oracle.update_one(target, update)
            else:
                target = {"_id": self.rng.randrange(self.next_id)}
                through, oracle = self.through.delete_one(target).deleted_count, self.oracle.delete_one(target).deleted_count
                assert through == oracle, (target, through, oracle, self.through.find_one(target),
                                           self.oracle.find_one(target))
            self.writes += 1

    def read_once(self, query: dict | None = None, with_aggregate: bool = False) -> None:
        """Compares find, count and distinct with the oracle, and with
        `with_aggregate` a $group too. The aggregate is only compared while
        no migration runs: the stand-in backend replaces a document in place,
        and a pipeline running meanwhile can see half of it (checked directly
        on the backend: `$cond` of `$isArray` then `$size` fails on a field
        that vanished in between)."""
        if query is None:
            query = QUERIES[self.next_query % len(QUERIES)]
            self.next_query += 1
        problems = self.observe(query, with_aggregate)
        if problems and not with_aggregate:
            # The stand-in backend replaces a document in place, so a read
            # running while the migration converts one can miss it (seen
            # directly on the backend, as above). Such a miss is gone on the
            # next read; a difference remold made is not. On a real server,
            # where a replacement is atomic, none is allowed (see the test).
            if not self.observe(query, with_aggregate):
                self.transient.append(problems)
                return
        self.wrong.extend(problems)

    def observe(self, query: dict, with_aggregate: bool) -> list[str]:
        """One read of each kind through remold and of the oracle; what differs."""
        with self.lock:
            # Sorted by _id on the server: an unsorted cursor of DocumentDB
            # repeats or skips documents updated between its batches, the
            # oracle's too (docs/backends.md).
            got = list(self.through.find(query).sort("_id", 1))
            want = list(self.oracle.find(query).sort("_id", 1))
            # countDocuments is an aggregate, and the stand-in backend can
            # fail a pipeline over a document the migration replaces at that
            # moment (see above); the count command reads no pipeline. The
            # aggregate is compared where no migration runs.
            if with_aggregate:
                count = self.through.count_documents(query)
            else:
                count = self.through.database.command(
                    {"count": self.through.name, "query": query})["n"]
            key = "color" if self.reads % 2 else "ram_gb"
            distinct = sorted(self.through.distinct(key, query))
            want_distinct = sorted(self.oracle.distinct(key, query))
            grouped = want_grouped = None
            if with_aggregate:
                # The attributes summed; not grouped by a string, as the
                # stand-in backend drops string values starting with '$'
                # when it rebuilds a document in a pipeline.
                pipeline = [{"$match": query},
                            {"$group": {"_id": None, "n": {"$sum": 1}, "ram": {"$sum": "$ram_gb"}}}]
                grouped = list(self.through.aggregate(pipeline))
                want_grouped = list(self.oracle.aggregate(pipeline))
            self.reads += 1
        problems = []
        if got != want or count != len(want):
            missing = [d["_id"] for d in want if d not in got][:5]
            extra = [d["_id"] for d in got if d not in want][:5]
            problems.append(f"{query}: {len(got)} (count {count}) vs oracle {len(want)}; "
                            f"missing {missing}, differing or extra {extra}")
        if grouped != want_grouped:
            problems.append(f"aggregate {query}: {grouped} vs oracle {want_grouped}")
        if distinct != want_distinct:
            problems.append(f"distinct {key} {query}: {distinct} vs oracle {want_distinct}")
        return problems

    def check_everything(self) -> None:
        for query in QUERIES + [{}]:
            self.read_once(query, with_aggregate=True)


def migrate(rules: Path, backend_uri: str, *args: str):
    return start_migrate(rules, backend_uri, "products", *args)


def test_migrate_online_with_a_kill_and_back(private_remold, backend, direct_client, db_name, tmp_path):
    database = direct_client[db_name]
    rng = random.Random(1)
    seed = [flat_product(i, rng) for i in range(N_PRODUCTS)]
    database.products.insert_many([dict(d) for d in seed])
    database.products_oracle.insert_many(seed)
    rules = tmp_path / "rules"
    rule_file(rules, db_name)
    flat_filter = {"specs": {"$exists": False}, "$or": [{"ram_gb": {"$exists": True}}, {"color": {"$exists": True}}]}
    try:
        remold = private_remold(extra_args=("--rules", str(rules), "--log-level", "info"))
        # Not retryable: remold sends a delete of one _id with limit 0, which
        # DocumentDB applies under the migration's concurrent writes; a
        # retryable one keeps limit 1, which the engine may pass by
        # (docs/backends.md, departure 6).
        client = pymongo.MongoClient(remold.uri, retryWrites=False)
        app = Products(client[db_name].products, database.products_oracle)
        app.check_everything()  # before any migration: every flat product is read correctly
        app.start()

        # A throttled migration, killed once it has converted part of the collection.
        first = migrate(rules, backend.uri, "--batch", "100", "--max-rate", "1000")
        converted_before = kill_once_past(first, database, "products", 300)
        assert 300 <= converted_before < N_PRODUCTS, converted_before
        assert database.products.count_documents(flat_filter) > 0  # halfway: both forms stored

        # Resumed from the checkpoint, it finishes.
        second = migrate(rules, backend.uri, "--batch", "200")
        out, err = second.communicate(timeout=600)
        assert second.returncode == 0, out + err
        assert "resuming from the checkpoint" in out, out
        assert "0 left in the flat form" in out, out
        # Plain progress lines off a terminal (on stderr), with the rate (and,
        # while it runs, the time left: tests/unit/progress_test.cc).
        assert re.search(r"^migrate: rule products: \d+/\d+ .* converted, \d+/s(, ETA \d+ s)?$", err,
                         re.MULTILINE), err
        assert database.products.count_documents(flat_filter) == 0
        check = run_remold("check", str(rules), "--backend", backend.uri)
        assert check.returncode == 0, check.stdout + check.stderr  # nothing left to migrate

        time.sleep(1.0)  # reads and writes go on over the converted collection
        assert not app.errors, app.errors
        app.check_everything()

        # Back to the flat form, online too: the rule now stores what the
        # application writes as written, and unfolds what an update touches.
        rule_file(rules, db_name, migrating="to_flat")
        remold.proc.send_signal(signal.SIGHUP)
        wait_for_log(remold, lambda text: text.count("rules: loaded") >= 2)
        back = migrate(rules, backend.uri, "--to", "flat", "--batch", "200")
        out, err = back.communicate(timeout=600)
        assert back.returncode == 0, out + err
        assert "0 left in the rule's form" in out, out
        time.sleep(0.5)
        app.finish()
        assert database.products.count_documents({"specs": {"$exists": True}}) == 0
        app.check_everything()
        # Every document is flat: without the rule, the collection is the oracle's twin.
        got = list(database.products.find().sort("_id", 1))
        want = list(database.products_oracle.find().sort("_id", 1))
        assert got == want, (app.wrong[:5], [(g, w) for g, w in zip(got, want) if g != w][:3])

        print(f"\nmigrate adoption: {app.writes} writes, {app.reads} reads, {len(app.wrong)} wrong, "
              f"{len(app.transient)} read again, killed after {converted_before} converted, resumed")
        assert not app.wrong, app.wrong[:5]
        if BACKEND_URI_ENV:  # a real server replaces a document atomically: no read may miss one
            assert not app.transient, app.transient[:5]
        assert app.writes > 20 and app.reads > 20, (app.writes, app.reads)
    finally:
        drop_database_after_kills(direct_client, db_name)


def test_migrate_refuses_what_it_cannot_do_safely(backend, tmp_path):
    rules = tmp_path / "rules"
    rule_file(rules, "shop", migrating="false")
    (rules / "readings.yaml").write_text(
        "namespace: shop.readings\npattern: bucket\nbucket:\n  collection: readings_buckets\n"
        "  meta: [sensor]\n  time: at\n  span: 1h\n")
    result = run_remold("migrate", "--backend", backend.uri, "--rules", str(rules), "--rule", "products",
                        "--to", "flat")
    assert result.returncode == 2
    assert "is not migrating" in result.stderr and "migrating: to_flat" in result.stderr, result.stderr
    rule_file(rules, "shop", migrating="to_flat")
    result = run_remold("migrate", "--backend", backend.uri, "--rules", str(rules), "--rule", "products")
    assert result.returncode == 2
    assert "writes through remold store the other form" in result.stderr, result.stderr
    # A bucket rule's readings go back only once remold no longer serves the
    # rule: reads of a bucket rule see its bucket collection alone.
    config = tmp_path / "remold.yaml"
    config.write_text(f"backend: {backend.uri}\nrules: {rules}\n")
    result = run_remold("migrate", "--config", str(config), "--rule", "readings", "--to", "flat")
    assert result.returncode == 2
    assert "is in the rules directory remold serves" in result.stderr, result.stderr
    assert "Remove the rule file" in result.stderr, result.stderr
    result = run_remold("migrate", "--backend", backend.uri, "--rules", str(rules), "--rule", "nope")
    assert result.returncode == 2 and "no rule named 'nope'" in result.stderr, result.stderr
    result = run_remold("migrate", "--rules", str(rules))
    assert result.returncode == 2 and "--rule NAME: required" in result.stderr, result.stderr
    result = run_remold("migrate", "--backend", backend.uri, "--rules", str(rules), "--rule", "products",
                        "--batch", "0")
    assert result.returncode == 2 and "--batch" in result.stderr, result.stderr


def test_migrate_dry_run_and_unconvertible_documents(backend, direct_client, db_name, tmp_path):
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "items.yaml").write_text(
        f"namespace: {db_name}.items\npattern: attribute\nattribute:\n  array: specs\n"
        "  fields: [color, size]\n  migrating: true\n")
    items = direct_client[db_name].items
    items.insert_many([{"_id": 1, "color": "red"}, {"_id": 2, "size": 3, "weight": 1},
                       {"_id": 3, "color": "blue", "specs": "not pairs"}, {"_id": 4, "weight": 2}])
    try:
        args = ("migrate", "--backend", backend.uri, "--rules", str(rules), "--rule", "items")
        dry = run_remold(*args, "--dry-run")
        assert dry.returncode == 1, dry.stdout + dry.stderr
        assert "2 document(s) would be converted, 1 cannot be" in dry.stdout, dry.stdout
        assert items.count_documents({"specs": {"$exists": True}}) == 1  # nothing written
        real = run_remold(*args)
        assert real.returncode == 1, real.stdout + real.stderr
        assert "cannot convert { \"_id\" : 3 }" in real.stdout, real.stdout
        assert "1 left in the flat form" in real.stdout, real.stdout
        assert items.find_one({"_id": 2}) == {"_id": 2, "weight": 1, "specs": [{"k": "size", "v": 3}]}
        assert items.find_one({"_id": 4}) == {"_id": 4, "weight": 2}
    finally:
        drop_database_after_kills(direct_client, db_name)
