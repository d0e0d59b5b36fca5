"""Counts of a soak (bench/soak/soak.sh), shared by its client threads: operations
done, errors by kind, and wrong answers (Problems), each with a running total
and a count since the last `take()`.

  error_kind(exc)        "network" (the connection lost or refused: pymongo's
                         AutoReconnect family), "server:<code>" (a command error),
                         "write:<code>" (a write error), "other:<Type>"
  tally.op(name)         one operation done (whatever its outcome)
  tally.error(exc, in_outage)
                         one operation failed with exc; outside an outage its
                         kind gets " (no outage)" appended
  unexpected(errors)     how many of these errors came outside an outage
  tally.problem(p)       a wrong answer seen during the run
  tally.take()           (ops, errors by kind, problems) since the last take
  tally.ops_total, tally.errors_total, tally.problems
"""
from __future__ import annotations

import threading
from collections import Counter

from pymongo.errors import AutoReconnect, BulkWriteError, ConnectionFailure, OperationFailure, WriteError

NO_OUTAGE = " (no outage)"


def unexpected(errors: Counter) -> int:
    return sum(n for kind, n in errors.items() if kind.endswith(NO_OUTAGE))


def error_kind(exc: BaseException) -> str:
    if isinstance(exc, (AutoReconnect, ConnectionFailure)):
        return "network"
    if isinstance(exc, BulkWriteError):
        codes = sorted({e.get("code") for e in exc.details.get("writeErrors", [])})
        if codes:
            return "write:" + ",".join(map(str, codes))
        concern = exc.details.get("writeConcernErrors") or [{}]
        return f"server:{concern[0].get('code')}"
    if isinstance(exc, WriteError):
        return f"write:{exc.code}"
    if isinstance(exc, OperationFailure):
        return f"server:{exc.code}"
    return f"other:{type(exc).__name__}"


class Tally:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ops_total = Counter()
        self.errors_total = Counter()
        self.problems: list = []
        self._ops = 0
        self._errors = Counter()
        self._problems = 0

    def op(self, name: str) -> None:
        with self._lock:
            self.ops_total[name] += 1
            self._ops += 1

    def error(self, exc: BaseException, in_outage: bool) -> str:
        kind = error_kind(exc) + ("" if in_outage else NO_OUTAGE)
        with self._lock:
            self.errors_total[kind] += 1
            self._errors[kind] += 1
        return kind

    def problem(self, problem) -> None:
        with self._lock:
            self.problems.append(problem)
            self._problems += 1

    def take(self) -> tuple[int, Counter, int]:
        with self._lock:
            taken = (self._ops, self._errors, self._problems)
            self._ops, self._errors, self._problems = 0, Counter(), 0
            return taken
