"""alight config -> verl's own composed ppo_trainer config: every key alight exposes lands, the rest is refused."""
# pyright: reportMissingImports=false
# (verl and omegaconf live in their own venv, .venv-verl; the type check runs in .venv)

from __future__ import annotations

import pytest
from verl_fixtures import require_verl, train_config

from alight_server.trainer.backends.verl.settings import VerlSettings

pytestmark = pytest.mark.verl
require_verl()

from verl.utils.config import omega_conf_to_dataclass  # noqa: E402

from alight_server.trainer.backends.verl.config import VerlConfigError, verl_config  # noqa: E402

ACTOR, ROLLOUT, MODEL = "actor_rollout_ref.actor", "actor_rollout_ref.rollout", "actor_rollout_ref.model"


def select(composed, key: str):
    from omegaconf import OmegaConf

    value = OmegaConf.select(composed, key)
    return OmegaConf.to_container(value) if hasattr(value, "keys") or isinstance(value, list | tuple) else value


def test_each_alight_key_lands_on_its_verl_key(tmp_path):
    config = train_config(
        tmp_path,
        group_size=6,
        tasks_per_step=3,
        seed=7,
        optimizer={"lr": 3e-6, "weight_decay": 0.1, "betas": [0.8, 0.95], "max_grad_norm": 0.5, "micro_batch_tokens": 2048},
        algorithm={"estimator": "rloo", "normalize_std": False, "clip_low": 0.1, "clip_high": 0.3,
                   "updates_per_batch": 2},
        samples={"max_prompt_tokens": 300, "max_response_tokens": 200},
        lora={"enabled": True, "r": 8, "alpha": 16, "target_modules": ["q_proj", "v_proj"]},
        inference={"train_temperature": 0.7},
    )  # fmt: skip
    settings = VerlSettings(n_gpus_per_node=4, tensor_parallel_size=2, gpu_memory_utilization=0.4, rollout="sglang")
    composed = verl_config(config, settings, "/models/policy")
    expected = {
        f"{MODEL}.path": "/models/policy",
        f"{MODEL}.external_lib": "alight_server.trainer.backends.verl.plugin",
        f"{MODEL}.lora_rank": 8,
        f"{MODEL}.lora_alpha": 16,
        f"{MODEL}.target_modules": ["q_proj", "v_proj"],
        f"{ACTOR}.optim.lr": 3e-6,
        f"{ACTOR}.optim.weight_decay": 0.1,
        f"{ACTOR}.optim.betas": [0.8, 0.95],
        f"{ACTOR}.optim.clip_grad": 0.5,
        f"{ACTOR}.use_dynamic_bsz": True,
        f"{ACTOR}.ppo_max_token_len_per_gpu": 2048,
        f"{ACTOR}.ppo_epochs": 2,
        f"{ACTOR}.clip_ratio_low": 0.1,
        f"{ACTOR}.clip_ratio_high": 0.3,
        f"{ACTOR}.policy_loss.loss_mode": "alight",
        f"{ACTOR}.use_kl_loss": False,
        f"{ACTOR}.data_loader_seed": 7,
        "algorithm.adv_estimator": "alight_rloo",
        "algorithm.norm_adv_by_std_in_grpo": False,
        f"{ROLLOUT}.name": "sglang",
        f"{ROLLOUT}.n": 6,
        f"{ROLLOUT}.temperature": 0.7,
        f"{ROLLOUT}.tensor_model_parallel_size": 2,
        f"{ROLLOUT}.gpu_memory_utilization": 0.4,
        "data.max_prompt_length": 300,
        "data.max_response_length": 200,
        "data.train_batch_size": 3,
        "trainer.n_gpus_per_node": 4,
        "trainer.default_local_dir": str(tmp_path / "run" / "verl"),
    }
    assert {key: select(composed, key) for key in expected} == expected


def test_verls_own_dataclasses_accept_the_translated_sections(tmp_path):
    composed = verl_config(train_config(tmp_path), VerlSettings(), "/models/policy")
    actor = omega_conf_to_dataclass(composed.actor_rollout_ref.actor)
    rollout = omega_conf_to_dataclass(composed.actor_rollout_ref.rollout)
    assert (actor.policy_loss.loss_mode, actor.clip_ratio_high) == ("alight", 0.28)
    assert (rollout.name, rollout.prompt_length, rollout.response_length) == ("vllm", 512, 512)


def test_sft_runs_the_registered_sft_loss_and_estimator(tmp_path):
    composed = verl_config(train_config(tmp_path, algorithm={"estimator": "sft"}), VerlSettings(), "/models/policy")
    assert select(composed, f"{ACTOR}.policy_loss.loss_mode") == "alight_sft"
    assert select(composed, "algorithm.adv_estimator") == "alight_sft"


@pytest.mark.parametrize(
    ("sections", "named"),
    [
        ({"algorithm": {"kl_coef": 0.05}}, "algorithm.kl_coef=0.05"),
        ({"algorithm": {"tis_cap": 2.0}}, "algorithm.tis_cap=2.0"),
        ({"lora": {"enabled": True, "dropout": 0.1}}, "lora.dropout=0.1"),
        ({"algorithm": {"rendered_rows": "recompute"}}, "algorithm.rendered_rows=recompute"),
        ({"optimizer": {"max_grad_norm": None}}, "optimizer.max_grad_norm=null"),
        ({"inference": {"device": "cuda:1"}}, "inference.device"),
        ({"inference": {"max_batch_size": 8}}, "inference.max_batch_size"),
        (
            {"server": {"url": "http://127.0.0.1:8700", "inference_url": "http://127.0.0.1:8001"}},
            "server.inference_url",
        ),
        (
            {"server": {"url": "http://127.0.0.1:8700", "inference_url": "http://127.0.0.1:8001"}},
            "server.url: the verl backend runs its own alight server",
        ),
    ],
)
def test_a_setting_verl_would_ignore_is_an_error_naming_it(tmp_path, sections, named):
    with pytest.raises(VerlConfigError, match="cannot run this config") as caught:
        verl_config(train_config(tmp_path, **sections), VerlSettings(), "/models/policy")
    assert named in str(caught.value)


def test_every_ignored_setting_is_named_at_once(tmp_path):
    config = train_config(tmp_path, algorithm={"kl_coef": 0.05, "tis_cap": 2.0}, inference={"dtype": "bfloat16"})
    with pytest.raises(VerlConfigError) as caught:
        verl_config(config, VerlSettings(), "/models/policy")
    assert [line.split(":")[0].strip() for line in str(caught.value).splitlines()[1:]] == [
        "algorithm.kl_coef=0.05",
        "algorithm.tis_cap=2.0",
        "inference.dtype",
    ]


def test_an_override_of_a_key_alight_sets_is_refused(tmp_path):
    settings = VerlSettings(overrides={f"{ACTOR}.optim.lr": 1e-3})
    with pytest.raises(VerlConfigError, match=r"verl.overrides.actor_rollout_ref.actor.optim.lr: alight sets"):
        verl_config(train_config(tmp_path), settings, "/models/policy")


def test_an_override_of_a_key_verl_does_not_have_is_refused(tmp_path):
    settings = VerlSettings(overrides={f"{ACTOR}.fsdp_config.param_ofload": True})
    with pytest.raises(VerlConfigError, match=r"param_ofload: verl 0\.9\.1 has no such key"):
        verl_config(train_config(tmp_path), settings, "/models/policy")


def test_an_override_verl_accepts_is_applied(tmp_path):
    settings = VerlSettings(overrides={f"{ACTOR}.fsdp_config.param_offload": True})
    composed = verl_config(train_config(tmp_path), settings, "/models/policy")
    assert select(composed, f"{ACTOR}.fsdp_config.param_offload") is True


def test_an_override_verls_dataclasses_reject_is_an_error(tmp_path):
    settings = VerlSettings(overrides={f"{ACTOR}.loss_agg_mode": "per-banana"})
    with pytest.raises(VerlConfigError, match="verl refused the translated config"):
        verl_config(train_config(tmp_path), settings, "/models/policy")
