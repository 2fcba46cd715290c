"""Asynchronous training end to end on the tiny model, three steps in one process: a held group carries over.

The held group's agents make their first call, then wait until the step-1 checkpoint exists (tool_agent's
`hold_until`): a rollout deliberately slower than a step, without a timed sleep that a busy machine would race.
The default run covers carry-over, resume mid-carry-over and the refill before an update on one shorter run
(test_async_carry_over.py); this one, opt-in (`async_e2e`), keeps the carried group in the same process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from alight.api_models import RolloutQuery
from alight.schemas import Mode, Rollout
from alight_server.stacks.opening import TrainingStacks
from alight_server.store.sql import SqlStore
from alight_server.trainer.config.run import TrainConfig
from alight_server.trainer.run.loop import TrainingRun
from alight_server.trainer.run.rollout_source import PoolGroups

pytestmark = [pytest.mark.timeout(900), pytest.mark.async_e2e]

WORDS = ["river", "stone", "apple", "river", "stone", "apple"]


def async_config(tiny_config: Callable[..., TrainConfig], steps: int) -> TrainConfig:
    return tiny_config(
        steps=steps,
        tasks_per_step=1,
        group_size=2,
        dataset={"shuffle": False},
        async_rollout={"enabled": True, "active_groups": 2, "max_staleness": 5},
        checkpoint={"every": 1, "keep_last": 5},
    )


def held_tasks(config: TrainConfig) -> list[dict[str, Any]]:
    """Group 0 waits for the step-1 checkpoint; the others run straight through."""
    hold = Path(config.output_dir) / "checkpoints" / "step-000001"
    return [{"word": "apple", "hold_until": str(hold)}, *({"word": w} for w in WORDS)]


@contextmanager
def run_store(config: TrainConfig) -> Iterator[SqlStore]:
    store = SqlStore(f"sqlite:///{Path(config.output_dir) / 'alight.db'}")
    try:
        yield store
    finally:
        store.close()


def train_rollouts(store: SqlStore) -> list[Rollout]:
    return store.list_rollouts(RolloutQuery(mode=Mode.TRAIN, limit=1000))


def test_a_slow_group_carries_over_and_is_trained_later_with_its_staleness(tiny_config) -> None:
    config = async_config(tiny_config, steps=3)
    run = TrainingRun(
        config, stacks=TrainingStacks(), train_tasks=held_tasks(config), val_tasks=[], show_progress=False
    )
    result = run.run()
    assert isinstance(run.rollouts, PoolGroups)
    steps = {r["step"]: r for r in result.history if "train/reward_mean" in r}

    used = {group: (step, staleness) for step, group, staleness in run.rollouts.pool.used}
    held = next(g for g in used if "-g000000-" in g)
    first = [g for g, (step, _) in used.items() if step == 1]
    assert held not in first and steps[1]["async/carry_over_out"] >= 1
    step, staleness = used[held]
    assert step > 1 and staleness >= 1 and steps[step]["async/staleness_max"] >= staleness
    with run_store(config) as store:
        held_rollouts = [r for r in train_rollouts(store) if r.group_id == held]
        for rollout in held_rollouts:
            versions = [c.policy_version for c in store.list_model_calls(rollout.id)]
            assert versions[0] == 0 and (versions[-1] or 0) >= 1  # each call with the version that served it
