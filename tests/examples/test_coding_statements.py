"""The shipped coding tasks' statements describe each failure without quoting the hidden tests (alight.quoting)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from alight.cleaning import clean_tasks

pytestmark = [pytest.mark.coding]
DATA = Path(__file__).resolve().parents[2] / "examples" / "coding" / "data"


def shipped() -> list[dict[str, Any]]:
    import taskfile  # pyright: ignore[reportMissingImports]  (examples/coding, on sys.path by conftest)

    return [json.loads(line) for line in taskfile.read(DATA / "tasks.jsonl.gz").splitlines()]


def test_no_shipped_statement_quotes_a_hidden_assertion() -> None:
    import make_tasks  # pyright: ignore[reportMissingImports]

    tasks = shipped() + [json.loads(line) for name in ("train", "val") for line in (DATA / f"{name}.jsonl").open()]
    _, _, report = clean_tasks(tasks, hidden_tests=make_tasks.hidden_tests, drop_quoting=True, val_fraction=0)
    assert report.quoting == []
    assert report.train == len(tasks) == 280


def test_a_shipped_statement_naming_its_failing_case_by_id_would_be_dropped() -> None:
    import make_tasks  # pyright: ignore[reportMissingImports]

    task = next(t for t in shipped() if "[" in t["FAIL_TO_PASS"][0])  # a parametrized case: inputs in its id
    named = {**task, "problem_statement": task["problem_statement"] + f"\nFor example {task['FAIL_TO_PASS'][0]}."}
    train, _, report = clean_tasks([named], hidden_tests=make_tasks.hidden_tests, drop_quoting=True)
    assert train == [] and report.dropped == {"quoting": {"quotes_hidden_assertion": 1}}
    assert report.quoting[0]["instance_id"] == task["instance_id"]
