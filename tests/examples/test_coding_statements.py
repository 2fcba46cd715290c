"""The shipped coding tasks' statements describe each failure without quoting the hidden tests (alight_sandbox.quoting)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from alight_sandbox.cleaning import clean_tasks

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


def test_a_generated_statement_names_the_failing_function_and_masks_its_cases_values() -> None:
    import make_tasks  # pyright: ignore[reportMissingImports]
    from sources import PROJECTS  # pyright: ignore[reportMissingImports]

    p = PROJECTS["inflection"]
    failing = [f"test_inflection.py::test_pluralize_plural[{case}]" for case in ("child-children", "man-men")]
    reports = {failing[0]: "AssertionError: assert 'children' == 'childrens'", failing[1]: "AssertionError: x"}
    statement = make_tasks.problem_statement(p, failing, reports, make_tasks.hidden_literals(p, failing))
    assert "- test_inflection.py::test_pluralize_plural (2 cases)" in statement
    assert "assert ... == 'childrens'" in statement  # what the code gave stays: the bug report needs it
    assert "child" not in statement.replace("childrens", "") and "men" not in statement
