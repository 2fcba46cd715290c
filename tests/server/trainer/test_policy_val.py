"""Validation per policy (phases.policy_scores): each policy with a named reward gets its own held-out score."""

from __future__ import annotations

import math
from datetime import UTC, datetime

from alight.schemas import FailureKind, Reward, Trajectory
from alight_server.trainer.config.policies import PolicyConfig
from alight_server.trainer.run.phases import policy_scores
from tests.server.trainer.samples_fixtures import trajectory

POLICIES = {"planner": PolicyConfig(reward="plan_score"), "executor": PolicyConfig()}


def rollout(rollout_id: str, task: str, plan_score: float | None, *, final: float = 1.0) -> Trajectory:
    t = trajectory([], rollout_id=rollout_id, group_id=task, reward=final)
    if plan_score is None:
        return t
    named = Reward(
        id=f"{rollout_id}-plan", rollout_id=rollout_id, attempt=1, value=plan_score, name="plan_score",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )  # fmt: skip
    return t.model_copy(update={"rewards": [named]})


def test_a_policy_with_a_named_reward_is_scored_by_it_not_by_the_final_reward() -> None:
    metrics = policy_scores([rollout("a1", "t1", 0.2), rollout("a2", "t1", 0.4), rollout("b1", "t2", 1.0)], POLICIES)
    assert math.isclose(metrics["policy/planner/val/score"], (0.2 + 0.4 + 1.0) / 3)
    # the error of that mean, tasks as clusters (alight.evaluation mean_and_error): each task's residual sum
    mean = (0.2 + 0.4 + 1.0) / 3
    residuals = [(0.2 - mean) + (0.4 - mean), 1.0 - mean]
    assert math.isclose(metrics["policy/planner/val/score_se"], math.sqrt(2 * sum(r * r for r in residuals)) / 3)
    assert metrics["policy/planner/val/rewarded"] == 3.0


def test_a_rollout_that_never_reported_the_named_reward_scores_zero_for_that_policy() -> None:
    metrics = policy_scores([rollout("a1", "t1", 1.0), rollout("a2", "t1", None, final=1.0)], POLICIES)
    assert metrics["policy/planner/val/score"] == 0.5
    assert metrics["policy/planner/val/rewarded"] == 1.0


def test_an_infra_failure_is_left_out_of_a_policys_score_as_of_val_score() -> None:
    failed = rollout("a2", "t1", 0.0).model_copy(update={"failure_kind": FailureKind.INFRA})
    assert policy_scores([rollout("a1", "t1", 0.8), failed], POLICIES)["policy/planner/val/score"] == 0.8


def test_a_policy_without_a_named_reward_has_no_score_of_its_own() -> None:
    metrics = policy_scores([rollout("a1", "t1", 0.5)], POLICIES)
    assert not [key for key in metrics if key.startswith("policy/executor/")]


def test_one_policy_runs_get_no_policy_scores() -> None:
    assert policy_scores([rollout("a1", "t1", 0.5)], {}) == {}
