"""Delta debugging of an operation list: the smallest sequence (no operation
can be removed) that still shows the same difference class on fresh
collections."""
from __future__ import annotations

import time
from typing import Callable, Optional


def minimize(ops: list, reproduces: Callable[[list], bool], budget: int = 200,
             deadline: Optional[float] = None) -> list:
    """ddmin, then single removals until none is possible (within ``budget``
    runs and before the monotonic ``deadline``: the result is then smaller
    but perhaps not minimal)."""
    runs = 0

    def test(candidate: list) -> bool:
        nonlocal runs
        runs += 1
        if deadline is not None and time.monotonic() > deadline:
            runs = budget
            return False
        return reproduces(candidate)

    n = 2
    while len(ops) >= 2 and runs < budget:
        chunk = max(1, len(ops) // n)
        reduced = False
        for start in range(0, len(ops), chunk):
            complement = ops[:start] + ops[start + chunk:]
            if complement and runs < budget and test(complement):
                ops, n, reduced = complement, max(n - 1, 2), True
                break
        if not reduced:
            if chunk == 1:
                break
            n = min(len(ops), n * 2)
    i = 0
    while i < len(ops) and len(ops) > 1 and runs < budget:
        candidate = ops[:i] + ops[i + 1:]
        if test(candidate):
            ops = candidate
        else:
            i += 1
    return ops
