"""Which trajectories supervised fine-tuning trains on: sft.min_reward, sft.where, and the config's checks."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from samples_fixtures import model_call, trajectory

from alight.schemas import Mode, Rollout, RolloutState, RunnerSpec, Trajectory
from alight_server.trainer.config.run import ConfigError, TrainConfig, parse_config
from alight_server.trainer.config.sections import SftConfig
from alight_server.trainer.step.sft import select_for_sft


def rollout(rollout_id: str, task: dict[str, Any]) -> Rollout:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return Rollout(
        id=rollout_id, task=task, mode=Mode.TRAIN, group_id=None, runner=RunnerSpec(entrypoint="agent.py:main"),
        timeout_s=60, max_attempts=1, metadata={}, state=RolloutState.SUCCEEDED, policy_version=0,
        created_at=now, updated_at=now, seq=1,
    )  # fmt: skip


def scored(rollout_id: str, reward: float | None, calls: int = 1) -> Trajectory:
    made = [model_call(i, [1, 2, 3 + i], [4], rollout_id=rollout_id) for i in range(calls)]
    return trajectory(made, rollout_id=rollout_id, reward=reward)


TRAJECTORIES = [scored("a", 1.0), scored("b", 0.0), scored("c", None), scored("d", 1.0, calls=3)]
ROLLOUTS = {t.rollout_id: rollout(t.rollout_id, {"op": "mul" if t.rollout_id == "d" else "add"}) for t in TRAJECTORIES}


def kept_ids(config: SftConfig) -> list[str]:
    kept, _ = select_for_sft(TRAJECTORIES, ROLLOUTS, config)
    return [t.rollout_id for t in kept]


def test_without_settings_every_trajectory_is_kept_and_a_missing_reward_becomes_zero() -> None:
    kept, metrics = select_for_sft(TRAJECTORIES, ROLLOUTS, SftConfig())
    assert [t.rollout_id for t in kept] == ["a", "b", "c", "d"]
    assert kept[2].final_reward == 0.0
    assert metrics == {"sft/kept": 4.0, "sft/left_out": 0.0}


def test_min_reward_keeps_trajectories_scored_at_or_above_it() -> None:
    assert kept_ids(SftConfig(min_reward=1.0)) == ["a", "d"]


def test_where_reads_the_task_and_the_call_count() -> None:
    assert kept_ids(SftConfig(where="task['op'] == 'add' and calls == 1")) == ["a", "b", "c"]
    assert kept_ids(SftConfig(min_reward=0.5, where="calls > 1")) == ["d"]


def test_a_where_that_gives_no_boolean_is_an_error_naming_the_expression() -> None:
    with pytest.raises(ValueError, match=r"sft.where 'calls \+ 1' gave 2 on rollout 'a', not true or false"):
        kept_ids(SftConfig(where="calls + 1"))


def test_a_where_that_fails_names_the_rollout() -> None:
    with pytest.raises(ValueError, match=r"sft.where .* failed on rollout 'a': KeyError"):
        kept_ids(SftConfig(where="task['missing'] == 1"))


def test_a_where_cannot_reach_private_attributes() -> None:
    with pytest.raises(ValueError, match="failed on rollout"):
        kept_ids(SftConfig(where="task.__class__.__subclasses__() == []"))


def base_config(tmp_path: Path, **sections: Any) -> dict[str, Any]:
    (tmp_path / "tasks.jsonl").write_text('{"q": 1}\n')
    return {"model": "tiny", "dataset": {"train": "tasks.jsonl"}, "agent": {"entrypoint": "a.py:main"}, **sections}


def test_a_where_that_does_not_parse_is_refused_when_the_config_loads(tmp_path: Path) -> None:
    raw = base_config(tmp_path, algorithm={"estimator": "sft"}, sft={"where": "reward >="})
    with pytest.raises(ConfigError, match=r"sft.where: Value error, not an expression"):
        parse_config(raw, tmp_path)


def test_sft_settings_without_the_sft_estimator_are_refused(tmp_path: Path) -> None:
    raw = base_config(tmp_path, sft={"min_reward": 1.0})
    with pytest.raises(ConfigError, match=r"sft.min_reward selects .* algorithm.estimator is 'grpo'"):
        parse_config(raw, tmp_path)


@pytest.mark.parametrize("settings", [{}, {"algorithm": {"estimator": "sft"}, "sft": {"min_reward": 1.0}}])
def test_a_dumped_config_loads_again(tmp_path: Path, settings: dict[str, Any]) -> None:
    # run.json and the training ranks' copy (trainer/backends/distributed.py) are public_dump(), which names every sft
    # field, None included: a GRPO config's dump was refused, and rank 1 died before joining the step.
    config = parse_config(base_config(tmp_path, **settings), tmp_path)
    again = TrainConfig.model_validate(json.loads(json.dumps(config.public_dump())))
    assert again.sft == config.sft and again.algorithm.estimator == config.algorithm.estimator


def test_sft_refuses_settings_that_need_a_ratio(tmp_path: Path) -> None:
    raw = base_config(tmp_path, algorithm={"estimator": "sft", "kl_coef": 0.1})
    with pytest.raises(ConfigError, match=r"kl_coef=0\.1 has no meaning for estimator sft"):
        parse_config(raw, tmp_path)


def test_only_steps_whose_training_or_selection_reads_rewards_warn_when_none_came() -> None:
    from alight_server.trainer.step.sft import needs_rewards

    assert needs_rewards("grpo", SftConfig()) and needs_rewards("rloo", SftConfig())
    assert not needs_rewards("sft", SftConfig())  # imported traces, all kept: a reward is not needed
    assert not needs_rewards("sft", SftConfig(where="calls <= 2"))
    assert needs_rewards("sft", SftConfig(min_reward=1.0))
    assert needs_rewards("sft", SftConfig(where="reward >= 1 and calls <= 2"))
