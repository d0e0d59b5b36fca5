"""Database names, rule files and harnesses for a run: one database pair per
family (``<prefix>_<family>_r`` seen through remold with the rule on its
``c``, ``<prefix>_<family>_f`` on the backend directly)."""
from __future__ import annotations

from pathlib import Path

from .families import FAMILIES
from .runner import Harness
from .table import Table


def db_names(prefix: str, family: str) -> tuple[str, str]:
    return f"{prefix}_{family}_r", f"{prefix}_{family}_f"


def write_rules(rules_dir: Path, prefix: str, families: list[str]) -> Path:
    rules_dir.mkdir(parents=True, exist_ok=True)
    for name in families:
        remold_db, _ = db_names(prefix, name)
        for file, text in FAMILIES[name].rules(remold_db).items():
            # A rule's name is its file's: c's rule is the family's, another
            # collection's (polymorphic's c3) <family>_<collection>.
            (rules_dir / (f"{name}.yaml" if file == "c.yaml" else f"{name}_{file}")).write_text(text)
    return rules_dir


def harness(name: str, prefix: str, remold_client, direct_client, table: Table,
            capabilities: set[str]) -> Harness:
    remold_db, flat_db = db_names(prefix, name)
    return Harness(FAMILIES[name], remold_client[remold_db], direct_client[flat_db], table,
                   capabilities)


def cleanup(prefix: str, families: list[str], direct_client) -> None:
    for name in families:
        for db in db_names(prefix, name):
            direct_client.drop_database(db)
