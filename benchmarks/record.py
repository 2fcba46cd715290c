"""A benchmark's result as a record in benchmarks/results.jsonl: what it measured, and where, when and under what load.

docs/benchmarks.md is generated from those records (`python scripts/benchmarks_doc.py`), so a figure in it always
carries the date, commit, machine and load it was measured at. A benchmark calls `record(...)` when run with
`--record`; without it nothing is written (a smoke run in the test suite records nothing).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results.jsonl"


def machine() -> str:
    """CPU model, cores and GPU presence, as a person reads it."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = "GPU" if Path("/dev/nvidia0").exists() else "no GPU"
    return f"{os.cpu_count()} cores, {model}, {gpu}"


def commit() -> str:
    """The commit the benchmark ran at, with `+dirty` when the tree had uncommitted changes."""
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True)
    except OSError:
        return "unknown"
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "") if head.returncode == 0 else "unknown"


def record(benchmark: str, what: str, result: str, *, path: Path | None = None) -> dict[str, str]:
    """Append one measurement; the command is this process's own argv, the load the 1-minute average now.

    Into `path`, else the file ALIGHT_BENCHMARK_RESULTS names (a test's smoke run points it at a temporary file),
    else benchmarks/results.jsonl.
    """
    path = path or Path(os.environ.get("ALIGHT_BENCHMARK_RESULTS") or RESULTS)
    entry = {
        "benchmark": benchmark,
        "what": what,
        "result": result,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%MZ"),
        "commit": commit(),
        "machine": machine(),
        "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
    }
    with path.open("a") as out:
        out.write(json.dumps(entry) + "\n")
    print(f"recorded in {path}: {benchmark}: {result}")
    return entry
