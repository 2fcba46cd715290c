"""alight's advantage estimators and losses in verl's own registries, so verl runs trainer/step/algorithm.py.

1. Advantages (`register_adv_est`): the rows' uid is a `RowKey`, so each rollout enters its group's statistics
   once however many rows it has.
2. Loss (`register_policy_loss`): verl hands a loss function only the rows' tensors, never the batch, so alight's
   token weights (computed once on the whole batch) ride in `rollout_is_weights`. That slot is free: alight's
   π_old is the gateway's logprobs (verl's bypass mode), so verl's rollout correction has nothing to weigh, and
   the config translation refuses it. Each rank's loss is scaled by the data-parallel size because FSDP averages
   gradients over ranks, as verl's own aggregations do.
3. SFT: the loss `alight_sft` and zero advantages, run in the same actor update as RL (verl's own SFT trainer is
   a separate program over Parquet files with no rollout replicas to update).
4. Distillation: the teacher's per-token reward rides as `distill_rewards` (R, A); `with_distill` adds it to the
   advantages (GRPO / RLOO, or the zeros of `alight_distill`) before the actor update.
"""
# pyright: reportMissingImports=false
# (verl and omegaconf live in their own venv, .venv-verl; the type check runs in .venv)

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from alight_server.trainer.backends.verl.data import RowKey
from alight_server.trainer.backends.verl.install import require_verl
from alight_server.trainer.step.algorithm import (
    AlgorithmConfig,
    Estimator,
    aggregation_weights,
    group_advantages,
    policy_loss,
    sft_loss,
    token_advantages,
)

ESTIMATOR_NAMES: dict[str, str] = {
    "grpo": "alight_grpo",
    "rloo": "alight_rloo",
    "sft": "alight_sft",
    "distill": "alight_distill",
}
LOSS_NAME = "alight"
SFT_LOSS_NAME = "alight_sft"


def rollout_table(index: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, list[int], torch.Tensor]:
    """From the rows' RowKeys: row_rollout (R,), rollout_group (U',), a row of each rollout, and the
    rowless rollouts' (rewards (V,), appended after the U' rollouts with rows)."""
    keys: list[RowKey] = list(index)
    if not all(isinstance(k, RowKey) for k in keys):
        raise TypeError("the alight estimator needs uid RowKeys: build the DataProto with trainer.verl.data")
    rollouts: dict[tuple[str, str], int] = {}
    groups: dict[str, int] = {}
    first_row: list[int] = []
    rowless: dict[str, tuple[float, ...]] = {}
    row_rollout = []
    for r, key in enumerate(keys):
        groups.setdefault(key.group, len(groups))
        rowless.setdefault(key.group, key.rowless_rewards)
        if (key.group, key.rollout) not in rollouts:
            rollouts[(key.group, key.rollout)] = len(rollouts)
            first_row.append(r)
        row_rollout.append(rollouts[(key.group, key.rollout)])
    extra_group = [groups[g] for g, rewards in rowless.items() for _ in rewards]
    rollout_group = torch.tensor([groups[g] for g, _ in rollouts] + extra_group, dtype=torch.long)
    extra_rewards = torch.tensor([v for rewards in rowless.values() for v in rewards], dtype=torch.float32)
    return torch.tensor(row_rollout, dtype=torch.long), rollout_group, first_row, extra_rewards


def _advantages(
    estimator: Estimator,
    token_level_rewards: torch.Tensor,  # (R, A) the rollout's reward on each row's last trained token
    response_mask: torch.Tensor,  # (R, A)
    index: np.ndarray,  # (R,) RowKey
    config: Any = None,  # verl's AlgoConfig: norm_adv_by_std_in_grpo
) -> tuple[torch.Tensor, torch.Tensor]:  # advantages and returns, both (R, A)
    row_rollout, rollout_group, first_row, extra_rewards = rollout_table(index)
    row_reward = token_level_rewards.sum(-1)  # (R,)
    rewards = torch.cat([row_reward[first_row].to(torch.float32).cpu(), extra_rewards])  # (U,)
    normalize_std = bool(getattr(config, "norm_adv_by_std_in_grpo", True)) if config is not None else True
    adv = group_advantages(rewards, rollout_group, estimator, normalize_std, AlgorithmConfig().eps)  # (U,)
    token_adv = token_advantages(adv.to(response_mask.device), row_rollout.to(response_mask.device), response_mask)
    return token_adv, token_adv


def alight_grpo(token_level_rewards, response_mask, index, config=None, **_: Any):
    """GRPO over rollouts (not rows): `algorithm.group_advantages` broadcast by `token_advantages`."""
    return _advantages("grpo", token_level_rewards, response_mask, index, config)


def alight_rloo(token_level_rewards, response_mask, index, config=None, **_: Any):
    """RLOO over rollouts (not rows): `algorithm.group_advantages` broadcast by `token_advantages`."""
    return _advantages("rloo", token_level_rewards, response_mask, index, config)


def alight_sft(token_level_rewards, response_mask, index=None, config=None, **_: Any):
    """Supervised fine-tuning has no advantages: zeros, which `alight_sft_loss` never reads; pure distillation
    (`alight_distill`) starts from the same zeros, and `with_distill` adds the teacher's reward."""
    zeros = torch.zeros_like(response_mask, dtype=torch.float32)
    return zeros, zeros


def _dp_size(config: Any) -> int:
    return int((getattr(config, "global_batch_info", None) or {}).get("dp_size") or 1)


def alight_sft_loss(
    old_log_prob: torch.Tensor,  # (R, A) unused: no ratio
    log_prob: torch.Tensor,  # (R, A) with grad
    advantages: torch.Tensor,  # (R, A) unused
    response_mask: torch.Tensor,  # (R, A)
    loss_agg_mode: str = "token-mean",  # unused: alight's token_mean weights say how tokens aggregate
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,  # (R, A) token_mean weights of the whole batch
) -> tuple[torch.Tensor, dict[str, Any]]:
    """`algorithm.sft_loss` with verl's calling convention."""
    if rollout_is_weights is None:
        raise ValueError(
            "the alight_sft loss needs the batch's token weights in rollout_is_weights (with_token_weights)"
        )
    loss, metrics = sft_loss(log_prob, response_mask, rollout_is_weights)
    return loss * _dp_size(config), {f"actor/alight_{k}": v for k, v in metrics.items()}


def alight_policy_loss(
    old_log_prob: torch.Tensor,  # (R, A)
    log_prob: torch.Tensor,  # (R, A) with grad
    advantages: torch.Tensor,  # (R, A)
    response_mask: torch.Tensor,  # (R, A)
    loss_agg_mode: str = "token-mean",  # unused: alight's weights say how tokens aggregate
    config: Any = None,  # verl's ActorConfig: clip_ratio_low / clip_ratio_high, global_batch_info
    rollout_is_weights: torch.Tensor | None = None,  # (R, A) alight's token weights (module docstring)
) -> tuple[torch.Tensor, dict[str, Any]]:
    """`algorithm.policy_loss` with verl's calling convention."""
    if rollout_is_weights is None:
        raise ValueError(
            "the alight loss needs the batch's token weights in rollout_is_weights: "
            "add them with alight_server.trainer.backends.verl.registry.with_token_weights"
        )
    if config is None:
        raise ValueError("the alight loss needs verl's actor config (clip_ratio_low, clip_ratio_high)")
    clip = config.clip_ratio
    algorithm = AlgorithmConfig(
        clip_low=clip if config.clip_ratio_low is None else config.clip_ratio_low,
        clip_high=clip if config.clip_ratio_high is None else config.clip_ratio_high,
    )
    loss, metrics = policy_loss(log_prob, old_log_prob, advantages, response_mask, rollout_is_weights, algorithm)
    return loss * _dp_size(config), {f"actor/alight_{k}": v for k, v in metrics.items()}


def register() -> None:
    """Put the functions into verl's registries; harmless to call again."""
    require_verl()
    from verl.trainer.ppo import core_algos

    for estimator, name in ESTIMATOR_NAMES.items():
        fn = {"grpo": alight_grpo, "rloo": alight_rloo, "sft": alight_sft, "distill": alight_sft}[estimator]
        if core_algos.ADV_ESTIMATOR_REGISTRY.get(name) is not fn:
            core_algos.register_adv_est(name)(fn)
    core_algos.register_policy_loss(LOSS_NAME)(alight_policy_loss)  # type: ignore[arg-type]
    core_algos.register_policy_loss(SFT_LOSS_NAME)(alight_sft_loss)  # type: ignore[arg-type]


def with_advantages(data: Any, estimator: Estimator, normalize_std: bool = True) -> Any:
    """`data` with `advantages` and `returns` by verl's own `compute_advantage` (its registry lookup)."""
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.ray_trainer import compute_advantage

    name = ESTIMATOR_NAMES[estimator]
    config = AlgoConfig(adv_estimator=name, norm_adv_by_std_in_grpo=normalize_std)
    return compute_advantage(data, adv_estimator=name, config=config)  # type: ignore[arg-type]


def with_token_weights(data: Any, aggregation: str) -> Any:
    """`data` with alight's token weights of the whole batch in `rollout_is_weights` (sum 1 over the batch)."""
    row_rollout, *_ = rollout_table(data.non_tensor_batch["uid"])
    mask = data.batch["response_mask"]
    data.batch["rollout_is_weights"] = aggregation_weights(mask, row_rollout.to(mask.device), aggregation)  # type: ignore[arg-type]
    return data


def with_distill(data: Any) -> Any:
    """`data` with its `distill_rewards` (R, A) added to the advantages (and returns) `with_advantages` wrote."""
    rewards = data.batch["distill_rewards"] * data.batch["response_mask"]  # (R, A)
    data.batch["advantages"] = data.batch["advantages"] + rewards
    data.batch["returns"] = data.batch["returns"] + rewards
    return data
