"""Helpers shared by the end-to-end test modules.

- ``CommandLog``: a pymongo command listener that records events.
- ``run_explain``: the backend commands ``remold explain`` prints.
- ``assert_request_survives_sigterm``: SIGTERM between a request's first
  bytes and the rest.
- ``projection_keeps_document_order``: a probe of the backend.
"""
from __future__ import annotations

import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable

from bson import json_util
from pymongo import monitoring

import wire
from conftest import Remold, require_binary


class CommandLog(monitoring.CommandListener):
    """Records every started/succeeded/failed command event."""

    def __init__(self):
        self.started_events, self.succeeded_events, self.failed_events = [], [], []
        self._lock = threading.Lock()

    def started(self, event):
        with self._lock:
            self.started_events.append(event)

    def succeeded(self, event):
        with self._lock:
            self.succeeded_events.append(event)

    def failed(self, event):
        with self._lock:
            self.failed_events.append(event)

    def clear(self):
        with self._lock:
            self.started_events.clear()
            self.succeeded_events.clear()
            self.failed_events.clear()

    @staticmethod
    def names(events) -> list[str]:
        return [e.command_name for e in events]


def run_explain(rules_dir: Path, db: str, command: dict) -> list[dict]:
    """The backend commands ``remold explain`` prints for ``command``."""
    binary = require_binary()
    result = subprocess.run([str(binary), "explain", "--rules", str(rules_dir), "--db", db,
                             json_util.dumps(command)],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, f"remold explain failed: {result.stderr}"
    lines = result.stdout.splitlines()
    commands = [json_util.loads(lines[i + 1].strip()) for i, line in enumerate(lines)
                if line.startswith("command ") and line.rstrip().endswith(":")]
    assert commands, f"remold explain printed no backend command:\n{result.stdout}"
    return commands


def assert_request_survives_sigterm(remold: Remold, send_first: Callable[[], None],
                                    send_rest: Callable[[], None],
                                    receive: Callable[[], "wire.Reply"]) -> "wire.Reply":
    """Sends a request's first bytes, SIGTERMs remold, sends the rest: the
    request was arriving, so remold must answer it, then exit 0. Returns
    the reply."""
    send_first()
    time.sleep(0.3)
    remold.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    try:
        send_rest()
        reply = receive()
    except (wire.ConnectionClosed, OSError) as exc:
        raise AssertionError(f"the request being received at SIGTERM was dropped: "
                             f"{type(exc).__name__}: {exc}") from exc
    rc = remold.terminate()
    assert rc == 0, f"remold exited {rc}; stderr:\n{remold.stderr()}"
    return reply


def projection_keeps_document_order(db) -> bool:
    """Whether the backend returns an inclusion projection's fields in the
    document's own order, as MongoDB does (mongo-java-server returns them
    in the projection's: docs/backends.md)."""
    probe = db["remold_probe_projection_order"]
    probe.drop()
    probe.insert_one({"_id": 1, "b": 1, "a": 1})
    try:
        return list(probe.find_one({"_id": 1}, {"a": 1, "b": 1})) == ["_id", "b", "a"]
    finally:
        probe.drop()
