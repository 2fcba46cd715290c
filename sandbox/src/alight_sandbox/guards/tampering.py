"""The `runner_tampering` gate over the workspace diff: files that could take over the grading interpreter or pytest.

The principle: the agent's files may change what the project's code does, never what runs the tests. So a
new or changed file is a violation when

- it is importable under a top-level name the grading interpreter imports from its own paths (the standard
  library, site-packages: pytest, _pytest, pluggy, ...; the grader's own modules; sitecustomize and
  usercustomize) or that the tests import a module of their own folder by (`tests/expected.py`: `expected`).
  "Importable as" is judged relative to the first ancestor folder that is not a package (the
  folder pytest puts on sys.path for a module there), to each package root the task declares, and to the
  workspace root. Sources, sourceless .pyc files, extension modules and package folders all count, and a
  deleted __init__.py that turns an unchanged file into a top-level module counts as well;
- it is a `*.pth` file (site's start-up hook), or a `conftest.py` (a pytest plugin), anywhere;
- it is compiled code Python would import (a sourceless .pyc, an extension module): `calc.cpython-311-...so`
  takes the place of `calc.py` itself, and nothing can review what it does;
- it changes pytest's settings (pytest.ini, .pytest.ini, tox.ini [pytest], setup.cfg [tool:pytest],
  pyproject.toml [tool.pytest...]) in any folder.
"""

from __future__ import annotations

import configparser
import tomllib
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import PurePosixPath

from alight_sandbox.guards.interpreter import module_path
from alight_sandbox.guards.rules import RUNNER_TAMPERING, Violation, test_folders

STARTUP_HOOKS = {"sitecustomize", "usercustomize"}


def _packages(files: Iterable[str]) -> set[str]:
    """Folders holding an __init__ module (source, .pyc or extension): regular packages."""
    found: set[str] = set()
    for rel in files:
        parts = module_path(rel)
        if parts is not None and rel.rpartition("/")[2].startswith("__init__."):
            found.add("/".join(parts))
    return found


def _inserted_depth(rel: str, packages: Collection[str]) -> int:
    """How many folders deep the first ancestor of `rel` that is not a package lies: what pytest's rootdir
    insertion puts on sys.path for a test module or conftest.py there."""
    folders = rel.split("/")[:-1]
    depth = len(folders)
    while depth > 0 and "/".join(folders[:depth]) in packages:
        depth -= 1
    return depth


def importable_as(rel: str, packages: Collection[str], roots: Sequence[str]) -> set[str]:
    """The dotted names `rel` can be imported under from the folders that can be on the grader's sys.path."""
    parts = module_path(rel)
    if not parts:
        return set()
    depth = _inserted_depth(rel, packages)
    names = {".".join(parts[depth:])} if parts[depth:] else set()
    for root in {"", *(r.strip("/") for r in roots)}:
        root = "" if root in ("", ".") else root
        if not root or rel.startswith(root + "/"):
            tail = parts[len(root.split("/")) if root else 0 :]
            if tail:
                names.add(".".join(tail))
    return names


def own_test_modules(files: Iterable[str]) -> set[str]:
    """Top-level names the tests import their folder's own modules by: pytest puts a test folder that is not a
    package on sys.path, after the package roots, so `tests/expected.py` is `expected`, and an `expected.py` in a
    package root would be imported in its place, restored test folder or not."""
    files = list(files)
    packages = _packages(files)
    names: set[str] = set()
    for rel in files:
        parts, depth = module_path(rel), _inserted_depth(rel, packages)
        inserted = "/".join(rel.split("/")[:depth])
        if parts and len(parts) > depth and any(inserted.startswith(f) for f in test_folders([rel])):
            names.add(parts[depth])
    return names


def pytest_settings(rel: str, text: str | None) -> object:
    """What a file tells pytest, comparable between two versions; None when it is not a pytest settings file."""
    name = PurePosixPath(rel).name
    if text is None:
        return None if name not in ("pytest.ini", ".pytest.ini") else "absent"
    if name in ("pytest.ini", ".pytest.ini"):
        return text
    if name == "pyproject.toml":
        try:
            tool = tomllib.loads(text).get("tool", {})
        except tomllib.TOMLDecodeError:
            return {"unparseable": text}
        return tool.get("pytest") if isinstance(tool, dict) else None  # pyright: ignore[reportUnknownMemberType]
    if name in ("tox.ini", "setup.cfg"):
        parser = configparser.RawConfigParser()
        try:
            parser.read_string(text)
        except configparser.Error:
            return {"unparseable": text}
        section = "pytest" if name == "tox.ini" else "tool:pytest"
        return dict(parser.items(section)) if parser.has_section(section) else None
    return None


def tampering_violations(
    before: Mapping[str, str | None],
    after: Mapping[str, str | None],
    changed: Iterable[str],
    modules: Collection[str],
    roots: Sequence[str] = (".",),
) -> list[Violation]:
    """`runner_tampering` for each changed file that reaches for the runner (before/after: every file's text)."""
    changed = set(changed)
    found: list[Violation] = []
    packages_before, packages_after = _packages(before), _packages(after)
    test_helpers = own_test_modules(before)
    for rel in sorted(changed | after.keys()):
        name = PurePosixPath(rel).name
        if rel in changed:
            if name.endswith(".pth"):
                found.append(Violation(RUNNER_TAMPERING, f"{rel}: a .pth file runs code when site starts Python"))
            if name == "conftest.py":
                found.append(Violation(RUNNER_TAMPERING, f"{rel}: a conftest.py is a pytest plugin"))
            if rel in after and not name.endswith(".py") and module_path(rel) is not None:
                found.append(
                    Violation(RUNNER_TAMPERING, f"{rel}: compiled code Python can import, which no review can read")
                )
            if pytest_settings(rel, before.get(rel)) != pytest_settings(rel, after.get(rel)):
                found.append(Violation(RUNNER_TAMPERING, f"{rel}: pytest's settings changed"))
        if rel not in after:
            continue
        names = importable_as(rel, packages_after, roots)
        if rel in changed or names != (importable_as(rel, packages_before, roots) if rel in before else set()):
            tops = sorted({n.split(".")[0] for n in names} & set(modules))
            stem = (module_path(rel) or [""])[-1]
            if stem in STARTUP_HOOKS and stem not in tops:
                tops.append(stem)
            # A test folder's own files are restored for grading; anywhere else one would take a helper's place.
            helpers = sorted({n.split(".")[0] for n in names} & test_helpers) if not test_folders([rel]) else []
            what = "added" if rel not in before else "changed" if rel in changed else "made top-level"
            shadows = f"{rel} ({what}) is importable as {', '.join(sorted(names))}: shadows"
            if tops:
                which = "which the grading interpreter imports from its own paths"
                found.append(Violation(RUNNER_TAMPERING, f"{shadows} {', '.join(tops)}, {which}"))
            if helpers:
                which = "which the tests import from their own folder"
                found.append(Violation(RUNNER_TAMPERING, f"{shadows} {', '.join(helpers)}, {which}"))
    return found
