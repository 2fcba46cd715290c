"""A training run whose attempts run out of budget: each ends budget_exceeded with reward 0, and trains as such."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from alight.api_models import RolloutQuery
from alight.schemas import FailureKind, Mode, RolloutState
from alight_server.stacks.opening import TrainingStacks
from alight_server.stacks.run_store import open_run_store
from alight_server.trainer.config.run import TrainConfig
from alight_server.trainer.run.loop import TrainingRun
from alight_server.trajectories.join import build_trajectory

pytestmark = pytest.mark.timeout(300)


def test_attempts_past_the_train_configs_call_budget_end_budget_exceeded_with_reward_0(
    tiny_config: Callable[..., TrainConfig],
) -> None:
    # The tool agent makes two calls with the OpenAI client (max_retries=10); its budget allows one.
    config = tiny_config(steps=1, limits={"attempt": {"calls": 1}})
    result = TrainingRun(config, stacks=TrainingStacks(), show_progress=False).run()

    store = open_run_store(result.run_dir)
    train = [r for r in store.list_rollouts(RolloutQuery(limit=1000)) if r.mode == Mode.TRAIN]
    assert len(train) == 2 * 2
    for rollout in train:
        # Final at the first attempt: a task failure, not an infra one that would be retried and skipped.
        assert rollout.state == RolloutState.FAILED
        (attempt,) = rollout.attempts
        assert attempt.failure_kind == FailureKind.BUDGET, attempt.message
        trajectory = build_trajectory(store, rollout.id, attempt.attempt)
        assert trajectory.final_reward == 0.0
        assert len(trajectory.calls) == 1  # the refused call was never recorded: it never reached the policy
