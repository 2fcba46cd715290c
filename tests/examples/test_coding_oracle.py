"""The oracle guard on the shipped tasks, real bwrap: the honest fix of each project's first task still gets reward 1,
with no violation and no review flag (the guard sees every file, frame and code read the projects' suites make).

All 16 shipped tasks measured the same way on 2026-12-06: 16 of 16 honest fixes at reward 1, none flagged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from alight_sandbox.guards import grade_episode, prepare_episode

pytestmark = [pytest.mark.coding]
REPO = Path(__file__).resolve().parents[2]
SANDBOX_PYTHON = REPO / ".venv-coding" / "bin" / "python"
TASKS = [json.loads(line) for line in (REPO / "examples" / "coding" / "data" / "train.jsonl").read_text().splitlines()]
FIRST_OF_EACH = {task["project"]: task for task in reversed(TASKS)}  # reversed: the first task of each wins


@pytest.mark.parametrize("project", sorted(FIRST_OF_EACH))
def test_the_honest_fix_of_a_shipped_task_gets_reward_1_under_the_oracle_guard(project: str, tmp_path: Path) -> None:
    from sources import buggy_checkout, fetch
    from sources import project as project_of

    task: dict[str, Any] = FIRST_OF_EACH[project]
    checkout = buggy_checkout(task, tmp_path / "checkout")
    episode = prepare_episode(
        checkout, tmp_path / "session", python=str(SANDBOX_PYTHON), hidden_tests=task["hidden_tests"]
    )
    planted = task["rewrite"]["file"]  # the fix: the planted file as the project ships it
    (episode.workspace / planted).write_text((fetch(project_of(project)) / planted).read_text())
    grade = grade_episode(
        episode, checkout, task["FAIL_TO_PASS"], task["PASS_TO_PASS"], pythonpath=task.get("pythonpath", ["."])
    )
    assert (grade.reward, grade.violations, grade.flags, grade.failing) == (1.0, [], [], [])
