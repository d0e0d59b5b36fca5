"""The soak's faults (bench/soak/soak.sh): the backend killed and restarted on its
port, and rule reloads.

  Backend(data_file)           mongo-java-server in its durable H2 mode
                               (tests/backend/Launcher.java, as the e2e fault
                               test's killable backend): a SIGKILL loses
                               nothing it acknowledged
    .start() / .uri / .pid     first start on a free port
    .restart(down_seconds, outages)
                               SIGKILL, wait, start again on the same port
                               and file (retrying while the port is busy);
                               records the outage
    .stop()
  Outages                      when the backend was down
    .overlaps(started, ended, grace=GRACE)
                               was an operation in flight during an outage
                               (or within `grace` seconds after it)
  reload_rules(directory, n, remold_pid) -> max_count
                               rewrites a rule (soak_rules.write_reload) and
                               sends remold SIGHUP
"""
from __future__ import annotations

import os
import signal
import threading
import time

from bench_processes import start_backend
from soak_rules import write_reload

GRACE = 2.0         # a write's follow-ups may have missed the backend
RECOVERY = 10.0     # clients may still see errors of the outage


class Outages:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._windows: list[list] = []   # [down, up or None]

    def down(self) -> None:
        with self._lock:
            self._windows.append([time.monotonic(), None])

    def up(self) -> None:
        with self._lock:
            self._windows[-1][1] = time.monotonic()

    def overlaps(self, started: float, ended: float, grace: float = GRACE) -> bool:
        with self._lock:
            return any(ended >= down and (up is None or started <= up + grace) for down, up in self._windows)

    def count(self) -> int:
        return len(self._windows)


class Backend:
    def __init__(self, data_file: str) -> None:
        self.data_file = data_file
        self.uri, self.proc = start_backend(data_file)
        self.port = int(self.uri.rstrip("/").rsplit(":", 1)[1])

    @property
    def pid(self) -> int:
        return self.proc.pid

    def restart(self, down_seconds: float, outages: Outages) -> float:
        """Kills and starts the backend again; returns the seconds it was down."""
        outages.down()
        killed = time.monotonic()
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        time.sleep(down_seconds)
        deadline = time.monotonic() + 30
        while True:
            try:
                uri, self.proc = start_backend(self.data_file, self.port)
                break
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)  # the port may not be free yet
        assert uri == self.uri, f"the backend came back on {uri}, not {self.uri}"
        outages.up()
        return time.monotonic() - killed

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()  # the launcher exits at stdin EOF
            try:
                self.proc.wait(15)
            except Exception:
                self.proc.kill()
                self.proc.wait()


def reload_rules(directory, n: int, remold_pid: int) -> int:
    max_count = write_reload(directory, n)
    os.kill(remold_pid, signal.SIGHUP)
    return max_count
