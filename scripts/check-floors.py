#!/usr/bin/env python3
"""The floors of remold's source tree, checked over its #include lines.

Each source file stands on a floor; a file may include files of its own
floor and of floors below it, never above. From the bottom:

  common     BSON and text helpers every part uses
  wire       proxy/wire/: the pure codec (framing, OP_MSG, compression)
  routing    proxy/routing/: the backend's members and the routes to them
  rules      the pattern-blind rule kit: namespaces, YAML helpers
  rewrite    the pattern-blind rewrite kit: commands, plans, BSON compare
  patterns   one module per pattern, each seeing only its own rule
  ruleset    the list of patterns, the rule set and its loader
  engine     the list-aware rewrite engine: catalog, references, stacks
  proxy      sessions, backend links, TLS, observability
  config     the configuration of `remold serve`, shared with the tools
  tools      migrate, reconcile, the backend client
  app        the `remold` binary

A folder is a floor, proxy/wire/ and proxy/routing/ each one of their own
(FLOOR_OF_FILE would place a file that has not moved to its floor yet; it
is empty). Includes that still run up a floor are listed
in STILL_UPWARD, with the folder they are to leave; the check fails on
any other upward include, and on a listed one that is gone (so the list
stays true as the floors are built). Run by `make test` (ctest
check_floors); `--graph` prints the folder graph and its upward arrows.
"""
from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

FLOORS = ["common", "wire", "routing", "rules", "rewrite", "patterns", "ruleset", "engine", "proxy", "config", "tools", "app"]
LEVEL = {name: i for i, name in enumerate(FLOORS)}
SOURCE_FOLDERS = ["common", "rules", "rewrite", "patterns", "ruleset", "engine", "proxy", "config", "tools", "app"]

# Files whose floor is not their folder's: none since the list-aware parts
# of rules/ and rewrite/ moved to ruleset/ and engine/. A file moved in
# steps is placed here until it reaches its folder.
FLOOR_OF_FILE: dict[str, str] = {}

# Upward includes not yet removed: (including file, included file).
STILL_UPWARD: set[tuple[str, str]] = set()

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


# Sub-folders that are floors of their own.
SUB_FLOORS = {"proxy/wire/": "wire", "proxy/routing/": "routing"}


def floor_of(path: str) -> str | None:
    if path in FLOOR_OF_FILE:
        return FLOOR_OF_FILE[path]
    for folder, floor in SUB_FLOORS.items():
        if path.startswith(folder):
            return floor
    top = path.split("/", 1)[0]
    return top if top in LEVEL else None


def includes(root: Path):
    """(including file, included file) for every project include."""
    for folder in SOURCE_FOLDERS:
        base = root / folder
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            if path.suffix not in (".h", ".cc"):
                continue
            rel = path.relative_to(root).as_posix()
            for target in INCLUDE.findall(path.read_text(errors="replace")):
                if floor_of(target) is not None and (root / target).exists():
                    yield rel, target


def main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parent.parent
    upward, arrows = set(), Counter()
    for source, target in includes(root):
        low, high = floor_of(source), floor_of(target)
        if low != high:
            arrows[(low, high)] += 1
        if LEVEL[high] > LEVEL[low]:
            upward.add((source, target))
    if "--graph" in argv:
        print("floor -> floor: includes (upward: the included file's floor is above the including file's)")
        for (a, b), n in sorted(arrows.items()):
            print(f"  {a:9} -> {b:9} {n:4}")
        print(f"upward includes: {len(upward)}")
        for source, target in sorted(upward):
            print(f"  {source} ({floor_of(source)}) -> {target} ({floor_of(target)})")
    new = sorted(upward - STILL_UPWARD)
    gone = sorted(STILL_UPWARD - upward)
    for source, target in new:
        print(f"check-floors: {source} ({floor_of(source)}) includes {target} ({floor_of(target)}), "
              f"a floor above it", file=sys.stderr)
    for source, target in gone:
        print(f"check-floors: {source} no longer includes {target}: take it out of STILL_UPWARD",
              file=sys.stderr)
    if not new and not gone:
        print(f"check-floors: no include runs up a floor"
              + (f" besides the {len(STILL_UPWARD)} still listed" if STILL_UPWARD else ""))
    return 1 if new or gone else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
