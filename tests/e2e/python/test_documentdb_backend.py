"""The DocumentDB gateway patch of scripts/install-documentdb.sh, shown on
the engine itself (no remold here).

Upstream's gateway, given one command with a maxTimeMS PostgreSQL refuses
(negative, or past 2^31 - 1 ms), answers it with an error, as it should,
but returns its pooled PostgreSQL connection inside an aborted
transaction: every later command that gets the connection fails with
33685826 "current transaction is aborted". The project's patch
(scripts/documentdb/gateway-end-aborted-transactions.patch) rolls the
transaction back. The test runs the same commands against a server with
each gateway: the defect on the unpatched one, none on the patched one.

It runs in the DocumentDB pass of the suite (REMOLD_TEST_BACKEND=documentdb),
where the script has built both gateways.
"""
from __future__ import annotations

import pymongo
import pytest
from pymongo.errors import OperationFailure

from conftest import BACKEND_KIND_ENV, BACKEND_URI_ENV, _start_documentdb

ABORTED_TRANSACTION = 33685826
BAD_VALUE = 2

pytestmark = pytest.mark.skipif(
    BACKEND_KIND_ENV != "documentdb" or bool(BACKEND_URI_ENV),
    reason="the DocumentDB pass runs it (REMOLD_TEST_BACKEND=documentdb builds both gateways)")


def failures_after_a_refused_max_time(uri: str, plain_commands: int = 10) -> list[int]:
    """The codes of the plain finds that fail after one count with maxTimeMS -1."""
    with pymongo.MongoClient(uri, maxPoolSize=1, serverSelectionTimeoutMS=10_000) as client:
        db = client.gateway_patch
        db.c.insert_one({"_id": 1})
        with pytest.raises(OperationFailure) as refused:
            db.command({"count": "c", "maxTimeMS": -1})
        assert refused.value.code == BAD_VALUE, refused.value
        codes = []
        for _ in range(plain_commands):
            try:
                assert db.c.find_one() == {"_id": 1}
            except OperationFailure as e:
                codes.append(e.code)
        return codes


@pytest.mark.parametrize("gateway", ["unpatched", "patched"])
def test_a_refused_max_time_leaves_no_aborted_connection(gateway):
    server, stop = _start_documentdb(unpatched=gateway == "unpatched")
    try:
        codes = failures_after_a_refused_max_time(server.direct_uri)
    finally:
        stop()
    if gateway == "unpatched":
        assert codes and set(codes) == {ABORTED_TRANSACTION}, (
            f"upstream's gateway no longer shows the defect ({codes}): "
            "see whether the patch is still needed")
    else:
        assert codes == [], f"plain finds failed after the refused maxTimeMS: {codes}"
