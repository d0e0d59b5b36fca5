"""Reads README.md's table "## What works through remold" and answers whether a
refusal (a command or stage, a rule, an error code) is documented there.

A row is ``| `name`, `name2` ... | bucket cell | attribute cell | computed cell |``;
a refusal is documented when the rule's cell contains the word "refused" and,
if the cell names codes (``refused (72)``), the error code is one of them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

HEADING = "## What works through remold"


@dataclass(frozen=True)
class Cell:
    text: str

    @property
    def refuses(self) -> bool:
        return re.search(r"\brefused\b", self.text, re.IGNORECASE) is not None

    @property
    def codes(self) -> set[int]:
        return {int(c) for c in re.findall(r"refused\s*\((\d+)\)", self.text, re.IGNORECASE)}


class Table:
    def __init__(self, rows: dict[str, dict[str, Cell]]):
        self.rows = rows  # command or stage name -> rule -> cell

    @classmethod
    def from_readme(cls, readme: Path) -> "Table":
        lines = readme.read_text().splitlines()
        try:
            start = lines.index(HEADING)
        except ValueError:
            raise ValueError(f"{readme}: no '{HEADING}' section")
        rows: dict[str, dict[str, Cell]] = {}
        rules: Optional[list[str]] = None
        for line in lines[start + 1:]:
            if line.startswith("## "):
                break
            if not line.startswith("|"):
                if rules is not None and rows:
                    break
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if rules is None:
                rules = [c.lower() for c in cells[1:]]
                continue
            if set(cells[0]) <= set("-: "):
                continue
            for name in re.findall(r"`([^`]+)`", cells[0]):
                rows[name] = {rule: Cell(text) for rule, text in zip(rules, cells[1:])}
        if not rows:
            raise ValueError(f"{readme}: the '{HEADING}' table has no rows")
        return cls(rows)

    def cell(self, name: str, rule: str) -> Optional[Cell]:
        return self.rows.get(name, {}).get(rule)

    def documents_refusal(self, names: list[str], rule: str, code: Optional[int]) -> Optional[str]:
        """The first of ``names`` whose cell documents this refusal, or None."""
        for name in names:
            cell = self.cell(name, rule)
            if cell is None or not cell.refuses:
                continue
            if cell.codes and code not in cell.codes:
                continue
            return name
        return None
