"""The backend commands remold would send for a client command, as
`remold explain` prints them (no backend needed).

  explain(binary, rules_dir, db, command) -> list[dict]   the commands, in order,
                                                          prerequisites (index builds) first
"""
from __future__ import annotations

import subprocess
from pathlib import Path

from bson import json_util


def explain(binary: Path | str, rules_dir: Path | str, db: str, command: dict) -> list[dict]:
    result = subprocess.run([str(binary), "explain", "--rules", str(rules_dir), "--db", db,
                             json_util.dumps(command)], capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise RuntimeError(f"remold explain failed ({result.returncode}): {result.stderr.strip()}")
    lines = result.stdout.splitlines()
    return [json_util.loads(lines[i + 1].strip()) for i, line in enumerate(lines[:-1])
            if line.rstrip().endswith(":") and (line.startswith("command ") or line.startswith("ensure"))]
