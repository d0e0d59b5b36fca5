"""`make run`'s promise (scripts/run-local.sh, README "A short tour").

The script, run with the binary under test and REMOLD_LISTEN=127.0.0.1:0,
starts its own backend and remold with the example rules (examples/rules)
and prints the connection string, the backend's address and, per rule, a
command to try (examples/tryouts.py). These tests check that the printed
commands are the tryouts of the example rules for the printed addresses,
run each as printed, and check on the backend directly that it did what
its line says: the reading is stored in a bucket (and reads back as
written), the product's attributes are stored as pairs and the attribute
query finds it, the post counts its comments. A --rules of the caller's
replaces the example rules, and then no command is printed.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pymongo
import pytest

from conftest import SOURCE_DIR, remold_environment, require_binary

sys.path.insert(0, str(SOURCE_DIR / "examples"))
import example_rules  # noqa: E402
import tryouts  # noqa: E402

RULES = SOURCE_DIR / "examples" / "rules"
PYTHON = str(SOURCE_DIR / ".venv" / "bin" / "python")


class RunLocal:
    """scripts/run-local.sh in a session of its own, its banner read."""

    def __init__(self, *flags: str):
        self.stderr = tempfile.TemporaryFile()
        # Its own in-memory backend, which takes no credentials: none of the
        # suite's backend (remold would log in with them, and fail to count).
        env = {**remold_environment(None), "REMOLD_LISTEN": "127.0.0.1:0"}
        self.proc = subprocess.Popen(["bash", "scripts/run-local.sh", str(require_binary()), *flags],
                                     cwd=SOURCE_DIR, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=self.stderr, text=True, start_new_session=True)
        self.banner: list[str] = []
        for line in self.proc.stdout:
            self.banner.append(line.rstrip("\n"))
            if "Ctrl-C stops both." in line:
                break
        text = "\n".join(self.banner)
        proxy = re.search(r"connection string:\s+(mongodb://\S+)", text)
        backend = re.search(r"backend \(direct\):\s+(mongodb://\S+)", text)
        assert proxy and backend, f"no banner; stdout:\n{text}\nstderr:\n{self.stderr_text()}"
        self.proxy_uri, self.backend_uri = proxy.group(1), backend.group(1)

    def stderr_text(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")

    def commands(self) -> list[tuple[str, str]]:
        """(comment line, command) for each rule; a comment without a command gets ''."""
        pairs, lines = [], [line for line in self.banner if line.startswith("  ")]
        for i, line in enumerate(lines):
            if line.startswith("  # "):
                follows = lines[i + 1] if i + 1 < len(lines) else ""
                pairs.append((line, "" if follows.startswith("  # ") or "Ctrl-C" in follows else follows.strip()))
        return pairs

    def stop(self) -> None:
        """Ctrl-C as a user would: the script stops remold and the backend."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise AssertionError("run-local.sh did not stop within 30 s of Ctrl-C")


@pytest.fixture
def run_local():
    started: list[RunLocal] = []

    def start(*flags: str) -> RunLocal:
        started.append(RunLocal(*flags))
        return started[-1]
    yield start
    for run in started:
        run.stop()


def run_printed(command: str) -> str:
    result = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"{command}\nexited {result.returncode}:\n{result.stderr}"
    return result.stdout


def check_bucket(rule: example_rules.BucketNames, proxy: pymongo.MongoClient, backend: pymongo.MongoClient):
    reading = tryouts.sample_reading(rule)
    meta = {field: reading[field] for field in rule.meta}
    buckets = list(backend[rule.db][rule.buckets].find())
    assert len(buckets) == 1, buckets
    bucket = buckets[0]
    assert {field: bucket[field] for field in rule.meta} == meta
    assert bucket["count"] == 1 and len(bucket[rule.measurements]) == 1, bucket
    stored = bucket[rule.measurements][0]
    assert stored[rule.time] == reading[rule.time]
    for field in rule.summarised:
        assert stored[field] == reading[field] == bucket["sum"][field], bucket
    assert backend[rule.db][rule.collection].count_documents({}) == 0  # nothing stored flat
    read_back = proxy[rule.db][rule.collection].find_one(meta)
    assert {k: v for k, v in read_back.items() if k != "_id"} == reading


def check_attribute(rule: example_rules.AttributeNames, proxy: pymongo.MongoClient, backend: pymongo.MongoClient):
    product = tryouts.sample_product(rule)
    attributes = {k: v for k, v in product.items() if k not in (rule.fixed or []) and
                  (rule.attributes is None or k in rule.attributes)}
    assert attributes, product
    stored = list(backend[rule.db][rule.collection].find())
    assert len(stored) == 1, stored
    assert stored[0][rule.array] == [{rule.key: k, rule.value: v} for k, v in attributes.items()], stored
    assert not set(attributes) & set(stored[0]), stored
    found = list(proxy[rule.db][rule.collection].find(tryouts.attribute_query(rule)))
    assert [{k: v for k, v in d.items() if k != "_id"} for d in found] == [product], found


def check_computed(rule: example_rules.CountNames, proxy: pymongo.MongoClient, backend: pymongo.MongoClient):
    comments = tryouts.sample_comments(rule)
    post = backend[rule.target_db][rule.target].find_one(tryouts.sample_post_filter(rule))
    counted = backend[rule.db][rule.collection].count_documents({rule.link_from: tryouts.POST_ID})
    assert counted == len(comments) == post[rule.count_field], (post, counted)
    for field, source in rule.maxima.items():
        assert post[field] == max(c[source] for c in comments), post


CHECKS = {"bucket": check_bucket, "attribute": check_attribute, "computed": check_computed}


def test_run_prints_a_command_per_example_rule_that_does_what_it_says(run_local):
    run = run_local()
    rules = example_rules.load(RULES)
    expected = tryouts.tryouts(rules, run.proxy_uri, run.backend_uri, PYTHON)
    assert run.commands() == [(t.lines()[0], t.command or "") for t in expected], run.banner
    assert {r.pattern for r in rules} == set(CHECKS), "each example rule's command is checked"
    assert f"rules: loaded {len(rules)} rule(s) from examples/rules (start)" in run.stderr_text()

    proxy, backend = pymongo.MongoClient(run.proxy_uri), pymongo.MongoClient(run.backend_uri)
    for rule, (_, command) in zip(rules, run.commands()):
        printed = run_printed(command)
        assert printed.strip(), f"{command} printed nothing"
        CHECKS[rule.pattern](getattr(rule, rule.pattern), proxy, backend)
    proxy.close()
    backend.close()


def test_run_with_rules_of_its_own_loads_those_and_prints_no_command(run_local, tmp_path: Path):
    (tmp_path / "items.yaml").write_text("namespace: shop.items\npattern: attribute\n"
                                         "attribute:\n  except: [name]\n")
    run = run_local("--rules", str(tmp_path), "--log-level", "info")
    assert run.commands() == [], run.banner
    deadline = time.monotonic() + 10
    while f"loaded 1 rule(s) from {tmp_path} (start)" not in run.stderr_text():
        assert time.monotonic() < deadline, run.stderr_text()
        time.sleep(0.1)
    assert "examples/rules" not in run.stderr_text()
