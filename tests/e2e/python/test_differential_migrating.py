"""The differential test (issue 11) on a collection halfway through an
adoption: the attribute rule says `migrating: true`, and every sequence
starts from documents written flat straight to the backend before the rule,
beside those the sequence writes through remold (stored as pairs). Every
operation of the generator runs through remold and on a flat copy, and
every difference must be a refusal documented for the attribute rule in
README.md's table "What works through remold", as for a collection
entirely in the rule's form.
"""
from __future__ import annotations

import os
import random
import uuid

import pymongo
import pytest

from conftest import NO_PROXY, SOURCE_DIR, start_remold
from differential.campaign import format_finding, format_report, run_campaign
from differential.capabilities import probe
from differential.families import Attribute
from differential.generator import Ids
from differential.runner import Harness
from differential.table import Table

SEED = int(os.environ.get("REMOLD_DIFF_SEED", "11"))
SEQUENCES = int(os.environ.get("REMOLD_DIFF_SEQUENCES", "12"))
LENGTH = int(os.environ.get("REMOLD_DIFF_LENGTH", "40"))
FLAT_DOCUMENTS = 12


class AttributeMigrating(Attribute):
    """The attribute family (its column of the README table), with the rule
    migrating and documents written before it."""

    def __init__(self, backend_client):
        self.backend_client = backend_client

    def rules(self, db):
        return {"c.yaml": super().rules(db)["c.yaml"] + "  migrating: true\n"}

    def setup(self, db) -> None:
        super().setup(db)
        rng = random.Random(5)  # the same documents on both sides
        ids = Ids()
        docs = []
        for _ in range(FLAT_DOCUMENTS):
            doc = self.document(rng, ids)
            doc["_id"] = 20_000 + len(docs)  # apart from the sequence's own _ids
            docs.append(doc)
        self.backend_client[db.name].c.insert_many(docs)  # flat, on both sides


def test_migrating_attribute_answers_as_a_flat_collection(backend, direct_client, tmp_path):
    if NO_PROXY:
        pytest.skip("compares remold against the backend; REMOLD_TEST_NO_PROXY=1")
    prefix = f"e2e_diffmig_{uuid.uuid4().hex[:6]}"
    remold_db, flat_db = f"{prefix}_r", f"{prefix}_f"
    family = AttributeMigrating(direct_client)
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "c.yaml").write_text(family.rules(remold_db)["c.yaml"])
    remold = start_remold(backend.uri, extra_args=("--rules", str(rules)))
    client = pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=10_000)
    try:
        caps = probe(direct_client, f"{prefix}_probe")
        family.caps = caps
        table = Table.from_readme(SOURCE_DIR / "README.md")
        h = Harness(family, client[remold_db], direct_client[flat_db], table, caps)
        result = run_campaign(h, caps, seed=SEED, sequences=SEQUENCES, length=LENGTH, minimize_budget=150,
                              minimize_seconds=5.0, minimize_total=12.0)
        report = format_report([result])
        print(f"\nmigrating attribute rule, {FLAT_DOCUMENTS} flat documents per sequence\n{report}")
        assert result.stats.operations >= SEQUENCES
        if result.findings:
            pytest.fail(f"{len(result.findings)} unexplained difference classes (seed {SEED}):\n\n"
                        + "\n\n".join(format_finding(f) for f in result.findings.values()) + "\n\n" + report,
                        pytrace=False)
    finally:
        client.close()
        for name in (remold_db, flat_db, f"{prefix}_probe"):
            direct_client.drop_database(name)
        remold.kill()
