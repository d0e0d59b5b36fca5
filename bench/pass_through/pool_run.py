#!/usr/bin/env python3
"""Many clients on few backend connections: pooled mode against one backend
connection per client, in the same run (docs/operations.md, "Connection
pooling").

For each client count, N raw wire connections (asyncio, one coroutine each)
connect to a remold, say hello, log in when the backend requires it
(SCRAM-SHA-256), then run a mixed workload for --seconds: an insert, a find
by _id, an update and a count, each followed by a pause, so the whole run
offers about --rate operations a second (many mostly idle application
connections, as a fleet of pools is). Two remolds in front of the same
backend take turns (ABBA over --rounds): one pooled (--backend-pool-size
--pool-size, one pool per worker), one with a backend connection per client.

Reported per side: operations completed per second, p50 / p99 latency,
errors (connections that failed, commands that failed), and the backend
connections remold held at peak, counted in /proc (its sockets to the
backend's port) every 20 ms.

  python3 bench/pass_through/pool_run.py --build build --clients 2000,10000 \\
      --backend 'mongodb://user:pw@127.0.0.1:10260/?authMechanism=SCRAM-SHA-256&authSource=admin'

Without --backend, a mongo-java-server stand-in is started for the run.
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import hmac
import os
import random
import resource
import struct
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import bson
import pymongo
from bson.binary import Binary

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from bench_processes import percentile, start_backend, start_remold  # noqa: E402

OP_MSG = 2013


def op_msg(request_id: int, doc: dict) -> bytes:
    body = struct.pack("<I", 0) + b"\x00" + bson.encode(doc)
    return struct.pack("<iiii", 16 + len(body), request_id, 0, OP_MSG) + body


class Connection:
    """One client connection speaking OP_MSG."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer
        self.next_id = 1

    async def command(self, doc: dict) -> dict:
        self.next_id += 1
        self.writer.write(op_msg(self.next_id, doc))
        header = await self.reader.readexactly(16)
        length = struct.unpack("<i", header[:4])[0]
        body = await self.reader.readexactly(length - 16)
        return bson.decode(body[5:])

    def close(self):
        self.writer.close()


_SALTED: dict[tuple[str, bytes, int], bytes] = {}


async def login(conn: Connection, user: str, password: str, source: str) -> None:
    """SCRAM-SHA-256 (the salted password computed once per run)."""
    nonce = base64.b64encode(os.urandom(24)).decode()
    first_bare = f"n={user},r={nonce}"
    reply = await conn.command({"saslStart": 1, "mechanism": "SCRAM-SHA-256",
                                "payload": Binary(b"n,," + first_bare.encode()),
                                "options": {"skipEmptyExchange": True}, "$db": source})
    if reply.get("ok") != 1:
        raise RuntimeError(f"saslStart: {reply.get('errmsg')} ({reply.get('code')})")
    server_first = bytes(reply["payload"])
    fields = dict(part.split("=", 1) for part in server_first.decode().split(","))
    key = (password, base64.b64decode(fields["s"]), int(fields["i"]))
    if key not in _SALTED:
        _SALTED[key] = hashlib.pbkdf2_hmac("sha256", password.encode(), key[1], key[2])
    salted = _SALTED[key]
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    stored_key = hashlib.sha256(client_key).digest()
    final_bare = f"c=biws,r={fields['r']}"
    auth_message = f"{first_bare},{server_first.decode()},{final_bare}".encode()
    proof = bytes(a ^ b for a, b in zip(client_key, hmac.digest(stored_key, auth_message, "sha256")))
    final = f"{final_bare},p={base64.b64encode(proof).decode()}"
    reply = await conn.command({"saslContinue": 1, "conversationId": reply["conversationId"],
                                "payload": Binary(final.encode()), "$db": source})
    while reply.get("ok") == 1 and not reply.get("done"):
        reply = await conn.command({"saslContinue": 1, "conversationId": reply["conversationId"],
                                    "payload": Binary(b""), "$db": source})
    if reply.get("ok") != 1:
        raise RuntimeError(f"saslContinue: {reply.get('errmsg')} ({reply.get('code')})")


class Side:
    """What one side (pooled or per client) measured in one round."""

    def __init__(self):
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self.completed = 0
        self.peak_backend = 0
        self.elapsed = 0.0


def backend_sockets(pid: int, port: int) -> int:
    """Established connections of `pid` to `port` (its sockets in /proc/net/tcp)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            next(lines)
            for line in lines:
                fields = line.split()
                if fields[3] == "01" and int(fields[2].rsplit(":", 1)[1], 16) == port and fields[9] in inodes:
                    count += 1
    return count


async def client(i: int, port: int, args, credentials, db: str, side: Side, start: asyncio.Event,
                 deadline_box: list) -> None:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        side.errors.append(f"connect: {exc}")
        return
    conn = Connection(reader, writer)
    try:
        hello = await conn.command({"hello": 1, "client": {"driver": {"name": "pool_run", "version": "1"}},
                                    "$db": "admin"})
        if hello.get("ok") != 1:
            raise RuntimeError(f"hello: {hello}")
        if credentials:
            await login(conn, *credentials)
        await start.wait()
        pause = 4 * args.clients_now / args.rate  # a turn of four operations, then a pause
        await asyncio.sleep(random.uniform(0, pause))  # the turns spread over the pause
        n = 0
        while time.monotonic() < deadline_box[0]:
            await asyncio.sleep(random.uniform(0.5, 1.5) * pause)
            doc_id = f"{i}-{n}"
            for doc in ({"insert": "c", "documents": [{"_id": doc_id, "i": i, "v": 0}], "$db": db},
                        {"find": "c", "filter": {"_id": doc_id}, "$db": db},
                        {"update": "c", "updates": [{"q": {"_id": doc_id}, "u": {"$inc": {"v": 1}}}], "$db": db},
                        {"count": "c", "query": {"i": i}, "$db": db}):
                began = time.monotonic()
                reply = await conn.command(doc)
                if reply.get("ok") != 1 or reply.get("writeErrors"):
                    side.errors.append(f"{next(iter(doc))}: {reply.get('errmsg') or reply.get('writeErrors')}")
                else:
                    side.latencies.append(time.monotonic() - began)
                    side.completed += 1
            n += 1
    except (OSError, asyncio.IncompleteReadError, RuntimeError) as exc:
        side.errors.append(f"{type(exc).__name__}: {str(exc)[:120]}")
    finally:
        conn.close()


async def run_side(count: int, port: int, args, credentials, db: str) -> Side:
    side = Side()
    start = asyncio.Event()
    deadline_box = [0.0]
    args.clients_now = count
    tasks = []
    for i in range(count):  # connect in waves: a burst of 10,000 SYNs overflows the listen queue
        tasks.append(asyncio.create_task(client(i, port, args, credentials, db, side, start, deadline_box)))
        if i % 200 == 199:
            await asyncio.sleep(0.05)
    await asyncio.sleep(args.settle)  # every connection has said hello and logged in
    began = time.monotonic()
    deadline_box[0] = began + args.seconds
    start.set()
    await asyncio.gather(*tasks)
    side.elapsed = time.monotonic() - began
    return side


def measure(count: int, remold, port: int, backend_port: int, args, credentials, db: str) -> Side:
    peak = [0]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], backend_sockets(remold.pid, backend_port))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        side = asyncio.run(run_side(count, port, args, credentials, db))
    finally:
        stop.set()
        sampler.join()
    side.peak_backend = peak[0]
    return side


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--backend", help="backend URI (with credentials if it requires them); "
                                          "default: a stand-in started for the run")
    parser.add_argument("--clients", default="2000,10000", help="client connection counts, in order")
    parser.add_argument("--pool-size", type=int, default=100, help="pooled side's --backend-pool-size")
    parser.add_argument("--rate", type=float, default=4000, help="operations a second offered in all")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--settle", type=float, default=10, help="seconds to connect and log in first")
    parser.add_argument("--rounds", type=int, default=2, help="ABBA rounds")
    parser.add_argument("--logs", help="a directory for the two remolds' logs (default: not kept)")
    args = parser.parse_args()

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    want = 4 * max(int(c) for c in args.clients.split(",")) + 1000
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(want, hard), max(want, hard)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    backend_proc = None
    backend = args.backend
    if not backend:
        backend, backend_proc = start_backend()
    parts = urllib.parse.urlsplit(backend)
    backend_port = parts.port or 27017
    credentials = None
    if parts.username:
        query = dict(urllib.parse.parse_qsl(parts.query))
        credentials = (urllib.parse.unquote(parts.username), urllib.parse.unquote(parts.password or ""),
                       query.get("authSource", "admin"))
    limit = str(2 * max(int(c) for c in args.clients.split(",")) + 100)
    logs = {}
    if args.logs:
        Path(args.logs).mkdir(parents=True, exist_ok=True)
        logs = {name: open(Path(args.logs, f"remold-{name}.log"), "w") for name in ("pooled", "per-client")}
    pooled, pooled_port = start_remold(args.build, backend, "--backend-pool-size", str(args.pool_size),
                                       "--max-connections", limit,
                                       stderr=logs.get("pooled", subprocess.DEVNULL))
    plain, plain_port = start_remold(args.build, backend, "--max-connections", limit,
                                     stderr=logs.get("per-client", subprocess.DEVNULL))
    sides = {"pooled": (pooled, pooled_port), "per client": (plain, plain_port)}
    run_id = os.urandom(3).hex()  # each run its own databases, dropped at the end
    databases: list[str] = []
    print(f"backend {parts.hostname}:{backend_port}, pooled side --backend-pool-size {args.pool_size}, "
          f"{args.rate:.0f} ops/s offered, {args.seconds:.0f} s per side, {args.rounds} ABBA rounds")
    try:
        for count in (int(c) for c in args.clients.split(",")):
            results: dict[str, list[Side]] = {name: [] for name in sides}
            for r in range(args.rounds):
                order = list(sides) if r % 2 == 0 else list(reversed(sides))
                for name in order:
                    proc, port = sides[name]
                    db = f"pool_run_{run_id}_{count}_{r}_{name.replace(' ', '_')}"
                    databases.append(db)
                    side = measure(count, proc, port, backend_port, args, credentials, db)
                    results[name].append(side)
                    print(f"  {count} clients, round {r + 1}, {name}: {side.completed / side.elapsed:.0f} ops/s, "
                          f"p99 {percentile(side.latencies, 0.99) * 1000:.1f} ms, errors {len(side.errors)}, "
                          f"backend connections at peak {side.peak_backend}", flush=True)
                    if side.errors:
                        print(f"    first errors: {side.errors[:3]}")
            print(f"\n{count} client connections:")
            print(f"  {'side':<12}{'ops/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'errors':>8}{'backend conns (peak)':>22}")
            for name, runs in results.items():
                latencies = [x for side in runs for x in side.latencies]
                rate = sum(side.completed for side in runs) / sum(side.elapsed for side in runs)
                errors = sum(len(side.errors) for side in runs)
                peak = max(side.peak_backend for side in runs)
                p50 = percentile(latencies, 0.5) * 1000 if latencies else float("nan")
                p99 = percentile(latencies, 0.99) * 1000 if latencies else float("nan")
                print(f"  {name:<12}{rate:>10.0f}{p50:>10.2f}{p99:>10.2f}{errors:>8}{peak:>22}")
            print(flush=True)
    finally:
        with pymongo.MongoClient(backend, serverSelectionTimeoutMS=10_000) as direct:
            for db in databases:
                direct.drop_database(db)
        for proc, _ in sides.values():
            proc.terminate()
            proc.wait(30)
        if backend_proc:
            backend_proc.stdin.close()
            backend_proc.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
