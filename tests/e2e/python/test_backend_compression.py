"""Compression on the backend link: ``compressors=`` in the backend URI.

The stand-in backend compresses nothing, so the backend here is a second
remold (``inner``, with ``--client-compression on``) in front of it: remold
compresses with clients itself.
The remold under test (``outer``) offers the URI's compressors to ``inner``
in the client's handshake, or in a hello of its own on a connection whose
first request is not a handshake, then compresses what it sends. Checked:
CRUD and a rule's plan through each compressor, the bytes on the backend
link against an outer remold without compressors (its
``remold_backend_bytes_sent_total`` and the inner remold's
``remold_bytes_received_total``), and a backend that chooses no
compressor (the stand-in itself) served uncompressed.
"""

from __future__ import annotations

import datetime as dt
import time
from types import SimpleNamespace

import pytest
from pymongo import MongoClient

import wire
from test_metrics import scrape, start_observed, value

COMPRESSORS = ["snappy", "zlib", "zstd"]
READINGS_RULE = """namespace: {db}.readings
pattern: bucket
bucket:
  collection: readings_buckets
  meta: [sensor]
  time: at
  span: 1h
"""


def backend_uri(remold, compressors: str | None) -> str:
    uri = f"mongodb://{remold.host}:{remold.port}/?directConnection=true"
    return uri + (f"&compressors={compressors}" if compressors else "")


@pytest.fixture
def chain(private_remold, tmp_path, db_name, direct_client):
    """start(compressors) -> the outer remold, a client of it, and both metrics addresses."""
    started = []
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "readings.yaml").write_text(READINGS_RULE.format(db=db_name))

    def start(compressors: str | None):
        inner, inner_metrics = start_observed(private_remold, "--client-compression", "on")
        outer, outer_metrics = start_observed(private_remold, "--rules", str(rules),
                                              backend_uri=backend_uri(inner, compressors))
        client = MongoClient(outer.uri, serverSelectionTimeoutMS=10_000)
        started.append(client)
        # What the outer remold sent on its own before any client (its
        # start-up count, with its authentication where the backend wants
        # one) is left out of the figures.
        settled(inner_metrics)
        return SimpleNamespace(outer=outer, client=client, outer_metrics=outer_metrics,
                               inner_metrics=inner_metrics, baseline=link_bytes_total(outer_metrics, inner_metrics))

    yield start
    for client in started:
        client.close()
    direct_client.drop_database(db_name)


def workload(db) -> None:
    """Compressible traffic: documents with a repeated text, read back."""
    text = "the same words again and again " * 40
    db.notes.insert_many([{"_id": i, "text": text, "n": i} for i in range(300)])
    assert db.notes.count_documents({}) == 300
    assert [d["n"] for d in db.notes.find({"n": {"$lt": 250}}).sort("n", 1).batch_size(50)] == list(range(250))
    db.notes.update_many({"n": {"$gte": 100}}, {"$set": {"late": True}})
    assert db.notes.count_documents({"late": True}) == 200
    db.notes.delete_many({"n": {"$lt": 10}})
    assert db.notes.count_documents({}) == 290


def link_bytes_total(outer_metrics, inner_metrics) -> tuple[float, float]:
    outer, inner = scrape(outer_metrics), scrape(inner_metrics)
    return value(outer, "remold_backend_bytes_sent_total"), value(inner, "remold_bytes_received_total")


def settled(metrics, quiet: float = 0.3, deadline: float = 10.0) -> None:
    """Waits until the bytes a remold received stop moving."""
    end = time.monotonic() + deadline
    last = value(scrape(metrics), "remold_bytes_received_total")
    while time.monotonic() < end:
        time.sleep(quiet)
        now = value(scrape(metrics), "remold_bytes_received_total")
        if now == last:
            return
        last = now


def link_bytes(started) -> tuple[float, float]:
    """(what the outer remold sent its backend, what the inner one received)
    since the chain started."""
    sent, received = link_bytes_total(started.outer_metrics, started.inner_metrics)
    return sent - started.baseline[0], received - started.baseline[1]


@pytest.mark.parametrize("name", COMPRESSORS)
def test_backend_link_compresses(name, chain, db_name):
    compressed = chain(name)
    db = compressed.client[db_name]
    workload(db)
    # A rule's plan goes compressed too: a bucket insert and its read back.
    db.readings.insert_many([{"sensor": "s1", "at": dt.datetime(2024, 1, 1, 0, m), "t": m} for m in range(30)])
    assert [r["t"] for r in db.readings.find({"sensor": "s1"}).sort("at", 1)] == list(range(30))
    sent, received = link_bytes(compressed)

    plain = chain(None)
    workload(plain.client[db_name + "_plain"])
    plain_sent, plain_received = link_bytes(plain)
    plain.client.drop_database(db_name + "_plain")
    print(f"\n{name}: backend link {sent:.0f} bytes sent, against {plain_sent:.0f} without compression")
    # What the outer remold counts is what the inner one received.
    assert received == pytest.approx(sent, rel=0.05)
    assert plain_received == pytest.approx(plain_sent, rel=0.05)
    assert sent < 0.5 * plain_sent, (sent, plain_sent)


def test_first_request_not_a_handshake_gets_remolds_own_offer(chain, db_name):
    """A raw connection that never says hello: remold's own isMaster makes
    the offer before the first command, which then goes compressed."""
    started = chain("zstd")
    sock = wire.connect(*started.outer.address)
    try:
        reply = wire.command(sock, {"insert": "raw", "documents": [{"_id": 1, "text": "x" * 20_000}]}, db=db_name)
        assert reply["ok"] == 1 and reply["n"] == 1, reply
        found = wire.command(sock, {"find": "raw", "filter": {"_id": 1}}, db=db_name)
        assert found["cursor"]["firstBatch"][0]["text"] == "x" * 20_000
    finally:
        sock.close()
    sent, _ = link_bytes(started)
    assert sent < 5_000, sent  # the 20 kB document went compressed


def test_by_default_the_clients_compression_goes_to_the_backend_link(private_remold, db_name, direct_client):
    """--client-compression is off by default: the handshake reply agrees to
    no compression with the client (a sidecar's loopback), and what the
    driver offered is offered to the backend instead, whose link then
    compresses; a driver that offers nothing gets a plain backend link."""
    inner, inner_metrics = start_observed(private_remold, "--client-compression", "on")
    outer, outer_metrics = start_observed(private_remold, backend_uri=backend_uri(inner, None))
    sock = wire.connect(*outer.address)
    try:
        hello = wire.legacy_command(sock, {"isMaster": 1, "compression": ["zstd"]}).doc
    finally:
        sock.close()
    assert hello["ok"] == 1 and "compression" not in hello, hello
    # What reached the inner remold so far (the outer one's own work at
    # start, that connection's authentication) is left out below.
    settled(inner_metrics)
    inner_before = value(scrape(inner_metrics), "remold_bytes_received_total")

    def backend_bytes_of(compressors: str | None) -> float:
        before = value(scrape(outer_metrics), "remold_backend_bytes_sent_total")
        uri = outer.uri + ("&" if "?" in outer.uri else "?") + f"compressors={compressors}" if compressors else outer.uri
        with MongoClient(uri, serverSelectionTimeoutMS=10_000) as client:
            workload(client[db_name])
            client.drop_database(db_name)
        return value(scrape(outer_metrics), "remold_backend_bytes_sent_total") - before

    plain, zstd = backend_bytes_of(None), backend_bytes_of("zstd")
    print(f"\nbackend link: {zstd:.0f} bytes for a zstd client, {plain:.0f} for a plain one")
    assert zstd < 0.5 * plain, (zstd, plain)
    inner_received = value(scrape(inner_metrics), "remold_bytes_received_total") - inner_before
    assert inner_received == pytest.approx(plain + zstd, rel=0.05)


def test_backend_choosing_no_compressor_is_served_plainly(private_remold, backend, direct_client, db_name):
    """The stand-in compresses nothing: the offer is answered without a
    compressor, and everything goes plain."""
    outer, _ = start_observed(private_remold,
                              backend_uri=f"mongodb://{backend.host}:{backend.port}/?compressors=zstd,snappy")
    with MongoClient(outer.uri, serverSelectionTimeoutMS=10_000) as client:
        workload(client[db_name])
    direct_client.drop_database(db_name)


def test_unknown_compressor_is_refused_at_start(private_remold, backend):
    with pytest.raises(RuntimeError) as refused:
        private_remold(backend_uri=f"mongodb://127.0.0.1:1/?compressors=zstd,lz4", timeout=10)
    assert "compressors" in str(refused.value) and "lz4" in str(refused.value)
