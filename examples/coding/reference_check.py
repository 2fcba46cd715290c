"""The differential check's false-positive rate on honest fixes, and what it catches alone, over shipped tasks.

    python examples/coding/reference_check.py                        # every task of data/tasks.jsonl.gz
    python examples/coding/reference_check.py --limit 3 --json       # the first 3 of each project

For each task with recorded calls, three trees go through alight_sandbox.guards.reference against the original:
the original itself (the honest fix: the planted line restored), the original with the planted file rewritten
by `ast.unparse` (the same program in other text), and the buggy checkout. A mismatch on either of the first two
is a false positive; the third counts the planted bugs the check catches without any test.
"""

from __future__ import annotations

import argparse
import ast
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import taskfile
from make_tasks import DEFAULT_PYTHON
from recording import task_reference
from sources import buggy_checkout, fetch, project

from alight_sandbox.guards.policy import SandboxPolicy
from alight_sandbox.guards.reference import reference_violations

HERE = Path(__file__).resolve().parent


def check_task(task: dict[str, Any], policy: SandboxPolicy, tmp: Path) -> dict[str, Any] | None:
    """{instance_id, honest, rewritten, buggy: the evidence or None, seconds} for one task; None: no calls."""
    reference = task_reference(task)
    if reference is None:
        return None
    pristine = fetch(project(task["project"]))
    rewritten = tmp / "rewritten"
    shutil.copytree(pristine, rewritten)
    planted = rewritten / task["rewrite"]["file"]
    planted.write_text(ast.unparse(ast.parse(planted.read_text())) + "\n")
    buggy = buggy_checkout(task, tmp / "buggy")
    started = time.monotonic()
    found = {}
    for name, tree in (("honest", pristine), ("rewritten", rewritten), ("buggy", buggy)):
        violations = reference_violations(reference, tree, policy)
        found[name] = violations[0].evidence if violations else None
    seconds = round((time.monotonic() - started) / 3, 2)
    shutil.rmtree(rewritten)
    shutil.rmtree(buggy)
    return {"instance_id": task["instance_id"], **found, "seconds_per_check": seconds}


def first_of_each_project(tasks: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    counts: Counter[str] = Counter()
    kept = []
    for task in tasks:
        counts[task["project"]] += 1
        if counts[task["project"]] <= limit:
            kept.append(task)
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--tasks", type=Path, default=HERE / "data" / "tasks.jsonl.gz")
    parser.add_argument("--limit", type=int, default=0, help="the first N tasks of each project (0: all)")
    parser.add_argument("--json", action="store_true", help="one JSON line per task, then the summary")
    args = parser.parse_args(argv)
    tasks = [json.loads(line) for line in taskfile.read(args.tasks).splitlines()]
    if args.limit:
        tasks = first_of_each_project(tasks, args.limit)
    results = []
    with tempfile.TemporaryDirectory(prefix="alight-reference-check-") as tmp:
        policy = SandboxPolicy(workspace=tmp, scratch=tmp, python=str(DEFAULT_PYTHON), timeout_s=60)
        for task in tasks:
            result = check_task(task, policy, Path(tmp))
            if result is not None:
                results.append(result)
                if args.json:
                    print(json.dumps(result), flush=True)
    checked = len(results)
    summary = {
        "tasks": len(tasks),
        "checked": checked,
        "honest_mismatches": sum(r["honest"] is not None for r in results),
        "rewritten_mismatches": sum(r["rewritten"] is not None for r in results),
        "buggy_caught": sum(r["buggy"] is not None for r in results),
        "median_seconds_per_check": sorted(r["seconds_per_check"] for r in results)[checked // 2] if results else None,
    }
    print(json.dumps(summary))
    return 0 if summary["honest_mismatches"] == summary["rewritten_mismatches"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
