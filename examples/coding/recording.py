"""What a task's differential check starts from: the function its bug is in and the calls its tests make.

The project's suite runs once on the pristine checkout under call_recorder.py (cached like the baseline);
a task then keeps the calls its FAIL_TO_PASS tests make into the library (the entry points they drive) and
the calls of the function the bug was planted in, at most MAX_CALLS, as `task["reference"]`:

    {"module": "inflection", "function": "_irregular", "calls": [[module, qualname, args, kwargs], ...]}

The grader (alight_sandbox.guards.reference) draws new inputs of the same shapes from these and compares the
agent's functions with the original's on them.
"""

from __future__ import annotations

import ast
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from sources import CACHE, Project, fetch, project

from alight_sandbox.guards import SandboxPolicy, run_command
from alight_sandbox.guards.policy import REPORT_DIR, WORKSPACE
from alight_sandbox.guards.reference import Reference
from alight_sandbox.guards.testrun import RUNNER

RECORDER = Path(__file__).with_name("call_recorder.py")
CODEC = RUNNER.with_name("reference_runner.py")
MAX_CALLS = 24  # recorded calls a task keeps, spread over its functions


def module_name(file: str) -> str:
    """`src/cachetools/keys.py` -> `cachetools.keys`; `toolz/__init__.py` -> `toolz`."""
    parts = [part for part in Path(file).with_suffix("").parts if part not in ("src", "__init__")]
    return ".".join(parts)


def planted_function(source: str, line: int) -> str | None:
    """The qualified name of the innermost function holding 0-based `line` of `source`; None at module level."""
    found: str | None = None

    def visit(node: ast.AST, prefix: str) -> None:
        nonlocal found
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                if child.lineno <= line + 1 <= (child.end_lineno or child.lineno):
                    if not isinstance(child, ast.ClassDef):
                        found = prefix + child.name
                    visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def recorded_calls(p: Project, python: str, timeout_s: float, cache: Path = CACHE) -> dict[str, Any]:
    """The pristine suite's calls into `p.sources` (call_recorder.py's report), computed once per version.

    The suite is recorded twice and only the calls both runs made are kept: a value that differs between runs
    (the current time, a random seed) would make the generated tasks differ too.
    """
    cached = cache / "baselines" / f"{p.folder}.calls.json"
    if cached.exists():
        return json.loads(cached.read_text())
    first, second = _record(p, python, timeout_s, cache), _record(p, python, timeout_s, cache)
    calls = {
        section: {
            key: [c for c in entries if json.dumps(c, sort_keys=True) in _texts(second[section].get(key, []))]
            for key, entries in first[section].items()
        }
        for section in ("by_test", "by_function")
    }
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(calls, sort_keys=True))
    return calls


def _texts(entries: list[Any]) -> set[str]:
    return {json.dumps(e, sort_keys=True) for e in entries}


def _record(p: Project, python: str, timeout_s: float, cache: Path) -> dict[str, Any]:
    """One sandboxed run of the pristine suite under call_recorder.py: its report."""
    with tempfile.TemporaryDirectory(prefix="alight-record-") as tmp:
        workspace, scratch = Path(tmp) / "workspace", Path(tmp) / "scratch"
        shutil.copytree(fetch(p, cache), workspace)
        scratch.mkdir()
        mounts = {f"{REPORT_DIR}/call_recorder.py": str(RECORDER), f"{REPORT_DIR}/reference_runner.py": str(CODEC)}
        policy = SandboxPolicy(
            workspace=str(workspace), scratch=str(scratch), python=python, timeout_s=timeout_s, read_only_at=mounts
        )
        roots = ":".join([*(f"{WORKSPACE}/{r}".rstrip("/.") for r in p.pythonpath), WORKSPACE])
        argv = [python, "-s", "-P", f"{REPORT_DIR}/call_recorder.py", roots, "/tmp/calls.json", ":".join(p.sources)]
        argv += ["--", "-p", "no:cacheprovider", "-q", "-o", "addopts=", "--import-mode=append"]
        env = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
        result = run_command(policy, argv, env=env)
        report = scratch / "calls.json"
        if not report.exists():
            raise RuntimeError(f"recording {p.folder}'s calls wrote nothing; its output:\n{result.output[-3000:]}")
        return json.loads(report.read_text())


def reference_spec(rewrite: dict[str, Any], failing: list[str], source: str, calls: dict[str, Any]) -> dict[str, Any]:
    """A task's `reference`: its planted function and the recorded calls its check draws from (`source` is the
    pristine text of the rewritten file)."""
    function = planted_function(source, rewrite["start"])
    found: dict[str, list[Any]] = {}
    for test in failing:
        for key, encoded in calls["by_test"].get(test, []):
            found.setdefault(key, []).append(encoded)
    if function is not None:
        found.setdefault(f"{rewrite['file']}::{function}", []).extend(
            calls["by_function"].get(f"{rewrite['file']}::{function}", [])
        )
    distinct = {key: sorted({json.dumps(e, sort_keys=True) for e in found[key]}) for key in sorted(found)}
    kept: list[list[Any]] = []
    while len(kept) < MAX_CALLS and any(distinct.values()):  # one call of each function in turn
        for key, texts in distinct.items():
            if texts and len(kept) < MAX_CALLS:
                file, _, qualname = key.partition("::")
                kept.append([module_name(file), qualname, *json.loads(texts.pop(0))])
    return {"module": module_name(rewrite["file"]), "function": function, "calls": kept}


def task_reference(task: dict[str, Any]) -> Reference | None:
    """A task's differential check for grade_episode; None for a task without recorded calls (one generated
    before tasks had a `reference`, or whose failing tests pass nothing with an exact JSON form)."""
    spec = task.get("reference")
    if not spec or not spec["calls"]:
        return None
    original = fetch(project(task["project"]))
    return Reference(original, spec["calls"], pythonpath=task.get("pythonpath", ["."]), seed=task["instance_id"])
