"""Task-source projects: pinned pure-Python PyPI sdists that ship their tests, fetched and unpacked once.

A task names its project; its buggy checkout is the pristine unpacked sdist with the task's rewrite applied.
The first use fetches them, or `bash scripts/setup.sh --coding` ahead (`python examples/coding/sources.py`), so
generation and grading never need the network afterwards.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"


@dataclass(frozen=True)
class Project:
    name: str
    version: str
    sources: tuple[str, ...]  # the files mutations are drawn from, relative to the checkout
    pythonpath: tuple[str, ...] = (".",)  # where the package imports from (src layouts: "src")

    @property
    def folder(self) -> str:
        return f"{self.name}-{self.version}"


PROJECTS = {
    p.name: p
    for p in (
        Project("inflection", "0.5.1", ("inflection/__init__.py",)),
        Project("parse", "1.22.4", ("parse/__init__.py",)),
        Project(
            "cachetools",
            "8.0.2",
            ("src/cachetools/__init__.py", "src/cachetools/keys.py", "src/cachetools/func.py"),
            ("src",),
        ),
        Project("toolz", "1.2.0", ("toolz/itertoolz.py", "toolz/dicttoolz.py", "toolz/functoolz.py")),
    )
}


def project(name: str) -> Project:
    if name not in PROJECTS:
        raise ValueError(f"unknown project {name!r}; known: {sorted(PROJECTS)}")
    return PROJECTS[name]


def _sdists(folder: Path, p: Project) -> list[Path]:
    stem = f"{re.sub(r'[-_.]+', '_', p.name).lower()}-{p.version}.tar.gz"
    return [
        f
        for f in folder.glob("*.tar.gz")
        if re.sub(r"^[^-]+", lambda m: m.group(0).replace("-", "_"), f.name.lower()) == stem
    ]


def download(projects: list[Project], sdists: Path) -> None:
    """Download the sdists of those of `projects` not yet in `sdists`, with one pip run (each costs a start-up)."""
    sdists.mkdir(parents=True, exist_ok=True)
    pins = [f"{p.name}=={p.version}" for p in projects if not _sdists(sdists, p)]
    if pins:
        pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", "-d", str(sdists)]
        subprocess.run([*pip, *pins], check=True)


def fetch(p: Project, cache: Path = CACHE) -> Path:
    """The pristine checkout of `p` (unpacked sdist), downloading the sdist with pip the first time."""
    checkout = cache / "checkouts" / p.folder
    if checkout.is_dir():
        return checkout
    sdists = cache / "sdists"
    download([p], sdists)
    found = _sdists(sdists, p)
    if not found:
        raise RuntimeError(f"pip downloaded no sdist for {p.name}=={p.version} into {sdists}")
    staging = cache / "checkouts" / f".{p.folder}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    with tarfile.open(found[0]) as archive:
        archive.extractall(staging, filter="data")
    (inner,) = staging.iterdir()  # sdists hold one top folder
    inner.rename(checkout)
    staging.rmdir()
    return checkout


def apply_rewrite(checkout: Path, rewrite: dict[str, Any]) -> None:
    """Apply a task's rewrite (replace lines [start, end) of one file, checking they are what it expects)."""
    path = checkout / rewrite["file"]
    lines = path.read_text().splitlines(keepends=True)
    start, end = rewrite["start"], rewrite["end"]
    if "".join(lines[start:end]) != rewrite["before"]:
        raise ValueError(f"{rewrite['file']} lines {start + 1}-{end} differ from the task's; wrong project version?")
    lines[start:end] = [rewrite["after"]]
    path.write_text("".join(lines))


def buggy_checkout(task: dict[str, Any], dest: Path, cache: Path = CACHE) -> Path:
    """A copy of the task's project with its bug in place, at `dest`."""
    shutil.copytree(fetch(project(task["project"]), cache), dest)
    apply_rewrite(dest, task["rewrite"])
    return dest


if __name__ == "__main__":
    wanted = [project(name) for name in sys.argv[1:] or PROJECTS]
    download(wanted, CACHE / "sdists")
    for p in wanted:
        print(fetch(p))
