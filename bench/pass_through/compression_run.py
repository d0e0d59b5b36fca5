"""What compression does on each of remold's two links (bench/README.md), in
one run:

  - the backend link (``compressors=`` in the backend URI): the bytes remold
    sends to and receives from the backend for the same work, with each
    compressor against none (remold's ``remold_backend_bytes_*_total``), and
    the time the work took (on loopback, which no network slows);
  - the client link (the driver's ``compressors=``, with
    ``--client-compression on``): p50 latency of a findOne by _id and of a
    find of 100 documents, and remold's CPU per operation, with each
    compressor against none.

The work: 20,000 readings (about 300 bytes each, as an IoT feed sends them)
inserted 500 per insert_many, 200 finds of 100 of them, 2,000 findOnes by
_id; the client link's cases run ABAB rounds.

The stand-in backend compresses nothing, so unless REMOLD_BENCH_BACKEND
names a real server the backend here is a second remold in front of the
stand-in (remold compresses with its clients): what the backend link's
bytes show is then exactly what remold sends and receives.

Usage: .venv/bin/python bench/pass_through/compression_run.py [--build build] [--rounds 3]
A backend: REMOLD_BENCH_BACKEND=mongodb://host:port (a server that
compresses), else a mongo-java-server is started here.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import socket
import sys
import time
import urllib.request
from pathlib import Path

import pymongo

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: the shared modules
from bench_processes import percentile, start_backend, start_remold  # noqa: E402

COMPRESSORS = ["snappy", "zlib", "zstd"]
DB = "remold_compression_bench"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Remold:
    def __init__(self, build: str, backend: str, client_compression: str = "off"):
        self.metrics = free_port()
        self.proc, self.port = start_remold(build, backend, "--metrics-listen", f"127.0.0.1:{self.metrics}",
                                            "--client-compression", client_compression)

    def uri(self, compressors: str | None = None) -> str:
        uri = f"mongodb://127.0.0.1:{self.port}/?directConnection=true"
        return uri + (f"&compressors={compressors}" if compressors else "")

    def counter(self, name: str) -> float:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics}/metrics", timeout=10) as response:
            for line in response.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
        return 0.0

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def reading(i: int) -> dict:
    return {"_id": i, "sensor": f"sensor-{i % 50:03d}", "site": ["north", "south", "east"][i % 3],
            "at": dt.datetime(2024, 1, 1) + dt.timedelta(seconds=10 * i), "temp": 20 + (i % 97) / 10,
            "humidity": 40 + (i % 31), "status": "ok" if i % 13 else "check",
            "firmware": "2.4.1", "note": "within the expected range for this sensor and season"}


def backend_work(client: pymongo.MongoClient, n: int) -> None:
    coll = client[DB]["readings"]
    coll.drop()
    for start in range(0, n, 500):
        coll.insert_many([reading(i) for i in range(start, start + 500)])
    rng = random.Random(1)
    for _ in range(200):
        start = rng.randrange(n - 100)
        assert len(list(coll.find({"_id": {"$gte": start}}).sort("_id", 1).limit(100))) == 100
    for _ in range(2000):
        assert coll.find_one({"_id": rng.randrange(n)}) is not None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--n", type=int, default=20_000)
    args = parser.parse_args()
    started: list[Remold] = []
    backend_proc = None
    uri = os.environ.get("REMOLD_BENCH_BACKEND")
    try:
        if not uri:
            stand_in, backend_proc = start_backend()
            peer = Remold(args.build, stand_in, "on")  # compresses with its clients
            started.append(peer)
            uri = f"mongodb://127.0.0.1:{peer.port}/"
        uri = uri.rstrip("/")
        sep = "&" if "?" in uri else "/?"
        print(f"compression bench: backend {uri}{' (a remold in front of the stand-in)' if backend_proc else ''}")

        print(f"\n(a) the backend link: {args.n:,} readings inserted 500 at a time, 200 finds of 100, "
              f"2,000 findOnes by _id")
        print(f"  {'compressors=':14}{'sent bytes':>14}{'received':>14}{'sent':>8}{'received':>10}{'seconds':>9}"
              "   (seconds: the faster of two runs)")
        with pymongo.MongoClient(uri) as warm:  # untimed: the backend's JIT, caches
            backend_work(warm, args.n)
            warm.drop_database(DB)
        cases = [None] + COMPRESSORS
        seconds = {name: float("inf") for name in cases}
        link = {}
        for r in range(2):  # A B C D, then D C B A: the fastest of two runs each
            for name in cases if r == 0 else list(reversed(cases)):
                remold = Remold(args.build, uri + (f"{sep}compressors={name}" if name else ""))
                started.append(remold)
                with pymongo.MongoClient(remold.uri()) as client:
                    began = time.perf_counter()
                    backend_work(client, args.n)
                    seconds[name] = min(seconds[name], time.perf_counter() - began)
                    client.drop_database(DB)
                link[name] = (remold.counter("remold_backend_bytes_sent_total"),
                              remold.counter("remold_backend_bytes_received_total"))
                remold.stop()
                started.remove(remold)
        plain = link[None]
        for name in cases:
            sent, received = link[name]
            print(f"  {name or 'none':14}{sent:14,.0f}{received:14,.0f}{sent / plain[0]:8.2f}"
                  f"{received / plain[1]:10.2f}{seconds[name]:9.2f}")

        print(f"\n(b) the client link on loopback: the driver's compressors=, {args.rounds} rounds (ABAB)")
        remold = Remold(args.build, uri, "on")
        started.append(remold)
        with pymongo.MongoClient(remold.uri()) as setup:
            coll = setup[DB]["readings"]
            coll.drop()
            for start in range(0, 5000, 500):
                coll.insert_many([reading(i) for i in range(start, start + 500)])
        clients = {name: pymongo.MongoClient(remold.uri(name)) for name in [None] + COMPRESSORS}
        ops = {
            "findOne by _id": (2000, lambda c, rng: c.find_one({"_id": rng.randrange(5000)})),
            "find of 100": (200, lambda c, rng: list(c.find({"_id": {"$gte": rng.randrange(4900)}}).limit(100))),
        }
        for label, (count, op) in ops.items():
            samples = {name: [] for name in clients}
            cpu = {name: 0.0 for name in clients}
            rng = random.Random(2)
            for name, client in clients.items():  # warm up
                for _ in range(100):
                    op(client[DB]["readings"], rng)
            for r in range(args.rounds):
                order = list(clients) if r % 2 == 0 else list(reversed(clients))
                for name in order:
                    coll = clients[name][DB]["readings"]
                    cpu_before = remold.cpu_seconds()
                    for _ in range(count):
                        began = time.perf_counter()
                        op(coll, rng)
                        samples[name].append(time.perf_counter() - began)
                    cpu[name] += remold.cpu_seconds() - cpu_before
            base = percentile(samples[None], 0.5)
            print(f"  {label}:")
            for name, values in samples.items():
                p50 = percentile(values, 0.5)
                print(f"    {name or 'none':8} p50 {p50 * 1e6:8.0f} us ({p50 / base:5.2f}x)   remold cpu "
                      f"{cpu[name] / len(values) * 1e6:7.1f} us/op")
        for client in clients.values():
            client.close()
        with pymongo.MongoClient(remold.uri()) as cleanup:
            cleanup.drop_database(DB)
    finally:
        for remold in started:
            remold.stop()
        if backend_proc:
            backend_proc.stdin.close()
            backend_proc.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
