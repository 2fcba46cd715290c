"""Rows of the dashboard's tables: a rollout's outcome in a line, a group's reward spread, a run's val interval."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from alight.api_models import RolloutQuery
from alight.evaluation import Z, mean_and_error
from alight.schemas import FailureKind, Mode, Rollout
from alight_server.store import Store
from alight_server.store.browse import RolloutFilter
from alight_server.trajectories.join import final_reward

MAX_GROUP = 1000  # members read per group for its spread


def rollout_row(store: Store, rollout: Rollout) -> dict[str, Any]:
    """One table row: the latest attempt's outcome, reward, calls and tokens."""
    latest = rollout.attempts[-1] if rollout.attempts else None
    calls = store.list_model_calls(rollout.id, latest.attempt) if latest else []
    duration = None
    if latest is not None and latest.ended_at is not None:
        duration = round((latest.ended_at - latest.started_at).total_seconds(), 3)
    versions = sorted({c.policy_version for c in calls if c.policy_version is not None})
    return {
        "id": rollout.id,
        "state": rollout.state.value,
        "mode": rollout.mode.value,
        "group_id": rollout.group_id,
        "step": metrics_step(rollout),
        "reward": _final(store, rollout),
        "failure_kind": latest.failure_kind.value if latest and latest.failure_kind else None,
        "attempts": len(rollout.attempts),
        "duration_s": duration,
        "policy_versions": versions,
        "calls": len(calls),
        "prompt_tokens": sum(len(c.prompt_token_ids) for c in calls),
        "generated_tokens": sum(len(c.response_token_ids) for c in calls),
    }


def metrics_step(rollout: Rollout) -> int | None:
    """The run step whose metrics this rollout fed: train rollouts of loop step k feed step k+1."""
    step = rollout.metadata.get("step")
    if not isinstance(step, int):
        return None
    return step if rollout.mode == Mode.VAL else step + 1


def spread(values: Sequence[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0, "mean": None, "std": None, "min": None, "max": None}
    return {
        "n": len(values),
        "mean": statistics.fmean(values),
        "std": statistics.pstdev(values) if len(values) > 1 else 0.0,
        "min": min(values),
        "max": max(values),
    }


def group_spreads(store: Store, group_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each group's final-reward spread over all its members, not only those on the page."""
    out: dict[str, dict[str, Any]] = {}
    for group_id in dict.fromkeys(group_ids):
        members = store.list_rollouts(RolloutQuery(group_id=group_id, limit=MAX_GROUP))
        rewards = [r for m in members if (r := _final(store, m)) is not None]
        out[group_id] = {**spread(rewards), "size": len(members)}
    return out


def validation_intervals(store: Store, run_id: str) -> list[dict[str, Any]]:
    """Per validation step: the mean score and its 95% interval, ± 2 SE clustered by task, over the val rollouts
    (alight.evaluation `mean_and_error`, as the before/after table and `alight eval` print it).

    A rollout scores as the trainer scores it (trainer/run/rollouts.py `scored`): its final reward, 0 when
    it failed without one; infra and timeout failures are left out.
    """
    found, _ = store.browse_rollouts(RolloutFilter(mode=Mode.VAL, id_prefix=f"{run_id}-val"), limit=100_000)
    by_step: dict[int, dict[str, list[float]]] = defaultdict(dict)
    for rollout in found:
        latest = rollout.attempts[-1] if rollout.attempts else None
        if latest is None or latest.failure_kind in (FailureKind.INFRA, FailureKind.TIMEOUT):
            continue
        value = _final(store, rollout)
        by_task = by_step[metrics_step(rollout) or 0]
        by_task.setdefault(rollout.group_id or rollout.id, []).append(0.0 if value is None else value)
    out = []
    for step, by_task in sorted(by_step.items()):
        mean, error = mean_and_error(by_task)
        half = 0.0 if math.isnan(error) else Z * error
        n = sum(map(len, by_task.values()))
        out.append({"step": step, "n": n, "tasks": len(by_task), "mean": mean, "low": mean - half, "high": mean + half})
    return out


def _final(store: Store, rollout: Rollout) -> float | None:
    if not rollout.attempts:
        return None
    return final_reward(store.list_rewards(rollout.id, attempt=rollout.attempts[-1].attempt))
