"""Task generation on one small project: every kept bug fails its FAIL_TO_PASS tests, the original passes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.coding, pytest.mark.slow]


def test_every_generated_task_fails_before_the_fix_and_passes_after_it(tmp_path: Path) -> None:
    import make_tasks
    from sources import PROJECTS, fetch

    out = tmp_path / "tasks.jsonl"
    assert (
        make_tasks.main(["--projects", "inflection", "--per-project", "2", "--max-tries", "8", "--out", str(out)]) == 0
    )
    tasks = [json.loads(line) for line in out.read_text().splitlines()]
    assert tasks, "no candidate of the first 8 was kept"
    p = PROJECTS["inflection"]
    for task in tasks:
        assert task["FAIL_TO_PASS"] and not set(task["FAIL_TO_PASS"]) & set(task["PASS_TO_PASS"])
        assert make_tasks.reproduces(task)  # the buggy checkout fails every FAIL_TO_PASS test
        fixed = make_tasks.suite(fetch(p), str(make_tasks.DEFAULT_PYTHON), p, 300.0, select=task["FAIL_TO_PASS"])
        assert fixed.passed(task["FAIL_TO_PASS"]) == len(task["FAIL_TO_PASS"])
        assert task["FAIL_TO_PASS"][0] in task["problem_statement"]


def test_the_candidate_order_is_the_same_for_the_same_seed_and_differs_for_another() -> None:
    from make_tasks import project_candidates
    from sources import PROJECTS

    p = PROJECTS["inflection"]
    assert project_candidates(p, 0) == project_candidates(p, 0)
    assert project_candidates(p, 0) != project_candidates(p, 1)


def test_a_rewrite_that_does_not_match_the_checkout_is_refused(tmp_path: Path) -> None:
    from sources import apply_rewrite

    (tmp_path / "m.py").write_text("x = 1\n")
    with pytest.raises(ValueError, match="differ from the task's"):
        apply_rewrite(tmp_path, {"file": "m.py", "start": 0, "end": 1, "before": "x = 2\n", "after": "x = 3\n"})
