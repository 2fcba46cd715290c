"""Grading runner mounted read-only into the sandbox: pytest in an interpreter the workspace's files cannot reach.

`python -s -P /opt/alight/pytest_runner.py ROOT[:ROOT...] -- PYTEST_ARGS...`

Standalone on purpose (no alight imports), like the outcomes plugin beside it. `-P` keeps the script's folder
and the working directory off sys.path and `-s` the user site; the environment is the grader's own (bwrap
--clearenv), so no PYTHONPATH or PYTHONSTARTUP reaches the interpreter. The task's package roots are
appended here, after the standard library and site-packages, so a workspace file can never take the place
of a module the interpreter already has, and a standard-library name the interpreter lacks (`_winapi` on
Linux, which subprocess tries) is looked up on the interpreter's own paths only, so it stays missing rather
than coming from the workspace. pytest is imported before the roots are added. The outcomes plugin is loaded
from this folder by file path and handed to pytest as an object: no module name the workspace could shadow
is ever looked up for it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path

PLUGIN = Path(__file__).with_name("pytest_outcomes.py")


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


def main() -> int:
    if "--" not in sys.argv:
        print("usage: pytest_runner.py ROOT[:ROOT...] -- PYTEST_ARGS...", file=sys.stderr)
        return 4
    split = sys.argv.index("--")
    roots = [root for arg in sys.argv[1:split] for root in arg.split(":") if root]
    args = sys.argv[split + 1 :]
    del sys.argv[1:]  # the code under test never sees the grader's options (where the reports go)
    spec = importlib.util.spec_from_file_location("alight_pytest_outcomes", PLUGIN)
    assert spec is not None and spec.loader is not None
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    import pytest

    # Before the path-based finder (after the built-in and frozen ones, which need no path).
    finders: list[object] = list(sys.meta_path)
    at = finders.index(importlib.machinery.PathFinder) if importlib.machinery.PathFinder in finders else len(finders)
    sys.meta_path.insert(at, StandardLibraryOnly(list(sys.path)))
    sys.path.extend(root for root in roots if root not in sys.path)
    return int(pytest.main(args, plugins=[plugin]))


if __name__ == "__main__":
    sys.exit(main())
