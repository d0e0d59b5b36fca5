"""The soak's output (bench/soak/soak.sh): a line per minute, and at the end the
problems, a summary line and the same as `BENCH_JSON {"bench": "soak", ...}`.

  minute_line(sample)              one minute's figures (a dict, see soak_run)
  errors_text(counter)             "network 12, server:6 3" or "none"
  summary(...) -> (line, object)   the final line and its JSON object
"""
from __future__ import annotations

import json
from collections import Counter


def errors_text(errors: Counter) -> str:
    return ", ".join(f"{kind} {n}" for kind, n in sorted(errors.items())) or "none"


def minute_line(s: dict) -> str:
    return (f"minute {s['minute']:>3}  t={s['t']:6.0f}s  rss {s['rss_kb'] / 1024:7.1f} MiB  fds {s['fds']:4d}  "
            f"ops {s['ops']:7d} ({s['ops'] / s['seconds']:6.1f}/s, total {s['ops_total']})  "
            f"errors: {errors_text(s['errors'])}  wrong answers {s['problems']}  "
            f"reloads {s['reloads_ok']} ok/{s['reloads_failed']} failed  backend restarts {s['restarts']}  "
            f"remold log lines {s['log_lines']}  backend file {s['backend_file_mb']:.0f} MiB")


def summary(minutes: float, clients: int, rss_start_kb: int, rss_end_kb: int, fds_start: int, fds_end: int,
            ops: Counter, errors: Counter, problems: list, reloads: tuple, restarts: int, figures: dict,
            failures: list) -> tuple[str, dict]:
    by_kind = Counter(p.kind for p in problems)
    growth = 100.0 * (rss_end_kb - rss_start_kb) / rss_start_kb if rss_start_kb else 0.0
    obj = {"bench": "soak", "minutes": round(minutes, 2), "clients": clients,
           "rss_start_kb": rss_start_kb, "rss_end_kb": rss_end_kb, "rss_growth_pct": round(growth, 2),
           "fds_start": fds_start, "fds_end": fds_end, "ops": sum(ops.values()), "ops_by_kind": dict(ops),
           "errors": dict(errors), "problems": dict(by_kind), "reloads_ok": reloads[0],
           "reloads_failed": reloads[1], "backend_restarts": restarts, "figures": figures,
           "failures": failures, "ok": not failures}
    line = (f"soak {'PASSED' if not failures else 'FAILED'}: {minutes:.1f} min, {clients} clients, "
            f"{sum(ops.values())} ops, rss {rss_start_kb / 1024:.1f} -> {rss_end_kb / 1024:.1f} MiB "
            f"({growth:+.1f}%), fds {fds_start} -> {fds_end}, errors: {errors_text(errors)}; "
            f"{reloads[0]} reloads ok, {reloads[1]} failed; {restarts} backend restarts; "
            f"problems: {errors_text(by_kind)}"
            + (f"; failures: {'; '.join(failures)}" if failures else ""))
    return line, obj


def bench_json(obj: dict) -> str:
    return "BENCH_JSON " + json.dumps(obj, sort_keys=False, default=str)
