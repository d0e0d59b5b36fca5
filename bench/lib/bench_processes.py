"""What the Python benches share: a mongo-java-server and a remold started
for the run, and percentiles. Each process is stopped by its caller.

  start_backend(data_file=None, port=0) -> (uri, proc)
                                          the stand-in on a loopback port (0: a free one);
                                          with data_file, durable (H2 file, survives SIGKILL)
  start_remold(build, backend, *args, stderr=DEVNULL) -> (proc, port)
                                          `backend` may carry credentials: remold
                                          gets them through REMOLD_BACKEND_* (it
                                          refuses them in --backend)
  client_uri(backend, port) -> uri        a client of that remold, logged in as
                                          the backend's user when it has one
  percentile(values, q)                   the q-quantile of a sample
"""
from __future__ import annotations

import os
import re
import subprocess
import urllib.parse
from pathlib import Path

SRC = Path(__file__).resolve().parents[2]


def start_backend(data_file: str | None = None, port: int = 0) -> tuple[str, subprocess.Popen]:
    """mongo-java-server on `port` (0: a free one), in memory; with `data_file`
    the durable H2 mode (tests/backend/Launcher.java): every command committed
    to the file before its reply, so a SIGKILL loses nothing acknowledged and a
    backend started again on the file finds the data."""
    proc = subprocess.Popen(["java", "-cp", "tests/backend/lib/*:tests/backend/classes", "Launcher",
                             "127.0.0.1", str(port), *([data_file] if data_file else [])],
                            cwd=SRC, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    for line in proc.stdout:
        match = re.match(r"listening (\S+):(\d+)$", line.strip())
        if match:
            return f"mongodb://{match.group(1)}:{match.group(2)}/", proc
    proc.wait(30)
    raise RuntimeError("backend did not start")


def _login(backend: str) -> tuple[str, dict[str, str]]:
    """`backend` without its credentials, and them as REMOLD_BACKEND_* variables."""
    parts = urllib.parse.urlsplit(backend)
    if parts.username is None:
        return backend, {}
    query = dict(urllib.parse.parse_qsl(parts.query))
    env = {"REMOLD_BACKEND_USERNAME": urllib.parse.unquote(parts.username),
           "REMOLD_BACKEND_PASSWORD": urllib.parse.unquote(parts.password or ""),
           "REMOLD_BACKEND_AUTH_SOURCE": query.pop("authSource", "admin"),
           "REMOLD_BACKEND_AUTH_MECHANISM": query.pop("authMechanism", "SCRAM-SHA-256")}
    bare = parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port else ""),
                          query=urllib.parse.urlencode(query))
    return urllib.parse.urlunsplit(bare), env


def client_uri(backend: str, port: int) -> str:
    parts = urllib.parse.urlsplit(backend)
    login = parts.netloc.rpartition("@")[0]
    query = dict(urllib.parse.parse_qsl(parts.query))
    options = {"directConnection": "true"}
    if login:
        options.update(authSource=query.get("authSource", "admin"),
                       authMechanism=query.get("authMechanism", "SCRAM-SHA-256"))
    return f"mongodb://{login + '@' if login else ''}127.0.0.1:{port}/?{urllib.parse.urlencode(options)}"


def start_remold(build: str, backend: str, *args: str, stderr=subprocess.DEVNULL) -> tuple[subprocess.Popen, int]:
    """BUILD/remold serve in front of `backend` on a free port, with `args`;
    its log (stderr) goes to `stderr` (a file object, or DEVNULL)."""
    bare, env = _login(backend)
    proc = subprocess.Popen([str(Path(build, "remold")), "serve", "--backend", bare, "--listen", "127.0.0.1:0",
                             "--log-level", "warn", *args],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr, text=True,
                            env={**os.environ, **env})
    for line in proc.stdout:
        match = re.search(r"listening on [\d.]+:(\d+)", line)
        if match:
            return proc, int(match.group(1))
    proc.wait(30)
    raise RuntimeError(f"remold did not start (backend {backend}, args {args})")


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]
