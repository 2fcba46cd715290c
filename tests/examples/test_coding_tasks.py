"""Task generation on one small project: every kept bug fails its FAIL_TO_PASS tests, the original passes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.coding, pytest.mark.slow]

SMALL = ["--seed", "0", "--projects", "inflection,parse", "--per-project", "2", "--max-tries", "8"]


def _generate(out: Path, workers: int) -> str:
    import make_tasks

    assert make_tasks.main([*SMALL, "--workers", str(workers), "--out", str(out)]) == 0
    return out.read_text()


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _generate(tmp_path_factory.mktemp("tasks") / "tasks.jsonl", workers=1)


def test_every_generated_task_fails_before_the_fix_and_passes_after_it(generated: str) -> None:
    import make_tasks
    from baseline import suite
    from sources import PROJECTS, fetch

    tasks = [json.loads(line) for line in generated.splitlines()]
    assert {t["project"] for t in tasks} == {"inflection", "parse"}, "no candidate of the first 8 was kept"
    for task in tasks:
        p = PROJECTS[task["project"]]
        assert task["FAIL_TO_PASS"] and not set(task["FAIL_TO_PASS"]) & set(task["PASS_TO_PASS"])
        assert make_tasks.reproduces(task)  # the buggy checkout fails every FAIL_TO_PASS test
        fixed = suite(fetch(p), str(make_tasks.DEFAULT_PYTHON), p, 300.0, select=task["FAIL_TO_PASS"])
        assert fixed.passed(task["FAIL_TO_PASS"]) == len(task["FAIL_TO_PASS"])
        assert task["FAIL_TO_PASS"][0] in task["problem_statement"]


def test_the_same_seed_gives_the_same_tasks_whatever_the_number_of_workers(generated: str, tmp_path: Path) -> None:
    assert _generate(tmp_path / "again.jsonl", workers=2) == generated


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
