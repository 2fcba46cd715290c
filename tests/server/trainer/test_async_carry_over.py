"""Asynchronous training through the real loop on the tiny model, in the default run: a group still running at
an update is carried over it, the run stops mid-carry-over, and --resume trains that group at the next step.

One shared run of two steps (one step, then a resume to two) read by every test here. Which group a step can
take is fixed by the tasks, not by timing: group 0's agents make their first call, then wait for the step-1
checkpoint; group 1 runs through once group 0's first calls are made; every later group waits for the step-2 checkpoint. So step 1 can
only take group 1, and the resumed step 2 only group 0 (tool_agent's `hold_until`). The longer runs (three
steps in one process, the refill before an update, learning in asynchronous mode) are in
test_async_training.py and test_learning.py, marked `async_e2e`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
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
    # per rollout of the held group, its latest attempt (the one trained): the policy version of each call
    held_versions: list[list[int | None]]
    replacement: list[tuple[datetime, int]]  # group 2's rollouts (the first top-up): created at, policy version
    first_update_at: datetime  # when policy version 1 (step 1's update) was published


def rollout_groups(store: SqlStore) -> dict[str, str]:
    return {r.id: r.group_id or "" for r in store.list_rollouts(RolloutQuery(mode=Mode.TRAIN, limit=1000))}


def latest_attempt_versions(store: SqlStore, rollout_id: str) -> list[int | None]:
    calls = store.list_model_calls(rollout_id)
    last = max(c.attempt for c in calls)
    return [c.policy_version for c in calls if c.attempt == last]


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
    first = TrainingRun(config, stacks=TrainingStacks(), train_tasks=tasks, val_tasks=[], show_progress=False)
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
            latest_attempt_versions(store, rollout_id) for rollout_id, group in after.items() if HELD in group
        ]
        replacement = [
            (r.created_at, r.policy_version)
            for r in store.list_rollouts(RolloutQuery(mode=Mode.TRAIN, limit=1000))
            if "-g000002-" in r.id
        ]
        first_update_at = next(v.created_at for v in store.list_policy_versions() if v.version == 1)
        import json as _j, sys as _s  # DEBUG
        dbg = {"versions": [(v.version, v.metadata, str(v.created_at)) for v in store.list_policy_versions()],
               "held": [(rid, [(c.attempt, c.policy_version, str(c.created_at)) for c in store.list_model_calls(rid)]) for rid, g in after.items() if HELD in g],
               "first_hist": [{k: v for k, v in r.items() if k in ("step", "policy_version", "train/uniform_groups", "async/staleness_max")} for r in first_result.history],
               "resumed_hist": [{k: v for k, v in r.items() if k in ("step", "policy_version", "train/uniform_groups", "async/staleness_max")} for r in resumed_result.history],
               "resumed_used": list(resumed.rollouts.pool.used)}
        print("DEBUG", _j.dumps(dbg, default=str), file=_s.stderr)
        with open("/tmp/dbg/carry.jsonl", "a") as _f: _f.write(_j.dumps(dbg, default=str) + "\n")
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
    trained_at = int(step_2["policy_version"]) - 1  # the version step 2 trained from (its own update adds one)
    assert step == 2 and HELD in group
    assert len(carried.held_versions) == carried.config.group_size
    # Counted from the group's first call. The held rollouts made it at version 0 and finish after step 1's
    # update; if the first run stopped before one finished, that attempt died with it and its retry on resume
    # starts again at the resumed version (docs/api.md: a killed run's attempts are retried), so the first call
    # of the attempt that trained is what counts.
    first_call = min(versions[0] or 0 for versions in carried.held_versions)
    assert staleness == trained_at - first_call
    assert step_2["async/staleness_max"] == staleness and step_2["async/carry_over_in"] >= 1
    for versions in carried.held_versions:  # each call with the version that served it, never ahead of training
        assert versions == sorted(versions) and (versions[-1] or 0) <= trained_at


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
