"""One training step of the coding example on the tiny model: the wiring, end to end (a 135M model fixes nothing).

`alight train examples/coding/config.yaml` with the embedded stack: real mini-swe-agent processes under the
controller, their model calls through the gateway to the tiny model, every action in the sandbox, grading,
the trajectory filter, one step. No validation before and after: each episode is ~10 CPU-s (mini's litellm
import alone ~4.8, then the project's tests in the sandbox), and the report is the same `alight train` path
tests/examples/tiny_step.py checks (test_word_problems, test_search_qa).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from alight_server.trajectories.join import build_trajectory
from tests.examples.tiny_step import last_step, train_rollouts

# Two episodes (the training rollouts): a few minutes on a busy 2-core machine, more when loaded.
pytestmark = [pytest.mark.coding, pytest.mark.slow, pytest.mark.timeout(1800)]
REPO = Path(__file__).resolve().parents[2]
SHORT_RUN = [
    "--quiet", "--steps", "1",
    "--set", "model=tiny",
    "--set", "group_size=2",
    "--set", "tasks_per_step=1",
    "--set", "dataset.val=null",
    "--set", "checkpoint.every=0",
    "--set", "metrics.tensorboard=false",
    "--set", "controller.concurrency=2",
    "--set", "agent.env.CODING_STEP_LIMIT=\"2\"",
    "--set", "agent.env.CODING_MAX_TOKENS=\"32\"",
    "--set", "review.audit_share=0",  # an audited group would wait for a person, not train in this step
]  # fmt: skip


def test_one_training_step_runs_the_harness_in_the_sandbox(tmp_path: Path) -> None:
    alight = str(Path(sys.executable).parent / "alight")
    argv = [
        alight,
        "train",
        str(REPO / "examples" / "coding" / "config.yaml"),
        *SHORT_RUN,
        "--output-dir",
        str(tmp_path),
    ]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=1500)
    assert result.returncode == 0, result.stderr[-3000:]
    step = last_step(tmp_path)
    assert step["step"] == 1 and "filter/gate_flagged" in step
    with train_rollouts(tmp_path, 2) as (store, rollouts):
        for rollout in rollouts:
            trajectory = build_trajectory(store, rollout.id)
            assert trajectory.calls and all(c.call.response_token_ids for c in trajectory.calls)  # mini -> gateway
            assert trajectory.final_reward == 0.0  # graded: the tiny model's bash does not fix the bug
            kinds = [e.kind for e in store.list_events(rollout.id)]
            assert "episode" in kinds and "reward_hacking" not in kinds  # graded, and no gate broken
