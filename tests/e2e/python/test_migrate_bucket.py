"""`remold migrate` on a bucket rule, online (tools/migrate/move_pass.h).

Readings are written flat, straight to the backend, before the rule exists.
remold then serves them under the bucket rule while an application inserts
readings through it and reads them back the whole time, every read checked
against a flat oracle collection that receives the same inserts. Reads of
a bucket rule see its bucket collection only, so while readings written
before the rule remain in the logical collection, reads are refused
(ConflictingOperationInProgress, 117, naming `remold migrate`:
app/adoption.h) rather than answered without them; what the test demands
is that every read is refused or exact. The migration is killed partway,
resumed from its checkpoint and finished: remold sees it done, and reads
then match the oracle exactly.
Then the rule is retired: removed from remold (reads and inserts are plain
again) and the readings moved back with --to flat while the application
still runs, until the collection is the oracle's twin.
"""
from __future__ import annotations

import datetime
import random
import shutil
import signal
import time
from pathlib import Path

import bson
import pymongo
import pytest

from conftest import NO_PROXY
from migration_support import Application, drop_database_after_kills, kill_once_past, start_migrate
from test_logging import wait_for_log
from test_rules import run_remold

pytestmark = pytest.mark.skipif(NO_PROXY, reason="runs remold migrate against remold's rules")

N_READINGS = 3000
# What remold logs once it has counted no reading left to move (app/adoption.h).
NOTHING_LEFT = "nothing written before the rule is left"
SENSORS = [f"s{i}" for i in range(12)]
START = datetime.datetime(2026, 3, 1)


def reading(rng: random.Random) -> dict:
    return {"_id": bson.ObjectId(), "sensor": rng.choice(SENSORS),
            "at": START + datetime.timedelta(minutes=rng.randrange(60 * 24 * 5)),
            "temp": round(rng.uniform(-5, 30), 2)}


def rule_file(rules: Path, db: str) -> Path:
    rules.mkdir(exist_ok=True)
    path = rules / "readings.yaml"
    path.write_text(f"namespace: {db}.readings\npattern: bucket\nbucket:\n  collection: readings_buckets\n"
                    "  meta: [sensor]\n  time: at\n  span: 6h\n  summaries:\n    temp: [sum, min, max]\n")
    return path


class Readings(Application):
    """Inserts readings through remold and into the oracle, and reads them.
    `complete` says whether reads must match the oracle exactly (nothing
    left to move) or may be refused while readings are left to move."""

    pause = 0.005

    def __init__(self, through, oracle):
        super().__init__()
        self.through, self.oracle = through, oracle
        self.rng = random.Random(9)
        self.written: set = set()  # _ids inserted through remold
        self.complete = False
        self.refused = 0  # reads refused while readings were left to move

    def write_once(self) -> None:
        with self.lock:
            docs = [reading(self.rng) for _ in range(self.rng.randrange(1, 4))]
            self.through.insert_many([dict(d) for d in docs])
            self.oracle.insert_many(docs)
            self.written.update(d["_id"] for d in docs)
            self.writes += 1

    def read_once(self) -> None:
        with self.lock:
            sensor = self.rng.choice(SENSORS)
            query = {"sensor": sensor, "at": {"$gte": START + datetime.timedelta(days=self.rng.randrange(4))}}
            try:
                got = list(self.through.find(query))
                count = self.through.count_documents(query)
            except pymongo.errors.OperationFailure as refused:
                if self.complete or refused.code != 117 or "remold migrate --rule readings" not in str(refused):
                    self.wrong.append(f"{query}: refused ({refused.code}) {refused}")
                self.refused += 1
                return
            want = {d["_id"]: d for d in self.oracle.find(query)}
            written = set(self.written)
            complete = self.complete
            self.reads += 1
        ids = [d["_id"] for d in got]
        problems = []
        if len(ids) != len(set(ids)):
            problems.append("a reading returned twice")
        # While readings move, more may have moved between the find and the
        # count; never fewer, and never more than the oracle holds.
        if count != len(got) if complete else not len(got) <= count <= len(want):
            problems.append(f"count {count} against {len(got)} found, {len(want)} in the oracle")
        altered = [d["_id"] for d in got if want.get(d["_id"]) != d]
        if altered:
            problems.append(f"not the oracle's: {altered[:3]} e.g. {got[ids.index(altered[0])]}")
        missing = [i for i in want if i not in set(ids) and (complete or i in written)]
        if missing:
            problems.append(f"missing {len(missing)}: {missing[:3]}")
        if problems:
            self.wrong.append(f"{query}: " + "; ".join(problems))


def migrate(rules: Path, backend_uri: str, *args: str):
    return start_migrate(rules, backend_uri, "readings", *args)


def sorted_by_id(docs) -> list:
    return sorted(docs, key=lambda d: d["_id"])


def test_migrate_bucket_online_with_a_kill_and_back(private_remold, backend, direct_client, db_name, tmp_path):
    database = direct_client[db_name]
    rng = random.Random(2)
    seed = [reading(rng) for _ in range(N_READINGS)]
    database.readings.insert_many([dict(d) for d in seed])
    database.readings_oracle.insert_many(seed)
    rules = tmp_path / "rules"
    rule_path = rule_file(rules, db_name)
    try:
        remold = private_remold(extra_args=("--rules", str(rules), "--log-level", "info"))
        client = pymongo.MongoClient(remold.uri)
        app = Readings(client[db_name].readings, database.readings_oracle)
        app.start()

        dry = run_remold("migrate", "--backend", backend.uri, "--rules", str(rules), "--rule", "readings",
                         "--dry-run")
        assert dry.returncode == 0, dry.stdout + dry.stderr
        assert f"{N_READINGS:,} document(s) would move into" in dry.stdout, dry.stdout
        assert database.readings.count_documents({}) == N_READINGS  # nothing moved

        # A throttled migration, killed once it has moved part of the readings.
        first = migrate(rules, backend.uri, "--batch", "100", "--max-rate", "1500")
        moved_before = kill_once_past(first, database, "readings", 900)
        assert 900 <= moved_before < N_READINGS, moved_before

        second = migrate(rules, backend.uri, "--batch", "500")
        out, err = second.communicate(timeout=600)
        assert second.returncode == 0, out + err
        assert "resuming from the checkpoint" in out, out
        assert "0 left in" in out and "migrate: done" in out, out
        assert database.readings.count_documents({}) == 0
        wait_for_log(remold, lambda text: NOTHING_LEFT in text, timeout=30)
        with app.lock:
            app.complete = True
        check = run_remold("check", str(rules), "--backend", backend.uri)
        assert check.returncode == 0, check.stdout + check.stderr

        time.sleep(1.0)  # reads and inserts go on over the buckets
        with app.lock:
            got = sorted_by_id(client[db_name].readings.find())
            want = sorted_by_id(database.readings_oracle.find())
        assert got == want

        # Retired: the rule leaves remold (plain reads and inserts), then
        # the readings move back from a directory of their own.
        retired = tmp_path / "retired"
        retired.mkdir()
        with app.lock:
            shutil.move(str(rule_path), str(retired / "readings.yaml"))
            remold.proc.send_signal(signal.SIGHUP)
            wait_for_log(remold, lambda text: "rule 'readings'" in text and "removed" in text)
            app.complete = False
            app.written.clear()  # inserts go to the flat collection now, readable at once
        back = migrate(retired, backend.uri, "--to", "flat", "--batch", "40")
        out, err = back.communicate(timeout=600)
        assert back.returncode == 0, out + err
        assert "0 left in" in out, out
        with app.lock:
            app.complete = True
        time.sleep(0.5)
        app.finish()
        assert database.readings_buckets.count_documents({}) == 0
        assert sorted_by_id(database.readings.find()) == sorted_by_id(database.readings_oracle.find())

        print(f"\nbucket migrate adoption: {app.writes} writes, {app.reads} reads ({app.refused} refused while "
              f"readings were left to move), {len(app.wrong)} wrong, killed after {moved_before} moved, resumed; "
              "back to flat")
        assert not app.wrong, app.wrong[:5]
        assert app.refused > 0, "reads went on while readings were left to move"
        assert app.writes > 20 and app.reads > 20, (app.writes, app.reads)
    finally:
        drop_database_after_kills(direct_client, db_name)


def test_migrate_bucket_killed_at_random_points_moves_each_reading_once(private_remold, backend, direct_client,
                                                                         db_name, tmp_path):
    """Killed again and again wherever it happens to be (stamping, writing
    buckets, deleting readings), the migration still stores every reading
    exactly once, in each direction."""
    database = direct_client[db_name]
    rng = random.Random(4)
    seed = [reading(rng) for _ in range(2000)]
    database.readings.insert_many([dict(d) for d in seed])
    rules = tmp_path / "rules"
    rule_file(rules, db_name)
    try:
        remold = private_remold(extra_args=("--rules", str(rules), "--log-level", "info"))
        through = pymongo.MongoClient(remold.uri)[db_name].readings
        kills = mid_batch = 0
        for direction in ((), ("--to", "flat")):
            for _ in range(6):
                run = migrate(rules, backend.uri, "--batch", "150", "--max-rate", "4000", *direction)
                time.sleep(rng.uniform(0.05, 0.4))
                run.send_signal(signal.SIGKILL)
                run.wait()
                kills += 1
                source = database.readings if not direction else database.readings_buckets
                mid_batch += source.count_documents({"_remold_migration": {"$exists": True}}) > 0
            last = migrate(rules, backend.uri, *direction)
            out, err = last.communicate(timeout=600)
            assert last.returncode == 0, out + err
            assert "0 left in" in out, out
            if not direction:
                assert database.readings.count_documents({}) == 0
                wait_for_log(remold, lambda text: NOTHING_LEFT in text, timeout=30)
                assert sorted_by_id(through.find()) == sorted_by_id(seed)
                assert through.count_documents({}) == len(seed)
            else:
                assert database.readings_buckets.count_documents({}) == 0
                assert sorted_by_id(database.readings.find()) == sorted_by_id(seed)
        print(f"\nbucket migrate: {kills} kills ({mid_batch} in the middle of a batch), "
              "every reading moved once each way")
    finally:
        drop_database_after_kills(direct_client, db_name)


def test_migrate_bucket_finishes_a_batch_stamped_after_it_began(backend, direct_client, db_name, tmp_path):
    """A batch stamped by another run once this one is under way (a run at
    once, killed after stamping; or the last command of a run killed just
    before this one started, which the server applies after its client is
    gone) is finished by this run once nothing else is left, not left
    behind: the run still ends with every reading moved, once."""
    database = direct_client[db_name]
    rng = random.Random(8)
    seed = [reading(rng) for _ in range(2000)]
    database.readings.insert_many([dict(d) for d in seed])
    rules = tmp_path / "rules"
    rule_file(rules, db_name)
    try:
        run = migrate(rules, backend.uri, "--batch", "100", "--max-rate", "600")
        deadline = time.monotonic() + 60
        while (database.remold_migrations.find_one({"_id": "readings"}) or {}).get("converted", 0) < 200:
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()
            time.sleep(0.02)
        # The run is past its start; the last readings in its order are
        # seconds away (600/s at most), stamped now as another run would.
        last = database.readings.find({}, {"_id": 1}).sort([("sensor", -1), ("at", -1), ("_id", -1)]).limit(100)
        stamped = database.readings.update_many({"_id": {"$in": [d["_id"] for d in last]},
                                                 "_remold_migration": {"$exists": False}},
                                                {"$set": {"_remold_migration": "0123456789abcdef:7"}})
        assert stamped.modified_count == 100
        out, err = run.communicate(timeout=600)
        assert run.returncode == 0, out + err
        assert "0 left in" in out and "migrate: done" in out, out
        assert database.readings.count_documents({}) == 0
        stored = sorted_by_id({"_id": m["_id"], "sensor": bucket["sensor"], "at": m["at"], "temp": m["temp"]}
                              for bucket in database.readings_buckets.find() for m in bucket["m"])
        assert stored == sorted_by_id(seed)
    finally:
        drop_database_after_kills(direct_client, db_name)


def test_migrate_bucket_runs_at_once_move_each_reading_once(private_remold, backend, direct_client, db_name,
                                                              tmp_path):
    """Three runs of the same migration at once (an operator's and a cron
    job's, say), each killed and restarted on its own: they finish each
    other's batches, and every reading still ends up in exactly one
    bucket."""
    database = direct_client[db_name]
    rng = random.Random(6)
    seed = [reading(rng) for _ in range(2500)]
    database.readings.insert_many([dict(d) for d in seed])
    rules = tmp_path / "rules"
    rule_file(rules, db_name)
    try:
        remold = private_remold(extra_args=("--rules", str(rules), "--log-level", "info"))
        through = pymongo.MongoClient(remold.uri)[db_name].readings
        for _ in range(3):
            runs = [migrate(rules, backend.uri, "--batch", str(rng.choice([40, 90, 150]))) for _ in range(3)]
            time.sleep(rng.uniform(0.1, 0.4))
            runs[rng.randrange(3)].send_signal(signal.SIGKILL)
            for run in runs:
                run.communicate(timeout=600)
        last = migrate(rules, backend.uri)
        out, err = last.communicate(timeout=600)
        assert last.returncode == 0, out + err
        assert database.readings.count_documents({}) == 0
        wait_for_log(remold, lambda text: NOTHING_LEFT in text, timeout=30)
        assert sorted_by_id(through.find()) == sorted_by_id(seed)
        assert through.count_documents({}) == len(seed)
    finally:
        drop_database_after_kills(direct_client, db_name)
