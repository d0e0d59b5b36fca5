"""Canonical forms of BSON values and command outcomes, so that what a plain
collection leaves unspecified does not count as a difference: the order of
documents without a sort, of distinct values, of collections and indexes.
Types are exact (1, 1.0, Int64(1) and True differ); doubles compare to 12
significant digits. Field order is compared
separately (``field_order_differs``) and reported as its own difference
class. Where docs/what-works.md says a rule gives a document's fields in another
order than written (as MongoDB's time-series collections do), the runner
leaves field order out for that rule.
"""
from __future__ import annotations

import datetime as dt
from typing import Any

from bson import json_util
from bson.regex import Regex


def canon(value: Any, loose: frozenset = frozenset()):
    """Hashable, type-exact, field-order-free form; numbers under a field named
    in ``loose`` compare by value (maintained values whose int/long/double
    type depends on the history of increments)."""
    if isinstance(value, dict):
        return ("doc", tuple(sorted((k, canon_field(k, v, loose)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return ("arr", tuple(canon(v, loose) for v in value))
    if isinstance(value, Regex):
        return ("Regex", value.pattern, value.flags)
    if isinstance(value, float):
        # 12 significant digits: a sum MongoDB adds in no specified order
        # ($group over unwound buckets, say) may differ in the last bits.
        return ("float", "nan") if value != value else ("float", float(f"{value:.12g}"))
    if isinstance(value, dt.datetime):
        return ("datetime", value.replace(tzinfo=None))
    return (type(value).__name__, value)


def canon_field(key: str, value: Any, loose: frozenset):
    if key in loose and isinstance(value, (int, float)) and not isinstance(value, bool):
        return ("num", "nan") if value != value else ("num", round(float(value), 9))
    return canon(value, loose)


def ordered(value: Any):
    """Like canon but field order matters (for the field-order check)."""
    if isinstance(value, dict):
        return ("doc", tuple((k, ordered(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return ("arr", tuple(ordered(v) for v in value))
    return repr(value)


def field_order_differs(a: Any, b: Any) -> bool:
    return ordered(a) != ordered(b)



def unordered_docs(docs: list, loose: frozenset = frozenset()) -> list:
    return sorted((canon(d, loose) for d in docs), key=repr)


def show(value: Any, limit: int = 600) -> str:
    text = json_util.dumps(value)
    return text if len(text) <= limit else text[:limit] + "..."
