"""Supervised fine-tuning's selection: which trajectories `algorithm.estimator: sft` trains on (docs/traces.md).

A trajectory is kept when its final reward is at least `sft.min_reward` (when set) and the `sft.where`
expression, evaluated by simpleeval over `expression_names`, is true of it (when set). Sampling the current
policy, keeping what scored well and fine-tuning on it is rejection-sampling fine-tuning: the ordinary loop."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from simpleeval import SimpleEval  # pyright: ignore[reportMissingTypeStubs]

from alight.schemas import Rollout, Trajectory
from alight_server.trainer.config.sections import SftConfig


def needs_rewards(estimator: str, config: SftConfig) -> bool:
    """Whether a step's trajectories need rewards: every estimator but sft, and sft when its selection reads them."""
    if estimator != "sft":
        return True
    return config.min_reward is not None or (config.where is not None and "reward" in config.where)


def expression_names(trajectory: Trajectory, rollout: Rollout | None) -> dict[str, Any]:
    """What an `sft.where` expression can read about one trajectory (docs/traces.md lists the names)."""
    return {
        "reward": trajectory.final_reward,
        "task": rollout.task if rollout is not None else None,
        "metadata": rollout.metadata if rollout is not None else {},
        "calls": len(trajectory.calls),
        "rendered": any(tc.call.rendered for tc in trajectory.calls),
        "rollout_id": trajectory.rollout_id,
        "group_id": trajectory.group_id,
        "mode": trajectory.mode.value,
    }


def passes(config: SftConfig, trajectory: Trajectory, rollout: Rollout | None) -> bool:
    """Whether supervised fine-tuning trains on `trajectory`; ValueError naming the expression when it fails."""
    reward = trajectory.final_reward
    if config.min_reward is not None and (reward is None or reward < config.min_reward):
        return False
    if config.where is None:
        return True
    evaluator = SimpleEval(names=expression_names(trajectory, rollout))
    try:
        verdict = evaluator.eval(config.where)  # pyright: ignore[reportUnknownMemberType]
    except Exception as exc:  # simpleeval raises its own errors and whatever the expression's operations raise
        raise ValueError(
            f"sft.where {config.where!r} failed on rollout {trajectory.rollout_id!r}: {type(exc).__name__}: {exc}"
        ) from None
    if not isinstance(verdict, bool):
        raise ValueError(
            f"sft.where {config.where!r} gave {verdict!r} on rollout {trajectory.rollout_id!r}, not true or "
            "false; compare something, e.g. reward >= 1"
        )
    return verdict


def select_for_sft(
    trajectories: Sequence[Trajectory], rollouts: Mapping[str, Rollout], config: SftConfig
) -> tuple[list[Trajectory], dict[str, float]]:
    """(the trajectories to fine-tune on, `sft/kept` and `sft/left_out`). A kept trajectory without a reward gets
    0 in the batch: the builder wants one, and sft never reads it."""
    kept = [
        t if t.final_reward is not None else t.model_copy(update={"final_reward": 0.0})
        for t in trajectories
        if passes(config, t, rollouts.get(t.rollout_id))
    ]
    return kept, {"sft/kept": float(len(kept)), "sft/left_out": float(len(trajectories) - len(kept))}
