"""alight's training config -> verl's (its own ppo_trainer config, composed by Hydra and overridden): `unsupported`
names every alight setting verl would silently ignore or compute differently, and `verl_config` refuses those."""
# pyright: reportMissingImports=false
# (verl and omegaconf live in their own venv, .venv-verl; the type check runs in .venv)

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from alight_server.trainer.backends.verl.install import require_verl
from alight_server.trainer.backends.verl.registry import ESTIMATOR_NAMES, LOSS_NAME, SFT_LOSS_NAME
from alight_server.trainer.backends.verl.settings import VerlSettings

if TYPE_CHECKING:
    from alight_server.trainer.config.run import TrainConfig

PLUGIN = "alight_server.trainer.backends.verl.plugin"
ACTOR = "actor_rollout_ref.actor"
ROLLOUT = "actor_rollout_ref.rollout"
MODEL = "actor_rollout_ref.model"
# The embedded engine's settings: on verl, its rollout replicas serve the policy.
ENGINE_ONLY = frozenset(
    {"device", "dtype", "max_batch_size", "prefix_cache_tokens", "overlap_prefill", "torch_threads"}
)


class VerlConfigError(ValueError):
    """An alight config the verl backend cannot honour; the message names each key and what to do."""


def unsupported(config: TrainConfig) -> list[str]:
    """One line per alight setting verl would silently ignore (or compute differently)."""
    problems = []
    algorithm = config.algorithm
    if algorithm.kl_coef > 0:
        problems.append(
            f"algorithm.kl_coef={algorithm.kl_coef}: verl adds its KL term outside the registered loss, weighted "
            "by its own loss_agg_mode instead of alight's aggregation; set 0 or use trainer.backend: embedded"
        )
    if algorithm.tis_cap is not None:
        problems.append(
            f"algorithm.tis_cap={algorithm.tis_cap}: the verl backend trains against the gateway's logprobs as "
            "π_old (verl's bypass mode), so there is no π_old / π_rollout ratio to cap; remove it"
        )
    if config.async_rollout.enabled and config.async_rollout.stale == "downweight":
        problems.append(
            "async_rollout.stale=downweight: the verl backend takes alight's token weights without the batch's "
            "row weights; use stale: drop (asynchronous rollouts themselves work on verl)"
        )
    if algorithm.step_reward_coef:
        problems.append(
            f"algorithm.step_reward_coef={algorithm.step_reward_coef}: verl hands an advantage estimator no per-turn step "
            "returns; set 0 or use trainer.backend: embedded"
        )
    if algorithm.estimator != "sft" and algorithm.rendered_rows == "recompute":
        problems.append(
            "algorithm.rendered_rows=recompute: the verl backend trains against the recorded logprobs (bypass "
            "mode) and has no pass that recomputes them; use drop, or algorithm.estimator: sft"
        )
    if config.lora.enabled and config.lora.dropout:
        problems.append(f"lora.dropout={config.lora.dropout}: verl's FSDP LoRA has no dropout setting; set 0")
    if config.optimizer.max_grad_norm is None:
        problems.append("optimizer.max_grad_norm=null: verl always clips the gradient norm; give a value")
    for key in sorted(ENGINE_ONLY & config.inference.model_fields_set):  # type: ignore[operator]
        problems.append(
            f"inference.{key}: configures the embedded engine, which the verl backend does not start; "
            "verl's rollout replicas serve the policy (see the verl: section)"
        )
    if config.server.url is not None:
        problems.append(
            "server.url: the verl backend runs its own alight server and controller next to its rollout "
            "replicas (an existing server is not supported yet); remove the server: section"
        )
    for key in ("inference_url", "weights_dir"):
        if getattr(config.server, key) is not None:
            problems.append(
                f"server.{key}: weights go to verl's rollout replicas through verl's checkpoint engine, "
                "not to an inference server; remove it"
            )
    return problems


def verl_overrides(config: TrainConfig, settings: VerlSettings, model_path: str | Path) -> dict[str, Any]:
    """Dotted verl keys -> values, for everything alight's config decides."""
    opt, algorithm, lora = config.optimizer, config.algorithm, config.lora
    out: dict[str, Any] = {
        f"{MODEL}.path": str(model_path),
        f"{MODEL}.external_lib": PLUGIN,  # verl's workers import it: alight's functions get registered there
        f"{ACTOR}.strategy": settings.strategy,
        f"{ACTOR}.optim.lr": opt.lr,
        f"{ACTOR}.optim.weight_decay": opt.weight_decay,
        f"{ACTOR}.optim.betas": list(opt.betas),
        f"{ACTOR}.optim.clip_grad": opt.max_grad_norm,
        # alight packs micro-batches by padded tokens; verl's dynamic batching packs by tokens per GPU
        f"{ACTOR}.use_dynamic_bsz": True,
        f"{ACTOR}.ppo_max_token_len_per_gpu": opt.micro_batch_tokens,
        f"{ACTOR}.ppo_mini_batch_size": config.tasks_per_step,
        f"{ACTOR}.ppo_epochs": algorithm.updates_per_batch,
        f"{ACTOR}.clip_ratio": algorithm.clip_low,
        f"{ACTOR}.clip_ratio_low": algorithm.clip_low,
        f"{ACTOR}.clip_ratio_high": algorithm.clip_high,
        f"{ACTOR}.policy_loss.loss_mode": SFT_LOSS_NAME if algorithm.estimator == "sft" else LOSS_NAME,
        f"{ACTOR}.use_kl_loss": False,
        f"{ACTOR}.entropy_coeff": 0.0,
        f"{ACTOR}.data_loader_seed": config.seed,
        "algorithm.adv_estimator": ESTIMATOR_NAMES[algorithm.estimator],
        "algorithm.norm_adv_by_std_in_grpo": algorithm.normalize_std,
        "algorithm.use_kl_in_reward": False,
        f"{ROLLOUT}.name": settings.rollout,
        f"{ROLLOUT}.mode": "async",
        f"{ROLLOUT}.n": config.group_size,
        f"{ROLLOUT}.temperature": config.inference.train_temperature,
        f"{ROLLOUT}.tensor_model_parallel_size": settings.tensor_parallel_size,
        f"{ROLLOUT}.gpu_memory_utilization": settings.gpu_memory_utilization,
        "data.train_batch_size": config.tasks_per_step,
        "trainer.nnodes": settings.nnodes,
        "trainer.n_gpus_per_node": settings.n_gpus_per_node,
        "trainer.default_local_dir": str(Path(config.output_dir) / "verl"),
        "trainer.logger": [],
    }
    if settings.max_model_len is not None:
        out[f"{ROLLOUT}.max_model_len"] = settings.max_model_len
    if config.samples.max_prompt_tokens is not None:
        out["data.max_prompt_length"] = config.samples.max_prompt_tokens
    if config.samples.max_response_tokens is not None:
        out["data.max_response_length"] = config.samples.max_response_tokens
    if lora.enabled:
        out[f"{MODEL}.lora_rank"] = lora.r
        out[f"{MODEL}.lora_alpha"] = lora.alpha
        out[f"{MODEL}.target_modules"] = list(lora.target_modules)
    return out


def verl_config(config: TrainConfig, settings: VerlSettings, model_path: str | Path) -> Any:
    """verl's full ppo_trainer config (an OmegaConf DictConfig) for this run, checked by verl's dataclasses."""
    problems = unsupported(config)
    mapped = verl_overrides(config, settings, model_path)
    clashes = sorted(set(settings.overrides) & set(mapped))
    problems += [f"verl.overrides.{key}: alight sets this key from its own config; set that instead" for key in clashes]
    if problems:
        raise VerlConfigError("the verl backend cannot run this config:\n" + "\n".join(f"  {p}" for p in problems))
    verl = require_verl()
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    config_dir = Path(str(verl.__file__)).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        composed = compose(config_name="ppo_trainer")
    for key, value in {**mapped, **settings.overrides}.items():
        if not _has_key(composed, key):
            where = f"verl.overrides.{key}" if key in settings.overrides else f"alight's translation to {key}"
            raise VerlConfigError(f"{where}: verl {verl.__version__} has no such key")
        OmegaConf.update(composed, key, value, merge=False)
    _validate(composed)
    return composed


def _has_key(composed: Any, dotted: str) -> bool:
    """Whether verl's config has the key, set or not (`???` values count: verl requires them)."""
    from omegaconf import DictConfig, OmegaConf

    parent, _, leaf = dotted.rpartition(".")
    node = OmegaConf.select(composed, parent) if parent else composed
    keys = list(node.keys()) if isinstance(node, DictConfig) else []  # `leaf in node` is False for ??? values
    return leaf in keys


def _validate(composed: Any) -> None:
    """verl's own dataclasses check the actor and rollout sections (types, ranges, combinations)."""
    from hydra.errors import InstantiationException
    from verl.utils.config import omega_conf_to_dataclass

    try:
        omega_conf_to_dataclass(composed.actor_rollout_ref.actor)
        omega_conf_to_dataclass(composed.actor_rollout_ref.rollout)
    except (InstantiationException, ValueError, TypeError, AssertionError) as exc:
        raise VerlConfigError(f"verl refused the translated config: {exc}") from exc
