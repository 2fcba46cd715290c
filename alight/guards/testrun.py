"""A project's tests run in a sandbox: outcomes per pytest node id, and the failures' messages."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from alight.guards.policy import REPORT_DIR, WORKSPACE, SandboxPolicy
from alight.guards.run import run_command

PLUGIN = Path(__file__).with_name("pytest_outcomes.py")


@dataclass
class TestRun:
    outcomes: dict[str, str]  # node id -> passed | failed | skipped
    messages: dict[str, str] = field(default_factory=dict)  # node id -> the failure's one-line message
    output: str = ""
    timed_out: bool = False
    coverage: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # file -> line -> node ids running it

    def passed(self, nodeids: Sequence[str]) -> int:
        return sum(self.outcomes.get(n) == "passed" for n in nodeids)


def run_tests(
    policy: SandboxPolicy,
    select: Sequence[str] | None = None,
    *,
    pythonpath: Sequence[str] = (),
    timeout_s: float | None = None,
    files: Sequence[str] = (),
    coverage: bool = False,
) -> TestRun:
    """pytest in a fresh sandbox over `policy.workspace`; only the `select`ed node ids when given.

    `files` (relative to the workspace) limits collection to those test files; `coverage` also records which
    tests execute each workspace line (`policy.python` then needs `coverage` installed).
    The project's own addopts are dropped (they name plugins such as pytest-cov that the sandbox lacks).
    """
    if not policy.python:
        raise ValueError("run_tests needs policy.python: an interpreter with pytest installed")
    name = uuid.uuid4().hex[:8]
    scratch = Path(policy.scratch)
    policy = replace(policy, read_only_at={**policy.read_only_at, f"{REPORT_DIR}/pytest_outcomes.py": str(PLUGIN)})
    argv = [policy.python, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-o", "addopts=", "-p", "pytest_outcomes"]
    argv += ["--outcomes-out", f"/tmp/outcomes-{name}.json"]
    if select is not None:
        (scratch / f"select-{name}.txt").write_text("\n".join(select) + "\n")
        argv += ["--outcomes-select", f"/tmp/select-{name}.txt"]
    if coverage:
        argv += ["--outcomes-coverage", f"/tmp/coverage-{name}.json"]
    if files:
        # Node ids stay relative to the workspace: with file arguments pytest would otherwise look for the
        # rootdir from those files' folder up, and the ids the caller selects by would not match.
        argv += ["--rootdir", WORKSPACE, *files]
    paths = [REPORT_DIR, *(f"/workspace/{p}".rstrip("/.") for p in pythonpath), "/workspace"]
    # No plugins from the interpreter's other packages (anyio's costs a third of a small suite's start-up);
    # the project's own conftest files still load.
    # A fixed hash seed: failure messages that print sets or dicts read the same on every run.
    env = {"PYTHONPATH": ":".join(paths), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONHASHSEED": "0"}
    result = run_command(policy, argv, env=env, timeout_s=timeout_s)
    report = scratch / f"outcomes-{name}.json"
    if not report.exists():
        return TestRun(outcomes={}, output=result.output, timed_out=result.timed_out)
    data = json.loads(report.read_text())
    report.unlink()
    lines = scratch / f"coverage-{name}.json"
    return TestRun(
        outcomes=data["outcomes"],
        messages=data["messages"],
        output=result.output,
        timed_out=result.timed_out,
        coverage=json.loads(lines.read_text()) if lines.exists() else {},
    )
