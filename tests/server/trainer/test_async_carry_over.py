"""Asynchronous training through the real loop on the tiny model, in the default run: a group still running at
an update is carried over it, the run stops mid-carry-over, and --resume trains that group at the next step.

One shared run of two steps (one step, then a resume to two) read by every test here. Which group a step can
take is fixed by the tasks, not by timing: group 0's agents make their first call, then wait for the step-1
checkpoint; group 1 runs through once group 0's first calls are made; every later group waits for the step-2 checkpoint. So step 1 can
only take group 1, and the resumed step 2 only group 0 (tool_agent's `hold_until`). The step-1 checkpoint
that lets group 0 go on is also where the first run stops, so that run's stack closes only once group 0's
rollouts ended (`FirstRunStacks`): they always finish in the first run, none dies with it to start again on
resume. The longer runs (three steps in one process, the refill before an update, learning in asynchronous
mode) are in test_async_training.py and test_learning.py, marked `async_e2e`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from alight.api_models import RolloutQuery
from alight.schemas import Mode
from alight_server.stacks.opening import TrainingStacks
from alight_server.stacks.run_store import run_target
from alight_server.store.sql import SqlStore
from alight_server.trainer.config.run import TrainConfig, parse_config
from alight_server.trainer.run.checkpoint import load_checkpoint
from alight_server.trainer.run.loop import TrainingRun
from alight_server.trainer.run.rollout_source import PoolGroups
from alight_server.trainer.run.rollouts import wait_all
from alight_server.trainer.run.servers import RunStack
from alight_testing.tiny_run import tiny_run_config
from tests.server.trainer.conftest import AGENT

pytestmark = pytest.mark.timeout(600)

HELD = "-g000000-"  # the group that is still running at step 1's update


@dataclass
class CarriedRun:
    config: TrainConfig
    first_history: list[dict[str, Any]]
    first_used: list[tuple[int, str, int]]  # (step, group id, staleness) trained on before the stop
    checkpoint_groups: list[int]  # the pool's groups in the step-1 checkpoint
    rollouts_before: dict[str, str]  # rollout id -> group id when the first run stopped
    resumed_history: list[dict[str, Any]]
    resumed_used: list[tuple[int, str, int]]
    rollouts_after: dict[str, str]
    held_versions: list[list[int | None]]  # per rollout of the held group: the policy version of each call
    resumed_version: int  # the version the resume published the restored weights as: the one step 2 trained from
    replacement: list[tuple[datetime, int]]  # group 2's rollouts (the first top-up): created at, policy version
    first_update_at: datetime  # when policy version 1 (step 1's update, or the resume's) was published


class FirstRunStacks(TrainingStacks):
    """`alight train`'s stacks, whose stack closes only once the held group's rollouts ended, when the run got
    through step 1: their second call waits for the step-1 checkpoint, after which the run stops at once, and
    a stop that came first would kill them (their retries on resume would start at the resumed version)."""

    def open_local(self, config: TrainConfig, run_dir: Path, backend: Any) -> RunStack:
        stack = super().open_local(config, run_dir, backend)
        close = stack.close

        def close_once_the_held_group_ended() -> None:
            client = stack.client
            if client is not None and (config.run_dir_checkpoints() / "step-000001").is_dir():
                held = [r.id for r in client.list_rollouts(RolloutQuery(mode=Mode.TRAIN, limit=1000)) if HELD in r.id]
                wait_all(client, held)  # the server's long-poll: returns when each has ended
            close()

        stack.close = close_once_the_held_group_ended  # type: ignore[method-assign]
        return stack


def rollout_groups(store: SqlStore) -> dict[str, str]:
    return {r.id: r.group_id or "" for r in store.list_rollouts(RolloutQuery(mode=Mode.TRAIN, limit=1000))}


@pytest.fixture(scope="module")
def carried(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CarriedRun]:
    folder = tmp_path_factory.mktemp("carry-over")
    checkpoints = folder / "run" / "checkpoints"
    first_calls = folder / "first-calls"
    tasks = [
        {"word": "apple", "hold_until": str(checkpoints / "step-000001"), "mark_dir": str(first_calls)},
        # group 1 finishes only once both of group 0's rollouts made their first call, so step 1 (which takes
        # group 1) never stops the run before group 0 has a call to count its staleness from
        {"word": "river", "hold_until_marks": {"dir": str(first_calls), "count": 2}},
        *({"word": w, "hold_until": str(checkpoints / "step-000002")} for w in ("stone", "apple", "river", "stone")),
    ]
    raw = tiny_run_config(
        folder,
        f"{AGENT}:main_http",
        tasks,
        steps=1,
        tasks_per_step=1,
        group_size=2,
        dataset={"shuffle": False},
        async_rollout={"enabled": True, "active_groups": 2, "max_staleness": 5},
        checkpoint={"every": 1, "keep_last": 5},
    )
    config = parse_config(raw, folder)
    first = TrainingRun(config, stacks=FirstRunStacks(), train_tasks=tasks, val_tasks=[], show_progress=False)
    first_result = first.run()
    assert isinstance(first.rollouts, PoolGroups)
    saved = load_checkpoint(checkpoints / "step-000001")
    store = SqlStore(f"sqlite:///{folder / 'run' / 'alight.db'}", run_target(folder / "run").kek_source())
    try:
        before = rollout_groups(store)
        resumed = TrainingRun(config.model_copy(update={"steps": 2}), stacks=TrainingStacks(), resume=True, train_tasks=tasks, val_tasks=[],
                              show_progress=False)  # fmt: skip
        resumed_result = resumed.run()
        assert isinstance(resumed.rollouts, PoolGroups)
        after = rollout_groups(store)
        held_versions = [
            [c.policy_version for c in store.list_model_calls(rollout_id)]
            for rollout_id, group in after.items()
            if HELD in group
        ]
        versions = store.list_policy_versions()
        resumed_version = next(v.version for v in versions if "resumed_at" in v.metadata)
        replacement = [
            (r.created_at, r.policy_version)
            for r in store.list_rollouts(RolloutQuery(mode=Mode.TRAIN, limit=1000))
            if "-g000002-" in r.id
        ]
        first_update_at = next(v.created_at for v in versions if v.version == 1)
    finally:
        store.close()
    yield CarriedRun(
        config=config,
        first_history=first_result.history,
        first_used=list(first.rollouts.pool.used),
        checkpoint_groups=[g["number"] for g in saved["async_pool"]["groups"]],
        rollouts_before=before,
        resumed_history=resumed_result.history,
        resumed_used=list(resumed.rollouts.pool.used),
        rollouts_after=after,
        held_versions=held_versions,
        resumed_version=resumed_version,
        replacement=replacement,
        first_update_at=first_update_at,
    )


def step_metrics(history: list[dict[str, Any]], step: int) -> dict[str, Any]:
    return next(r for r in history if r.get("step") == step and "train/reward_mean" in r)


def test_a_group_still_running_at_an_update_is_carried_out_of_that_step(carried: CarriedRun) -> None:
    ((step, group, _),) = carried.first_used
    assert step == 1 and "-g000001-" in group  # the group that ran straight through, not the held one
    assert step_metrics(carried.first_history, 1)["async/carry_over_out"] >= 1
    assert 0 in carried.checkpoint_groups  # still in flight when the run stopped at step 1


def test_the_resumed_run_trains_the_carried_group_with_the_staleness_of_its_first_call(carried: CarriedRun) -> None:
    ((step, group, staleness),) = carried.resumed_used
    step_2 = step_metrics(carried.resumed_history, 2)
    assert step == 2 and HELD in group
    # Each held rollout made one call at version 0 and its second once step 1's update was published (the
    # first run's last version: 1, or 0 where step 1's group had equal rewards and nothing changed); the resume
    # published the restored weights as the next version, which step 2 trained from. Step 2's own update is
    # not counted on: a group of equal rewards makes none.
    first_run_last = carried.resumed_version - 1
    assert carried.held_versions == [[0, first_run_last]] * carried.config.group_size
    assert staleness == carried.resumed_version - 0 >= 1  # counted from its first call's version, 0
    assert step_2["async/staleness_max"] == staleness and step_2["async/carry_over_in"] >= 1


def test_resume_continues_the_carried_rollouts_instead_of_starting_them_again(carried: CarriedRun) -> None:
    kept = {i: g for i, g in carried.rollouts_after.items() if i in carried.rollouts_before}
    assert kept == carried.rollouts_before
    per_group: dict[str, int] = {}
    for group in carried.rollouts_after.values():
        per_group[group] = per_group.get(group, 0) + 1
    assert set(per_group.values()) == {carried.config.group_size}  # no group started twice


def test_a_step_starts_the_group_that_replaces_its_own_before_its_weight_update(carried: CarriedRun) -> None:
    """The pool is topped up as soon as a step has its groups: the new one runs while the step trains and updates."""
    assert len(carried.replacement) == carried.config.group_size
    for created_at, version in carried.replacement:
        assert created_at < carried.first_update_at and version == 0
