"""The differential test (issue 11), bounded for ``make test``: for each rule
(bucket, attribute, computed, subset, extended_reference, versioned,
polymorphic, outlier, history) a few seeded random sequences of writes, reads,
pipelines from a plain collection reading the ruled one, $out/$merge into it
and catalog commands run through remold on the ruled collection and directly
on the backend on a flat copy (for computed, subset and extended_reference,
what the rule maintains is recomputed on the flat copy by the oracle after
every write; for versioned, each sequence starts with documents stored at
older versions, which the flat copy holds upgraded; for polymorphic, c shares
its stored collection with a second rule's c3, which the sequences seed and
write too, and the oracle keeps the flat side's copy of the stored collection
to compare with remold's; for outlier, the threshold is 3, so that arrays of
up to 12 elements overflow all the time, and each sequence starts with long
arrays written before the rule; for history, likewise, with every element a
document of its own aside and a copy of the latest 2 kept). Every difference must be a
refusal documented in docs/what-works.md's table "What works through remold", or a
difference a cell of it states ("differs: ..."); any other difference fails
the test, printed with its seed and a minimal
reproducing sequence (delta-debugged on fresh collections).

The harness lives in ``differential/``; the long run is
``tests/e2e/differential.sh --rule attribute --seed 7 --ops 100000``.
``REMOLD_DIFF_SEED`` (default 11) and ``REMOLD_DIFF_SEQUENCES`` (default 12
per rule, of ``REMOLD_DIFF_LENGTH`` 40 operations) change the bounded run.
"""
from __future__ import annotations

import os
import uuid

import pymongo
import pytest

from conftest import NO_PROXY, SOURCE_DIR, start_remold
from differential.campaign import format_finding, format_report, run_campaign
from differential.capabilities import probe
from differential.families import FAMILIES
from differential.setup import cleanup, harness, write_rules
from differential.table import PAGE, Table

SEED = int(os.environ.get("REMOLD_DIFF_SEED", "11"))
SEQUENCES = int(os.environ.get("REMOLD_DIFF_SEQUENCES", "12"))
LENGTH = int(os.environ.get("REMOLD_DIFF_LENGTH", "40"))
MINIMIZE_SECONDS = 5.0  # per difference class, and
MINIMIZE_TOTAL = 12.0   # per rule, so that a run with many classes stays bounded


@pytest.fixture(scope="module")
def differential_env(backend, direct_client, tmp_path_factory):
    if NO_PROXY:
        pytest.skip("compares remold against the backend; REMOLD_TEST_NO_PROXY=1")
    prefix = f"e2e_diff_{uuid.uuid4().hex[:6]}"
    rules = write_rules(tmp_path_factory.mktemp("diff") / "rules", prefix, sorted(FAMILIES))
    remold = start_remold(backend.uri, extra_args=("--rules", str(rules)))
    client = pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=10_000)
    caps = probe(direct_client, f"{prefix}_probe")
    yield prefix, client, caps
    client.close()
    cleanup(prefix, sorted(FAMILIES), direct_client)
    remold.kill()
    remold.forget_stderr()


def test_what_works_table_is_readable():
    table = Table.from_page(SOURCE_DIR / PAGE)
    for name in ("insert", "find", "update", "delete", "$lookup", "$out", "renameCollection"):
        assert set(table.rows[name]) == set(FAMILIES), f"table row {name}: {table.rows[name]}"


@pytest.mark.parametrize("rule", sorted(FAMILIES))
def test_ruled_collection_answers_as_a_flat_one(rule, differential_env, direct_client):
    prefix, client, caps = differential_env
    missing = set(getattr(FAMILIES[rule], "requires", ())) - set(caps)
    if missing:
        pytest.skip(f"rule {rule} needs a backend with {', '.join(sorted(missing))}")
    table = Table.from_page(SOURCE_DIR / PAGE)
    h = harness(rule, prefix, client, direct_client, table, caps)
    result = run_campaign(h, caps, seed=SEED, sequences=SEQUENCES, length=LENGTH,
                          minimize_budget=150, minimize_seconds=MINIMIZE_SECONDS,
                          minimize_total=MINIMIZE_TOTAL)
    report = format_report([result])
    print(f"backend capabilities: {', '.join(sorted(caps))}\n{report}")
    assert result.stats.operations >= SEQUENCES, "the sequences ran no operation"
    if result.findings:
        pytest.fail(f"{len(result.findings)} unexplained difference classes (rule {rule}, seed {SEED}):\n\n"
                    + "\n\n".join(format_finding(f) for f in result.findings.values())
                    + "\n\n" + report, pytrace=False)
