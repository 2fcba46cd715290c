"""Each example trains end to end: `alight train examples/<fw>/config.yaml` on the tiny model, one short step."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from alight.schemas import TERMINAL_STATES, Mode
from alight_server.store import open_store

REPO = Path(__file__).resolve().parents[2]
GROUP_SIZE = 2
# The smallest run that still goes through everything the example's config sets up: the embedded stack,
# the example's agent through the gateway, one group of 2 rollouts, samples and one training step.
# Where the time went before (about 3 minutes per example on 2 busy cores): validation before and after
# training (two more sequential rollout phases, each paying an agent process start and a 256-token reply),
# tensorboard's import, and torch threads fighting the agent processes for the two cores.
SHORT_RUN = [
    "--steps", "1",
    "--set", f"group_size={GROUP_SIZE}",
    "--set", "tasks_per_step=1",
    "--set", "dataset.val_size=0",  # no held-out tasks: no validation phases
    "--set", "checkpoint.every=0",  # one checkpoint, at the end
    "--set", "metrics.tensorboard=false",
    "--set", "inference.torch_threads=1",
    "--set", "controller.concurrency=2",
    "--set", "rollout_timeout_s=120",
]  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(300)
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
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    steps = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    trained = [s for s in steps if s.get("step") == 1 and "train/groups" in s]
    assert trained, steps
    step = trained[0]
    # Every rollout of the step ran the agent to the end and came back with a reward and trainable calls.
    assert step["rollouts/failed"] == 0 and step["rollouts/missing_reward"] == 0, step
    assert step["samples/rows"] >= GROUP_SIZE and step["perf/generated_tokens"] > 0, step
    # A group whose rewards differ is trained on and pushed to inference as policy version 1; a group the
    # untrained tiny model scores the same everywhere (usually all 0: the examples reward exact answers)
    # carries no signal and must leave the policy where it was.
    learned = step["train/groups"] - step["train/uniform_groups"] > 0
    assert step["policy_version"] == (1.0 if learned else 0.0), step
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["steps"] == 1 and summary["policy_version"] == step["policy_version"], summary
    assert (tmp_path / "checkpoints").is_dir() and any((tmp_path / "checkpoints").iterdir())

    # The rollouts in the run's own store: one group of train rollouts, all terminal, each with its
    # model calls served through the gateway with token ids.
    store = open_store(f"sqlite:///{tmp_path / 'alight.db'}")
    try:
        rollouts = store.list_rollouts(limit=100)
        assert [r.mode for r in rollouts] == [Mode.TRAIN] * GROUP_SIZE, [(r.id, r.mode) for r in rollouts]
        assert len({r.group_id for r in rollouts}) == 1
        assert all(r.state in TERMINAL_STATES for r in rollouts), [(r.id, r.state) for r in rollouts]
        for rollout in rollouts:
            calls = store.list_model_calls(rollout.id)
            assert calls and all(c.response_token_ids and c.policy_version == 0 for c in calls), rollout.id
    finally:
        store.close()
