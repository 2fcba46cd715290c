"""The suite's files longest first, so the test workers finish together (longest-processing-time order).

pytest-xdist (`--dist loadfile`) gives a worker the next file whenever it runs short of work. Left to itself it
queues the files with the most tests first, which puts a file of one 70-second training test near the end,
running alone while the other workers idle. scripts/test.sh turns that order off (`--no-loadscope-reorder`),
and the workers' collection puts the files in the order of their last measured run time instead, longest
first; a file with no measurement counts as the longest (its cost is unknown: run early, a long one cannot become
the tail that runs alone, and a short one costs the start nothing). A full run of scripts/test.sh records each
file's time in .alight/test-durations.json; copying it over tests/durations.json refreshes the order
(docs/testing.md). It also records each file's CPU seconds in .alight/test-cpu.json: on 2 busy cores the
suite's length is its CPU, and a file's wall time there says more about what ran beside it than about itself.
"""

from __future__ import annotations

import json
import resource
from collections import defaultdict
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

DURATIONS = Path(__file__).with_name("durations.json")


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def order_longest_first(items: list[pytest.Item], durations: Path = DURATIONS) -> None:
    """Sort `items` in place by their file's recorded seconds, longest first; a file's tests stay together and
    in their order (the sort is stable and every test of a file shares its key)."""
    known: dict[str, float] = json.loads(durations.read_text()) if durations.exists() else {}
    unknown = max(known.values()) if known else 0.0
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        first.setdefault(_file(item.nodeid), index)
    items.sort(key=lambda item: (-known.get(_file(item.nodeid), unknown), first[_file(item.nodeid)]))


def _cpu_seconds() -> float:
    """This process's CPU seconds, its threads' and those of the subprocesses it has waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


CPU_STASH = pytest.StashKey[float]()


class CpuMeter:
    """In the process that runs the tests: each test's CPU seconds, set-up to tear-down, on its tear-down report
    (a subprocess counts once it has been waited for; one it never waits for, not at all)."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        item.stash[CPU_STASH] = _cpu_seconds()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any]:
        outcome = yield
        if call.when == "teardown" and CPU_STASH in item.stash:
            outcome.get_result().user_properties.append(("cpu_s", _cpu_seconds() - item.stash[CPU_STASH]))


class DurationRecorder:
    """Sums each file's set-up, call and tear-down seconds, and its CPU seconds (CpuMeter), over a run and writes
    them as JSON at its end: the seconds to `path`, the CPU seconds beside it in test-cpu.json."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seconds: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[_file(report.nodeid)] += report.duration
        self.cpu[_file(report.nodeid)] += sum(
            v for k, v in report.user_properties if k == "cpu_s" and isinstance(v, float)
        )

    def pytest_sessionfinish(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for path, seconds in ((self.path, self.seconds), (self.path.with_name("test-cpu.json"), self.cpu)):
            ordered = dict(sorted(((f, round(s, 1)) for f, s in seconds.items()), key=lambda kv: -kv[1]))
            path.write_text(json.dumps(ordered, indent=1) + "\n")
