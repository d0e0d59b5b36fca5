#!/usr/bin/env python3
"""The relative links of remold's Markdown files, checked.

For every tracked *.md file (`git ls-files`, or a walk of the tree
outside git; node_modules, virtual environments, build and third-party
folders left out), every link `[text](path)` or `[text](path#anchor)`
outside code must name an existing file or folder, relative to the file
(or to the repository's root when it starts with `/`), and an anchor must
be a heading of the target Markdown file, slugged as GitHub slugs them
(lowercase, spaces to '-', punctuation but '-' and '_' dropped, a
repeated heading's slug suffixed -1, -2, ...). `#anchor` alone names a
heading of the file itself. External links (a scheme such as http:,
https:, mailto:) are skipped. Each broken link is printed as FILE:LINE;
the exit status is 1 if there is any. Run by `make test` (ctest
check_doc_links).
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

SKIPPED_FOLDERS = {"node_modules", ".venv", ".venv-latest", "venv", "build", "build-fuzz",
                   "third_party", "third-party", "vendor", ".git"}

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"(`+)(.+?)\1", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.I)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def markdown_files(root: Path) -> list[Path]:
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "*.md"],
                             check=True, capture_output=True).stdout.decode()
        paths = [root / p for p in out.split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        paths = sorted(root.rglob("*.md"))
    return [p for p in paths
            if not SKIPPED_FOLDERS & set(p.relative_to(root).parts[:-1]) and p.is_file()]


def without_code(text: str) -> str:
    """The text with fenced blocks and code spans blanked, lines kept in place."""
    lines, fenced = [], None
    for line in text.split("\n"):
        mark = FENCE.match(line)
        if fenced:
            if mark and mark.group(1) == fenced:
                fenced = None
            lines.append("")
        elif mark:
            fenced = mark.group(1)
            lines.append("")
        else:
            lines.append(line)
    return INLINE_CODE.sub(lambda m: re.sub(r"[^\n]", "x", m.group(0)), "\n".join(lines))


def slug(heading: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path, cache: dict[Path, set[str]]) -> set[str]:
    if path not in cache:
        found, seen, fenced = set(), {}, None
        for line in path.read_text(errors="replace").split("\n"):
            mark = FENCE.match(line)
            if fenced:
                fenced = None if mark and mark.group(1) == fenced else fenced
                continue
            if mark:
                fenced = mark.group(1)
                continue
            found.update(HTML_ANCHOR.findall(line))
            heading = HEADING.match(line)
            if heading:
                base = slug(heading.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else f"{base}-{n}")
        cache[path] = found
    return cache[path]


def broken_links(root: Path, path: Path, cache: dict[Path, set[str]]):
    text = without_code(path.read_text(errors="replace"))
    for match in LINK.finditer(text):
        target = match.group(1)
        if not target or SCHEME.match(target):
            continue
        line = text.count("\n", 0, match.start(1)) + 1
        file_part, _, anchor = target.partition("#")
        file_part = unquote(file_part)
        if not file_part:
            dest = path
        elif file_part.startswith("/"):
            dest = root / file_part.lstrip("/")
        else:
            dest = path.parent / file_part
        if not dest.exists():
            yield line, target, "no such file or folder"
        elif anchor and dest.is_file() and dest.suffix == ".md" and unquote(anchor) not in anchors(dest, cache):
            yield line, target, f"no heading '#{anchor}' in {dest.resolve().relative_to(root).as_posix()}"


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    cache: dict[Path, set[str]] = {}
    files = markdown_files(root)
    broken = 0
    for path in files:
        for line, target, why in broken_links(root, path, cache):
            print(f"{path.relative_to(root).as_posix()}:{line}: ({target}): {why}", file=sys.stderr)
            broken += 1
    if broken:
        print(f"check-doc-links: {broken} broken link(s) in {len(files)} Markdown files", file=sys.stderr)
        return 1
    print(f"check-doc-links: every relative link of {len(files)} Markdown files resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
