"""Reads the table "## What works through remold" of docs/what-works.md and answers whether a
refusal (a command or stage, a rule, an error code) is documented there.

A row is ``| `name`, `name2` ... | bucket cell | attribute cell | computed cell |``;
a refusal is documented when the rule's cell contains the word "refused" and,
if the cell names codes (``refused (72)``), the error code is one of them. A
row without a backticked name is a property, named by its first cell: "field
order of the documents read" says, per rule, whether fields come back in the
order written ("kept") or not ("differs"). A cell that says "differs: ..."
documents a difference that is not a refusal (a bucket rule's `_id` not
enforced unique, the indexes listIndexes shows).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

HEADING = "## What works through remold"
PAGE = "docs/what-works.md"  # the page that holds the table, in the source directory


@dataclass(frozen=True)
class Cell:
    text: str

    @property
    def refuses(self) -> bool:
        return re.search(r"\brefused\b", self.text, re.IGNORECASE) is not None

    @property
    def differs(self) -> bool:
        return re.search(r"\bdiffers:", self.text, re.IGNORECASE) is not None

    @property
    def codes(self) -> set[int]:
        return {int(c) for c in re.findall(r"refused\s*\((\d+)\)", self.text, re.IGNORECASE)}


class Table:
    def __init__(self, rows: dict[str, dict[str, Cell]]):
        self.rows = rows  # command or stage name -> rule -> cell

    @classmethod
    def from_page(cls, page: Path) -> "Table":
        lines = page.read_text().splitlines()
        try:
            start = lines.index(HEADING)
        except ValueError:
            raise ValueError(f"{page}: no '{HEADING}' section")
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
            names = re.findall(r"`([^`]+)`", cells[0]) or [cells[0].lower()]
            for name in names:
                rows[name] = {rule: Cell(text) for rule, text in zip(rules, cells[1:])}
        if not rows:
            raise ValueError(f"{page}: the '{HEADING}' table has no rows")
        return cls(rows)

    def reorders_fields(self, rule: str) -> bool:
        """Whether the row "field order of the documents read" says the rule
        gives fields in another order than written ("differs")."""
        for name, cells in self.rows.items():
            if name.startswith("field order") and rule in cells:
                return re.search(r"\bdiffers\b", cells[rule].text, re.IGNORECASE) is not None
        return False

    def cell(self, name: str, rule: str) -> Optional[Cell]:
        return self.rows.get(name, {}).get(rule)

    def documents_difference(self, names: list[str], rule: str) -> Optional[str]:
        """The first of ``names`` whose cell says how the rule differs there
        ("differs: ..."), or None."""
        for name in names:
            cell = self.cell(name, rule)
            if cell is not None and cell.differs:
                return name
        return None

    def documents_refusal(self, names: list[str], rule: str, codes: tuple[int, ...]) -> Optional[str]:
        """The first of ``names`` whose cell documents this refusal (each of
        its codes), or None."""
        for name in names:
            cell = self.cell(name, rule)
            if cell is None or not cell.refuses:
                continue
            if cell.codes and not set(codes) <= cell.codes:
                continue
            return name
        return None
