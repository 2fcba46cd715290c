"""The workers' schedule: files longest first, each file's tests together and in order (tests/longest_first.py)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from tests.longest_first import DurationRecorder, order_longest_first


def items(*nodeids: str) -> list[pytest.Item]:
    return cast(list[pytest.Item], [SimpleNamespace(nodeid=n) for n in nodeids])


def test_files_run_longest_first_with_their_tests_together_and_in_order(tmp_path: Path) -> None:
    durations = tmp_path / "durations.json"
    durations.write_text(json.dumps({"a.py": 1.0, "b.py": 70.0, "c.py": 5.0}))
    suite = items("a.py::t1", "b.py::t1", "a.py::t2", "c.py::t1", "b.py::t2", "new.py::t1")
    order_longest_first(suite, durations)
    # new.py was never measured: it counts the median (5.0) and keeps its place after c.py, collected first.
    assert [i.nodeid for i in suite] == ["b.py::t1", "b.py::t2", "c.py::t1", "new.py::t1", "a.py::t1", "a.py::t2"]


def test_without_a_record_each_file_keeps_its_first_place(tmp_path: Path) -> None:
    suite = items("b.py::t1", "a.py::t1", "b.py::t2")
    order_longest_first(suite, tmp_path / "absent.json")
    assert [i.nodeid for i in suite] == ["b.py::t1", "b.py::t2", "a.py::t1"]


def test_a_run_records_each_files_seconds_longest_first(tmp_path: Path) -> None:
    recorder = DurationRecorder(tmp_path / "out" / "durations.json")
    for nodeid, seconds in [("a.py::t1", 0.25), ("b.py::t1", 3.0), ("a.py::t2", 0.5), ("a.py::t2", 0.25)]:
        recorder.pytest_runtest_logreport(cast(Any, SimpleNamespace(nodeid=nodeid, duration=seconds)))
    recorder.pytest_sessionfinish()
    assert list(json.loads((tmp_path / "out" / "durations.json").read_text()).items()) == [("b.py", 3.0), ("a.py", 1.0)]
