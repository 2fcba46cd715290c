"""VerlBackend's CPU-checkable parts: row padding for the ranks, and the verl API it drives (the rest needs a GPU)."""
# pyright: reportMissingImports=false
# (verl and omegaconf live in their own venv, .venv-verl; the type check runs in .venv)

from __future__ import annotations

import inspect

import pytest
import torch
from verl_fixtures import actor_config, real_batch, require_verl

pytestmark = pytest.mark.verl
require_verl()

from verl.trainer.ppo.core_algos import get_policy_loss_fn  # noqa: E402

from alight_server.trainer.backends.verl.backend import VerlBackend, pad_to_ranks  # noqa: E402
from alight_server.trainer.backends.verl.data import to_data_proto  # noqa: E402
from alight_server.trainer.backends.verl.registry import register, with_advantages, with_token_weights  # noqa: E402


def test_rows_added_for_the_ranks_train_nothing(tmp_path):
    register()
    data = with_token_weights(with_advantages(to_data_proto(real_batch()), "grpo"), "per_rollout_mean")
    padded = pad_to_ranks(data, 4)
    assert (len(data), len(padded)) == (7, 8)
    extra = padded.batch[-1:]
    assert extra["response_mask"].sum() == 0 and extra["rollout_is_weights"].sum() == 0
    assert torch.equal(padded.batch["input_ids"][:7], data.batch["input_ids"])
    config = actor_config(tmp_path)

    def loss(d) -> float:
        b = d.batch
        logp = b["old_log_probs"] + 0.1 * b["response_mask"]  # a policy that moved
        mask = b["response_mask"].bool()
        value, _ = get_policy_loss_fn("alight")(
            b["old_log_probs"], logp, b["advantages"], mask, "token-mean", config, b["rollout_is_weights"]
        )
        return float(value)

    assert loss(padded) == pytest.approx(loss(data), abs=1e-7)


def test_every_verl_api_the_backend_drives_exists_in_the_installed_verl():
    from verl.checkpoint_engine import CheckpointEngineManager
    from verl.single_controller.ray import RayClassWithInitArgs, RayWorkerGroup, ResourcePoolManager  # noqa: F401
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env  # noqa: F401
    from verl.trainer.ppo.utils import Role
    from verl.utils import tensordict_utils as tu
    from verl.utils.metric import reduce_metrics  # noqa: F401
    from verl.workers.engine_workers import ActorRolloutRefWorker
    from verl.workers.rollout.llm_server import LLMServerManager
    from verl.workers.rollout.replica import RolloutReplica

    assert str(Role.ActorRollout) == "actor_rollout"
    for owner, names in [
        (ActorRolloutRefWorker, ["init_model", "update_actor", "save_checkpoint", "load_checkpoint", "update_weights"]),
        (CheckpointEngineManager, ["update_weights", "sleep_replicas"]),
        (LLMServerManager, ["create", "get_replicas"]),
        (RolloutReplica, ["server_address", "launch_servers"]),
        (tu, ["assign_non_tensor", "get"]),
    ]:
        missing = [n for n in names if not hasattr(owner, n)]
        assert not missing, f"{owner.__name__} lacks {missing}"
    assert "global_steps" in inspect.signature(CheckpointEngineManager.update_weights).parameters
    assert {"config", "worker_group", "rollout_resource_pool"} <= set(inspect.signature(LLMServerManager).parameters)


def test_the_backend_has_the_trainer_backend_methods():
    for name in ("step", "push_weights", "state_dict", "load_state_dict", "close"):
        assert callable(getattr(VerlBackend, name))
