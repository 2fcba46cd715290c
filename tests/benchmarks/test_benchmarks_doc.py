"""docs/benchmarks.md is generated from benchmarks/results.jsonl, and a benchmark's record carries its conditions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmarks.script_modules import REPO as ROOT
from tests.benchmarks.script_modules import doc, recorder


def test_docs_benchmarks_md_is_what_the_records_generate() -> None:
    done = subprocess.run(
        [sys.executable, "scripts/benchmarks_doc.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_a_new_record_names_its_command_date_commit_machine_and_load_and_appears_in_the_doc(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    entry = recorder.record("store", "inserts", "0.8x a bare sqlite3 insert", path=results)
    row = json.loads(results.read_text())
    assert row == entry
    assert row["commit"] != "unknown" and "cores" in row["machine"] and row["load"].count(" ") == 2
    assert row["command"].endswith(" ".join(sys.argv))
    text = doc.render(doc.load(results))
    assert "## store" in text and "0.8x a bare sqlite3 insert" in text and row["date"] in text


def test_a_record_without_its_conditions_is_refused_naming_what_it_lacks(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps({"benchmark": "gateway", "what": "latency", "result": "+0.7 ms"}) + "\n")
    with pytest.raises(ValueError, match="line 1 lacks command, date, commit, machine, load"):
        doc.load(results)
