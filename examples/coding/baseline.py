"""A project's pristine suite, cached: the tests that pass and which of them execute each source line.

The line map is what makes generation fast: a mutation can only break the tests that run its lines, so
a candidate whose lines no test runs is dropped without a run, and the rest are screened with just the
tests that run them before the whole suite confirms the keepers.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sources import CACHE, Project, fetch

from alight_sandbox.guards import SandboxPolicy, TestRun, run_tests

# A bug that loops forever is stopped by CPU time, which does not depend on the machine's load the way the
# wall clock does: the same candidates are rejected on a busy machine and an idle one. A whole suite takes
# 1-4 s of CPU (10 s with the baseline's coverage); the wall-clock timeout is only a backstop.
CPU_S = 60
IMPORT_TIME = ""  # coverage's context for lines run before any test: module level, run at collection


@dataclass
class Baseline:
    passed: list[str]  # node ids that pass on the pristine checkout, sorted
    lines: dict[str, dict[str, list[str]]]  # source file -> line (1-based, as a string) -> node ids running it

    @staticmethod
    def files(nodeids: list[str]) -> set[str]:
        return {n.split("::")[0] for n in nodeids}

    def tests_running(self, file: str, start: int, end: int) -> list[str] | None:
        """Passing tests that run any of lines [start, end) (0-based) of `file`; None: one runs at import."""
        by_line = self.lines.get(file, {})
        running: set[str] = set()
        for line in range(start + 1, end + 1):
            running.update(by_line.get(str(line), ()))
        if IMPORT_TIME in running:
            return None  # module-level code: every test may see the change
        passed = set(self.passed)
        return sorted(running & passed)


def suite(
    checkout: Path,
    python: str,
    p: Project,
    timeout_s: float,
    select: list[str] | None = None,
    *,
    coverage: bool = False,
) -> TestRun:
    """The project's suite (or the `select`ed tests) on a throwaway copy of `checkout`, in a sandbox."""
    with tempfile.TemporaryDirectory(prefix="alight-gen-") as tmp:
        workspace = Path(tmp) / "workspace"
        shutil.copytree(checkout, workspace)
        return run_in_place(workspace, python, p, timeout_s, select, coverage=coverage)


def run_in_place(
    workspace: Path,
    python: str,
    p: Project,
    timeout_s: float,
    select: list[str] | None = None,
    *,
    coverage: bool = False,
) -> TestRun:
    """The suite (or the `select`ed tests, collecting only their files) over `workspace` itself, in a sandbox."""
    with tempfile.TemporaryDirectory(prefix="alight-gen-tmp-") as scratch:
        policy = SandboxPolicy(
            workspace=str(workspace), scratch=scratch, python=python, timeout_s=timeout_s, cpu_s=CPU_S
        )
        files = sorted(Baseline.files(select)) if select is not None else ()
        return run_tests(policy, select, pythonpath=p.pythonpath, files=files, coverage=coverage)


def baseline(p: Project, python: str, timeout_s: float, cache: Path = CACHE) -> Baseline:
    """The pristine run of `p`'s suite with its line map, computed once per project version."""
    cached = cache / "baselines" / f"{p.folder}.lines.json"
    if cached.exists():
        data = json.loads(cached.read_text())
        return Baseline(passed=data["passed"], lines=data["lines"])
    run = suite(fetch(p, cache), python, p, timeout_s, coverage=True)
    passed = sorted(n for n, outcome in run.outcomes.items() if outcome == "passed")
    if not passed:
        raise RuntimeError(f"no test of {p.folder} passes in the sandbox; its output:\n{run.output[-3000:]}")
    if not run.coverage:
        raise RuntimeError(
            f"no line map for {p.folder}: is `coverage` installed in {python}? (bash scripts/setup.sh --coding)"
        )
    lines = {f: run.coverage[f] for f in p.sources if f in run.coverage}
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps({"passed": passed, "lines": lines}))
    return Baseline(passed=passed, lines=lines)
