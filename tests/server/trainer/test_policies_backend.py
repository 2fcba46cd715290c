"""Several policies' trainers (PolicySet) on the tiny model: each its own adapter and optimizer, saved and restored."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from policies_fixtures import TWO, digest, embedded, step
from samples_fixtures import model_call, trajectory

from alight.client import AlightClient
from alight_server.trainer.backends.embedded import EmbeddedBackend
from alight_server.trainer.backends.policy_set import PolicySet, make_policy_set
from alight_server.trainer.config.run import TrainConfig
from alight_server.trainer.run.checkpoint import save_checkpoint
from alight_server.trainer.run.init_from import checkpoint_adapter, export_policy
from alight_server.trainer.run.weight_sync import WeightSync
from alight_server.trainer.step.samples import SampleConfig
from alight_server.trainer.step.update import step_policies


@pytest.fixture
def two_policies(tiny_config: Callable[..., TrainConfig]) -> tuple[TrainConfig, PolicySet]:
    config = tiny_config(**TWO)
    return config, make_policy_set(config)


def test_a_step_of_one_policy_leaves_the_others_adapter_unchanged_and_the_reverse(
    two_policies: tuple[TrainConfig, PolicySet],
) -> None:
    _, policies = two_policies
    assert list(policies.backends) == ["planner", "executor"]
    for trained, other in (("planner", "executor"), ("executor", "planner")):
        before = {name: digest(policies.weights(name)) for name in policies.backends}
        step(policies, trained)
        assert digest(policies.weights(other)) == before[other]
        assert digest(policies.weights(trained)) != before[trained]
    # each policy's own optimizer with its own settings
    assert [g["lr"] for g in embedded(policies, "executor").optimizer.param_groups] == [5e-3]
    assert [g["lr"] for g in embedded(policies, "planner").optimizer.param_groups] == [1e-2]


def test_adapter_weights_are_named_as_peft_names_a_one_adapter_models(
    two_policies: tuple[TrainConfig, PolicySet],
) -> None:
    _, policies = two_policies
    names = list(policies.weights("planner"))
    assert "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight" in names
    assert all(".lora_A.weight" in n or ".lora_B.weight" in n for n in names)


def optimizer_tensors(state: dict[str, Any]) -> dict[str, torch.Tensor]:
    return {f"{p}.{k}": v for p, values in state["optimizer"]["state"].items() for k, v in values.items()}


def test_a_checkpoint_restores_every_policys_adapter_and_optimizer_exactly(
    two_policies: tuple[TrainConfig, PolicySet],
) -> None:
    config, policies = two_policies
    step(policies, "planner")
    step(policies, "executor")
    policies.own_versions.update(planner=3, executor=1)
    saved = policies.state_dict()
    restored = make_policy_set(config)
    restored.load_state_dict(saved)
    for name in ("planner", "executor"):
        assert digest(restored.weights(name)) == digest(policies.weights(name))
        mine, theirs = restored.backends[name].state_dict(), saved["policies"][name]
        assert digest(optimizer_tensors(mine)) == digest(optimizer_tensors(theirs))
        assert embedded(restored, name).updates == 1
    assert restored.own_versions == {"planner": 3, "executor": 1}


def test_a_checkpoint_of_other_policies_is_refused_naming_them(
    two_policies: tuple[TrainConfig, PolicySet],
) -> None:
    _, policies = two_policies
    saved = policies.state_dict()
    del saved["policies"]["executor"]
    with pytest.raises(ValueError, match=r"trained the policies \['planner'\], this config trains"):
        policies.load_state_dict(saved)


def test_init_from_starts_a_policy_from_a_checkpoints_adapter_trainable_or_frozen(
    tiny_config: Callable[..., TrainConfig], two_policies: tuple[TrainConfig, PolicySet], tmp_path: Path
) -> None:
    _, policies = two_policies
    step(policies, "executor")
    folder = save_checkpoint(tmp_path / "earlier" / "checkpoints", 1, {"trainer": policies.state_dict()})
    policies_from = {
        "planner": {"trainable": False, "init_from": str(folder)},  # a frozen adapter, from the step folder
        "executor": {"init_from": str(tmp_path / "earlier")},
    }
    started = make_policy_set(tiny_config(**{**TWO, "policies": policies_from}))
    assert started.starts_from_checkpoints and list(started.backends) == ["executor"]
    assert digest(started.weights("executor")) == digest(policies.weights("executor"))
    assert digest(started.weights("planner")) == digest(policies.weights("planner"))


def test_several_policies_refuse_more_than_one_training_process(tiny_config: Callable[..., TrainConfig]) -> None:
    with pytest.raises(ValueError, match="several policies train in one process"):
        make_policy_set(tiny_config(**TWO, trainer={"world_size": 2}))


def test_a_lone_policy_trained_without_lora_is_refused_naming_the_setting(
    tiny_config: Callable[..., TrainConfig],
) -> None:
    with pytest.raises(ValueError, match=r"policies.solo trains without LoRA.*set lora.enabled: true"):
        make_policy_set(tiny_config(policies={"solo": {}}))


def test_a_several_policy_checkpoint_given_to_init_from_is_refused_pointing_at_each_policys_init_from(
    two_policies: tuple[TrainConfig, PolicySet], tmp_path: Path
) -> None:
    _, policies = two_policies
    save_checkpoint(tmp_path / "checkpoints", 1, {"trainer": policies.state_dict()})
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r", "config": {"model": "tiny"}}))
    with pytest.raises(ValueError, match=r"trained several policies \(planner, executor\).*policies.NAME.init_from"):
        export_policy(tmp_path, "tiny", tmp_path / "out")
    with pytest.raises(ValueError, match=r"trained the policies planner, executor, not 'judge'"):
        checkpoint_adapter(tmp_path, "judge")


def test_init_from_a_checkpoint_trained_without_lora_is_refused(tmp_path: Path) -> None:
    save_checkpoint(tmp_path / "checkpoints", 1, {"trainer": {"trainable": {"lm_head.weight": torch.zeros(2)}}})
    with pytest.raises(ValueError, match="trained without LoRA, so holds no adapter"):
        checkpoint_adapter(tmp_path, "planner")


def test_a_step_whose_groups_all_have_equal_rewards_steps_and_pushes_no_policy(
    two_policies: tuple[TrainConfig, PolicySet],
) -> None:
    config, policies = two_policies
    trajectories = [
        trajectory(
            [
                model_call(0, [1, 5, 6], [7, 8], rollout_id=rid, flags=["policy:planner"]),
                model_call(1, [1, 5, 6, 7, 8, 9], [10, 11], rollout_id=rid, flags=["policy:executor"]),
            ],
            rollout_id=rid,
            reward=0.5,
        )
        for rid in ("r1", "r2")
    ]
    before = {name: digest(policies.weights(name)) for name in policies.backends}
    nowhere = WeightSync(AlightClient("http://127.0.0.1:9", "no-server"))  # a push would fail: none may happen
    metrics, version = step_policies(
        policies, trajectories, config, SampleConfig(pad_token_id=0), decode=str, sync=nowhere, step=1
    )
    assert version is None
    assert {name: digest(policies.weights(name)) for name in policies.backends} == before
    for name in ("planner", "executor"):
        assert metrics[f"policy/{name}/samples/rows"] == 2.0 and metrics[f"policy/{name}/train/uniform_groups"] == 1.0
        assert f"policy/{name}/train/loss" not in metrics and metrics[f"policy/{name}/policy_version"] == 0.0
    assert metrics["samples/rows"] == 4.0 and metrics["train/uniform_groups"] == 2.0


def test_a_one_policy_run_steps_as_a_set_of_one_with_the_step_s_own_metrics_and_checkpoint(
    tiny_config: Callable[..., TrainConfig],
) -> None:
    config = tiny_config()
    policies = make_policy_set(config)
    assert not policies.named and isinstance(policies.one, EmbeddedBackend) and list(policies.backends) == ["policy"]
    assert set(policies.state_dict()) == {"trainable", "optimizer", "updates"}  # the backend's own, as before
    trajectories = [  # calls with no policy flag
        trajectory([model_call(0, [1, 5, 6], [7, 8], rollout_id=rid)], rollout_id=rid, reward=0.5)
        for rid in ("r1", "r2")
    ]
    nowhere = WeightSync(AlightClient("http://127.0.0.1:9", "no-server"))  # a push would fail: none may happen
    metrics, version = step_policies(
        policies, trajectories, config, SampleConfig(pad_token_id=0), decode=str, sync=nowhere, step=1
    )
    assert version is None  # one group, equal rewards: nothing to learn
    assert metrics == {"train/groups": 1.0, "train/uniform_groups": 1.0, "samples/rows": 2.0, "samples/breaks": 0.0}
