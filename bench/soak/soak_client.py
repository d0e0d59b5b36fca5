"""One soak client (bench/soak/soak.sh): a thread with its own MongoClient to
remold (driver defaults: retryable reads and writes on), its own random
sequence, and keys of its own in every workload, so what it was told about
its documents is all that decides what they must hold.

  client.attempt(op, fn) -> Outcome     runs fn(); counts the op, and the error
                                        if it raised one (whether in an outage:
                                        from a kill to RECOVERY s after the restart)
  Outcome.ok / .result / .faulted       faulted: it failed, or it was in flight
                                        while the backend was down (a write's
                                        follow-ups may not have run)
  client.wrong(where, detail)           a wrong answer through remold
  client.run(workloads, stop)           the loop: a workload by weight, one step
"""
from __future__ import annotations

import random
import sys
import time
import traceback
from dataclasses import dataclass

import pymongo
from pymongo.errors import PyMongoError

from soak_faults import RECOVERY
from soak_ledger import Problem


@dataclass
class Outcome:
    ok: bool
    result: object
    faulted: bool


class Client:
    def __init__(self, index: int, uri: str, db: str, tally, outages) -> None:
        self.index = index
        self.tag = f"c{index:02d}"
        self.rng = random.Random(index)
        self.tally = tally
        self.outages = outages
        self.mongo = pymongo.MongoClient(uri, serverSelectionTimeoutMS=20_000, connectTimeoutMS=5_000,
                                         socketTimeoutMS=60_000, appname=f"soak-{self.tag}")
        self.db = self.mongo[db]
        self.seq = 0

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def attempt(self, op: str, fn) -> Outcome:
        started = time.monotonic()
        try:
            result, ok = fn(), True
        except PyMongoError as exc:
            result, ok = exc, False
        ended = time.monotonic()
        if not ok:
            self.tally.error(result, self.outages.overlaps(started, ended, RECOVERY))
        self.tally.op(op)
        return Outcome(ok, result, not ok or self.outages.overlaps(started, ended))

    def wrong(self, where: str, detail: str) -> None:
        self.tally.problem(Problem("wrong answer", f"{where} ({self.tag})", detail))

    def run(self, workloads: list, stop) -> None:
        weights = [w.weight for w in workloads]
        try:
            while not stop.is_set():
                workload = self.rng.choices(workloads, weights)[0]
                try:
                    workload.step(self)
                except Exception as exc:  # a bug of the soak, or a reply pymongo cannot read
                    self.tally.error(exc, False)
                    print(f"soak: client {self.tag}, {workload.name}: {traceback.format_exc()}",
                          file=sys.stderr, flush=True)
                    time.sleep(1)
        finally:
            self.mongo.close()
