"""Grading runner mounted read-only into the sandbox: pytest in an interpreter the workspace's files cannot reach.

`python -s -P /opt/alight/pytest_runner.py ROOT[:ROOT...] -- PYTEST_ARGS...`

Standalone on purpose (no alight imports), like the outcomes plugin beside it. `-P` keeps the script's folder
and the working directory off sys.path and `-s` the user site; the environment is the grader's own (bwrap
--clearenv), so no PYTHONPATH or PYTHONSTARTUP reaches the interpreter. The task's package roots are
appended here, after the standard library and site-packages, so a workspace file can never take the place
of a module the interpreter already has. The outcomes plugin is loaded from this folder by file path and
handed to pytest as an object: no module name the workspace could shadow is ever looked up for it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

PLUGIN = Path(__file__).with_name("pytest_outcomes.py")


def main() -> int:
    if "--" not in sys.argv:
        print("usage: pytest_runner.py ROOT[:ROOT...] -- PYTEST_ARGS...", file=sys.stderr)
        return 4
    split = sys.argv.index("--")
    roots = [root for arg in sys.argv[1:split] for root in arg.split(":") if root]
    args = sys.argv[split + 1 :]
    del sys.argv[1:]  # the code under test never sees the grader's options (where the reports go)
    sys.path.extend(root for root in roots if root not in sys.path)
    spec = importlib.util.spec_from_file_location("alight_pytest_outcomes", PLUGIN)
    assert spec is not None and spec.loader is not None
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    import pytest

    return int(pytest.main(args, plugins=[plugin]))


if __name__ == "__main__":
    sys.exit(main())
