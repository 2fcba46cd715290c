"""Task files as reproducible bytes: JSONL (gzip with no timestamp or name), and the check of a regenerated set.

A project's tasks are the first ones its seeded candidate order keeps, so a run asking K of a project must
give exactly the first K shipped tasks of it: that is what `check` compares.
Hashes are over the uncompressed JSONL, so they do not depend on the zlib build that compressed it.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path


def write(path: Path, text: str) -> None:
    """`text` to `path`, gzipped when it ends in .gz: level 9, mtime 0, no file name, so equal text gives equal bytes."""
    data = text.encode()
    if path.suffix != ".gz":
        path.write_bytes(data)
        return
    with path.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as out:
        out.write(data)


def read(path: Path) -> str:
    return (gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()).decode()


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def by_project(text: str) -> dict[str, list[str]]:
    """The file's lines grouped by their task's project, each group in file order."""
    groups: dict[str, list[str]] = {}
    for line in text.splitlines(keepends=True):
        groups.setdefault(json.loads(line)["project"], []).append(line)
    return groups


def check(generated: str, shipped: str, counts: dict[str, int]) -> tuple[bool, str, str]:
    """(equal, sha256 of `generated`, sha256 of the shipped tasks it should equal).

    Those are, for each project of `counts` in order, the shipped file's first `counts[project]` tasks of it.
    """
    ship = by_project(shipped)
    expected = "".join(line for name, count in counts.items() for line in ship.get(name, [])[:count])
    return generated == expected, digest(generated), digest(expected)
