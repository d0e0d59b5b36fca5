"""The rules of a rules directory (examples/rules) read for the names that
`make run`'s try-out lines and `make demo` use.

  load(directory) -> list[Rule]   one per *.yaml file, in file-name order
  Rule.name                       the file's stem, as remold names the rule
  Rule.bucket / .attribute / .computed
                                  the names of a rule of that pattern (None otherwise)
  by_pattern(rules, pattern)      the one rule of that pattern (ValueError if none or several)

Names the file leaves out take remold's documented defaults (docs/patterns/bucket.md and attribute.md:
bucket_time `start`, measurements `m`, array `specs`, key `k`, value `v`).
remold validates rules; this reads them only as far as the examples need and
raises ValueError, naming the file, for one it cannot read that far.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

import yaml


@dataclass(frozen=True)
class BucketNames:
    db: str
    collection: str       # the logical collection the application writes
    buckets: str          # the bucket collection, same database
    meta: list[str]
    time: str
    bucket_time: str
    measurements: str
    summarised: list[str]  # fields with summaries, in the file's order


@dataclass(frozen=True)
class AttributeNames:
    db: str
    collection: str
    array: str
    key: str
    value: str
    fixed: Optional[list[str]]       # `except`: every other field but _id is an attribute
    attributes: Optional[list[str]]  # `fields`: only these are attributes


@dataclass(frozen=True)
class CountNames:
    """A computed rule's first aggregate that keeps a count."""
    db: str
    collection: str      # the source the application writes
    target_db: str
    target: str
    link_from: str
    link_to: str
    count_field: str
    inputs: dict[str, str]  # other maintained fields' source fields: {source field: "sum"|"max"|...}
    maxima: dict[str, str]  # {max: F} fields: {target field: F}


@dataclass(frozen=True)
class Rule:
    name: str
    path: Path
    pattern: str
    namespace: str
    bucket: Optional[BucketNames] = None
    attribute: Optional[AttributeNames] = None
    computed: Optional[CountNames] = None


def load(directory: Path | str) -> list[Rule]:
    return [_read(path) for path in sorted(Path(directory).glob("*.yaml"))]


def by_pattern(rules: list[Rule], pattern: str) -> Rule:
    found = [r for r in rules if r.pattern == pattern and getattr(r, pattern) is not None]
    if len(found) != 1:
        raise ValueError(f"expected one {pattern} rule, found {len(found)}: {[r.name for r in found]}")
    return found[0]


def _read(path: Path) -> Rule:
    try:
        doc = yaml.safe_load(path.read_text())
        namespace, pattern = doc["namespace"], doc["pattern"]
        db, collection = namespace.split(".", 1)
        body = doc.get(pattern) or {}
        rule = Rule(path.stem, path, pattern, namespace)
        if pattern == "bucket":
            return replace(rule, bucket=_bucket(db, collection, body))
        if pattern == "attribute":
            return replace(rule, attribute=_attribute(db, collection, body))
        if pattern == "computed":
            return replace(rule, computed=_computed(db, collection, body))
        return rule
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"{path}: cannot read the rule's names: {exc!r}") from exc


def _bucket(db: str, collection: str, b: dict) -> BucketNames:
    return BucketNames(db, collection, b["collection"], list(b.get("meta") or []), b["time"],
                       b.get("bucket_time", "start"), b.get("measurements", "m"),
                       list((b.get("summaries") or {}).keys()))


def _attribute(db: str, collection: str, a: dict) -> AttributeNames:
    return AttributeNames(db, collection, a.get("array", "specs"), a.get("key", "k"), a.get("value", "v"),
                          a.get("except"), a.get("fields"))


def _computed(db: str, collection: str, c: dict) -> Optional[CountNames]:
    for aggregate in c.get("aggregates") or []:
        fields = aggregate.get("fields") or {}
        counts = [name for name, spec in fields.items() if spec == "count"]
        if not counts:
            continue
        link = aggregate["link"]
        link_from, link_to = (link, "_id") if isinstance(link, str) else (link["from"], link["to"])
        target_db, target = aggregate["target"].split(".", 1) if "." in aggregate["target"] \
            else (db, aggregate["target"])
        inputs, maxima = {}, {}
        for name, spec in fields.items():
            if isinstance(spec, dict):
                for kind, source in spec.items():
                    if isinstance(source, str):
                        inputs.setdefault(source, kind)
                if isinstance(spec.get("max"), str):
                    maxima[name] = spec["max"]
        return CountNames(db, collection, target_db, target, link_from, link_to, counts[0], inputs, maxima)
    return None
