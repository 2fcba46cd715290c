"""Each example trains end to end: `alight train examples/<fw>/config.yaml` on the tiny model, one short step."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# The smallest run that still goes through everything: 2 rollouts of 1 task, one optimizer step, 1 val task.
SHORT_RUN = ["--steps", "1", "--set", "group_size=2", "--set", "tasks_per_step=1", "--set", "validation.max_tasks=1"]


@pytest.mark.slow
@pytest.mark.parametrize("example", ["openai_agents", "langchain", "autogen", "mcp"])
def test_example_trains_one_step_on_the_tiny_model(example: str, tmp_path: Path) -> None:
    config = REPO / "examples" / example / "config.yaml"
    cmd = [
        str(Path(sys.executable).parent / "alight"),
        "train",
        str(config),
        "--output-dir",
        str(tmp_path),
        "--quiet",
        *SHORT_RUN,
    ]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    steps = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    trained = [s for s in steps if s.get("step") == 1 and "train/groups" in s]
    assert trained, steps
    # Every rollout of the step ran the agent to the end and came back with a reward and trainable calls.
    assert trained[0]["rollouts/failed"] == 0 and trained[0]["rollouts/missing_reward"] == 0
    assert trained[0]["samples/rows"] >= 2 and trained[0]["perf/generated_tokens"] > 0
