"""Several pymongo clients at once, for the e2e tests of the rules that
follow writes (computed, subset): run_clients drives a weighted mix of
operations from n threads, each with its own MongoClient, started together.
"""

from __future__ import annotations

import random
import threading
import time
import traceback
from typing import Callable

from pymongo.errors import OperationFailure


# mongo-java-server (1.47) sorts live documents: a sort (a findAndModify or
# aggregate with one) racing with writes to the sort key can fail with this
# Java error, and nothing is written. Against the stand-in the workers below
# retry their own operation then, as an application would retry a transient
# error; a maintenance step of remold's that fails this way is remold's to
# handle (it logs a warning, which print_remold_log shows).
STAND_IN_SORT_RACE = "Comparison method violates its general contract"


def run_clients(make_client: Callable, db_name: str, n_clients: int, total_ops: int,
                mix: list[tuple[str, int]], step: Callable, seed: int) -> tuple[list[str], dict, float]:
    """Runs total_ops operations from n_clients threads, each with its own
    MongoClient to remold, started together: each picks an operation kind
    from `mix` and runs `step(db, rng, kind)`. Returns (errors, tally of
    operation kinds, seconds)."""
    clients = [make_client() for _ in range(n_clients)]
    for c in clients:
        c.admin.command("ping")
    errors: list[str] = []
    tally: dict = {}
    lock = threading.Lock()
    barrier = threading.Barrier(n_clients)

    def run(k: int) -> None:
        mine: dict = {}
        rng = random.Random(seed * 1000 + k)
        n_ops = total_ops // n_clients + (1 if k < total_ops % n_clients else 0)
        db = clients[k][db_name]
        barrier.wait()
        try:
            for _ in range(n_ops):
                op = pick(rng, mix)
                mine[op] = mine.get(op, 0) + 1
                for attempt in range(10):
                    try:
                        step(db, rng, op)
                        break
                    except OperationFailure as exc:
                        if STAND_IN_SORT_RACE not in str(exc) or attempt == 9:
                            raise
                        mine["retried (stand-in sort race)"] = mine.get("retried (stand-in sort race)", 0) + 1
        except BaseException:  # noqa: BLE001 - reported by the test
            with lock:
                errors.append(f"client {k}: {traceback.format_exc()}")
        with lock:
            for key, n in mine.items():
                tally[key] = tally.get(key, 0) + n

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n_clients)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    seconds = time.monotonic() - start
    assert not any(t.is_alive() for t in threads), "a client thread is still running after 600 s"
    return errors, tally, seconds


def pick(rng: random.Random, weighted: list[tuple[str, int]]) -> str:
    total = sum(w for _, w in weighted)
    x = rng.randrange(total)
    for name, w in weighted:
        if x < w:
            return name
        x -= w
    return weighted[-1][0]


def report(problems: list[str], what: str, limit: int = 12) -> str:
    head = "\n  ".join(problems[:limit])
    more = f"\n  ... and {len(problems) - limit} more" if len(problems) > limit else ""
    return f"{what}: {len(problems)} problems:\n  {head}{more}"


# --------------------------------------------------------------------------
# Oracles: the maintained values recomputed from the source documents.
