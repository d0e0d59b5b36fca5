"""What the Python bench runs share (bench/README.md): a remold started on
a rules directory, the backend URI without its credentials, timing and
percentiles."""
from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlsplit, urlunsplit

import pymongo

from bench_processes import start_backend


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def without_credentials(uri: str) -> tuple[str, str | None, str | None]:
    parts = urlsplit(uri)
    if not parts.username:
        return uri, None, None
    host = parts.hostname + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, host, "/", "", "")), parts.username, parts.password


def start_remold(build: str, backend: str, rules: str, credentials: Path | None) -> tuple[subprocess.Popen, int]:
    command = [str(Path(build, "remold")), "serve", "--backend", backend, "--listen", "127.0.0.1:0", "--rules", rules,
               "--log-level", "warn"]
    if credentials:
        command += ["--backend-credentials", str(credentials)]
    remold = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True)
    for line in remold.stdout:
        match = re.search(r"listening on [\d.]+:(\d+)", line)
        if match:
            return remold, int(match.group(1))
    raise RuntimeError("remold did not start")


def timed(samples: list[float], operation) -> object:
    began = time.perf_counter()
    result = operation()
    samples.append(time.perf_counter() - began)
    return result


def compare_rounds(label: str, ways: dict, rounds: int, ops: int, warm_up: int, width: int = 16) -> None:
    """Times each way (name -> operation, the first the base) `ops` times a
    round, `rounds` rounds alternating which goes first, after `warm_up`
    untimed runs of each; prints p50, p99 and the p50 ratio to the base.
    An operation that returns None fails the run."""
    samples = {name: [] for name in ways}
    for operation in ways.values():
        for _ in range(warm_up):
            operation()
    for round_index in range(rounds):
        order = list(ways.items())
        if round_index % 2:
            order.reverse()
        for name, operation in order:
            for _ in range(ops):
                assert timed(samples[name], operation) is not None, (label, name)
    base = percentile(samples[next(iter(ways))], 0.5)
    print(f"\n{label}")
    for name, values in samples.items():
        p50, p99 = percentile(values, 0.5), percentile(values, 0.99)
        print(f"  {name:{width}s} p50 {p50 * 1e6:8.1f} us   p99 {p99 * 1e6:8.1f} us   p50 ratio {p50 / base:5.2f}")


@contextlib.contextmanager
def ruled_session(build: str, rule_files: dict[str, str], databases: list[str]):
    """A bench's backend (REMOLD_BENCH_BACKEND, else the stand-in started
    here) and a remold on a rules directory of `rule_files` (file name ->
    text), started with the backend's credentials from a file of its own.
    Yields `backend` (the URI without credentials), `direct` (a client of
    the backend) and `client` (one through remold); `databases` are
    dropped first. Everything started is stopped at the end."""
    backend_proc = remold = None
    uri = os.environ.get("REMOLD_BENCH_BACKEND")
    if not uri:
        uri, backend_proc = start_backend()
    backend, user, password = without_credentials(uri)
    try:
        direct = pymongo.MongoClient(uri)
        for name in databases:
            direct.drop_database(name)
        with tempfile.TemporaryDirectory() as scratch:
            rules = Path(scratch, "rules")
            rules.mkdir()
            for name, text in rule_files.items():
                (rules / name).write_text(text)
            credentials = None
            if user:
                credentials = Path(scratch, "credentials.yaml")
                credentials.write_text(f"username: {user}\npassword: {password}\n")
                credentials.chmod(0o600)
            remold, port = start_remold(build, backend, str(rules), credentials)
            auth = f"{user}:{password}@" if user else ""
            options = "directConnection=true" + ("&authSource=admin" if user else "")
            client = pymongo.MongoClient(f"mongodb://{auth}127.0.0.1:{port}/?{options}")
            yield SimpleNamespace(backend=backend, direct=direct, client=client)
    finally:
        if remold:
            remold.terminate()
            remold.wait()
        if backend_proc:
            backend_proc.terminate()
            backend_proc.wait()
