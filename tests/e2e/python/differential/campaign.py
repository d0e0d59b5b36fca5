"""A campaign: N seeded sequences of one family through one Harness; every new
unexplained difference class is shrunk to a minimal reproducer; the report
gives the figures issue 11 asks for."""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Optional

from bson import json_util

from .generator import Generator
from .minimize import minimize
from .runner import Difference, Harness, Stats


@dataclass
class Finding:
    cls: tuple
    seed: int
    sequence: int
    ops: list
    detail: str


@dataclass
class Result:
    family: str
    stats: Stats
    findings: dict = field(default_factory=dict)  # cls -> Finding


def sequence_rng(family: str, seed: int, sequence: int) -> random.Random:
    return random.Random(f"{family}:{seed}:{sequence}")


def run_campaign(harness: Harness, capabilities: set[str], *, seed: int, sequences: Optional[int],
                 length: int, ops_total: Optional[int] = None, minimize_budget: int = 120,
                 time_limit: Optional[float] = None, minimize_seconds: Optional[float] = None,
                 minimize_total: Optional[float] = None, log=None) -> Result:
    """Runs sequences until ``sequences`` or ``ops_total`` or ``time_limit``;
    shrinks each new class (at most ``minimize_seconds`` each, and once
    ``minimize_total`` seconds are spent the rest are reported unshrunk)."""
    family = harness.f.name
    result = Result(family, Stats())
    stats = result.stats
    start = time.monotonic()
    shrinking = 0.0
    i = 0
    while True:
        if sequences is not None and i >= sequences:
            break
        if ops_total is not None and stats.operations >= ops_total:
            break
        if time_limit is not None and time.monotonic() - start > time_limit:
            break
        if log and stats.sequences and stats.sequences % 200 == 0:
            elapsed = time.monotonic() - start
            log(f"... {family}: {stats.sequences} sequences, {stats.operations} operations, "
                f"{stats.operations / elapsed:.0f} ops/s, {len(result.findings)} classes so far")
        ops = Generator(harness.f, sequence_rng(family, seed, i), capabilities).sequence(length)
        diffs = harness.run(ops, stats)
        stats.sequences += 1
        for d in diffs:
            if d.cls not in result.findings:
                began = time.monotonic()
                deadline = began + minimize_seconds if minimize_seconds else None
                over = minimize_total is not None and shrinking > minimize_total
                result.findings[d.cls] = shrink(harness, ops, d, seed, i, 0 if over else minimize_budget,
                                                deadline)
                shrinking += time.monotonic() - began
                if log:
                    log(format_finding(result.findings[d.cls]))
        i += 1
    stats.seconds = time.monotonic() - start
    return result


def shrink(harness: Harness, ops: list, d: Difference, seed: int, sequence: int, budget: int,
           deadline: Optional[float] = None) -> Finding:
    prefix = ops[:d.index + 1]

    def reproduces(candidate):
        return any(x.cls == d.cls for x in harness.run(candidate, stop_class=d.cls))

    minimal = minimize(prefix, reproduces, budget, deadline) if budget else prefix
    note = "" if budget else " (not shrunk: time spent)"
    again = [x for x in harness.run(minimal, stop_class=d.cls) if x.cls == d.cls]
    detail = again[-1].detail if again else d.detail
    return Finding(d.cls, seed, sequence, minimal, detail + note)


def format_finding(f: Finding) -> str:
    family, what, how = f.cls
    lines = [f"[{family}] {what}: {how}",
             f"  seed {f.seed}, sequence {f.sequence}; minimal reproducer ({len(f.ops)} ops, "
             f"run on fresh collections; c is ruled, o plain):"]
    for o in f.ops:
        where = "admin" if o["admin"] else "db"
        lines.append(f"    {where}.command({json_util.dumps(o['cmd'])})")
    lines.append("    " + f.detail.replace("\n", "\n    "))
    return "\n".join(lines)


def format_report(results: list[Result]) -> str:
    lines = []
    for r in results:
        s = r.stats
        rate = s.operations / s.seconds if s.seconds else 0.0
        lines.append(f"== {r.family}: {s.sequences} sequences, {s.operations} operations in "
                     f"{s.seconds:.1f} s ({rate:.0f} ops/s); {s.skipped} skipped by capability")
        lines.append(f"   covered (answered alike on both sides): "
                     + ", ".join(f"{k} {v}" for k, v in sorted(s.covered.items())))
        lines.append("   documented refusals: "
                     + (", ".join(f"{k} x{v}" for k, v in sorted(s.refusals.items())) or "none"))
        lines.append("   documented differences: "
                     + (", ".join(f"{k} x{v}" for k, v in sorted(s.documented.items())) or "none"))
        lines.append(f"   unexplained differences: {sum(s.differences.values())} in "
                     f"{len(r.findings)} classes")
        for cls, n in sorted(s.differences.items(), key=lambda kv: -kv[1]):
            lines.append(f"     x{n}  {cls[1]}: {cls[2]}")
    return "\n".join(lines)
