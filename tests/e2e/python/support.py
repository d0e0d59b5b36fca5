"""Helpers shared by the end-to-end test modules.

- ``CommandLog``: a pymongo command listener that records events.
- ``run_explain``: the backend commands ``remold explain`` prints.
"""
from __future__ import annotations

import subprocess
import threading
from pathlib import Path

from bson import json_util
from pymongo import monitoring

from conftest import require_binary


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
