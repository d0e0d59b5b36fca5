"""The soak (bench/soak/soak.sh; bench/README.md, "soak.sh"): remold under a mixed
load for MINUTES, with rule reloads and backend restarts, then a check that
nothing acknowledged was lost.

Starts mongo-java-server in its durable mode (a data file in a temporary
directory) and remold in front of it with one rule per pattern
(soak_rules.py), then runs --clients client threads (soak_client.py) over
the workloads: pass-through (soak_plain.py), bucket (soak_readings.py),
attribute (soak_products.py), computed (soak_comments.py), subset
(soak_reviews.py), extended reference (soak_orders.py) and versioned
(soak_users.py). Every RELOAD seconds a rule file is rewritten and remold
gets SIGHUP; every RESTART seconds the backend is killed (SIGKILL) and
started again on its port and file. Each minute it prints remold's RSS and
open file descriptors, the operations done, errors by kind, wrong answers
seen, reloads and restarts. At the end of the load: every workload's
documents are checked through remold and on the backend directly
(soak_ledger.py), then a summary line and BENCH_JSON (soak_report.py).

Exit status 1 when anything acknowledged is lost (or a delete undone, a
value wrong, a write doubled, a phantom, a maintained value wrong where no
fault explains it, a wrong answer during the run), when an operation failed
outside a backend outage (from the kill to 10 s after the restart: any
error, network or server's, or a reply pymongo could not read), when
remold's RSS grew more than RSS_LIMIT % from the end of the warm-up to the
end of the load, when a reload failed or was not seen, or when remold died
or did not exit 0 on SIGTERM; else 0.

Usage: .venv/bin/python bench/soak/soak_run.py --minutes 30 --build build [--clients 64]
Environment (seconds): REMOLD_SOAK_RELOAD_SECONDS (60), REMOLD_SOAK_RESTART_SECONDS
(600), REMOLD_SOAK_WARMUP_SECONDS (60), REMOLD_SOAK_DOWN_SECONDS (1: how long the
backend stays dead), REMOLD_SOAK_RSS_LIMIT (5, percent); REMOLD_SOAK_KEEP=1
keeps the temporary directory (data file, rules, remold's log).
"""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import pymongo

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))  # bench/lib: the shared modules
from bench_processes import start_remold  # noqa: E402
from soak_client import Client  # noqa: E402
from soak_comments import Comments  # noqa: E402
from soak_faults import Backend, Outages, reload_rules  # noqa: E402
from soak_ledger import FAILING_KINDS  # noqa: E402
from soak_orders import Orders  # noqa: E402
from soak_plain import Plain  # noqa: E402
from soak_probe import fd_count, line_count, log_summary, reloads, rss_kb  # noqa: E402
from soak_products import Products  # noqa: E402
from soak_readings import Readings  # noqa: E402
from soak_report import bench_json, minute_line, summary  # noqa: E402
from soak_reviews import Reviews  # noqa: E402
from soak_rules import DB, write_rules  # noqa: E402
from soak_tally import Tally, unexpected  # noqa: E402
from soak_users import Users  # noqa: E402


def env_seconds(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Soak:
    def __init__(self, args, work: Path) -> None:
        self.args = args
        self.work = work
        self.rules = work / "rules"
        self.log_path = work / "remold.log"
        self.reload_every = env_seconds("REMOLD_SOAK_RELOAD_SECONDS", 60)
        self.restart_every = env_seconds("REMOLD_SOAK_RESTART_SECONDS", 600)
        self.warmup = env_seconds("REMOLD_SOAK_WARMUP_SECONDS", 60)
        self.down = env_seconds("REMOLD_SOAK_DOWN_SECONDS", 1)
        self.rss_limit = env_seconds("REMOLD_SOAK_RSS_LIMIT", 5)
        self.outages = Outages()
        self.reloads_sent = 0
        self.failures: list[str] = []

    def start(self) -> None:
        write_rules(self.rules)
        self.backend = Backend(str(self.work / "backend.mv"))
        self.metrics = free_port()
        self.log = open(self.log_path, "w")
        self.remold, self.port = start_remold(self.args.build, self.backend.uri, "--rules", str(self.rules),
                                              "--metrics-listen", f"127.0.0.1:{self.metrics}", stderr=self.log)
        self.uri = f"mongodb://127.0.0.1:{self.port}/"
        print(f"soak: backend {self.backend.uri} (durable, {self.backend.data_file}), remold {self.uri} "
              f"(pid {self.remold.pid}, rules {self.rules}), {self.args.clients} clients, "
              f"{self.args.minutes} min; reload every {self.reload_every:.0f}s, backend restart every "
              f"{self.restart_every:.0f}s, warm-up {self.warmup:.0f}s", flush=True)
        clients = self.args.clients
        self.workloads = [Plain(), Readings(), Products(), Comments(clients), Reviews(clients), Orders(clients),
                          Users()]
        with pymongo.MongoClient(self.uri) as setup:
            for workload in self.workloads:
                workload.setup(setup[DB])

    def sample(self, minute: int, seconds: float, tally) -> dict:
        ops, errors, problems = tally.take()
        ok, failed = reloads(self.metrics)
        return {"minute": minute, "t": time.monotonic() - self.t0, "seconds": seconds,
                "rss_kb": rss_kb(self.remold.pid), "fds": fd_count(self.remold.pid), "ops": ops,
                "ops_total": sum(tally.ops_total.values()), "errors": errors, "problems": problems,
                "reloads_ok": ok, "reloads_failed": failed, "restarts": self.outages.count(),
                "log_lines": line_count(self.log_path),
                "backend_file_mb": os.path.getsize(self.backend.data_file) / 2**20}

    def load(self, tally) -> tuple[dict, dict]:
        """Runs the clients and the faults; returns the samples at the end of
        the warm-up and at the end of the load."""
        stop = threading.Event()
        clients = [Client(i, self.uri, DB, tally, self.outages) for i in range(self.args.clients)]
        threads = [threading.Thread(target=c.run, args=(self.workloads, stop), daemon=True) for c in clients]
        self.t0 = now = time.monotonic()
        end = now + self.args.minutes * 60
        next_minute, next_reload, next_restart = now + 60, now + self.reload_every, now + self.restart_every
        warm_at, warm, last, minute = now + min(self.warmup, self.args.minutes * 60), None, now, 0
        for thread in threads:
            thread.start()
        try:
            while (now := time.monotonic()) < end:
                if self.remold.poll() is not None:
                    self.failures.append(f"remold died (exit status {self.remold.returncode})")
                    break
                if now >= next_reload:
                    max_count = reload_rules(self.rules, self.reloads_sent + 1, self.remold.pid)
                    self.reloads_sent += 1
                    print(f"  reload {self.reloads_sent}: readings max_count {max_count}, SIGHUP", flush=True)
                    next_reload += self.reload_every
                if now >= next_restart:
                    took = self.backend.restart(self.down, self.outages)
                    print(f"  backend restart {self.outages.count()}: killed and up again in {took:.1f}s",
                          flush=True)
                    next_restart += self.restart_every
                if warm is None and now >= warm_at:
                    warm = {"rss_kb": rss_kb(self.remold.pid), "fds": fd_count(self.remold.pid)}
                if now >= next_minute:
                    minute += 1
                    print(minute_line(self.sample(minute, now - last, tally)), flush=True)
                    last, next_minute = now, next_minute + 60
                time.sleep(0.2)
            alive = self.remold.poll() is None
            final = {"rss_kb": rss_kb(self.remold.pid), "fds": fd_count(self.remold.pid)} if alive else None
            if alive and now - last >= 5:
                print(minute_line(self.sample(minute + 1, now - last, tally)), flush=True)
        finally:
            stop.set()
            for thread in threads:
                thread.join(90)
        if any(t.is_alive() for t in threads):
            self.failures.append("a client thread is stuck 90s after the load ended")
        return warm or final, final

    def verify(self) -> tuple[list, dict]:
        problems, figures = [], {}
        with pymongo.MongoClient(self.uri, serverSelectionTimeoutMS=30_000) as through, \
                pymongo.MongoClient(self.backend.uri, directConnection=True, serverSelectionTimeoutMS=30_000) as direct:
            for workload in self.workloads:
                found, counts = workload.verify(through[DB], direct[DB])
                problems += found
                figures.update(counts)
        return problems, figures

    def stop(self) -> None:
        if self.remold.poll() is None:
            self.remold.terminate()
            try:
                status = self.remold.wait(30)
            except Exception:
                self.remold.kill()
                status = "none (killed after 30 s)"
            if status != 0:
                self.failures.append(f"remold exited {status} after SIGTERM")
        self.backend.stop()
        self.log.close()


def print_problems(problems: list) -> Counter:
    kinds = Counter(p.kind for p in problems)
    for kind in sorted(kinds):
        listed = [p for p in problems if p.kind == kind]
        print(f"{kind}: {len(listed)}" + ("" if kind in FAILING_KINDS else
                                           " (a write in flight during a backend kill: documented, "
                                           "`remold reconcile --fix` repairs)"))
        for p in listed[:10]:
            print(f"  {p}")
    return kinds


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--build", default="build")
    parser.add_argument("--clients", type=int, default=64)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="remold-soak."))
    soak, tally = Soak(args, work), Tally()
    reload_counts, figures = (0, 0), {}
    try:
        soak.start()
        warm, final = soak.load(tally)
        problems = tally.problems[:]
        if final is not None:
            reload_counts = reloads(soak.metrics)
            found, figures = soak.verify()
            problems += found
    finally:
        soak.stop()
    kinds = print_problems(problems)
    soak.failures += [f"{kinds[k]} {k}" for k in FAILING_KINDS if kinds[k]]
    warm, final = warm or {"rss_kb": 0, "fds": 0}, final or {"rss_kb": 0, "fds": 0}
    growth = 100.0 * (final["rss_kb"] - warm["rss_kb"]) / warm["rss_kb"] if warm["rss_kb"] else 0.0
    if final["rss_kb"] and growth > soak.rss_limit:
        soak.failures.append(f"remold's RSS grew {growth:.1f}% (limit {soak.rss_limit:g}%)")
    if unexpected(tally.errors_total):
        soak.failures.append(f"{unexpected(tally.errors_total)} errors outside a backend outage")
    if reload_counts[1]:
        soak.failures.append(f"{reload_counts[1]} rule reloads failed")
    elif final["rss_kb"] and reload_counts[0] < soak.reloads_sent + 1:
        soak.failures.append(f"{soak.reloads_sent} reloads sent, remold counts {reload_counts[0] - 1} "
                             "after its start")
    print(f"remold's log: {line_count(soak.log_path)} lines; the most frequent (numbers as #):")
    for text, n in log_summary(soak.log_path, 8):
        print(f"  {n:7d}  {text}")
    figures["backend file MiB"] = round(os.path.getsize(soak.backend.data_file) / 2**20, 1)
    line, obj = summary(args.minutes, args.clients, warm["rss_kb"], final["rss_kb"], warm["fds"], final["fds"],
                        tally.ops_total, tally.errors_total, problems, reload_counts, soak.outages.count(),
                        figures, soak.failures)
    print(bench_json(obj))
    print(line, flush=True)
    if os.environ.get("REMOLD_SOAK_KEEP") == "1":
        print(f"kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if not soak.failures else 1


if __name__ == "__main__":
    sys.exit(main())
