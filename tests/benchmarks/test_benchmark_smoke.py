"""Every benchmark the README cites runs at a tiny size and prints its ratio line, so a figure's command cannot
break unnoticed (benchmarks/async.py once crashed after its 8-minute synchronous phase reading its own store).

The sizes are the benchmarks' own flags, turned down: what is checked is that the command runs end to end and
prints the line its README figure comes from, not the figure.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# benchmark -> (its arguments at a tiny size, the ratio line it must print)
SMOKE: dict[str, tuple[list[str], str]] = {
    "gateway.py": (
        ["--sequential", "5", "--requests", "32", "--rounds", "1", "--feel", ""],
        r"throughput ratio gateway/direct: \d+\.\d+",
    ),
    "gateway_capture.py": (["--calls", "64", "--repeats", "1"], r"writer/hop wall \d+\.\d+x"),
    "inference.py": (
        ["--model", "tiny", "--engines", "embedded", "--max-tokens", "2", "--threads", "1", "--sequential"],
        r"\| embedded \|.*\| x\d+\.\d+ \|",
    ),
    "samples.py": (["--trajectories", "20", "--baseline-trajectories", "5", "--repeats", "1"], r"speed-up: \d+\.\dx"),
    "store.py": (["--calls", "50"], r"SqlStore on SQLite .*\(\d+\.\d+x baseline\)"),
    "async.py": (
        [
            "--steps",
            "1",
            "--tasks-per-step",
            "1",
            "--group-size",
            "2",
            "--active-groups",
            "2",
            "--median-s",
            "0.05",
            "--straggler-share",
            "0",
        ],
        r"async s=1 +\d+\.\d+ +\d+\.\d+x",
    ),
}


@pytest.mark.parametrize("script", sorted(SMOKE))
def test_a_cited_benchmark_runs_at_a_tiny_size_and_prints_its_ratio(script: str, tmp_path: Path) -> None:
    args, ratio = SMOKE[script]
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / script), *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,  # under pytest's own 300 s, so a hung benchmark reports its output
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert re.search(ratio, done.stdout), done.stdout[-3000:]


def test_every_benchmark_the_readme_cites_has_a_smoke_run() -> None:
    cited = set(re.findall(r"benchmarks/(\w+\.py)", (REPO / "README.md").read_text()))
    assert cited, "the README cites no benchmark: has its performance table moved?"
    assert cited <= set(SMOKE), f"add a tiny-size run of {sorted(cited - set(SMOKE))} to SMOKE"
