"""The driver matrix: one scenario, run through remold by each client an
application may use, judged here the same way for all of them.

Clients (driver_clients.py; all installed by scripts/install-deps.sh):
the Node.js driver and mongosh (tests/e2e/node), the Go driver
(tests/e2e/go), the Java sync driver (tests/e2e/java) and pymongo
(tests/e2e/pymongo). Each comes in two version sets that run the same
programs: against the stand-in (MongoDB 4.2, wire version 8) the releases
pinned as the newest that still accept it, against DocumentDB the newest
releases (driver_clients.VERSION_SET); each test id names the release it
runs. Each runs one program against a remold of the test's own
(--client-compression on, a bucket rule on <db>.readings, metrics on). The
program gets a plan {uri, db, compressed: {snappy|zlib|zstd: URI}} (with
the test user's credentials when the backend requires them) and prints one
JSON object, canonical Extended JSON (so BSON types survive), with these
steps, each {ok: true, ...} or {ok: false, error: {kind, code, codeName,
message}}:

1. ``crud`` on <db>.crud: insertOne {_id: "a", n: 1, tags: ["x", "y"]};
   insertMany b (n 2), c (n 3); find n >= 2 by _id (foundGte2); updateOne a
   $inc n 10; updateMany n < 5 $set small; deleteOne b; then final (all by
   _id) and count. Reports insertOneId, insertManyCount, foundGte2,
   updateOne/updateMany {matched, modified}, deleteOne, final, count.
2. ``cursor`` on <db>.cursor: 250 documents {_id: i, pad}, read back sorted
   by _id with batchSize 50; reports ids in order and batches, the size of
   each batch as the driver received it.
3. ``bulk`` on <db>.bulk: an ordered bulk (3 inserts, updateOne,
   updateMany, deleteOne, replaceOne, an upsert) and an unordered one (a
   duplicate _id insert, an insert, updateOne, deleteOne); reports each one's
   {inserted, matched, modified, deleted, upserted, writeErrors: [{index,
   code}]} and final (all by _id).
4. ``compression``, per compressor X: a client of its own on
   compressed[X] (the URI has compressors=X) inserts 20 documents into
   <db>.compressed_X and reads them back (inserted, found; Java also
   driverCompressors, what the handshake negotiated as it reports it).
   The URI leads through a WireTap (wire_tap.py) in front of remold, which
   records what the driver and remold really sent.
5. ``bucket`` on <db>.readings (the bucket rule): 12 readings {sensor,
   at, temp} inserted one by one with insertOne (the driver adds _id), then
   found sorted by at; reports inserted (with their _id) and found.
6. ``refusal``: updateOne on a reading, which the rule refuses; reports the
   attempt (the error as the application sees it) and the readings again
   (after).

Runs against REMOLD_TEST_BACKEND_URI too. A client that is not installed
fails its test, saying to run scripts/install-deps.sh.
"""

from __future__ import annotations

import datetime as dt
import json
import os

import pytest
from bson import json_util
from bson.json_util import CANONICAL_JSON_OPTIONS, JSONOptions

import wire
from conftest import with_credentials
from driver_clients import CLIENTS, VERSION_SET, locate, pinned_version
from test_bucket import rule_yaml
from test_metrics import free_port, scrape, value
from wire_tap import WireTap

COMPRESSORS = ("snappy", "zlib", "zstd")
# Never compressed (the compression spec): the handshakes and the
# authentication conversation.
NEVER_COMPRESSED = {"hello", "isMaster", "ismaster", "saslStart", "saslContinue", "getnonce",
                    "authenticate", "createUser", "updateUser", "copydbSaslStart",
                    "copydbgetnonce", "copydb"}
T0 = dt.datetime(2024, 3, 4, tzinfo=dt.timezone.utc)
RETRYABLE_WRITES_TEXT = "does not support retryable writes"
DECODE = JSONOptions(tz_aware=True, tzinfo=dt.timezone.utc)


def typed(value):
    """``value`` as canonical Extended JSON, parsed as plain JSON: documents
    compare without regard to field order, but 1, 1L, 1.0 and true differ."""
    return json.loads(json_util.dumps(value, json_options=CANONICAL_JSON_OPTIONS))


def expected_readings() -> list[tuple]:
    return [(f"s{1 + i % 2}", T0 + dt.timedelta(minutes=10 * i), 20.25 + i) for i in range(12)]


def backend_insert_n_with_duplicate(direct_client, db: str) -> int:
    """What the backend answers as ``n`` for an unordered insert of two
    documents whose first has a used _id: 1 on MongoDB (the stand-in,
    mongo-java-server, counts the failed document too). remold forwards
    writes on a collection without a rule as they are, so this is the count
    each driver must report for step 3's unordered bulk."""
    probe = direct_client[db]["probe_insert_n"]
    probe.insert_one({"_id": 1})
    reply = direct_client[db].command("insert", "probe_insert_n",
                                      documents=[{"_id": 1}, {"_id": 2}], ordered=False)
    probe.drop()
    assert len(reply.get("writeErrors", [])) == 1, reply
    return reply["n"]


@pytest.fixture
def matrix_db(db_name, direct_client):
    yield db_name
    direct_client.drop_database(db_name)


@pytest.fixture
def matrix_remold(matrix_db, tmp_path, private_remold):
    """A remold with client compression on, the bucket rule on <db>.readings
    and metrics; returns (remold, metrics address)."""
    rules = tmp_path / "rules"
    rules.mkdir()
    # {sensor, at, temp} readings in hourly buckets per sensor.
    (rules / "readings.yaml").write_text(rule_yaml(matrix_db, "readings", "readings_buckets"))
    port = free_port()
    remold = private_remold(extra_args=("--rules", str(rules), "--client-compression", "on",
                                        "--metrics-listen", f"127.0.0.1:{port}"))
    return remold, ("127.0.0.1", port)


def step(seen: dict, name: str, everything: str) -> dict:
    result = seen[name]
    assert result.get("ok") is True, \
        f"step {name} failed:\n{json.dumps(result, indent=2)}\n{everything}"
    return result


def check_crud(seen, raw, everything):
    crud = step(seen, "crud", everything)
    assert crud["insertOneId"] == "a", everything
    assert crud["insertManyCount"] == 2, everything
    assert raw["crud"]["foundGte2"] == typed([{"_id": "b", "n": 2}, {"_id": "c", "n": 3}]), \
        everything
    assert crud["updateOne"] == {"matched": 1, "modified": 1}, everything
    assert crud["updateMany"] == {"matched": 2, "modified": 2}, everything
    assert crud["deleteOne"] == 1, everything
    assert raw["crud"]["final"] == typed([{"_id": "a", "n": 11, "tags": ["x", "y"]},
                                          {"_id": "c", "n": 3, "small": True}]), everything
    assert crud["count"] == 2, everything


def check_cursor(seen, everything):
    cursor = step(seen, "cursor", everything)
    assert cursor["ids"] == list(range(250)), "the cursor lost, repeated or reordered documents"
    assert cursor["batches"] == [50] * 5, \
        f"batches as the driver received them: {cursor['batches']}"


def check_bulk(seen, raw, unordered_inserted, everything):
    bulk = step(seen, "bulk", everything)
    assert bulk["ordered"] == {"inserted": 3, "matched": 4, "modified": 4, "deleted": 1,
                               "upserted": 1, "writeErrors": []}, everything
    assert bulk["unordered"] == {"inserted": unordered_inserted, "matched": 1, "modified": 1,
                                 "deleted": 1, "upserted": 0,
                                 "writeErrors": [{"index": 0, "code": 11000}]}, everything
    assert raw["bulk"]["final"] == typed([{"_id": 2, "k": "B", "n": 20, "u": True},
                                          {"_id": 4, "k": "d"},
                                          {"_id": 5, "k": "e", "n": 5}]), everything


def check_compression(client, seen, raw, taps, everything):
    docs = [{"_id": i, "text": f"row {i} " + "compressible " * 20} for i in range(20)]
    for name in COMPRESSORS:
        result = seen["compression"][name]
        assert result.get("ok") is True, f"compressors={name} failed:\n{everything}"
        assert result["inserted"] == 20, everything
        assert raw["compression"][name]["found"] == typed(docs), \
            f"compressors={name}: documents differ"
        if client.reports_compressor:
            assert result["driverCompressors"] == [name], \
                f"compressors={name}: the driver negotiated {result['driverCompressors']}"

        # On the wire: everything but the handshakes and the authentication
        # conversation went compressed with this compressor, and remold
        # answered every compressed request that wants a reply with it (and
        # none that does not: moreToCome).
        tap = taps[name]
        assert not tap.problems, tap.problems
        messages = tap.recorded()
        requests = [m for m in messages if m.from_client]
        compressed = [m for m in requests if m.compressor_id is not None]
        plain = sorted({m.command for m in requests if m.compressor_id is None})
        assert compressed, f"compressors={name}: the driver sent nothing compressed through remold"
        assert {m.compressor_id for m in compressed} == {wire.COMPRESSOR_IDS[name]}, \
            f"compressors={name}: compressor ids {sorted({m.compressor_id for m in compressed})}"
        assert {"insert", "find"} <= {m.command for m in compressed}, \
            f"compressors={name}: compressed commands {sorted({m.command for m in compressed})}"
        assert set(plain) <= NEVER_COMPRESSED, f"compressors={name}: sent uncompressed: {plain}"
        replies = {(m.connection, m.response_to): m for m in messages if not m.from_client}
        for request in compressed:
            reply = replies.get((request.connection, request.request_id))
            if request.more_to_come:
                assert reply is None, f"compressors={name}: {request} was answered: {reply}"
                continue
            assert reply is not None, f"compressors={name}: no reply to {request}"
            assert reply.compressor_id == wire.COMPRESSOR_IDS[name], \
                f"compressors={name}: reply to {request.command} was {reply}"


def check_bucket(seen, raw, everything):
    bucket = step(seen, "bucket", everything)
    inserted, found = raw["bucket"]["inserted"], raw["bucket"]["found"]
    assert [(d["sensor"], d["at"], d["temp"]) for d in bucket["inserted"]] == expected_readings(), \
        everything
    assert all("_id" in d for d in inserted), f"a reading was inserted without _id:\n{everything}"
    # Read back as inserted: same _id, values and BSON types (field order
    # aside: the Node.js driver appends the _id it adds, MongoDB puts it first).
    assert found == inserted, (f"readings read back differ from those inserted:\n"
                               f"inserted {json.dumps(inserted)}\nfound    {json.dumps(found)}")


def check_refusal(seen, raw, db, everything):
    refusal = step(seen, "refusal", everything)
    attempt = refusal["attempt"]
    assert attempt["ok"] is False, f"the rule did not refuse the update:\n{everything}"
    error = attempt["error"]
    assert error["code"] == 72 and error["codeName"] == "InvalidOptions", everything
    text = (f"bucket rule 'readings' for {db}.readings: update of individual readings is not "
            f"supported (they are stored inside buckets in {db}.readings_buckets)")
    assert text in error["message"], f"remold's reason did not reach the application:\n{everything}"
    assert RETRYABLE_WRITES_TEXT not in error["message"], everything
    assert raw["refusal"]["after"] == raw["bucket"]["found"], "the refused update changed readings"


@pytest.mark.parametrize("name", list(CLIENTS),
                         ids=[f"{name}-{pinned_version(name)}" for name in CLIENTS])
def test_driver_scenario(name, backend, matrix_db, matrix_remold, direct_client, tmp_path):
    # The newest releases against DocumentDB; against the stand-in, the
    # newest that still accept MongoDB 4.2 (driver_clients.py).
    assert VERSION_SET == ("latest" if backend.kind == "documentdb" else "pinned"), backend.kind
    client = locate(name)
    remold, metrics = matrix_remold
    unordered_inserted = backend_insert_n_with_duplicate(direct_client, matrix_db)
    before = scrape(metrics)

    taps = {c: WireTap(remold.address) for c in COMPRESSORS}
    try:
        plan = {"uri": remold.uri, "db": matrix_db,
                "compressed": {c: with_credentials(taps[c].uri(f"compressors={c}"),
                                                   remold.credentials)
                               for c in COMPRESSORS}}
        home = tmp_path / "home"  # mongosh writes its logs and config under $HOME
        home.mkdir()
        stdout = client.run(plan, {**os.environ, "HOME": str(home)})
    finally:
        for tap in taps.values():
            tap.close()
    after = scrape(metrics)

    raw = json.loads(stdout)
    seen = json_util.loads(stdout, json_options=DECODE)
    everything = f"{client.label} printed:\n{stdout[:6000]}"
    check_crud(seen, raw, everything)
    check_cursor(seen, everything)
    check_bulk(seen, raw, unordered_inserted, everything)
    check_compression(client, seen, raw, taps, everything)
    check_bucket(seen, raw, everything)
    check_refusal(seen, raw, matrix_db, everything)

    # remold's own account: the cursor's batches came through getMore, the
    # readings through the rule, whose one refusal it counted.
    def delta(metric, **labels):
        return value(after, metric, **labels) - value(before, metric, **labels)
    assert delta("remold_requests_total", command="getMore") >= 4
    # 12 inserts, 2 finds, the refused update.
    assert delta("remold_rewrites_total", rule="readings") == 12 + 2 + 1
    assert delta("remold_rewrite_errors_total", rule="readings") == 1
    # The readings are stored in buckets on the backend, none flat.
    buckets = list(direct_client[matrix_db]["readings_buckets"].find())
    assert sorted((b["sensor"], b["count"]) for b in buckets) == [("s1", 3), ("s1", 3),
                                                                  ("s2", 3), ("s2", 3)], buckets
    assert direct_client[matrix_db]["readings"].count_documents({}) == 0
