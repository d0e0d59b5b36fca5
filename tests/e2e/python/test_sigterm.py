"""SIGTERM drains: a request in flight completes, then remold exits 0 and
accepts nothing new."""

from __future__ import annotations

import signal
import socket
import threading
import time

import pymongo
import pytest
from pymongo import monitoring

import wire

# A portable, CPU-bound single request: an unindexed self-$lookup is
# quadratic in the collection size on every MongoDB-compatible server.
PIPELINE = [
    {"$lookup": {"from": "slow", "localField": "k", "foreignField": "k", "as": "same"}},
    {"$project": {"n": {"$size": "$same"}}},
    {"$group": {"_id": None, "total": {"$sum": "$n"}}},
]
GROUPS = 50
MIN_REQUEST_SECONDS = 1.0


def expected_total(n_docs: int) -> int:
    per_group = [len(range(g, n_docs, GROUPS)) for g in range(GROUPS)]
    return sum(c * c for c in per_group)


def seed_slow_collection(coll) -> int:
    """Grow the collection until the aggregate takes MIN_REQUEST_SECONDS directly."""
    n_docs = 0
    target = 1000
    while True:
        coll.insert_many([{"_id": i, "k": i % GROUPS} for i in range(n_docs, target)])
        n_docs = target
        start = time.monotonic()
        assert list(coll.aggregate(PIPELINE))[0]["total"] == expected_total(n_docs)
        if time.monotonic() - start >= MIN_REQUEST_SECONDS or n_docs >= 64_000:
            return n_docs
        target *= 2


class AggregateWatch(monitoring.CommandListener):
    def __init__(self):
        self.started_evt = threading.Event()
        self.finished_at = None

    def started(self, event):
        if event.command_name == "aggregate":
            self.started_evt.set()

    def succeeded(self, event):
        if event.command_name == "aggregate":
            self.finished_at = time.monotonic()

    def failed(self, event):
        if event.command_name == "aggregate":
            self.finished_at = time.monotonic()


def served(address) -> bool:
    """Does a brand-new connection get an answer to isMaster within a second?"""
    try:
        sock = wire.connect(*address, timeout=1.0)
    except OSError:
        return False
    try:
        return wire.legacy_command(sock, {"isMaster": 1}, timeout=1.0).doc.get("ok") == 1
    except (OSError, wire.ConnectionClosed):
        return False
    finally:
        sock.close()


def test_sigterm_drains_in_flight_request(private_remold, direct_client, db_name):
    n_docs = seed_slow_collection(direct_client[db_name].slow)
    remold = private_remold()
    watch = AggregateWatch()
    # No retries: a retried aggregate on a fresh connection would hide a dropped one.
    client = pymongo.MongoClient(remold.uri, event_listeners=[watch], retryReads=False,
                                 serverSelectionTimeoutMS=10_000)
    outcome: dict = {}

    def run():
        try:
            outcome["result"] = list(client[db_name].slow.aggregate(PIPELINE))
        except Exception as exc:
            outcome["error"] = exc

    try:
        client.admin.command("ping")
        worker = threading.Thread(target=run)
        worker.start()
        assert watch.started_evt.wait(10), "aggregate never started"
        time.sleep(0.2)  # let the request reach the backend
        sigterm_at = time.monotonic()
        remold.proc.send_signal(signal.SIGTERM)

        time.sleep(0.1)
        if watch.finished_at is None:
            assert not served(remold.address), "remold served a new connection while draining"

        worker.join(60)
        assert not worker.is_alive(), "in-flight aggregate never completed"
        assert "error" not in outcome, f"in-flight request failed: {outcome.get('error')!r}"
        assert outcome["result"] == [{"_id": None, "total": expected_total(n_docs)}]
        assert watch.finished_at > sigterm_at, (
            "the request finished before SIGTERM was sent; it was not in flight "
            "(make it slower)")

        rc = remold.terminate()  # no new signal if it already exited; waits
        assert rc == 0, f"remold exited {rc}; stderr:\n{remold.stderr()}"
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(remold.address, timeout=2).close()
    finally:
        client.close()
        direct_client.drop_database(db_name)
