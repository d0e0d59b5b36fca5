"""What the soak (bench/soak/soak.sh) reads of a running remold.

  rss_kb(pid)                 VmRSS of /proc/PID/status, in KiB
  fd_count(pid)               entries of /proc/PID/fd
  reloads(metrics_port)       (success, failure) of remold_rule_reloads_total
  line_count(path)            lines of a log file so far
  log_summary(path, n)        its n most frequent lines, without the time
                              stamp and with every number as #: [(text, count)]
"""
from __future__ import annotations

import os
import re
import urllib.request
from collections import Counter


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def reloads(metrics_port: int) -> tuple[int, int]:
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as response:
        text = response.read().decode()
    counts = {"success": 0, "failure": 0}
    for match in re.finditer(r'^remold_rule_reloads_total\{result="(\w+)"\} (\S+)$', text, re.M):
        counts[match.group(1)] = int(float(match.group(2)))
    return counts["success"], counts["failure"]


def line_count(path) -> int:
    with open(path, "rb") as log:
        return sum(1 for _ in log)


def log_summary(path, n: int) -> list[tuple[str, int]]:
    lines = Counter()
    with open(path, errors="replace") as log:
        for line in log:
            text = line.rstrip("\n").split(" ", 1)[-1]
            lines[re.sub(r"\d+", "#", text)[:160]] += 1
    return lines.most_common(n)
