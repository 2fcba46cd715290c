"""Generate bug-fix tasks the SWE-smith way, locally: mutate real projects, keep the bugs their own tests catch.

    python examples/coding/make_tasks.py --seed 0 --per-project 75 --out examples/coding/data/tasks.jsonl

For each project (sources.py): run its test suite once in the sandbox (the baseline), then draw candidate
mutations (mutations.py) in a seeded order; for each, apply it to a fresh copy, run the whole suite in the
sandbox, and keep it only if 1..--max-fail baseline-passing tests now fail (FAIL_TO_PASS) and the run
finished (no timeout); every other baseline-passing test is PASS_TO_PASS. The problem statement is written
from the failing tests' names and messages. Same seed, same sources: same tasks. It runs one suite at a
time at low CPU priority (nice 10); about one candidate per 2-15 s depending on the project and the load.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mutations import Candidate, candidates, render
from sources import CACHE, PROJECTS, Project, apply_rewrite, fetch

from alight.guards import SandboxPolicy, TestRun, require_tools, run_tests

HERE = Path(__file__).resolve().parent
DEFAULT_PYTHON = HERE.parent.parent / ".venv-coding" / "bin" / "python"
MAX_STATEMENT_TESTS = 5


def suite(checkout: Path, python: str, p: Project, timeout_s: float, select: list[str] | None = None) -> TestRun:
    """The project's suite (or the `select`ed tests) on a throwaway copy of `checkout`, in a sandbox."""
    with tempfile.TemporaryDirectory(prefix="alight-gen-") as tmp:
        workspace, scratch = Path(tmp) / "workspace", Path(tmp) / "tmp"
        shutil.copytree(checkout, workspace)
        scratch.mkdir()
        policy = SandboxPolicy(workspace=str(workspace), scratch=str(scratch), python=python, timeout_s=timeout_s)
        return run_tests(policy, select, pythonpath=p.pythonpath)


def baseline(p: Project, python: str, timeout_s: float) -> list[str]:
    """Node ids that pass on the pristine checkout (cached per project version)."""
    cached = CACHE / "baselines" / f"{p.folder}.json"
    if cached.exists():
        return json.loads(cached.read_text())
    run = suite(fetch(p), python, p, timeout_s)
    passed = sorted(n for n, outcome in run.outcomes.items() if outcome == "passed")
    if not passed:
        raise RuntimeError(f"no test of {p.folder} passes in the sandbox; its output:\n{run.output[-3000:]}")
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(passed))
    return passed


def module_name(file: str) -> str:
    """`src/cachetools/keys.py` -> `cachetools.keys`; `toolz/__init__.py` -> `toolz`."""
    parts = [part for part in Path(file).with_suffix("").parts if part not in ("src", "__init__")]
    return ".".join(parts)


def problem_statement(p: Project, failing: list[str], messages: dict[str, str]) -> str:
    shown = failing[:MAX_STATEMENT_TESTS]
    lines = [f"Some behaviour of `{p.name}` ({p.version}) is broken: {len(failing)} of its tests fail.", ""]
    lines += ["Failing tests:", *(f"- {n}" for n in shown)]
    if len(failing) > len(shown):
        lines.append(f"- ... and {len(failing) - len(shown)} more")
    reports = [f"{n}:\n    {messages[n].strip().splitlines()[0][:300]}" for n in shown if messages.get(n, "").strip()]
    if reports:
        lines += ["", "What they report:", "```", *reports, "```"]
    lines += [
        "",
        "Fix the library code so that these tests pass again without breaking the others. The test files that",
        "fail are not in your checkout; they are run against your change afterwards. Do not edit tests.",
    ]
    return "\n".join(lines)


def project_candidates(p: Project, seed: int) -> list[Candidate]:
    checkout = fetch(p)
    pool = [c for f in p.sources for c in candidates((checkout / f).read_text(), f)]
    random.Random(f"{seed}/{p.name}").shuffle(pool)
    return pool


def generate(
    p: Project, seed: int, count: int, python: str, *, max_tries: int, max_fail: int, timeout_s: float
) -> Iterator[dict[str, Any]]:
    """Up to `count` validated tasks of one project, in the seeded candidate order."""
    passed = baseline(p, python, timeout_s)
    checkout = fetch(p)
    kept = 0
    for tries, candidate in enumerate(project_candidates(p, seed)):
        if kept >= count or tries >= max_tries:
            return
        mutation = render((checkout / candidate.file).read_text(), candidate)
        if mutation is None:
            continue
        with tempfile.TemporaryDirectory(prefix="alight-bug-") as tmp:
            buggy = Path(tmp) / "checkout"
            shutil.copytree(checkout, buggy)
            apply_rewrite(buggy, mutation.rewrite())
            run = suite(buggy, python, p, timeout_s)
        failing = [n for n in passed if run.outcomes.get(n) != "passed"]
        if run.timed_out or not run.outcomes or not 1 <= len(failing) <= max_fail:
            continue
        kept += 1
        broken = set(failing)
        yield {
            "instance_id": f"{module_name(candidate.file)}.{candidate.kind}.{candidate.index}",
            "project": p.name,
            "version": p.version,
            "pythonpath": list(p.pythonpath),
            "kind": mutation.kind,
            "rewrite": mutation.rewrite(),
            "problem_statement": problem_statement(p, failing, run.messages),
            "FAIL_TO_PASS": failing,
            "PASS_TO_PASS": [n for n in passed if n not in broken],
            "hidden_tests": sorted({n.split("::")[0] for n in failing}),
        }


def reproduces(task: dict[str, Any], python: str = str(DEFAULT_PYTHON)) -> bool:
    """Does the task's bug show? Every FAIL_TO_PASS test fails on its buggy checkout (for `alight data clean`)."""
    p = PROJECTS[task["project"]]
    with tempfile.TemporaryDirectory(prefix="alight-repro-") as tmp:
        buggy = Path(tmp) / "checkout"
        shutil.copytree(fetch(p), buggy)
        apply_rewrite(buggy, task["rewrite"])
        run = suite(buggy, python, p, 300.0, select=task["FAIL_TO_PASS"])
    return bool(run.outcomes) and run.passed(task["FAIL_TO_PASS"]) == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--projects", default=",".join(PROJECTS), help=f"comma-separated, of {sorted(PROJECTS)}")
    parser.add_argument("--per-project", type=int, default=75, help="tasks to keep per project")
    parser.add_argument("--max-tries", type=int, default=400, help="candidates to test per project at most")
    parser.add_argument("--max-fail", type=int, default=20, help="drop bugs that fail more tests than this")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per test-suite run")
    parser.add_argument("--python", default=str(DEFAULT_PYTHON), help="interpreter with pytest, used in the sandbox")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    require_tools("bwrap")
    if not Path(args.python).exists():
        parser.error(f"--python {args.python} does not exist; bash scripts/setup.sh builds .venv-coding")
    os.nice(10)  # test suites are the bulk of the work: stay out of other jobs' way
    args.out.parent.mkdir(parents=True, exist_ok=True)
    total = 0
    with args.out.open("w") as out:
        for name in args.projects.split(","):
            p = PROJECTS[name.strip()]
            options = {"max_tries": args.max_tries, "max_fail": args.max_fail, "timeout_s": args.timeout}
            for task in generate(p, args.seed, args.per_project, args.python, **options):
                out.write(json.dumps(task) + "\n")
                out.flush()
                total += 1
                print(f"{total:4d} {task['instance_id']}: {len(task['FAIL_TO_PASS'])} fail to pass", flush=True)
    print(f"wrote {total} tasks to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
