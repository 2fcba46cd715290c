"""Task generation on a small slice: every kept bug fails its FAIL_TO_PASS tests, the original passes them, the
bytes are the same on every run, and they are the start of the shipped task set."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.coding, pytest.mark.slow]

PROJECTS = ["inflection", "parse"]
PER_PROJECT = 2
SMALL = ["--seed", "0", "--projects", ",".join(PROJECTS), "--per-project", str(PER_PROJECT), "--max-tries", "8"]
SHIPPED = Path(__file__).resolve().parents[2] / "examples" / "coding" / "data" / "tasks.jsonl.gz"


def _generate(out: Path, workers: int, extra: list[str] | None = None) -> bytes:
    import make_tasks

    assert make_tasks.main([*SMALL, "--workers", str(workers), "--out", str(out), *(extra or [])]) == 0
    return out.read_bytes()


@pytest.fixture(scope="module")
def generated_gz(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return _generate(tmp_path_factory.mktemp("tasks") / "tasks.jsonl.gz", workers=1)


@pytest.fixture(scope="module")
def generated(generated_gz: bytes) -> str:
    return gzip.decompress(generated_gz).decode()


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
        assert task["FAIL_TO_PASS"][0].split("[")[0] in task["problem_statement"]  # by function, not by case


def test_a_second_run_with_another_number_of_workers_writes_the_same_bytes(generated_gz: bytes, tmp_path: Path) -> None:
    assert _generate(tmp_path / "again.jsonl.gz", workers=2) == generated_gz


def test_a_resumed_run_writes_the_same_bytes_as_an_uninterrupted_one(
    generated: str, generated_gz: bytes, tmp_path: Path
) -> None:
    out = tmp_path / "resumed.jsonl.gz"
    partial = tmp_path / "resumed.jsonl.gz.partial"
    partial.mkdir()
    (partial / "inflection.jsonl").write_text(generated.splitlines(keepends=True)[0])  # interrupted after one task
    assert _generate(out, workers=1, extra=["--resume"]) == generated_gz
    assert not partial.exists()


def test_the_generated_slice_is_the_start_of_each_project_in_the_shipped_task_set(generated: str) -> None:
    import taskfile

    same, ours, theirs = taskfile.check(generated, taskfile.read(SHIPPED), dict.fromkeys(PROJECTS, PER_PROJECT))
    assert same, f"regenerated {ours} != shipped {theirs}: rerun the README's command to ship the current tasks"


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


def test_problem_statements_mask_addresses_temporary_paths_and_measured_times() -> None:
    from make_tasks import normalised

    message = "assert <function f at 0x7f4fe7993740> == 2, wrote /tmp/pytest-of-u/pytest-3/x0/a.txt in 0.0123s\nmore"
    assert normalised(message) == "assert <function f at 0x...> == 2, wrote /tmp/... in N s"
    assert normalised("assert parse('{:d}s', '3s') == 3") == "assert parse('{:d}s', '3s') == 3"  # data, not a time


def test_a_gzipped_task_file_has_the_same_bytes_whenever_it_is_written(tmp_path: Path) -> None:
    import taskfile

    text = '{"project": "p", "instance_id": "a"}\n'
    taskfile.write(tmp_path / "a.jsonl.gz", text)
    time.sleep(1.1)  # gzip's header records the time by default: a second later it would differ
    taskfile.write(tmp_path / "b.jsonl.gz", text)
    assert (tmp_path / "a.jsonl.gz").read_bytes() == (tmp_path / "b.jsonl.gz").read_bytes()
    assert taskfile.read(tmp_path / "a.jsonl.gz") == text


def test_the_check_reports_a_shipped_task_that_differs_from_the_regenerated_one() -> None:
    import taskfile

    line = '{{"project": "{}", "instance_id": "{}"}}\n'.format
    shipped = line("p", "a") + line("q", "b") + line("p", "c")
    assert taskfile.check(line("p", "a"), shipped, {"p": 1})[0]
    assert taskfile.check(line("p", "a") + line("p", "c") + line("q", "b"), shipped, {"p": 2, "q": 1})[0]
    assert not taskfile.check(line("p", "x"), shipped, {"p": 1})[0]
    assert not taskfile.check(line("p", "a"), shipped, {"p": 1, "q": 1})[0]  # q's task is missing
