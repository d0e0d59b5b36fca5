"""The rules lifecycle: ``remold check``, refusing to start on bad rules, and
hot reload (SIGHUP and file change) while clients keep working.

Every test writes its own rules directory naming its own database. Reload
tests run client threads that read and write throughout every reload and
must see no error at all.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable

import pymongo
import pytest
from bson import ObjectId

from conftest import require_binary

T0 = dt.datetime(2024, 3, 4)
MINUTE = dt.timedelta(minutes=1)
RELOAD_TIMEOUT = 10.0  # the file watcher polls once a second


def rule_text(db: str, collection: str, buckets: str, *, extra: str = "", pad_to: int = 0) -> str:
    text = (f"namespace: {db}.{collection}\n"
            "pattern: bucket\n"
            "bucket:\n"
            f"  collection: {buckets}\n"
            "  meta: [sensor]\n"
            "  time: at\n"
            "  span: 1h\n"
            f"{extra}"
            "  summaries:\n"
            "    temp: [sum, min, max]\n")
    if pad_to:
        assert len(text) < pad_to - 2
        text += "#" * (pad_to - len(text) - 1) + "\n"
    return text


def run_remold(*args: str, timeout: float = 20.0) -> subprocess.CompletedProcess:
    binary = require_binary()
    try:
        return subprocess.run([str(binary), *args], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"remold {' '.join(args)} still running after {timeout}s (stdout: {exc.stdout!r})")


def error_lines(stderr: str, path: Path) -> list[tuple[int, str]]:
    """(line, message) of every ``PATH:LINE: message`` line about ``path``."""
    out = []
    pattern = re.compile(re.escape(str(path)) + r":(\d+): (.+)$")
    for line in stderr.splitlines():
        match = pattern.search(line)
        if match:
            out.append((int(match.group(1)), match.group(2)))
    return out


# --------------------------------------------------------------------------
# remold check.


def test_check_accepts_valid_rules(tmp_path):
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "readings.yaml").write_text(rule_text("iot", "readings", "readings_buckets"))
    (rules / "power.yml").write_text(
        "namespace: plant.power\npattern: bucket\nbucket:\n  collection: power_buckets\n"
        "  meta: [site, meter]\n  time: ts\n  granularity: minute\n  max_count: 120\n"
        "  fields: [ts, kw]\n  summaries:\n    kw: [max]\n")
    # Not rule files: ignored, however broken.
    (rules / "README.md").write_text("rules for: readings, power\n")
    (rules / ".readings.yaml.swp").write_text("namespace: [\n")
    (rules / "notes.txt").write_text("pattern: nonsense\n")
    result = run_remold("check", str(rules))
    assert result.returncode == 0, f"exit {result.returncode}: {result.stderr}"
    assert result.stderr.strip() == ""
    assert "iot.readings" in result.stdout and "iot.readings_buckets" in result.stdout
    assert "plant.power" in result.stdout and "plant.power_buckets" in result.stdout
    assert "2 rule" in result.stdout, result.stdout


def test_check_accepts_empty_directory(tmp_path):
    result = run_remold("check", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "0 rule" in result.stdout


GOOD = "namespace: iot.r\npattern: bucket\nbucket:\n  collection: rb\n  meta: [sensor]\n  time: at\n"

# (id, file text, line of the error or None when any line will do, words the message must have)
BAD_RULES = [
    ("unknown_key", GOOD + "  span: 1h\n  spam: 2\n", 8, ["spam"]),
    ("unknown_top_level_key", "namespace: iot.r\npattern: bucket\nbuckets: {}\n", 3, ["buckets"]),
    ("invalid_yaml", GOOD.replace("[sensor]", "[sensor") + "  span: 1h\n", None, ["YAML"]),
    ("span_zero", GOOD + "  span: 0h\n", 7, ["span", "0h"]),
    ("span_unit", GOOD + "  span: 1w\n", 7, ["span", "1w"]),
    ("span_and_granularity", GOOD + "  span: 1h\n  granularity: hour\n", 8, ["granularity"]),
    ("no_span", GOOD, None, ["span"]),
    ("bad_granularity", GOOD + "  granularity: fortnight\n", 7, ["fortnight"]),
    ("no_time", GOOD.replace("  time: at\n", "") + "  span: 1h\n", None, ["time"]),
    ("summary_kind", GOOD + "  span: 1h\n  summaries:\n    temp: [sum, avg]\n", 9, ["avg"]),
    ("summary_of_time", GOOD + "  span: 1h\n  summaries:\n    at: [max]\n", 9, ["at"]),
    ("max_count_zero", GOOD + "  span: 1h\n  max_count: 0\n", 8, ["max_count"]),
    ("max_count_text", GOOD + "  span: 1h\n  max_count: many\n", 8, ["max_count"]),
    ("fields_without_time", GOOD + "  span: 1h\n  fields: [temp]\n", 8, ["fields", "at"]),
    ("dotted_meta", GOOD.replace("[sensor]", "[sensor.id]") + "  span: 1h\n", 5, ["sensor.id"]),
    ("time_is_meta", GOOD.replace("[sensor]", "[sensor, at]") + "  span: 1h\n", None, ["at"]),
    ("buckets_are_logical",
     GOOD.replace("collection: rb", "collection: r") + "  span: 1h\n", 4, ["collection"]),
    ("namespace_without_db", GOOD.replace("iot.r", "readings") + "  span: 1h\n", 1, ["namespace"]),
    ("unknown_pattern", GOOD.replace("pattern: bucket", "pattern: bucketz") + "  span: 1h\n", 2,
     ["bucketz"]),
    ("not_a_mapping", "- namespace: iot.r\n", 1, ["mapping"]),
]


@pytest.mark.parametrize("text,line,words", [c[1:] for c in BAD_RULES], ids=[c[0] for c in BAD_RULES])
def test_check_reports_the_file_and_line(tmp_path, text, line, words):
    (tmp_path / "ok.yaml").write_text(rule_text("iot", "fine", "fine_buckets"))
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    result = run_remold("check", str(tmp_path))
    assert result.returncode != 0, f"exit 0 for a bad rule; stdout: {result.stdout}"
    assert result.returncode > 0, f"killed by signal {-result.returncode}"
    errors = error_lines(result.stderr, bad)
    # Every mistake is reported; a misspelt section is also a missing one.
    count = 2 if "buckets:" in text else 1
    assert len(errors) == count, f"expected {count} FILE:LINE error(s) about {bad}, got stderr:\n{result.stderr}"
    if count == 2:
        assert errors[0] == (1, "missing 'bucket' section, expected the bucket rule's options"), errors
        errors = errors[1:]
    got_line, message = errors[0]
    if line is not None:
        assert got_line == line, f"error at line {got_line}, expected {line}: {message}"
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"
    assert not error_lines(result.stderr, tmp_path / "ok.yaml"), result.stderr


def test_check_reports_every_bad_file(tmp_path):
    one, two = tmp_path / "one.yaml", tmp_path / "two.yaml"
    one.write_text(GOOD + "  span: 3q\n")
    two.write_text(GOOD.replace("iot.r", "iot.s") + "  span: 1h\n  colour: red\n")
    result = run_remold("check", str(tmp_path))
    assert result.returncode != 0
    assert [line for line, _ in error_lines(result.stderr, one)] == [7]
    assert [line for line, _ in error_lines(result.stderr, two)] == [8]


def test_check_reports_every_error_of_a_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("namespace: iot.r\npattern: bucket\nbucket:\n  collection: 5\n  meta: [sensor, 7]\n"
                   "  time: at\n  span: 0h\n  max_count: \"100\"\n  colour: red\n")
    result = run_remold("check", str(tmp_path))
    assert result.returncode == 1, f"exit {result.returncode}: {result.stderr}"
    errors = error_lines(result.stderr, bad)
    assert [line for line, _ in errors] == [4, 5, 7, 8, 9], result.stderr
    assert "'collection' is the integer 5, expected a collection name" in errors[0][1]
    assert "an item of 'meta' is the integer 7" in errors[1][1]
    assert "span '0h'" in errors[2][1]
    assert "max_count is the string '100', expected an integer" in errors[3][1]
    assert "unknown key 'colour'" in errors[4][1]
    assert "5 error(s)" in result.stderr
    assert result.stdout == ""


def test_check_accepts_quoted_numbers_as_names(tmp_path):
    (tmp_path / "r.yaml").write_text('namespace: iot.r\npattern: bucket\nbucket:\n  collection: "5"\n'
                                     '  meta: ["7"]\n  time: at\n  span: 1h\n')
    result = run_remold("check", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "iot.r -> iot.5" in result.stdout


def test_check_rejects_conflicting_rules(tmp_path):
    # Two rules for one namespace.
    (tmp_path / "a.yaml").write_text(rule_text("iot", "r", "rb"))
    (tmp_path / "b.yaml").write_text(rule_text("iot", "r", "rb2"))
    result = run_remold("check", str(tmp_path))
    assert result.returncode != 0
    assert "iot.r" in result.stderr and "a.yaml" in result.stderr and "b.yaml" in result.stderr
    # A bucket collection that is itself a rule's logical collection.
    (tmp_path / "b.yaml").write_text(rule_text("iot", "rb", "rbb"))
    result = run_remold("check", str(tmp_path))
    assert result.returncode != 0
    assert "iot.rb" in result.stderr, result.stderr


def test_check_not_a_directory(tmp_path):
    result = run_remold("check", str(tmp_path / "missing"))
    assert result.returncode != 0
    assert str(tmp_path / "missing") in result.stderr
    file = tmp_path / "rule.yaml"
    file.write_text(rule_text("iot", "r", "rb"))
    assert run_remold("check", str(file)).returncode != 0


# --------------------------------------------------------------------------
# remold serve refuses bad rules.


def test_serve_refuses_to_start_on_invalid_rules(tmp_path, backend):
    (tmp_path / "ok.yaml").write_text(rule_text("iot", "fine", "fine_buckets"))
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD + "  span: 1h\n  spam: 2\n")
    result = run_remold("serve", "--listen", "127.0.0.1:0", "--backend", backend.uri,
                        "--log-level", "warn", "--rules", str(tmp_path))
    assert result.returncode == 2, f"exit {result.returncode}; stderr: {result.stderr}"
    assert "remold listening" not in result.stdout
    errors = error_lines(result.stderr, bad)
    assert errors and errors[0][0] == 8 and "spam" in errors[0][1], result.stderr


def test_serve_refuses_a_missing_rules_directory(tmp_path, backend):
    result = run_remold("serve", "--listen", "127.0.0.1:0", "--backend", backend.uri,
                        "--log-level", "warn", "--rules", str(tmp_path / "nowhere"))
    assert result.returncode == 2, f"exit {result.returncode}; stderr: {result.stderr}"
    assert "remold listening" not in result.stdout
    assert "nowhere" in result.stderr


# --------------------------------------------------------------------------
# Hot reload.


class Workload:
    """Client threads reading and writing through remold during reloads.

    ``stable`` keeps its bucket rule throughout: every thread checks after each
    insert that the count of its own readings is exactly what it inserted.
    ``readings`` is the namespace whose rule comes and goes: the threads only
    require that every operation on it succeeds, but for reads refused while
    it holds readings written before its rule came back (the threads'
    inserts while it was gone): ConflictingOperationInProgress (117), naming
    `remold migrate` (app/adoption.h).
    """

    def __init__(self, uri: str, db: str, threads: int = 3):
        self.uri, self.db = uri, db
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.ops = 0
        self.inserted: dict[str, int] = {}
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(f"w{k}", k % 2 == 1), daemon=True)
                         for k in range(threads)]

    def __enter__(self):
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self._threads:
            t.join(60)
        assert not any(t.is_alive() for t in self._threads), "a client thread hung"

    def _run(self, sensor: str, batches: bool):
        client = pymongo.MongoClient(self.uri, serverSelectionTimeoutMS=10_000)
        stable, switched = client[self.db]["stable"], client[self.db]["readings"]
        inserted, minute = 0, 0
        try:
            while not self.stop.is_set():
                try:
                    if batches:
                        docs = [{"_id": ObjectId(), "sensor": sensor, "at": T0 + (minute + i) * MINUTE,
                                 "temp": float(i)} for i in range(50)]
                        stable.insert_many(docs, ordered=minute % 100 == 0)
                        minute += 50
                        inserted += 50
                    else:
                        stable.insert_one({"sensor": sensor, "at": T0 + minute * MINUTE, "temp": 1.0})
                        minute += 1
                        inserted += 1
                    n = stable.count_documents({"sensor": sensor})
                    if n != inserted:
                        self.errors.append(f"{sensor}: {n} readings counted after {inserted} inserted")
                    recent = list(stable.find({"sensor": sensor, "at": {"$gte": T0 + (minute - 5) * MINUTE}}))
                    if len(recent) != min(5, inserted):
                        self.errors.append(f"{sensor}: {len(recent)} readings in the last 5 minutes")
                    switched.insert_one({"sensor": sensor, "at": T0 + minute * MINUTE, "temp": 2.0})
                    try:
                        list(switched.find({"sensor": sensor}).sort("at", -1).limit(3))
                        switched.count_documents({"sensor": sensor})
                    except pymongo.errors.OperationFailure as refused:
                        if refused.code != 117 or "remold migrate --rule readings" not in str(refused):
                            raise
                    with self._lock:
                        self.ops += 6
                except Exception as exc:  # noqa: BLE001 - every failure is the finding
                    self.errors.append(f"{sensor}: {exc!r}")
                    time.sleep(0.05)
        finally:
            self.inserted[sensor] = inserted
            client.close()


def where_does_an_insert_go(client, direct_client, db: str) -> str:
    """Inserts one probe reading through remold into ``readings``; returns
    'buckets' or 'plain' by where the backend stored it."""
    doc = {"_id": ObjectId(), "sensor": "probe", "at": T0, "temp": 0.0}
    client[db]["readings"].insert_one(doc)
    if direct_client[db]["readings"].count_documents({"_id": doc["_id"]}):
        return "plain"
    for bucket in direct_client[db]["readings_buckets"].find({"sensor": "probe"}):
        if any(m.get("_id") == doc["_id"] for m in bucket.get("m", [])):
            return "buckets"
    return "nowhere"


def wait_for(what: str, check: Callable[[], bool], timeout: float = RELOAD_TIMEOUT,
             remold=None) -> float:
    started = time.monotonic()
    while True:
        if check():
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            detail = f"\nremold stderr:\n{remold.stderr()[-3000:]}" if remold else ""
            pytest.fail(f"{what}: not within {timeout}s{detail}")
        time.sleep(0.1)


def replace_file(path: Path, text: str, scratch: Path, *, keep_stat_of: Path | None = None) -> None:
    """Atomically replaces ``path`` (a reader never sees half a file); with
    ``keep_stat_of``, the new file has that file's size and mtime."""
    tmp = scratch / f"{path.name}.{ObjectId()}"
    tmp.write_text(text)
    if keep_stat_of is not None:
        st = keep_stat_of.stat()
        assert tmp.stat().st_size == st.st_size, "replacement must have the same size"
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, path)


def check_workload(work: Workload, direct_client, db: str, min_ops: int = 50) -> None:
    assert not work.errors, f"{len(work.errors)} client errors during reloads: {work.errors[:5]}"
    assert work.ops >= min_ops, f"only {work.ops} operations ran during the reloads"
    # Every stable reading is in a bucket, none went to the plain collection.
    stored: dict[str, int] = {}
    for bucket in direct_client[db]["stable_buckets"].find():
        stored[bucket["sensor"]] = stored.get(bucket["sensor"], 0) + bucket["count"]
    assert stored == work.inserted
    assert direct_client[db]["stable"].count_documents({}) == 0


@pytest.fixture
def reload_db(db_name, direct_client):
    yield db_name
    direct_client.drop_database(db_name)


def test_reload_on_file_change(tmp_path, reload_db, private_remold, direct_client, make_client):
    db = reload_db
    rules, scratch = tmp_path / "rules", tmp_path / "scratch"
    rules.mkdir()
    scratch.mkdir()
    (rules / "stable.yaml").write_text(rule_text(db, "stable", "stable_buckets"))
    remold = private_remold(extra_args=("--rules", str(rules)))
    client = make_client(remold.uri)
    readings_rule = rules / "readings.yaml"

    with Workload(remold.uri, db) as work:
        time.sleep(0.5)
        assert where_does_an_insert_go(client, direct_client, db) == "plain"

        # Add a rule: inserts start being bucketed.
        replace_file(readings_rule, rule_text(db, "readings", "readings_buckets"), scratch)
        wait_for("a new rule file is applied",
                 lambda: where_does_an_insert_go(client, direct_client, db) == "buckets",
                 remold=remold)
        indexes = [list(ix["key"].items())
                   for ix in direct_client[db]["readings_buckets"].list_indexes()]
        assert [("sensor", 1), ("start", 1)] in indexes
        time.sleep(1.0)

        # Break the file: the error is logged with file and line, old rules stay.
        replace_file(readings_rule, rule_text(db, "readings", "readings_buckets",
                                              extra="  spam: 2\n"), scratch)
        wait_for("the broken rule file is reported",
                 lambda: any(line == 8 and "spam" in msg
                             for line, msg in error_lines(remold.stderr(), readings_rule)),
                 remold=remold)
        for _ in range(5):
            assert where_does_an_insert_go(client, direct_client, db) == "buckets"
            time.sleep(0.3)

        # Fix it again, then remove it: pass-through.
        replace_file(readings_rule, rule_text(db, "readings", "readings_buckets"), scratch)
        time.sleep(1.5)
        assert where_does_an_insert_go(client, direct_client, db) == "buckets"
        readings_rule.unlink()
        wait_for("a removed rule stops applying",
                 lambda: where_does_an_insert_go(client, direct_client, db) == "plain",
                 remold=remold)
        time.sleep(1.0)

    check_workload(work, direct_client, db)
    assert remold.alive()
    assert remold.terminate() == 0


def test_reload_on_sighup(tmp_path, reload_db, private_remold, direct_client, make_client, backend):
    """SIGHUP reloads by itself: each new version of the rule file has the old
    one's name, size and mtime, so the file watcher has nothing to notice."""
    db = reload_db
    rules, scratch = tmp_path / "rules", tmp_path / "scratch"
    rules.mkdir()
    scratch.mkdir()
    (rules / "stable.yaml").write_text(rule_text(db, "stable", "stable_buckets"))
    size = 400
    elsewhere = rule_text(db, "elsewhere", "readings_buckets", pad_to=size)
    active = rule_text(db, "readings", "readings_buckets", pad_to=size)
    broken = rule_text(db, "readings", "readings_buckets", extra="  spam: 2\n", pad_to=size)
    readings_rule = rules / "readings.yaml"
    readings_rule.write_text(elsewhere)
    os.utime(readings_rule, ns=(time.time_ns() - 10**10, time.time_ns() - 10**10))
    reference = scratch / "reference"
    reference.write_text(elsewhere)
    os.utime(reference, ns=(readings_rule.stat().st_atime_ns, readings_rule.stat().st_mtime_ns))

    remold = private_remold(args=["serve", "--listen", "127.0.0.1:0", "--backend", backend.uri,
                                  "--log-level", "info", "--rules", str(rules)])
    client = make_client(remold.uri)

    def sighup_and_wait(what: str, done: Callable[[], bool]) -> None:
        before = remold.stderr().count("SIGHUP")
        remold.proc.send_signal(signal.SIGHUP)
        wait_for(f"{what}: SIGHUP is acted on", lambda: remold.stderr().count("SIGHUP") > before,
                 timeout=5, remold=remold)
        wait_for(what, done, timeout=5, remold=remold)

    with Workload(remold.uri, db) as work:
        time.sleep(0.5)
        assert where_does_an_insert_go(client, direct_client, db) == "plain"

        # The rule now names `readings`: applied on SIGHUP.
        replace_file(readings_rule, active, scratch, keep_stat_of=reference)
        sighup_and_wait("SIGHUP applies the new rule",
                        lambda: where_does_an_insert_go(client, direct_client, db) == "buckets")

        # Broken: SIGHUP logs the error (file and line) and keeps the rules.
        replace_file(readings_rule, broken, scratch, keep_stat_of=reference)
        sighup_and_wait("SIGHUP reports the broken rule",
                        lambda: any(line == 8 and "spam" in msg
                                    for line, msg in error_lines(remold.stderr(), readings_rule)))
        for _ in range(5):
            assert where_does_an_insert_go(client, direct_client, db) == "buckets"
            time.sleep(0.2)

        # The rule names another collection again: `readings` is pass-through.
        replace_file(readings_rule, elsewhere, scratch, keep_stat_of=reference)
        sighup_and_wait("SIGHUP removes the rule",
                        lambda: where_does_an_insert_go(client, direct_client, db) == "plain")
        time.sleep(0.5)

    check_workload(work, direct_client, db)
    assert remold.alive()
    assert remold.terminate() == 0


def test_cursor_opened_before_a_reload_keeps_working(tmp_path, reload_db, private_remold,
                                                     direct_client, make_client):
    """A client iterating a cursor on a collection while a rule for that
    collection is added must still get every document of its cursor."""
    db = reload_db
    rules, scratch = tmp_path / "rules", tmp_path / "scratch"
    rules.mkdir()
    scratch.mkdir()
    remold = private_remold(extra_args=("--rules", str(rules)))
    client = make_client(remold.uri)
    docs = [{"_id": i, "sensor": "s1", "at": T0 + i * MINUTE, "temp": float(i)} for i in range(300)]
    client[db]["readings"].insert_many(docs)

    cursor = client[db]["readings"].find({"sensor": "s1"}, batch_size=20).sort("_id", 1)
    first = [next(cursor) for _ in range(20)]
    replace_file(rules / "readings.yaml", rule_text(db, "readings", "readings_buckets"), scratch)
    wait_for("the new rule applies",
             lambda: where_does_an_insert_go(client, direct_client, db) == "buckets", remold=remold)
    rest = list(cursor)
    assert first + rest == docs


# --------------------------------------------------------------------------
# Removing and adding rules: the data stays where the rule put it, and the
# reload says so.


def attribute_rule_text(db: str, collection: str) -> str:
    return (f"namespace: {db}.{collection}\n"
            "pattern: attribute\n"
            "attribute:\n"
            "  except: [name]\n")


def warning_lines(stderr: str, text: str) -> list[str]:
    return [line for line in stderr.splitlines() if " warning " in line and text in line]


def test_removing_a_rule_warns_what_becomes_of_its_data(tmp_path, reload_db, private_remold,
                                                        direct_client, make_client):
    db = reload_db
    rules, scratch = tmp_path / "rules", tmp_path / "scratch"
    rules.mkdir()
    scratch.mkdir()
    readings_rule, products_rule = rules / "readings.yaml", rules / "products.yaml"
    readings_rule.write_text(rule_text(db, "readings", "readings_buckets"))
    products_rule.write_text(attribute_rule_text(db, "products"))
    remold = private_remold(extra_args=("--rules", str(rules)))
    client = make_client(remold.uri)
    readings = [{"_id": i, "sensor": "s1", "at": T0 + i * MINUTE, "temp": float(i)} for i in range(5)]
    client[db]["readings"].insert_many(readings)
    client[db]["products"].insert_one({"_id": 1, "name": "laptop", "ram_gb": 16})
    assert list(client[db]["readings"].find().sort("_id", 1)) == readings
    assert list(client[db]["products"].find()) == [{"_id": 1, "name": "laptop", "ram_gb": 16}]
    # Rules in force at start are not "added".
    assert not warning_lines(remold.stderr(), "added:"), remold.stderr()

    # The bucket rule's file is deleted.
    readings_rule.unlink()
    wait_for("the removal of the bucket rule is logged",
             lambda: warning_lines(remold.stderr(), "rule 'readings'"), remold=remold)
    [line] = warning_lines(remold.stderr(), "rule 'readings'")
    assert f"rule 'readings' (bucket, {db}.readings) removed: " in line, line
    assert f"the readings stay in the bucket collection {db}.readings_buckets" in line, line
    assert f"reads of {db}.readings no longer return them until the rule is back" in line, line
    # As the warning says: the readings are in the buckets, and a read of the
    # collection answers what the plain collection on the backend holds.
    stored = sum(b["count"] for b in direct_client[db]["readings_buckets"].find())
    assert stored == len(readings)
    assert list(client[db]["readings"].find()) == list(direct_client[db]["readings"].find()) == []

    # The attribute rule now names another collection: products loses its rule.
    replace_file(products_rule, attribute_rule_text(db, "elsewhere"), scratch)
    wait_for("the removal of the attribute rule and the new rule are logged",
             lambda: warning_lines(remold.stderr(), f"rule 'products' (attribute, {db}.elsewhere) added"),
             remold=remold)
    lines = warning_lines(remold.stderr(), "rule 'products'")
    assert any(f"rule 'products' (attribute, {db}.products) removed: the documents stay as stored: "
               f"reads of {db}.products return the attributes as the array 'specs' of {{k, v}} pairs"
               in line for line in lines), lines
    assert any(f"rule 'products' (attribute, {db}.elsewhere) added: documents already in "
               f"{db}.elsewhere are not converted" in line for line in lines), lines
    # As the warning says: reads return the stored form, exactly the backend's.
    through = list(client[db]["products"].find())
    assert through == list(direct_client[db]["products"].find())
    assert through == [{"_id": 1, "name": "laptop", "specs": [{"k": "ram_gb", "v": 16}]}]
    assert client[db]["products"].count_documents({"ram_gb": 16}) == 0

    # The bucket rule comes back: its readings are read again (once remold
    # has counted nothing written before it in the logical collection:
    # until then its reads are refused, 117), and the addition is logged.
    replace_file(readings_rule, rule_text(db, "readings", "readings_buckets"), scratch)

    def read_again() -> bool:
        try:
            return client[db]["readings"].count_documents({}) == len(readings)
        except pymongo.errors.OperationFailure as refused:
            assert refused.code == 117, refused.details
            return False

    wait_for("the bucket rule applies again", read_again, remold=remold)
    assert list(client[db]["readings"].find().sort("_id", 1)) == readings
    wait_for("the addition is logged",
             lambda: warning_lines(remold.stderr(), f"rule 'readings' (bucket, {db}.readings) added: "
                                   f"documents already in {db}.readings are not converted"),
             remold=remold)
    assert remold.alive()
    assert remold.terminate() == 0
