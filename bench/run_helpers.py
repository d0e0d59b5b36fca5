"""What the Python bench runs share (bench/README.md): a remold started on
a rules directory, the backend URI without its credentials, timing and
percentiles."""
from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit


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
