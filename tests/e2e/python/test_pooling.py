"""Pooled mode (--backend-pool-size): many clients on few backend connections.

Each test starts a remold of its own with a small pool and one worker
thread (one pool), so the limit is exact, and checks what the clients see
against the same operations without pooling or against the backend
directly:

- many clients with a mixed workload never hold more backend connections
  than the pool allows (counted in /proc, not only in remold's metrics),
  and lose or double nothing;
- interleaved cursors of many clients never cross;
- a client never runs a request as another client's user (two users of
  different privileges, on a backend that enforces them);
- transactions commit or abort exactly as they do on the backend directly;
- a request that finds no free connection within waitQueueTimeoutMS gets
  ExceededTimeLimit (262), which drivers retry, and the proxy keeps serving.
"""

from __future__ import annotations

import os
import threading
import time

import pymongo
import pytest
from pymongo.errors import OperationFailure

from conftest import Credentials, with_credentials
from test_fault import backend_connections
from test_metrics import free_port, scrape, value


def start_pooled(private_remold, pool_size: int, *, backend_uri=None, metrics=True):
    """A remold with one worker and a pool of `pool_size` per member, and
    its metrics address (None without)."""
    port = free_port()
    kwargs = {"backend_uri": backend_uri} if backend_uri else {}
    extra = ("--metrics-listen", f"127.0.0.1:{port}") if metrics else ()
    remold = private_remold(extra_args=("--backend-pool-size", str(pool_size), "--threads", "1", *extra),
                            **kwargs)
    return remold, ("127.0.0.1", port) if metrics else None


def with_option(uri: str, option: str) -> str:
    return uri + ("&" if "?" in uri else "?") + option


class PeakSampler:
    """Samples a count in the background; `peak` is the largest seen."""

    def __init__(self, sample):
        self.sample = sample
        self.peak = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.is_set():
            self.peak = max(self.peak, self.sample())
            time.sleep(0.005)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def run_threads(count: int, work) -> list:
    """Runs work(i) on `count` threads; the exceptions they raised."""
    errors: list = []

    def guarded(i):
        try:
            work(i)
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_many_clients_share_few_backend_connections(private_remold, backend, direct_client, db_name):
    """40 clients (each its own MongoClient, with its monitors) run inserts,
    updates, finds and counts through a pool of 3: the backend never sees
    more than 3 connections from remold, nothing fails, and every write is
    there exactly once. (directConnection=true and no metrics endpoint: no
    topology monitor or readiness probe has connections of its own, so
    every connection counted in /proc is the pool's.)"""
    remold, _ = start_pooled(private_remold, 3, backend_uri=with_option(backend.uri, "directConnection=true"),
                             metrics=False)
    count = lambda: backend_connections(remold.proc.pid, backend.port)  # noqa: E731
    with PeakSampler(count) as idle:
        time.sleep(1.5)
    own = idle.peak
    clients = [pymongo.MongoClient(remold.uri, maxPoolSize=2) for _ in range(40)]
    rounds = 30

    def work(i):
        coll = clients[i][db_name].mixed
        for j in range(rounds):
            coll.insert_one({"_id": f"{i}-{j}", "client": i, "n": 0})
            coll.update_one({"_id": f"{i}-{j}"}, {"$inc": {"n": 1}})
            assert coll.find_one({"_id": f"{i}-{j}"})["n"] == 1
            assert coll.count_documents({"client": i}) == j + 1

    try:
        with PeakSampler(count) as sockets:
            errors = run_threads(len(clients), work)
        assert errors == []
        assert 1 <= sockets.peak - own <= 3, (sockets.peak, own)
        stored = list(direct_client[db_name].mixed.find({}, {"n": 1}))
        assert len(stored) == len(clients) * rounds
        assert all(doc["n"] == 1 for doc in stored)
    finally:
        for client in clients:
            client.close()
        direct_client.drop_database(db_name)


def test_interleaved_cursors_never_cross(private_remold, direct_client, db_name):
    """12 clients each page through their own 150 documents in batches of 7,
    round-robin in one thread and then all at once, over a pool of 2:
    every getMore reaches its own cursor, and each client reads exactly
    its own documents in order."""
    remold, metrics = start_pooled(private_remold, 2)
    clients = [pymongo.MongoClient(remold.uri) for _ in range(12)]
    try:
        direct_client[db_name].docs.insert_many(
            [{"_id": c * 1000 + k, "owner": c, "k": k} for c in range(len(clients)) for k in range(150)])
        cursors = [client[db_name].docs.find({"owner": i}, batch_size=7).sort("k", 1)
                   for i, client in enumerate(clients)]
        seen = [[] for _ in clients]
        for _ in range(150):  # one document of each cursor in turn
            for i, cursor in enumerate(cursors):
                doc = next(cursor)
                seen[i].append((doc["owner"], doc["k"]))
        assert seen == [[(i, k) for k in range(150)] for i in range(len(clients))]

        concurrent = [None] * len(clients)

        def read(i):
            docs = clients[i][db_name].docs.find({"owner": i}, batch_size=7).sort("k", -1)
            concurrent[i] = [(d["owner"], d["k"]) for d in docs]

        assert run_threads(len(clients), read) == []
        assert concurrent == [[(i, k) for k in reversed(range(150))] for i in range(len(clients))]
        samples = scrape(metrics)
        assert value(samples, "remold_backend_pool_limit") == 2
        assert value(samples, "remold_backend_pool_waits_total") > 0  # 12 clients did share 2
        assert value(samples, "remold_backend_pool_timeouts_total") == 0
        assert value(samples, "remold_backend_pool_pins_total", reason="cursor") >= 2 * len(clients)
        assert value(samples, "remold_backend_pool_connections", state="open") <= 2
    finally:
        for client in clients:
            client.close()
        direct_client.drop_database(db_name)


@pytest.fixture
def two_users(backend, direct_client):
    """A writer and a reader on a backend that enforces privileges."""
    if backend.credentials is None:
        pytest.skip("needs a backend that authenticates and enforces privileges (REMOLD_TEST_BACKEND=documentdb)")
    suffix = os.urandom(4).hex()
    writer = Credentials(f"pool_writer_{suffix}", "writer-" + os.urandom(8).hex())
    reader = Credentials(f"pool_reader_{suffix}", "reader-" + os.urandom(8).hex())
    # DocumentDB accepts these two role sets only (docs/backends.md).
    direct_client.admin.command("createUser", writer.user, pwd=writer.password,
                                roles=[{"role": "clusterAdmin", "db": "admin"},
                                       {"role": "readWriteAnyDatabase", "db": "admin"}])
    direct_client.admin.command("createUser", reader.user, pwd=reader.password,
                                roles=[{"role": "readAnyDatabase", "db": "admin"}])
    yield writer, reader
    for user in (writer, reader):
        direct_client.admin.command("dropUser", user.user)


def test_a_client_never_runs_as_another_clients_user(private_remold, backend, direct_client, db_name,
                                                       two_users):
    """A writer's and a reader's clients interleave on a pool of 4 (each
    login runs on a pooled connection and marks it with its user): 16
    threads of each. Every insert of the writer succeeds; every insert of
    the reader is refused (Unauthorized, 13) and its reads succeed, however
    the requests interleave; a client that never logged in is refused too.
    The collection holds exactly the writer's documents."""
    writer, reader = two_users
    remold, metrics = start_pooled(private_remold, 4)
    address = f"mongodb://{remold.host}:{remold.port}/"
    writers = [pymongo.MongoClient(with_credentials(address, writer)) for _ in range(16)]
    readers = [pymongo.MongoClient(with_credentials(address, reader)) for _ in range(16)]
    anonymous = pymongo.MongoClient(address, serverSelectionTimeoutMS=5000)
    rounds = 20
    refused: list = []
    try:
        direct_client[db_name].who.insert_one({"_id": "seed"})

        def work(i):
            if i % 2 == 0:
                coll = writers[i // 2][db_name].who
                for j in range(rounds):
                    coll.insert_one({"_id": f"w{i}-{j}", "by": "writer"})
                    coll.count_documents({})
            else:
                coll = readers[i // 2][db_name].who
                for j in range(rounds):
                    try:
                        coll.insert_one({"_id": f"r{i}-{j}", "by": "reader"})
                    except OperationFailure as exc:
                        refused.append(exc.code)
                    else:
                        raise AssertionError("the reader's insert ran as someone allowed to write")
                    assert coll.find_one({"_id": "seed"}) == {"_id": "seed"}

        assert run_threads(32, work) == []
        assert refused == [13] * (16 * rounds)
        with pytest.raises(OperationFailure) as anonymous_refusal:
            anonymous[db_name].who.find_one({})
        assert anonymous_refusal.value.code == 13
        stored = list(direct_client[db_name].who.find({}, {"by": 1}))
        assert len(stored) == 1 + 16 * rounds
        assert sorted({doc.get("by", "seed") for doc in stored}) == ["seed", "writer"]
        samples = scrape(metrics)
        assert value(samples, "remold_backend_pool_connections", state="open") <= 4
        assert value(samples, "remold_backend_pool_pins_total", reason="authentication") >= 32
    finally:
        for client in (*writers, *readers, anonymous):
            client.close()
        direct_client.drop_database(db_name)


def transaction_workload(client, db_name: str, threads: int, per_thread: int) -> list:
    """Each thread runs `per_thread` transactions: two inserts and an $inc
    of its own counter, committed when (thread + n) is even, else aborted by
    an exception inside the callback. Returns the errors raised. (One
    counter per thread: transactions contending for one document time out
    on DocumentDB's row lock, code 112 without a retryable label, pooled or
    not.)"""

    def work(t):
        with client.start_session() as session:
            for n in range(per_thread):
                def body(s, t=t, n=n):
                    db = s.client[db_name]
                    db.items.insert_many([{"_id": f"{t}-{n}-a"}, {"_id": f"{t}-{n}-b"}], session=s)
                    db.counter.update_one({"_id": t}, {"$inc": {"n": 1}}, session=s)
                    if (t + n) % 2:
                        raise RuntimeError("abort")

                try:
                    session.with_transaction(body)
                except RuntimeError:
                    pass

    client[db_name].counter.insert_many([{"_id": t, "n": 0} for t in range(threads)])
    client[db_name].create_collection("items")
    return run_threads(threads, work)


def test_transactions_commit_or_abort_as_without_pooling(private_remold, backend, direct_client, db_name):
    """6 threads run 12 transactions each through a pool of 2 (a
    transaction's connection is parked for it between its statements, up to
    its commit or abort), and the same workload runs on the backend
    directly: both end with the same documents, every committed transaction
    whole, no aborted one anywhere."""
    if backend.kind == "stand-in":
        pytest.skip("the stand-in has no transactions: run it with REMOLD_TEST_BACKEND=documentdb")
    remold, metrics = start_pooled(private_remold, 2)
    pooled = pymongo.MongoClient(remold.uri)
    direct_db = db_name + "_direct"
    try:
        assert transaction_workload(pooled, db_name, 6, 12) == []
        assert transaction_workload(direct_client, direct_db, 6, 12) == []
        through = direct_client[db_name]
        oracle = direct_client[direct_db]
        ids = sorted(doc["_id"] for doc in through.items.find())
        assert ids == sorted(doc["_id"] for doc in oracle.items.find())
        assert len(ids) == 6 * 12  # the 36 committed transactions, 2 documents each
        counters = list(through.counter.find().sort("_id", 1))
        assert counters == list(oracle.counter.find().sort("_id", 1)) == [{"_id": t, "n": 6} for t in range(6)]
        samples = scrape(metrics)
        assert value(samples, "remold_backend_pool_pins_total", reason="transaction") >= 72
        assert value(samples, "remold_backend_pool_connections", state="open") <= 2
    finally:
        pooled.close()
        direct_client.drop_database(db_name)
        direct_client.drop_database(direct_db)


def test_no_free_connection_within_wait_queue_timeout_is_retryable(private_remold, backend, db_name,
                                                                   direct_client):
    """A client whose command is tied to its connection (currentOp) keeps
    the only pooled connection; another client's find waits the backend
    URI's waitQueueTimeoutMS (300 ms) and is refused with ExceededTimeLimit
    (262), the error a driver retries. Once the first client goes, its
    connection is closed (never reused by someone else) and the second is
    served."""
    remold, metrics = start_pooled(private_remold, 1, backend_uri=with_option(backend.uri, "waitQueueTimeoutMS=300"))
    holder = pymongo.MongoClient(remold.uri, maxPoolSize=1)
    waiter = pymongo.MongoClient(remold.uri, maxPoolSize=1, retryReads=False)
    try:
        holder.admin.command("ping")
        try:
            holder.admin.command("currentOp")
        except OperationFailure:
            pass  # a backend without currentOp: the command is tied to its connection all the same
        started = time.monotonic()
        with pytest.raises(OperationFailure) as refusal:
            waiter[db_name].c.find_one({})
        assert refusal.value.code == 262
        assert "waitQueueTimeoutMS" in str(refusal.value)
        assert time.monotonic() - started >= 0.3
        holder.close()
        assert waiter[db_name].c.find_one({}) is None
        samples = scrape(metrics)
        assert value(samples, "remold_backend_pool_timeouts_total") >= 1
        assert value(samples, "remold_backend_pool_pins_total", reason="connection") == 1
    finally:
        holder.close()
        waiter.close()
        direct_client.drop_database(db_name)
