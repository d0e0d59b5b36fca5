"""What to try with each rule of a rules directory, as `make run` prints it:
one shell command per rule (a pymongo one-liner) that does what the
application would and prints what remold made of it.

  tryouts(rules, proxy_uri, backend_uri, python) -> list[Tryout]
  sample_reading(b), sample_product(a), attribute_query(a),
  sample_post_filter(c), sample_comments(c)   the data the commands use

  python examples/tryouts.py RULES_DIR PROXY_URI BACKEND_URI PYTHON
      prints, per rule, `  # <rule> (<pattern>): <what it shows>` and the
      command under it; a rule these examples cannot show gets the comment
      line alone.

The names (databases, collections, fields) come from the rule files
(example_rules.py); the sample values are these commands' own.
tests/e2e/python/test_run_local.py runs the printed commands and checks
their effects.
"""
from __future__ import annotations

import datetime as dt
import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
import example_rules  # noqa: E402
from example_rules import AttributeNames, BucketNames, CountNames, Rule  # noqa: E402

READING_AT = dt.datetime(2024, 3, 4, 9, 15)
POST_ID = "p1"


@dataclass(frozen=True)
class Tryout:
    rule: str
    pattern: str
    says: str
    command: Optional[str]  # None: nothing to try for this rule here

    def lines(self) -> list[str]:
        head = f"  # {self.rule} ({self.pattern}): {self.says}"
        return [head] + ([f"  {self.command}"] if self.command else [])


def sample_reading(b: BucketNames) -> dict:
    reading = {field: "s1" for field in b.meta}
    reading[b.time] = READING_AT
    reading.update({field: 21.5 for field in b.summarised})
    return reading


def _attributes(a: AttributeNames) -> list[str]:
    if a.attributes:
        return a.attributes[:2]
    return [name for name in ("ram_gb", "screen_in") if name not in a.fixed]


def sample_product(a: AttributeNames) -> dict:
    return {"name": "laptop", **dict(zip(_attributes(a), (16, 14)))}


def attribute_query(a: AttributeNames) -> dict:
    return {_attributes(a)[0]: {"$gte": 16}}


def sample_post_filter(c: CountNames) -> dict:
    return {c.link_to: POST_ID}


def sample_comments(c: CountNames) -> list[dict]:
    def inputs(minute: int) -> dict:
        # Values of the source fields the rule's other fields read, by how they are read.
        value = {"sum": 1, "latest": "ann"}
        return {field: value.get(kind, READING_AT + dt.timedelta(minutes=minute))
                for field, kind in c.inputs.items()}
    return [{c.link_from: POST_ID, "text": text, **inputs(minute)}
            for minute, text in ((0, "first"), (1, "second"))]


def literal(value) -> str:
    """`value` as Python source, strings in double quotes (the command is single-quoted)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, dt.datetime):
        return f"datetime.datetime({value.year}, {value.month}, {value.day}, {value.hour}, {value.minute})"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def _collection(client: str, db: str, collection: str) -> str:
    return f"{client}[{literal(db)}][{literal(collection)}]"


# Each of these gives what the command shows and its Python code.
def _bucket(rule: Rule, proxy: str) -> tuple[str, str]:
    b = rule.bucket
    logical, buckets = _collection("c", b.db, b.collection), _collection("c", b.db, b.buckets)
    meta = {field: "s1" for field in b.meta}
    code = (f"import pymongo, datetime; c = pymongo.MongoClient({literal(proxy)}); "
            f"{logical}.insert_one({literal(sample_reading(b))}); "
            f"print({literal(b.db + '.' + b.buckets + ':')}, {buckets}.find_one({literal(meta)})); "
            f"print({literal(b.db + '.' + b.collection + ':')}, {logical}.find_one({literal(meta)}))")
    return (f"insert a reading into {b.db}.{b.collection}: it is stored in a bucket of "
            f"{b.db}.{b.buckets} and reads back as written", code)


def _attribute(rule: Rule, proxy: str, backend: str) -> tuple[str, str]:
    a = rule.attribute
    code = (f"import pymongo; c = pymongo.MongoClient({literal(proxy)}); "
            f"b = pymongo.MongoClient({literal(backend)}); "
            f"{_collection('c', a.db, a.collection)}.insert_one({literal(sample_product(a))}); "
            f"print(\"found:\", {_collection('c', a.db, a.collection)}.find_one({literal(attribute_query(a))})); "
            f"print(\"stored on the backend:\", {_collection('b', a.db, a.collection)}.find_one())")
    return (f"insert a product into {a.db}.{a.collection} and find it by an attribute; "
            f"the backend stores its attributes as {a.array}: [{{{a.key}, {a.value}}}, ...]", code)


def _computed(rule: Rule, proxy: str) -> tuple[str, str]:
    c = rule.computed
    target = _collection("c", c.target_db, c.target)
    source = _collection("c", c.db, c.collection)
    post = sample_post_filter(c)
    code = (f"import pymongo, datetime; c = pymongo.MongoClient({literal(proxy)}); "
            f"{target}.update_one({literal(post)}, {{\"$setOnInsert\": {{\"title\": \"Hello\"}}}}, upsert=True); "
            f"{source}.insert_many({literal(sample_comments(c))}); "
            f"print({target}.find_one({literal(post)}), \"| comments counted:\", "
            f"{source}.count_documents({literal({c.link_from: POST_ID})}))")
    return (f"insert two comments on a post into {c.db}.{c.collection}: the post in "
            f"{c.target_db}.{c.target} holds their count in {c.count_field}", code)


def tryouts(rules: list[Rule], proxy_uri: str, backend_uri: str, python: str) -> list[Tryout]:
    found = []
    for rule in rules:
        if rule.bucket:
            says, code = _bucket(rule, proxy_uri)
        elif rule.attribute:
            says, code = _attribute(rule, proxy_uri, backend_uri)
        elif rule.computed:
            says, code = _computed(rule, proxy_uri)
        else:
            found.append(Tryout(rule.name, rule.pattern, f"{rule.namespace}; nothing to try here "
                                "for this rule (see docs/rules.md)", None))
            continue
        found.append(Tryout(rule.name, rule.pattern, says, f"{shlex.quote(python)} -c {shlex.quote(code)}"))
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 5:
        print("usage: tryouts.py RULES_DIR PROXY_URI BACKEND_URI PYTHON", file=sys.stderr)
        return 2
    rules_dir, proxy, backend, python = argv[1:]
    for tryout in tryouts(example_rules.load(rules_dir), proxy, backend, python):
        print("\n".join(tryout.lines()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
