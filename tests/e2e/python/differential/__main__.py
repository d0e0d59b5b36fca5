"""The long run: ``python -m differential --rule attribute --seed 7 --ops 100000``
(from tests/e2e/python; tests/e2e/differential.sh wraps it). Starts the
backend REMOLD_TEST_BACKEND names (the stand-in by default, or documentdb;
or uses REMOLD_TEST_BACKEND_URI) and a remold with the rules, runs sequences until the operation count is reached, prints every new
unexplained difference class with a minimal reproducer as it is found, and
the figures at the end. Exit status 1 if any unexplained difference was found.
"""
from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pymongo

import conftest
from .campaign import format_report, run_campaign
from .capabilities import probe
from .families import FAMILIES
from .setup import cleanup, harness, write_rules
from .table import PAGE, Table


def start_backend():
    """(the backend, what stops it)."""
    if conftest.BACKEND_URI_ENV:
        uri, credentials = conftest.split_credentials(conftest.BACKEND_URI_ENV)
        host, port = pymongo.uri_parser.parse_uri(conftest.BACKEND_URI_ENV)["nodelist"][0]
        return conftest.Backend(uri, host, port, kind="external", credentials=credentials), lambda: None
    if conftest.BACKEND_KIND_ENV == "documentdb":
        return conftest._start_documentdb()
    cmd = ["java", "-cp", "tests/backend/lib/*:tests/backend/classes", "Launcher", "127.0.0.1", "0"]
    proc = subprocess.Popen(cmd, cwd=conftest.SOURCE_DIR, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    host, port = conftest.read_port_line(proc, conftest._BACKEND_LINE, 60, "backend")
    conftest.drain_in_background(proc.stdout, [])

    def stop():
        proc.stdin.close()
        proc.wait(15)

    return conftest.Backend(f"mongodb://{host}:{port}/", host, port, proc), stop


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="differential", description=__doc__.splitlines()[0])
    parser.add_argument("--rule", action="append", choices=sorted(FAMILIES),
                        help="family to run (repeatable; default all)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--ops", type=int, default=100_000, help="operations per rule")
    parser.add_argument("--length", type=int, default=40, help="operations per sequence")
    parser.add_argument("--minimize-budget", type=int, default=300,
                        help="re-runs allowed to shrink one difference class")
    parser.add_argument("--minimize-seconds", type=float, default=60.0,
                        help="time allowed to shrink one difference class")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that `finally` stops remold and the backend
    families = args.rule or sorted(FAMILIES)
    for name in families:
        note = FAMILIES[name].configure(args.seed)
        if note:
            print(f"{name}: {note} (seed {args.seed})", flush=True)
    table = Table.from_page(conftest.SOURCE_DIR / PAGE)
    prefix = f"diff_{uuid.uuid4().hex[:6]}"
    backend, stop_backend = start_backend()
    conftest._use_credentials(backend)
    remold = None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            rules = write_rules(Path(tmp) / "rules", prefix, families)
            remold = conftest.start_remold(backend.uri, extra_args=("--rules", str(rules)))
            direct = pymongo.MongoClient(backend.direct_uri, serverSelectionTimeoutMS=10_000)
            client = pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=10_000)
            caps = probe(direct, f"{prefix}_probe")
            print(f"backend: {backend.kind}; capabilities: {', '.join(sorted(caps))}", flush=True)
            results = []
            for name in families:
                missing = set(FAMILIES[name].requires) - caps
                if missing:
                    print(f"== {name}: skipped, the backend lacks {', '.join(sorted(missing))}", flush=True)
                    continue
                h = harness(name, prefix, client, direct, table, caps)
                results.append(run_campaign(
                    h, caps, seed=args.seed, sequences=None, length=args.length, ops_total=args.ops,
                    minimize_budget=args.minimize_budget, minimize_seconds=args.minimize_seconds,
                    log=lambda s: print(s, flush=True)))
            cleanup(prefix, families, direct)
    finally:
        if remold:
            remold.terminate()
            remold.forget_stderr()
        stop_backend()
    print(format_report(results))
    return 1 if any(r.findings for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
