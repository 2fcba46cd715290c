"""The suite's files longest first, so the test workers finish together (longest-processing-time order).

pytest-xdist (`--dist loadfile`) gives a worker the next file whenever it runs short of work. Left to itself it
queues the files with the most tests first, which puts a file of one 70-second training test near the end,
running alone while the other workers idle. scripts/test.sh turns that order off (`--no-loadscope-reorder`),
and the workers' collection puts the files in the order of their last measured run time instead, longest
first; a file with no measurement counts the median. A full run of scripts/test.sh records each file's time in
.alight/test-durations.json; copying it over tests/durations.json refreshes the order (docs/testing.md).
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

import pytest

DURATIONS = Path(__file__).with_name("durations.json")


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def order_longest_first(items: list[pytest.Item], durations: Path = DURATIONS) -> None:
    """Sort `items` in place by their file's recorded seconds, longest first; a file's tests stay together and
    in their order (the sort is stable and every test of a file shares its key)."""
    known: dict[str, float] = json.loads(durations.read_text()) if durations.exists() else {}
    unknown = statistics.median(known.values()) if known else 0.0
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        first.setdefault(_file(item.nodeid), index)
    items.sort(key=lambda item: (-known.get(_file(item.nodeid), unknown), first[_file(item.nodeid)]))


class DurationRecorder:
    """Sums each file's set-up, call and tear-down seconds over a run and writes them as JSON at its end."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[_file(report.nodeid)] += report.duration

    def pytest_sessionfinish(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        ordered = dict(sorted(((f, round(s, 1)) for f, s in self.seconds.items()), key=lambda kv: -kv[1]))
        self.path.write_text(json.dumps(ordered, indent=1) + "\n")
