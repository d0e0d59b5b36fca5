"""What the migration tests share (test_migrate*.py): running `remold
migrate` as the operator would, killing it partway, and an application that
writes and reads through remold on two threads while the test goes on."""
from __future__ import annotations

import signal
import subprocess
import threading
import time
from pathlib import Path

import pymongo
import pymongo.errors

from conftest import require_binary


def start_migrate(rules: Path, backend_uri: str, rule: str, *args: str) -> subprocess.Popen:
    """`remold migrate --backend URI --rules DIR --rule NAME ARGS`, running."""
    return subprocess.Popen([str(require_binary()), "migrate", "--backend", backend_uri, "--rules", str(rules),
                             "--rule", rule, *args],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def kill_once_past(process: subprocess.Popen, database, rule: str, at_least: int) -> int:
    """SIGKILLs `process` once its checkpoint counts `at_least` documents
    done (or after 60 s); the count the checkpoint holds then."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        checkpoint = database.remold_migrations.find_one({"_id": rule}) or {}
        if checkpoint.get("converted", 0) >= at_least:
            break
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    return (database.remold_migrations.find_one({"_id": rule}) or {}).get("converted", 0)


class Application:
    """An application writing and reading through remold on two threads.

    Subclasses give write_once and read_once, each holding `lock` for its
    operations, so that a read and the oracle's answer see the same writes;
    a read that differs from the oracle appends to `wrong`. The migration
    runs outside the lock, as it would in production."""

    pause = 0.0  # seconds between operations of a thread

    def __init__(self):
        self.lock = threading.Lock()
        self.writes = self.reads = 0
        self.wrong: list[str] = []
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []

    def write_once(self) -> None:
        raise NotImplementedError

    def read_once(self) -> None:
        raise NotImplementedError

    def _run(self, write: bool) -> None:
        while not self.stop.is_set():
            try:
                self.write_once() if write else self.read_once()
            except Exception as exc:  # noqa: BLE001 - reported by the test
                self.errors.append(f"{type(exc).__name__}: {exc}")
                return
            if self.pause:
                time.sleep(self.pause)

    def start(self) -> None:
        self.threads = [threading.Thread(target=self._run, args=(write,)) for write in (True, False)]
        for thread in self.threads:
            thread.start()

    def finish(self) -> None:
        """Stops both threads; fails on an error either met."""
        self.stop.set()
        for thread in self.threads:
            thread.join(60)
        assert not self.errors, self.errors


def drop_database_after_kills(client, name: str) -> None:
    """Drops a test's database once a killed `remold migrate` is done with it.

    A killed client's last command runs on in the server; mongo-java-server
    fails a dropDatabase that meets it ("index not found with name [_id_]"),
    so the drop is tried again for a few seconds."""
    for attempt in range(10):
        try:
            client.drop_database(name)
            return
        except pymongo.errors.OperationFailure:
            if attempt == 9:
                raise
            time.sleep(0.5)
