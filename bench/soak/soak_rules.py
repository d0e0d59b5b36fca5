"""The soak's rules (bench/soak/soak.sh): one rule per pattern, each on its own
collections of the database `soak`, taken from examples/rules/ and the
golden and e2e tests' rule files.

  write_rules(directory)          writes the six rule files
  write_reload(directory, n)      rewrites readings.yaml for the n-th reload:
                                  max_count alternates between 50 and 60, a
                                  real change of the rule set that changes no
                                  answer (a full bucket starts another)
  MAX_COUNTS                      the values max_count takes

The plain collection `soak.plain` has no rule: its traffic is forwarded as it is.
"""
from __future__ import annotations

import os
from pathlib import Path

DB = "soak"
MAX_COUNTS = (50, 60)

READINGS = """# bucket (examples/rules/readings.yaml); max_count alternates on reload
namespace: soak.readings
pattern: bucket
bucket:
  collection: readings_buckets
  meta: [sensor]
  time: at
  span: 1h
  summaries:
    temp: [sum, min, max]
  max_count: {max_count}
"""

RULES = {
    "products.yaml": """# attribute (examples/rules/products.yaml)
namespace: soak.products
pattern: attribute
attribute:
  array: specs
  key: k
  value: v
  except: [name, price, category]
""",
    "comments.yaml": """# computed (examples/rules/comments.yaml)
namespace: soak.comments
pattern: computed
computed:
  aggregates:
    - target: posts
      link: {from: postId, to: _id}
      fields:
        commentCount: count
        lastCommentAt: {max: createdAt}
""",
    "reviews.yaml": """# subset (tests/golden/cases/subset)
namespace: soak.reviews
pattern: subset
subset:
  parent: items
  link: itemId
  array: recentReviews
  sort: {at: -1}
  limit: 3
  fields: [author, rating, at]
""",
    "orders.yaml": """# extended reference (tests/golden/cases/extended_reference), synced
namespace: soak.orders
pattern: extended_reference
extended_reference:
  reference: customerId
  referenced: customers
  into: customer
  fields: [name, city]
  mode: synced
  missing: error
""",
    "users.yaml": """# versioned (tests/e2e/python/test_versioned.py, without the move)
namespace: soak.users
pattern: versioned
versioned:
  field: schemaVersion
  versions:
    - version: 1
    - version: 2
      upgrade:
        - compute: {field: firstName, expression: {part: {of: name, by: " ", index: 0}}}
        - compute: {field: lastName, expression: {part: {of: name, by: " ", index: -1}}}
        - remove: name
    - version: 3
      upgrade:
        - rename: {from: zip, to: postcode}
        - convert: {field: postcode, to: string}
""",
}


def _write(path: Path, text: str) -> None:
    """Whole or not at all: the directory watch never reads half a file."""
    tmp = path.with_name("." + path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_rules(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in RULES.items():
        _write(directory / name, text)
    write_reload(directory, 0)


def write_reload(directory: Path, n: int) -> int:
    """Writes readings.yaml with the n-th max_count; returns it."""
    max_count = MAX_COUNTS[n % len(MAX_COUNTS)]
    _write(directory / "readings.yaml", READINGS.format(max_count=max_count))
    return max_count
