"""Sidecars that must agree (app/sidecars.h; issue 28, item 2).

remold runs as one sidecar per application instance, and a rule change
reaches the sidecars at different times. Several remolds in front of one
backend, in one `sidecars` group, each publish how their rules store each
collection and check the others': one that cannot read what another writes
says so within seconds (an error line, a metric, /readyz 503). And the
rollout docs/operations.md describes (every sidecar reads both forms before any
writes the new one) takes an attribute rule onto a collection that holds
data, across three sidecars one at a time, with an application reading
and writing through all three the whole time, every read compared with a
flat oracle: 0 wrong answers, and no disagreement reported at any step.
"""
from __future__ import annotations

import random
import time
from pathlib import Path

import pymongo
import pytest

from conftest import NO_PROXY
from test_logging import wait_for_log
from test_metrics import http_get, scrape, start_observed, value
from test_migrate import N_PRODUCTS, Products, flat_product
from test_rules import run_remold

pytestmark = pytest.mark.skipif(NO_PROXY, reason="asserts remold's own sidecar checks")

ATTRIBUTE = "namespace: {db}.products\npattern: attribute\nattribute:\n  array: specs\n  except: [name, price]\n"


def write_rule(rules: Path, db: str, migrating: str | None) -> None:
    """The attribute rule on <db>.products, with `migrating` (none: the key absent)."""
    text = ATTRIBUTE.format(db=db) + (f"  migrating: {migrating}\n" if migrating else "")
    tmp = rules / "products.yaml.tmp"
    tmp.write_text(text)
    tmp.rename(rules / "products.yaml")


def sidecar(private_remold, rules: Path, db: str):
    """A remold of the test's group, with its own rules directory and /metrics."""
    rules.mkdir(exist_ok=True)
    return start_observed(private_remold, "--rules", str(rules), "--log-level", "info", "--sidecars", db,
                          "--sidecars-registry", f"{db}.sidecars")


def ready(address) -> tuple[int, str]:
    status, body, _ = http_get(address, "/readyz")
    return status, body


def wait_until(what: str, check, timeout: float = 30.0) -> float:
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < timeout, f"{what}: not within {timeout} s"
        time.sleep(0.05)
    return time.monotonic() - started


def test_a_sidecar_with_other_rules_is_detected_within_seconds(private_remold, direct_client, db_name, tmp_path):
    try:
        ruled, ruled_metrics = sidecar(private_remold, tmp_path / "a", db_name)
        write_rule(tmp_path / "a", db_name, None)
        wait_for_log(ruled, lambda text: "rules: loaded 1 rule(s)" in text)
        # A second sidecar of the group without the rule (an old ConfigMap).
        started = time.monotonic()
        plain, plain_metrics = sidecar(private_remold, tmp_path / "b", db_name)
        wait_until("the plain sidecar refuses readiness",
                   lambda: ready(plain_metrics)[0] == 503 and "sidecars:" in ready(plain_metrics)[1])
        wait_for_log(ruled, lambda text: "cannot read what this remold writes to" in text)
        detected = time.monotonic() - started
        status, body = ready(plain_metrics)
        assert f"cannot read what" in body and f"{db_name}.products" in body, body
        assert "attribute specs {k, v} except [name, price]" in body, body
        assert "error sidecars: this remold cannot read what" in plain.stderr()
        # The ruled sidecar reads what the plain one writes: it serves both
        # forms while a live sidecar of its group writes plain documents.
        assert "writes " + f"{db_name}.products as 'plain', which its form does not read" in ruled.stderr()
        assert ready(ruled_metrics)[0] == 200
        assert "this remold cannot read what" not in ruled.stderr()
        samples = scrape(plain_metrics)
        assert value(samples, "remold_sidecars_live") == 1
        assert value(samples, "remold_sidecar_disagreements", namespace=f"{db_name}.products", reader="this") == 1
        samples = scrape(ruled_metrics)
        assert value(samples, "remold_sidecar_disagreements", namespace=f"{db_name}.products", reader="other") == 1

        # The old sidecar gets the rule: they agree again within seconds.
        started = time.monotonic()
        write_rule(tmp_path / "b", db_name, None)
        wait_until("the sidecars agree again", lambda: ready(plain_metrics)[0] == 200)
        wait_for_log(ruled, lambda text: "again (or it left)" in text)
        agreed = time.monotonic() - started
        assert value(scrape(plain_metrics), "remold_sidecar_disagreements",
                     namespace=f"{db_name}.products", reader="this") == 0
        print(f"\nsidecars: a disagreeing sidecar detected in {detected:.1f} s, agreement seen again "
              f"{agreed:.1f} s after its rule changed")
    finally:
        direct_client.drop_database(db_name)


class Fleet(Products):
    """The migration tests' application (writes and reads checked against
    a flat oracle), each operation through one of several sidecars."""

    def __init__(self, throughs, oracle):
        super().__init__(throughs[0], oracle)
        self.throughs = throughs
        self.pick = random.Random(11)

    def write_once(self) -> None:
        self.through = self.pick.choice(self.throughs)
        super().write_once()

    def read_once(self, query=None, with_aggregate: bool = False) -> None:
        self.through = self.pick.choice(self.throughs)
        super().read_once(query, with_aggregate)


def test_rolling_out_a_rule_across_sidecars_answers_right_at_every_step(private_remold, make_client, backend,
                                                                        direct_client, db_name, tmp_path):
    database = direct_client[db_name]
    rng = random.Random(5)
    seed = [flat_product(i, rng) for i in range(N_PRODUCTS)]
    database.products.insert_many([dict(d) for d in seed])
    database.products_oracle.insert_many(seed)
    try:
        sidecars = [sidecar(private_remold, tmp_path / f"s{i}", db_name) for i in range(3)]
        app = Fleet([make_client(remold.uri, retryWrites=False)[db_name].products for remold, _ in sidecars],
                    database.products_oracle)
        app.start()
        time.sleep(1.0)

        def roll(migrating: str | None) -> None:
            """Each sidecar in turn gets the rule with `migrating`, the
            application running; each reload is waited for."""
            for i, (remold, _) in enumerate(sidecars):
                loads = remold.stderr().count("rules: loaded")
                write_rule(tmp_path / f"s{i}", db_name, migrating)
                wait_for_log(remold, lambda text: text.count("rules: loaded") > loads)
                time.sleep(1.5)  # a heartbeat or two with the sidecars in different steps

        # 1. Every sidecar reads both forms, and writes the flat one.
        roll("to_flat")
        # 2. Then each writes the rule's form (the others read both).
        roll("true")
        # 3. The data written before the rule, converted.
        result = run_remold("migrate", "--backend", backend.uri, "--rules", str(tmp_path / "s0"), "--rule",
                            "products")
        assert result.returncode == 0, result.stdout + result.stderr
        # 4. The rule without `migrating`: each counts nothing left, and
        # serves the rule's form alone.
        roll(None)
        for remold, _ in sidecars:
            wait_for_log(remold, lambda text: "written before the rule" not in text.split("rules: loaded")[-1]
                         or "nothing written before the rule is left" in text, timeout=30)
        time.sleep(1.0)
        app.finish()
        app.check_everything()

        logs = [remold.stderr() for remold, _ in sidecars]
        disagreements = [line for log in logs for line in log.splitlines() if "cannot read what" in line]
        assert not disagreements, disagreements[:3]
        for _, metrics in sidecars:
            assert ready(metrics)[0] == 200
            assert value(scrape(metrics), "remold_sidecars_live") == 2
        print(f"\nsidecars: rule rolled out across 3 sidecars in 3 steps and a migration: {app.writes} writes, "
              f"{app.reads} reads, {len(app.wrong)} wrong, {len(app.transient)} transient (the stand-in's), "
              "0 disagreements")
        assert not app.wrong, app.wrong[:5]
        flat_left = database.products.count_documents({"specs": {"$exists": False}, "ram_gb": {"$exists": True}})
        assert flat_left == 0
    finally:
        direct_client.drop_database(db_name)
