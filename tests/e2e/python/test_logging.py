"""Logs: text or JSON lines (--log-format json), one line per connection
event and per error, the slow-operation log (--slow-op-ms), and nothing at
info level or above that quotes a document or a credential.

Every test runs a remold of its own and reads its stderr.
"""

from __future__ import annotations

import base64
import json
import re
import time
import uuid

import pymongo
import pytest

pytestmark = pytest.mark.usefixtures("proxy_only")

from test_metrics import free_port, scrape, value, write_attribute_rule  # noqa: E402

_ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")

# A portable, CPU-bound single request (as in test_sigterm): an unindexed
# self-$lookup is quadratic in the collection size.
GROUPS = 50


def slow_pipeline(marker: str) -> list:
    return [
        {"$match": {"tag": {"$ne": marker}}},  # the marker is in the command, never in the log
        {"$lookup": {"from": "slow", "localField": "k", "foreignField": "k", "as": "same"}},
        {"$project": {"n": {"$size": "$same"}}},
        {"$group": {"_id": None, "total": {"$sum": "$n"}}},
    ]


def seed_slow(coll, marker: str, seconds: float) -> None:
    """Grow the collection until the aggregate takes `seconds` on the backend directly."""
    n = 0
    target = 500
    while True:
        coll.insert_many([{"_id": i, "k": i % GROUPS, "tag": "t"} for i in range(n, target)])
        n = target
        took = []
        for _ in range(2):  # the faster of two: a cold or busy JVM is not a slow query
            start = time.monotonic()
            list(coll.aggregate(slow_pipeline(marker)))
            took.append(time.monotonic() - start)
        if min(took) >= seconds or n >= 64_000:
            return
        target *= 2


def serve_args(backend_uri: str, *extra: str) -> list[str]:
    return ["serve", "--listen", "127.0.0.1:0", "--backend", backend_uri, *extra]


def json_lines(text: str) -> list[dict]:
    lines = []
    for line in text.splitlines():
        record = json.loads(line)  # every line is one JSON object
        assert isinstance(record, dict), line
        assert _ISO_UTC.match(record["t"]), record
        assert record["level"] in ("trace", "debug", "info", "warn", "error", "critical"), record
        assert isinstance(record["msg"], str)
        lines.append(record)
    return lines


def wait_for_log(remold, predicate, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = remold.stderr()
        if predicate(text):
            return text
        time.sleep(0.05)
    raise AssertionError(f"log condition not met within {timeout}s; stderr:\n{remold.stderr()}")


def test_json_lines_with_connection_events(private_remold, backend, db_name):
    remold = private_remold(args=serve_args(backend.uri, "--log-format", "json", "--log-level", "info"))
    client = pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=10_000, maxPoolSize=1)
    client[db_name].c.insert_one({"x": 1})
    client.close()
    text = wait_for_log(remold, lambda t: "closed after" in t)
    assert remold.terminate() == 0
    records = json_lines(remold.stderr())
    messages = [r["msg"] for r in records]
    assert any(m.startswith("listening on 127.0.0.1:") for m in messages), messages
    opens = [r for r in records if " open from 127.0.0.1:" in r["msg"]]
    closes = [r for r in records if " closed after " in r["msg"]]
    assert opens and closes, messages
    for record in opens + closes:
        assert record["level"] == "info"
        assert record["msg"].startswith(f"session {record['session']}: ")
    assert {r["session"] for r in closes} <= {r["session"] for r in opens}
    assert "stopped" in messages
    assert text  # (read while running, too)


def test_text_format_is_the_default(private_remold, backend):
    remold = private_remold(args=serve_args(backend.uri, "--log-level", "info"))
    client = pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=10_000)
    client.admin.command("ping")
    client.close()
    text = wait_for_log(remold, lambda t: "closed after" in t)
    line = next(l for l in text.splitlines() if "open from" in l)
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3} info session \d+: open from 127\.0\.0\.1:\d+$", line), line


def test_slow_operation_log(private_remold, backend, direct_client, db_name):
    marker = f"marker-{uuid.uuid4().hex}"
    seed_slow(direct_client[db_name].slow, marker, seconds=0.3)
    remold = private_remold(args=serve_args(backend.uri, "--log-format", "json",
                                            "--log-level", "info", "--slow-op-ms", "100"))
    client = pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=10_000)
    try:
        client.admin.command("ping")
        client.admin.command("ping")  # fast: not logged
        list(client[db_name].slow.aggregate(slow_pipeline(marker)))
        text = wait_for_log(remold, lambda t: "slow operation" in t)
    finally:
        client.close()
    slow = [r for r in json_lines(text) if "slow operation" in r["msg"]]
    assert len(slow) == 1, slow  # the aggregate only, not the pings
    record = slow[0]
    assert record["level"] == "warn"
    match = re.match(rf"^session {record['session']}: slow operation: aggregate on {db_name}\.slow "
                     r"took (\d+\.\d) ms$", record["msg"])
    assert match, record
    assert float(match.group(1)) >= 100
    assert marker not in text


def test_no_documents_or_credentials_at_info(private_remold, backend, direct_client, db_name,
                                             tmp_path):
    """Every command logged as slow, errors of every kind: the marker (a value
    in documents, filters and a duplicate key) never reaches the log."""
    marker = f"secret-{uuid.uuid4().hex}"
    rule = write_attribute_rule(tmp_path / "rules", db_name)
    remold = private_remold(args=serve_args(backend.uri, "--log-format", "json", "--log-level", "info",
                                            "--slow-op-ms", "1", "--rules", str(tmp_path / "rules")))
    client = pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=10_000)
    try:
        coll = client[db_name].plain
        coll.insert_one({"_id": marker, "note": marker})
        with pytest.raises(pymongo.errors.DuplicateKeyError):
            coll.insert_one({"_id": marker})  # errmsg quotes the key
        assert coll.find_one({"note": marker})["_id"] == marker
        coll.update_one({"_id": marker}, {"$set": {"other": marker}})
        products = client[db_name].products
        products.insert_one({"_id": 1, "name": marker, "ram_gb": marker})
        # A rewritten command that takes well over 1 ms on any machine, so the
        # slow-operation log surely has one line naming the rule.
        products.insert_many([{"_id": 10 + i, "name": "bulk", "ram_gb": i, "screen_in": i % 17}
                              for i in range(3000)])
        assert products.find_one({"ram_gb": marker})["name"] == marker
        with pytest.raises(pymongo.errors.OperationFailure):
            list(products.find({"$where": f"this.name == '{marker}'"}))
        with pytest.raises(pymongo.errors.OperationFailure):
            client[db_name].command({"noSuchCommand": marker})
        # Credentials: PLAIN carries the password in the clear (base64).
        with pytest.raises(pymongo.errors.PyMongoError):
            bad = pymongo.MongoClient(remold.uri, username=f"user-{marker}", password=f"pw-{marker}",
                                      authMechanism="PLAIN", serverSelectionTimeoutMS=5_000)
            try:
                bad.admin.command("ping")
            finally:
                bad.close()
    finally:
        client.close()
    text = wait_for_log(remold, lambda t: t.count("closed after") >= 2)
    records = json_lines(text)
    assert any("slow operation" in r["msg"] for r in records), "every operation was slow at 1 ms"
    assert any(f"rule {rule}" in r["msg"] for r in records), "the rewritten ones name their rule"
    assert marker not in text
    assert base64.b64encode(marker.encode()).decode()[:20] not in text


def test_auth_payloads_never_logged_even_at_debug(private_remold, backend, tmp_path, db_name):
    marker = f"secret-{uuid.uuid4().hex}"
    write_attribute_rule(tmp_path / "rules", db_name)
    metrics_port = free_port()
    remold = private_remold(args=serve_args(backend.uri, "--log-level", "trace", "--slow-op-ms", "1",
                                            "--rules", str(tmp_path / "rules"),
                                            "--metrics-listen", f"127.0.0.1:{metrics_port}"))
    for mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-1"):
        with pytest.raises(pymongo.errors.PyMongoError):
            bad = pymongo.MongoClient(remold.uri, username=f"user-{marker}", password=f"pw-{marker}",
                                      authMechanism=mechanism, authSource=db_name,
                                      serverSelectionTimeoutMS=5_000)
            try:
                bad.admin.command("ping")
            finally:
                bad.close()
    text = wait_for_log(remold, lambda t: t.count("closed after") >= 3)
    samples = scrape(("127.0.0.1", metrics_port))
    assert value(samples, "remold_requests_total", command="saslStart") >= 3, "the payloads went through"
    assert marker not in text
    for payload in (f"user-{marker}", f"pw-{marker}", marker):
        encoded = base64.b64encode(payload.encode()).decode()
        assert encoded[:16] not in text
