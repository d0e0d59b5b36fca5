"""SIGTERM drains: a request in flight completes, then remold exits 0 and
accepts nothing new. Stopping, or being killed, leaves nothing behind."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pymongo
import pytest
from pymongo import monitoring

import wire
from conftest import _REMOLD_LINE, REMOLD_START_TIMEOUT, read_port_line, require_binary
from support import assert_request_survives_sigterm

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


def test_sigterm_keeps_a_partly_received_request(private_remold, direct_client, db_name):
    """A request whose first bytes reached remold before SIGTERM is in flight:
    it is read to its end and answered, then the connection closes."""
    remold = private_remold()
    sock = wire.connect(*remold.address)
    try:
        assert wire.command(sock, {"ping": 1})["ok"] == 1
        message = wire.op_msg({"insert": "partial", "documents": [{"_id": 1}], "$db": db_name})
        reply = assert_request_survives_sigterm(
            remold,
            lambda: sock.sendall(message[:20]),  # the header and the flags: remold is reading this request
            lambda: sock.sendall(message[20:]),
            lambda: wire.recv_message(sock, timeout=10))
        assert reply.doc.get("ok") == 1 and reply.doc.get("n") == 1, reply.doc
        assert direct_client[db_name].partial.count_documents({}) == 1
    finally:
        sock.close()
        direct_client.drop_database(db_name)


LOAD_CLIENTS = 16


def test_sigterm_under_load_answers_what_it_executed(private_remold, direct_client, db_name):
    """SIGTERM while 16 clients write: remold exits 0; every client sees either
    its reply or a network error; every acknowledged write is stored, and no
    write whose client saw a network error was executed (a request remold
    read is answered before its connection closes)."""
    remold = private_remold()
    stop = threading.Event()
    acked: list[list[str]] = [[] for _ in range(LOAD_CLIENTS)]
    failed: list[list[str]] = [[] for _ in range(LOAD_CLIENTS)]
    fatal: list[str] = []
    started = threading.Barrier(LOAD_CLIENTS + 1)

    def run(i: int) -> None:
        client = pymongo.MongoClient(remold.uri, retryWrites=False, serverSelectionTimeoutMS=2000,
                                     socketTimeoutMS=20_000)
        coll = client[db_name].load
        try:
            coll.insert_one({"_id": f"w{i:02d}-warmup"})
            acked[i].append(f"w{i:02d}-warmup")
            started.wait(10)
            for n in range(100_000):
                if stop.is_set():
                    break
                _id = f"w{i:02d}-{n:06d}"
                try:
                    coll.insert_one({"_id": _id})
                    acked[i].append(_id)
                except pymongo.errors.AutoReconnect:
                    failed[i].append(_id)
                    break  # remold is going away; a new connection would be refused
        except Exception as exc:
            fatal.append(f"client {i}: {type(exc).__name__}: {exc}")
        finally:
            client.close()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(LOAD_CLIENTS)]
    try:
        for thread in threads:
            thread.start()
        started.wait(30)
        time.sleep(1.0)
        remold.proc.send_signal(signal.SIGTERM)
        rc = remold.proc.wait(30)
        stop.set()
        for thread in threads:
            thread.join(30)
        assert rc == 0, f"remold exited {rc}; stderr:\n{remold.stderr()}"
        assert not fatal, f"clients failed with other than network errors: {fatal}"
        stored = {d["_id"] for d in direct_client[db_name].load.find({}, {"_id": 1})}
        lost = [i for ids in acked for i in ids if i not in stored]
        assert not lost, f"acknowledged writes missing: {lost[:20]}"
        executed_unanswered = [i for ids in failed for i in ids if i in stored]
        assert not executed_unanswered, (
            f"writes executed by the backend whose clients got a network error instead of the "
            f"reply: {executed_unanswered}")
        print(f"\nsigterm under load: {sum(map(len, acked))} writes acknowledged, "
              f"{sum(map(len, failed))} clients saw the connection close, none executed")
    finally:
        stop.set()
        direct_client.drop_database(db_name)


def test_signals_repeated_while_stopping_still_exit_zero(private_remold):
    """A supervisor that repeats SIGTERM until the process is gone sees a clean
    stop, not a death by signal in the instant between drain and exit."""
    remold = private_remold()
    while remold.proc.poll() is None:
        remold.proc.send_signal(signal.SIGTERM)  # no-op once reaped
        time.sleep(0.001)
    assert remold.proc.returncode == 0, f"remold exited {remold.proc.returncode}"


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="no /dev/shm")
def test_a_killed_remold_leaves_no_driver_counters_file(backend):
    """libmongoc's /dev/shm/mongoc-<pid> would outlive a SIGKILL and, once the
    pid comes round again, make a later process warn before main()."""
    env = {k: v for k, v in os.environ.items() if k != "MONGOC_DISABLE_SHM"}
    proc = subprocess.Popen([str(require_binary()), "serve", "--listen", "127.0.0.1:0",
                             "--backend", backend.uri, "--log-level", "warn"],
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    counters_file = Path(f"/dev/shm/mongoc-{proc.pid}")
    try:
        read_port_line(proc, _REMOLD_LINE, REMOLD_START_TIMEOUT, "remold")
        assert not counters_file.exists(), f"{counters_file} exists while remold runs"
    finally:
        proc.kill()
        proc.wait()
    assert not counters_file.exists(), f"{counters_file} outlived the killed remold"
