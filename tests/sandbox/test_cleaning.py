"""`alight data clean`: each stage drops what it should, the probe keeps mixed tasks, the report counts it all."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from alight_sandbox.cleaning import clean_tasks

ALIGHT = str(Path(sys.executable).parent / "alight")


def task(i: int, statement: str = "fix it", tests: int = 2, **extra: Any) -> dict[str, Any]:
    return {
        "instance_id": f"t{i}",
        "problem_statement": statement,
        "FAIL_TO_PASS": ["a"],
        "PASS_TO_PASS": ["b"] * (tests - 1),
        **extra,
    }


def test_each_stage_drops_its_tasks_and_the_report_says_why() -> None:
    tasks = [task(0), task(1, statement="  "), task(2, tests=50), task(3, broken=True), task(4)]
    train, val, report = clean_tasks(tasks, max_tests=10, reproduces=lambda t: not t.get("broken"), val_fraction=0.5)
    assert sorted(t["instance_id"] for t in train + val) == ["t0", "t4"]
    assert report.as_dict()["dropped"] == {
        "statement": {"empty_problem_statement": 1},
        "size": {"too_many_tests": 1},
        "reproduce": {"does_not_reproduce": 1},
    }
    assert (report.train, report.val) == (1, 1)


def test_the_probe_keeps_mixed_tasks_and_a_share_of_all_failed_ones() -> None:
    outcomes: dict[str, list[float | None]] = {"mixed": [0.0, 1.0], "easy": [1.0, 1.0], "infra": [None, None]}
    outcomes |= {f"hard{i}": [0.0, 0.0] for i in range(4)}
    tasks = [task(i, instance_id=name) for i, name in enumerate(outcomes)]
    train, _, report = clean_tasks(
        tasks, probe=lambda ts: [outcomes[t["instance_id"]] for t in ts], keep_failed=0.5, val_fraction=0.0
    )
    kept = sorted(t["instance_id"] for t in train)
    assert "mixed" in kept and "easy" not in kept and "infra" not in kept
    assert sum(name.startswith("hard") for name in kept) == 2
    assert report.dropped["probe"] == {"too_easy": 1, "probe_failed": 1, "too_hard": 2}
    assert report.probe == {"mixed": 1, "all_failed_kept": 2}


def test_the_same_seed_gives_the_same_split() -> None:
    tasks = [task(i) for i in range(20)]
    assert clean_tasks(tasks, seed=3)[:2] == clean_tasks(tasks, seed=3)[:2]


def test_the_command_writes_the_split_and_the_report(tmp_path: Path) -> None:
    source = tmp_path / "tasks.jsonl"
    source.write_text(
        "".join(json.dumps(t) + "\n" for t in [task(0), task(1, statement=""), task(2), task(3, broken=True)])
    )
    checker = tmp_path / "check.py"
    checker.write_text("def reproduces(task):\n    return not task.get('broken')\n")
    out = tmp_path / "clean"
    argv = [ALIGHT, "data", "clean", str(source), "--out-dir", str(out)]
    result = subprocess.run(
        [*argv, "--reproduce", f"{checker}:reproduces", "--val-fraction", "0.5"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "dropped at reproduce: 1 does_not_reproduce" in result.stdout
    report = json.loads((out / "clean_report.json").read_text())
    assert report["tasks_in"] == 4 and report["train"] + report["val"] == 2
    assert len((out / "train.jsonl").read_text().splitlines()) == report["train"]


def test_the_command_names_a_line_that_is_not_a_json_object(tmp_path: Path) -> None:
    source = tmp_path / "tasks.jsonl"
    source.write_text('{"problem_statement": "x"}\n[1, 2]\n')
    argv = [ALIGHT, "data", "clean", str(source), "--out-dir", str(tmp_path / "o")]
    result = subprocess.run(argv, capture_output=True, text=True)
    assert result.returncode == 2
    assert "line 2" in result.stderr


def test_the_command_reads_gzipped_tasks(tmp_path: Path) -> None:
    source = tmp_path / "tasks.jsonl.gz"
    source.write_bytes(gzip.compress("".join(json.dumps(task(i)) + "\n" for i in range(3)).encode()))
    result = subprocess.run(
        [ALIGHT, "data", "clean", str(source), "--out-dir", str(tmp_path / "o"), "--val-fraction", "0"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert len((tmp_path / "o" / "train.jsonl").read_text().splitlines()) == 3


# -- the statement: any task schema, and statements that quote a hidden assertion -----------------------------------
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HIDDEN_TEST = """import pytest

from slugs import slugify

CASES = [("Hello World", "hello-world"), ("  Many   spaces ", "many-spaces")]


@pytest.mark.parametrize(("text", "slug"), CASES)
def test_slugify(text, slug):
    assert slugify(text) == slug
"""


def _clean(source: Path, out: Path, *options: str) -> subprocess.CompletedProcess[str]:
    argv = [ALIGHT, "data", "clean", str(source), "--out-dir", str(out), "--val-fraction", "0", *options]
    return subprocess.run(argv, capture_output=True, text=True)


def _quoting_tasks(tmp_path: Path) -> Path:
    """Two slugify tasks over a real hidden test file: one statement quotes a case, one describes the failure."""
    (tmp_path / "test_slugs.py").write_text(HIDDEN_TEST)
    hook = tmp_path / "hidden.py"
    hook.write_text(
        "from pathlib import Path\n\n"
        "def sources(task):\n"
        f"    return {{f: (Path({str(tmp_path)!r}) / f).read_text() for f in task['hidden_tests']}}\n"
    )
    failing = ["test_slugs.py::test_slugify[Hello World-hello-world]"]
    quoting = "test_slugify fails: AssertionError: assert 'hello world' == 'hello-world'"
    describing = "test_slugify fails: slugify keeps the spaces between words instead of joining them with a dash."
    rows = [
        task(0, statement=quoting, FAIL_TO_PASS=failing, hidden_tests=["test_slugs.py"]),
        task(1, statement=describing, FAIL_TO_PASS=failing, hidden_tests=["test_slugs.py"]),
    ]
    source = tmp_path / "tasks.jsonl"
    source.write_text("".join(json.dumps(t) + "\n" for t in rows))
    return source


def test_task_sets_without_a_statement_field_are_kept_whole(tmp_path: Path) -> None:
    for name in ("quickstart/tasks_train.jsonl", "claude_code/tasks.jsonl", "codex/tasks.jsonl"):
        result = _clean(EXAMPLES / name, tmp_path / name)
        assert result.returncode == 0, result.stderr
        report = json.loads((tmp_path / name / "clean_report.json").read_text())
        assert report["dropped"] == {} and report["train"] == report["tasks_in"] > 0, name


def test_the_statement_field_is_the_one_named(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in (EXAMPLES / "claude_code" / "tasks.jsonl").read_text().splitlines()[:3]]
    rows[1]["prompt"] = " \n"
    source = tmp_path / "tasks.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = _clean(source, tmp_path / "o", "--statement-field", "prompt")
    assert result.returncode == 0, result.stderr
    assert "dropped at statement: 1 empty_problem_statement" in result.stdout
    assert [json.loads(line)["id"] for line in (tmp_path / "o" / "train.jsonl").read_text().splitlines()] == [
        "arith-000",
        "arith-002",
    ]


def test_a_statement_quoting_a_hidden_assertion_is_reported_with_its_evidence_and_kept(tmp_path: Path) -> None:
    result = _clean(_quoting_tasks(tmp_path), tmp_path / "o", "--hidden-tests", f"{tmp_path / 'hidden.py'}:sources")
    assert result.returncode == 0, result.stderr
    assert "statement quotes a hidden assertion: 1, kept" in result.stdout
    report = json.loads((tmp_path / "o" / "clean_report.json").read_text())
    (quoted,) = report["quotes_hidden_assertion"]
    assert quoted["instance_id"] == "t0" and not quoted["dropped"]
    assert quoted["evidence"] == ["test_slugs.py::test_slugify: `slugify(text) == slug` quoted as 'hello-world'"]
    assert report["train"] == 2


def test_drop_quoting_drops_the_statements_that_quote_and_keeps_the_others(tmp_path: Path) -> None:
    hook = f"{tmp_path / 'hidden.py'}:sources"
    result = _clean(_quoting_tasks(tmp_path), tmp_path / "o", "--hidden-tests", hook, "--drop-quoting")
    assert result.returncode == 0, result.stderr
    assert "dropped at quoting: 1 quotes_hidden_assertion" in result.stdout
    kept = [json.loads(line)["instance_id"] for line in (tmp_path / "o" / "train.jsonl").read_text().splitlines()]
    assert kept == ["t1"]


def test_drop_quoting_without_the_hidden_tests_is_a_usage_error(tmp_path: Path) -> None:
    result = _clean(EXAMPLES / "quickstart" / "tasks_train.jsonl", tmp_path / "o", "--drop-quoting")
    assert result.returncode == 2
    assert "--hidden-tests" in result.stderr
