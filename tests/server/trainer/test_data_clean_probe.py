"""`alight data clean --probe`: k rollouts per task of the config's policy decide which tasks are kept."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ALIGHT = str(Path(sys.executable).parent / "alight")
AGENT = Path(__file__).parent / "agents" / "probe_agent.py"


def test_the_probe_keeps_mixed_tasks_drops_easy_ones_and_samples_the_hard_ones(tmp_path: Path) -> None:
    solved = {"easy": "always", "mixed": "once", "hard0": "never", "hard1": "never"}
    tasks = [
        {"instance_id": name, "problem_statement": f"task {name}", "solved": how, "marker": str(tmp_path / name)}
        for name, how in solved.items()
    ]
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    config = {
        "model": "tiny",
        "dataset": {"train": str(tmp_path / "tasks.jsonl"), "val_size": 0},
        "agent": {"entrypoint": f"{AGENT}:main"},
        "rollout_timeout_s": 240,
        "output_dir": str(tmp_path / "run"),
        "inference": {"device": "cpu", "torch_threads": 1},
        # Probe rollouts forked from one process that imported the agent (openai: over a CPU-second a start).
        "controller": {"concurrency": 2, "preload": True},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    argv = [ALIGHT, "data", "clean", str(tmp_path / "tasks.jsonl"), "--out-dir", str(tmp_path / "clean")]
    argv += ["--probe", str(tmp_path / "config.yaml"), "--k", "2", "--keep-failed", "0.5", "--val-fraction", "0"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=540)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    kept = [json.loads(line)["instance_id"] for line in (tmp_path / "clean" / "train.jsonl").read_text().splitlines()]
    assert "mixed" in kept and "easy" not in kept
    assert sum(name.startswith("hard") for name in kept) == 1  # half of the two all-failed tasks
    report = json.loads((tmp_path / "clean" / "clean_report.json").read_text())
    assert report["dropped"]["probe"] == {"too_easy": 1, "too_hard": 1}
    assert report["probe"] == {"mixed": 1, "all_failed_kept": 1}
    assert "difficulty probe" in result.stdout  # the probe's own rollout report (success, tokens, ...)
