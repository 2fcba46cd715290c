"""One training step of an example's own config on the tiny model, through `alight train`: the example's agent,
reward and tool loop run for real; only the policy is the tiny one, so the step costs seconds, not minutes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alight.api_models import RolloutQuery
from alight.schemas import Mode, Rollout
from alight_server.stacks.run_store import open_run_store
from alight_server.store import Store

REPO = Path(__file__).resolve().parents[2]
ALIGHT = str(Path(sys.executable).parent / "alight")


def train_one_tiny_step(example: Path, out: Path) -> dict[str, Any]:
    """Run the step (1 task x 4 rollouts, 1 validation task before and after) and return its metrics line."""
    argv = [
        ALIGHT, "train", str(example / "config.yaml"), "--quiet", "--steps", "1",
        "--output-dir", str(out),
        "--set", "model=tiny",
        "--set", "group_size=4",
        "--set", "tasks_per_step=1",
        "--set", "validation.max_tasks=1",
        "--set", "validation.samples_per_task=1",
        "--set", "checkpoint.every=0",
        "--set", "metrics.tensorboard=false",
        "--set", "controller.concurrency=4",
        "--set", "review.audit_share=0",  # an audited group would wait for a person, not train in this step
    ]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=540, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "before training: 1 rollouts, 1 scored" in proc.stdout and "after training (step 1)" in proc.stdout
    step = last_step(out)
    assert step["step"] == 1 and step["rollouts/failed"] == 0 and step["rollouts/missing_reward"] == 0, step
    return step


def last_step(out: Path) -> dict[str, Any]:
    """The run's last metrics line."""
    return json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])


@contextmanager
def train_rollouts(out: Path, count: int) -> Iterator[tuple[Store, list[Rollout]]]:
    """The run's store, opened as the dashboard opens it, and its rollouts: exactly `count`, all training ones."""
    store = open_run_store(out)
    try:
        rollouts = store.list_rollouts(RolloutQuery(limit=10))
        assert [r.mode for r in rollouts] == [Mode.TRAIN] * count, [(r.id, r.mode) for r in rollouts]
        yield store, rollouts
    finally:
        store.close()
