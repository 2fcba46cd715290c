"""Evaluator hooks: a user function that scores a finished attempt's trajectory, for agents that cannot.

Configure `evaluator: "my_pkg.scoring:score"` (or "path/to/file.py:score").
When an attempt finishes, before the rollout turns terminal, the server calls
`score(trajectory)` with the attempt's joined trajectory (its attempt_status and
failure_kind already set to how the attempt ended). It returns:

- a number: the rollout's final reward;
- a dict `{name: number}`: named final rewards (the first one is primary
  when no unnamed reward exists);
- None: no reward from the evaluator for this attempt.

Example::

    def score(trajectory):
        answer = trajectory.calls[-1].call.response["choices"][0]["message"]["content"]
        return {"correct": float("42" in answer), "short": float(len(answer) < 200)}
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from alight.entry import load_target
from alight.schemas import AttemptFinish, AttemptStatus, RewardCreate, RewardSource, Rollout, Trajectory
from alight_server.config import ServerConfig
from alight_server.store.base import Store
from alight_server.trajectory import build_trajectory

Evaluator = Callable[[Trajectory], Any]


def load_evaluator(ref: str) -> Evaluator:
    """Import "module:function" or "file.py:function"; a bad reference fails with what to fix."""
    try:
        return load_target(ref)
    except Exception as exc:
        raise ValueError(f"cannot load the evaluator {ref!r}: {exc}") from exc


def rewards_from(result: Any, rollout_id: str, attempt: int) -> list[RewardCreate]:
    """The reward rows an evaluator's return value stands for; ValueError for anything but numbers."""
    if result is None:
        return []
    items = result.items() if isinstance(result, dict) else [(None, result)]
    rows = []
    for name, value in items:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(
                f"evaluator returned {value!r} for {name or 'the reward'} of rollout {rollout_id!r}; "
                "return a finite number, a dict of them, or None"
            )
        # Deterministic ids: a retried finish (or a second call) stores nothing new.
        suffix = "" if name is None else f"-{name}"
        rows.append(
            RewardCreate(
                id=f"eval-{attempt}{suffix}"[:200],
                attempt=attempt,
                value=float(value),
                name=None if name is None else str(name),
                final=True,
                source=RewardSource.EVALUATOR,
            )
        )
    return rows


def evaluator_hook(evaluate: Evaluator) -> Callable[[Store, Rollout, int, AttemptFinish], None]:
    """Wrap `evaluate(trajectory)` as an attempt-finished hook that stores its rewards."""

    def hook(store: Store, rollout: Rollout, attempt: int, finish: AttemptFinish) -> None:
        trajectory = build_trajectory(store, rollout.id, attempt).model_copy(
            update={"attempt_status": AttemptStatus(finish.status), "failure_kind": finish.failure_kind}
        )
        result = evaluate(trajectory)
        if inspect.isawaitable(result):
            result = asyncio.run(_await(result))
        for reward in rewards_from(result, rollout.id, attempt):
            store.add_reward(rollout.id, reward)

    hook.__qualname__ = f"evaluator({getattr(evaluate, '__qualname__', evaluate)!s})"
    return hook


async def _await(awaitable: Any) -> Any:
    return await awaitable


def install_evaluator(app: FastAPI, config: ServerConfig) -> None:
    """Register config.evaluator (if any) as an attempt-finished hook of `app`."""
    if config.evaluator:
        app.state.attempt_finished_hooks.append(evaluator_hook(load_evaluator(config.evaluator)))
