"""What a soak client was told about its documents (bench/soak/soak.sh).

A Ledger maps each key (a document or a reading the client wrote) to the
states it may be in now, given the replies: an acknowledged write leaves one
state; a write whose outcome the client never learnt (a network error, any
error) adds its state to those already possible, since it may or may not
have landed. ABSENT is the state of a document never stored or deleted.
States are hashable values chosen by each workload (a field's value, a
tuple of fields).

  ledger.acked(key, state)     the write was acknowledged: only `state` now
  ledger.acked_one_of(key, states)  acknowledged, over a state not known: one of `states`
  ledger.unknown(key, state)   the write may have landed: `state` is possible too
  ledger.states(key)           the possible states (ABSENT for a key never written)
  ledger.certain(key)          the one possible state, or None when several are
  ledger.keys()                every key written (not while clients write)
  key in ledger                was it written
  compare(ledger, observed, keys, where) -> [Problem]
      `observed` maps key -> the state found (a key not in it was not found);
      each of `keys` must be found in one of its possible states, and no key
      outside the ledger may be found.

A Problem has a kind: "lost" (acknowledged as stored, not found),
"resurrected" (acknowledged as deleted, found), "wrong value", "phantom"
(found, never written), "doubled" (found more than once), "wrong answer" (a
read through remold disagreed with what the client was told), "derived"
(a maintained value wrong where no fault explains it) or "drift" (a
maintained value wrong on a document a write in flight during a backend
kill touched: documented, `remold reconcile` repairs it).
"""
from __future__ import annotations

from dataclasses import dataclass

ABSENT = "<absent>"
FAILING_KINDS = ("lost", "resurrected", "wrong value", "phantom", "doubled", "wrong answer", "derived")


@dataclass(frozen=True)
class Problem:
    kind: str
    where: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.where}: {self.detail}"


class Ledger:
    def __init__(self) -> None:
        self._states: dict = {}

    def acked(self, key, state) -> None:
        self._states[key] = {state}

    def acked_one_of(self, key, states) -> None:
        self._states[key] = set(states)

    def unknown(self, key, state) -> None:
        self._states.setdefault(key, {ABSENT}).add(state)

    def states(self, key) -> set:
        return self._states.get(key, {ABSENT})

    def certain(self, key):
        states = self.states(key)
        return next(iter(states)) if len(states) == 1 else None

    def keys(self):
        return self._states.keys()

    def __contains__(self, key) -> bool:
        return key in self._states


def compare(ledger: Ledger, observed: dict, keys, where: str) -> list[Problem]:
    problems = []
    for key in keys:
        states = ledger.states(key)
        found = observed.get(key, ABSENT)
        if found in states:
            continue
        if found == ABSENT:
            kind = "lost"
        elif states == {ABSENT}:
            kind = "resurrected"
        else:
            kind = "wrong value"
        problems.append(Problem(kind, where, f"{key!r}: found {found!r}, possible {sorted(map(repr, states))}"))
    for key in observed:
        if key not in ledger:
            problems.append(Problem("phantom", where, f"{key!r}: found {observed[key]!r}, never written"))
    return problems
