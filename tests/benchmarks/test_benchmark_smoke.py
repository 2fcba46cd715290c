"""Every benchmark the README cites runs at a tiny size and prints its ratio line, so a figure's command cannot
break unnoticed (benchmarks/async.py once crashed after its 8-minute synchronous phase reading its own store).

The sizes are the benchmarks' own flags, turned down: what is checked is that the command runs end to end and
prints the line its README figure comes from, not the figure. Each runs with `--record` into a temporary file
(ALIGHT_BENCHMARK_RESULTS), so the records a real run would append to benchmarks/results.jsonl are checked too.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmarks.script_modules import doc

REPO = Path(__file__).resolve().parents[2]


# benchmark -> its section in benchmarks/results.jsonl (and docs/benchmarks.md)
SECTION = {
    "gateway.py": "gateway",
    "gateway_capture.py": "gateway-capture",
    "inference.py": "inference",
    "samples.py": "samples",
    "store.py": "store",
    "async.py": "async",
    "footprint.py": "footprint",
    "judge_injection.py": "judge-injection",
}

# The quickstart's run at the tiny model: one step of one group of two, validation on one task, no tensorboard,
# one torch thread on both sides, the process tree sampled every 0.5 s (at 0.1 s the sampler, which walks every
# process of the machine, was a third of the benchmark's CPU on a loaded machine).
FOOTPRINT = [
    "--model", "tiny", "--steps", "1", "--val-tasks", "1", "--row-tokens", "64", "--trained-tokens", "16",
    "--set", "tasks_per_step=1", "--set", "group_size=2", "--set", "metrics.tensorboard=false",
    "--set", "trainer.torch_threads=1", "--sample-s", "0.5",
]  # fmt: skip

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
    "judge_injection.py": (
        ["--model", "tiny", "--pairs", "1", "--only", "naive", "defended-lp"],
        r"defended-lp: clean .* shift .*; flagged \d+/3 injected, \d+/1 clean",
    ),
    "samples.py": (["--trajectories", "20", "--baseline-trajectories", "5", "--repeats", "1"], r"speed-up: \d+\.\dx"),
    "store.py": (["--calls", "50"], r"SqlStore on SQLite .*\(\d+\.\d+x baseline\)"),
    "footprint.py": (
        FOOTPRINT,
        r"alight / floor: memory \d+\.\d+x, checkpoint \d+\.\d+x",
    ),
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
            "--staleness",  # one asynchronous run: the ratio line is sync against s=1
            "1",
        ],
        r"async s=1 +\d+\.\d+ +\d+\.\d+x",
    ),
}


@pytest.mark.parametrize("script", sorted(SMOKE))
def test_a_cited_benchmark_runs_at_a_tiny_size_prints_its_ratio_and_records_it(script: str, tmp_path: Path) -> None:
    args, ratio = SMOKE[script]
    results = tmp_path / "results.jsonl"
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / script), *args, "--record"],
        cwd=tmp_path,
        env={**os.environ, "ALIGHT_BENCHMARK_RESULTS": str(results)},
        capture_output=True,
        text=True,
        timeout=240,  # under pytest's own 300 s, so a hung benchmark reports its output
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert re.search(ratio, done.stdout), done.stdout[-3000:]
    assert results.exists(), f"{script} --record wrote nothing: {done.stdout[-3000:]}"
    rows = doc.load(results)  # refuses a record that lacks any of its conditions
    assert rows and {row["benchmark"] for row in rows} == {SECTION[script]}
    assert all(f"benchmarks/{script}" in row["command"] and "--record" in row["command"] for row in rows)


def test_every_smoke_run_records_into_an_existing_section_of_the_results() -> None:
    sections = {row["benchmark"] for row in doc.load()}
    assert set(SECTION) == set(SMOKE)
    assert set(SECTION.values()) <= sections, f"no section {sorted(set(SECTION.values()) - sections)} in results"


def test_every_benchmark_the_readme_cites_has_a_smoke_run() -> None:
    cited = set(re.findall(r"benchmarks/(\w+\.py)", (REPO / "README.md").read_text()))
    assert cited, "the README cites no benchmark: has its performance table moved?"
    assert cited <= set(SMOKE), f"add a tiny-size run of {sorted(cited - set(SMOKE))} to SMOKE"
