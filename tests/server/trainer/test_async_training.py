"""Asynchronous training end to end on the tiny model: a held group carries over, and --resume continues it.

The held group's agents make their first call, then wait until the step-1 checkpoint exists (tool_agent's
`hold_until`): a rollout deliberately slower than a step, without a timed sleep that a busy machine would race.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from alight.api_models import RolloutQuery
from alight.schemas import Mode, Rollout
from alight_server.store.sql import SqlStore
from alight_server.trainer.checkpoint import load_checkpoint
from alight_server.trainer.config import TrainConfig
from alight_server.trainer.loop import TrainingRun

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
    run = TrainingRun(config, train_tasks=held_tasks(config), val_tasks=[], show_progress=False)
    result = run.run()
    assert run.pool is not None
    steps = {r["step"]: r for r in result.history if "train/reward_mean" in r}

    used = {group: (step, staleness) for step, group, staleness in run.pool.used}
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


def test_resume_mid_carry_over_continues_the_carried_groups(tiny_config) -> None:
    first = async_config(tiny_config, steps=1)
    tasks = held_tasks(first)
    TrainingRun(first, train_tasks=tasks, val_tasks=[], show_progress=False).run()
    checkpoint = load_checkpoint(Path(first.output_dir) / "checkpoints" / "step-000001")
    carried = [g["number"] for g in checkpoint["async_pool"]["groups"]]
    assert 0 in carried  # the held group was in flight when the run stopped
    with run_store(first) as store:
        before = {r.id: r.group_id for r in train_rollouts(store)}

    resumed = TrainingRun(first.model_copy(update={"steps": 2}), resume=True, train_tasks=tasks, val_tasks=[],
                          show_progress=False)  # fmt: skip
    resumed.run()
    assert resumed.pool is not None
    final = load_checkpoint(Path(first.output_dir) / "checkpoints" / "step-000002")
    after_groups = {g["number"] for g in final["async_pool"]["groups"]}
    used_numbers = {int(group.split("-g")[1][:6]) for _, group, _ in resumed.pool.used}
    assert set(carried) <= used_numbers | after_groups  # none lost
    with run_store(first) as store:
        after = {r.id: r.group_id for r in train_rollouts(store)}
    assert {i: g for i, g in after.items() if i in before} == before  # the same rollouts, not new ones
    per_group: dict[str, int] = {}
    for group in after.values():
        per_group[group or ""] = per_group.get(group or "", 0) + 1
    assert set(per_group.values()) == {first.group_size}  # no group started twice


def test_a_step_starts_the_groups_that_replace_its_own_before_its_weight_update(tiny_config) -> None:
    """The pool is topped up as soon as a step has its groups: the new ones run while it trains and updates."""
    config = async_config(tiny_config, steps=2).model_copy(update={"group_size": 4})  # 4 equal rewards: unlikely
    run = TrainingRun(config, train_tasks=[{"word": w} for w in WORDS], val_tasks=[], show_progress=False)
    run.run()
    with run_store(config) as store:
        first_update = next(v for v in store.list_policy_versions() if v.version == 1)  # step 1's
        replacement = [r for r in train_rollouts(store) if "-g000002-" in r.id]  # groups 0, 1 start the run
        assert len(replacement) == config.group_size
        assert all(r.created_at < first_update.created_at and r.policy_version == 0 for r in replacement)
