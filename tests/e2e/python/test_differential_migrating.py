"""The differential test (issue 11) on a collection halfway through a
migration. The attribute rule says `migrating: true`, and every sequence
starts from documents written flat straight to the backend before the rule,
beside those the sequence writes through remold (stored as pairs); or it
says `migrating: to_flat`, and the documents stored before are pairs,
beside those the sequence writes flat. Every
operation of the generator runs through remold and on a flat copy, and
every difference must be a refusal documented for the attribute rule in
docs/what-works.md's table "What works through remold", as for a collection
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
from differential.table import PAGE, Table

SEED = int(os.environ.get("REMOLD_DIFF_SEED", "11"))
SEQUENCES = int(os.environ.get("REMOLD_DIFF_SEQUENCES", "12"))
LENGTH = int(os.environ.get("REMOLD_DIFF_LENGTH", "40"))
STORED_DOCUMENTS = 12


FIXED = ("_id", "name", "price", "category")  # the family's rule: except [name, price, category]


def folded(doc: dict) -> dict:
    """A document in the rule's form, as remold stores it: its attributes as
    {k, v} pairs."""
    out = {k: v for k, v in doc.items() if k in FIXED}
    pairs = [{"k": k, "v": v} for k, v in doc.items() if k not in FIXED]
    if pairs:
        out["specs"] = pairs
    return out


class AttributeMigrating(Attribute):
    """The attribute family (its column of the table), with the rule
    migrating and documents stored before the sequence: with `migrating:
    true`, written flat before the rule; with `to_flat`, stored as pairs
    under it."""

    def __init__(self, backend_client, direction: str):
        self.backend_client, self.direction = backend_client, direction

    def rules(self, db):
        return {"c.yaml": super().rules(db)["c.yaml"] + f"  migrating: {self.direction}\n"}

    def setup(self, db) -> None:
        super().setup(db)
        rng = random.Random(5)  # the same documents on both sides
        ids = Ids()
        docs = []
        for _ in range(STORED_DOCUMENTS):
            doc = self.document(rng, ids)
            doc["_id"] = 20_000 + len(docs)  # apart from the sequence's own _ids
            docs.append(doc)
        remold_side = db.name.endswith("_r")
        if remold_side and self.direction == "to_flat":
            docs = [folded(d) for d in docs]
        self.backend_client[db.name].c.insert_many(docs)  # straight to the backend, on both sides


@pytest.mark.parametrize("direction", ["true", "to_flat"])
def test_migrating_attribute_answers_as_a_flat_collection(direction, backend, direct_client, tmp_path):
    if NO_PROXY:
        pytest.skip("compares remold against the backend; REMOLD_TEST_NO_PROXY=1")
    prefix = f"e2e_diffmig_{uuid.uuid4().hex[:6]}"
    remold_db, flat_db = f"{prefix}_r", f"{prefix}_f"
    family = AttributeMigrating(direct_client, direction)
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "c.yaml").write_text(family.rules(remold_db)["c.yaml"])
    remold = start_remold(backend.uri, extra_args=("--rules", str(rules)))
    client = pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=10_000)
    try:
        caps = probe(direct_client, f"{prefix}_probe")
        family.caps = caps
        table = Table.from_page(SOURCE_DIR / PAGE)
        h = Harness(family, client[remold_db], direct_client[flat_db], table, caps)
        result = run_campaign(h, caps, seed=SEED, sequences=SEQUENCES, length=LENGTH, minimize_budget=150,
                              minimize_seconds=5.0, minimize_total=12.0)
        report = format_report([result])
        print(f"\nattribute rule migrating: {direction}, {STORED_DOCUMENTS} documents stored before each "
              f"sequence\n{report}")
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
