"""Grading runner mounted read-only into the sandbox: pytest in an interpreter the workspace's files cannot reach.

`python -s -P /opt/alight/pytest_runner.py [--oracle SETTINGS] ROOT[:ROOT...] -- PYTEST_ARGS...`

Standalone on purpose (no alight imports), like the outcomes plugin beside it. `-P` keeps the script's folder
and the working directory off sys.path and `-s` the user site; the environment is the grader's own (bwrap
--clearenv), so no PYTHONPATH or PYTHONSTARTUP reaches the interpreter. The task's package roots are
appended here, after the standard library and site-packages, so a workspace file can never take the place
of a module the interpreter already has, and a standard-library name the interpreter lacks (`_winapi` on
Linux, which subprocess tries) is looked up on the interpreter's own paths only, so it stays missing rather
than coming from the workspace. pytest is imported before the roots are added. The outcomes plugin is loaded
from this folder by file path and handed to pytest as an object: no module name the workspace could shadow
is ever looked up for it. With --oracle, the oracle guard beside it (pytest_oracle.py) is installed first of all,
before pytest or any project code is imported, and its record is closed once pytest has finished. pytest's
PYTEST_CURRENT_TEST names the running test (a parametrized id spells out its arguments and expected value): here
it says only which phase runs, so the environment holds nothing of the tests.
"""

from __future__ import annotations

import builtins
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
from collections.abc import Sequence
from pathlib import Path

PLUGIN = Path(__file__).with_name("pytest_outcomes.py")
ORACLE = Path(__file__).with_name("pytest_oracle.py")


class StandardLibraryOnly(importlib.abc.MetaPathFinder):
    """Finds standard-library names on the interpreter's own paths only; absent there, they are absent."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: object = None):
        if path is not None or fullname not in sys.stdlib_module_names or fullname in sys.builtin_module_names:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, self.paths)
        if spec is None:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return spec


def _load(name: str, path: Path, own_builtins: bool = False) -> types.ModuleType:
    """A module of this folder by file path, never entered in sys.modules under a name; with `own_builtins`, its
    functions look names up in a copy of the builtins that patching `builtins` later leaves alone."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    if own_builtins:
        module.__dict__["__builtins__"] = dict(vars(builtins))
    spec.loader.exec_module(module)
    return module


def _withhold_current_test() -> None:
    import _pytest.runner

    def update(item: object, when: str | None) -> None:
        if when is None:
            os.environ.pop("PYTEST_CURRENT_TEST", None)
        else:
            os.environ["PYTEST_CURRENT_TEST"] = f"(withheld by the grader) ({when})"

    _pytest.runner._update_current_test_var = update  # pyright: ignore[reportPrivateUsage]


def main() -> int:
    if "--" not in sys.argv:
        print("usage: pytest_runner.py [--oracle SETTINGS] ROOT[:ROOT...] -- PYTEST_ARGS...", file=sys.stderr)
        return 4
    split = sys.argv.index("--")
    before = sys.argv[1:split]
    oracle = before[1] if before[:1] == ["--oracle"] else None
    roots = [root for arg in before[2 if oracle else 0 :] for root in arg.split(":") if root]
    args = sys.argv[split + 1 :]
    del sys.argv[1:]  # the code under test never sees the grader's options (where the reports go)
    finish = _load("alight_pytest_oracle", ORACLE, own_builtins=True).install(oracle) if oracle else None
    plugin = _load("alight_pytest_outcomes", PLUGIN)
    import pytest

    if oracle:
        _withhold_current_test()

    # Before the path-based finder (after the built-in and frozen ones, which need no path).
    finders: list[object] = list(sys.meta_path)
    at = finders.index(importlib.machinery.PathFinder) if importlib.machinery.PathFinder in finders else len(finders)
    sys.meta_path.insert(at, StandardLibraryOnly(list(sys.path)))
    sys.path.extend(root for root in roots if root not in sys.path)
    status = int(pytest.main(args, plugins=[plugin]))
    if finish is not None:
        finish()
    return status


if __name__ == "__main__":
    sys.exit(main())
