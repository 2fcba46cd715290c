"""The workers' schedule: files longest first, each file's tests together and in order (tests/longest_first.py)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from tests.longest_first import CpuMeter, DurationRecorder, order_longest_first


def items(*nodeids: str) -> list[pytest.Item]:
    return cast(list[pytest.Item], [SimpleNamespace(nodeid=n) for n in nodeids])


def test_files_run_longest_first_with_their_tests_together_and_in_order(tmp_path: Path) -> None:
    durations = tmp_path / "durations.json"
    durations.write_text(json.dumps({"a.py": 1.0, "b.py": 70.0, "c.py": 5.0}))
    suite = items("a.py::t1", "b.py::t1", "a.py::t2", "c.py::t1", "b.py::t2", "new.py::t1")
    order_longest_first(suite, durations)
    # new.py was never measured: it counts as the longest (70.0) and keeps its place after b.py, collected first.
    assert [i.nodeid for i in suite] == ["b.py::t1", "b.py::t2", "new.py::t1", "c.py::t1", "a.py::t1", "a.py::t2"]


def test_without_a_record_each_file_keeps_its_first_place(tmp_path: Path) -> None:
    suite = items("b.py::t1", "a.py::t1", "b.py::t2")
    order_longest_first(suite, tmp_path / "absent.json")
    assert [i.nodeid for i in suite] == ["b.py::t1", "b.py::t2", "a.py::t1"]


def test_a_run_records_each_files_seconds_longest_first(tmp_path: Path) -> None:
    recorder = DurationRecorder(tmp_path / "out" / "durations.json")
    # (a tear-down report carries its test's CPU seconds, CpuMeter's "cpu_s")
    reports = [("a.py::t1", 0.25, 0.5), ("b.py::t1", 3.0, 1.0), ("a.py::t2", 0.5, None), ("a.py::t2", 0.25, 1.25)]
    for nodeid, seconds, cpu in reports:
        properties = [] if cpu is None else [("cpu_s", cpu)]
        recorder.pytest_runtest_logreport(
            cast(Any, SimpleNamespace(nodeid=nodeid, duration=seconds, user_properties=properties))
        )
    recorder.pytest_sessionfinish()
    assert list(json.loads((tmp_path / "out" / "durations.json").read_text()).items()) == [("b.py", 3.0), ("a.py", 1.0)]
    assert list(json.loads((tmp_path / "out" / "test-cpu.json").read_text()).items()) == [("a.py", 1.8), ("b.py", 1.0)]


def test_each_test_s_cpu_seconds_ride_on_its_tear_down_report() -> None:
    meter = CpuMeter()
    item = SimpleNamespace(stash=pytest.Stash())
    meter.pytest_runtest_setup(cast(Any, item))
    subprocess.run([sys.executable, "-c", "sum(range(30_000_000))"], check=True)  # waited for: its CPU counts
    for when in ("call", "teardown"):
        report = SimpleNamespace(user_properties=[])
        hook = meter.pytest_runtest_makereport(cast(Any, item), cast(Any, SimpleNamespace(when=when)))
        next(hook)
        with contextlib.suppress(StopIteration):
            hook.send(SimpleNamespace(get_result=lambda report=report: report))
        cpu = [v for k, v in report.user_properties if k == "cpu_s"]
        assert (when, len(cpu)) == (when, 1 if when == "teardown" else 0)
    assert cpu[0] > 0.2
