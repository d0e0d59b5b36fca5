"""What the Python benches share: a mongo-java-server and a remold started
for the run, and percentiles. Each process is stopped by its caller.

  start_backend(data_file=None, port=0) -> (uri, proc)
                                          the stand-in on a loopback port (0: a free one);
                                          with data_file, durable (H2 file, survives SIGKILL)
  start_remold(build, backend, *args, stderr=DEVNULL) -> (proc, port)
  percentile(values, q)                   the q-quantile of a sample
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from migrate_run import start_backend  # noqa: F401  (re-exported)


def start_remold(build: str, backend: str, *args: str, stderr=subprocess.DEVNULL) -> tuple[subprocess.Popen, int]:
    """BUILD/remold serve in front of `backend` on a free port, with `args`;
    its log (stderr) goes to `stderr` (a file object, or DEVNULL)."""
    proc = subprocess.Popen([str(Path(build, "remold")), "serve", "--backend", backend, "--listen", "127.0.0.1:0",
                             "--log-level", "warn", *args],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr, text=True)
    for line in proc.stdout:
        match = re.search(r"listening on [\d.]+:(\d+)", line)
        if match:
            return proc, int(match.group(1))
    proc.wait(30)
    raise RuntimeError(f"remold did not start (backend {backend}, args {args})")


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]
