"""The RL algorithm in one place: group advantages and the clipped policy loss (docs/algorithm.md).

Every trainer backend calls these functions on plain tensors (shapes in the comments: U rollouts, G groups,
R rows, T tokens); they know nothing of models or of how rows were built. The aggregation weights sum to 1 over
the batch, so micro-batches cut from it just add their losses up: gradient accumulation stays exact.
`estimator: sft` replaces advantages and ratio with `sft_loss`, so rows known only as text train as well."""

from __future__ import annotations

import torch

# The `algorithm:` section lives with the config, which reads it without torch.
from alight_server.trainer.config.algorithm import Aggregation, AlgorithmConfig, Estimator


def _group_sums(values: torch.Tensor, group: torch.Tensor, num_groups: int) -> torch.Tensor:
    return torch.zeros(num_groups, dtype=values.dtype, device=values.device).index_add_(0, group, values)  # (G,)


def group_advantages(
    rewards: torch.Tensor,  # (U,) final reward per rollout
    group: torch.Tensor,  # (U,) int64 group index per rollout, 0..G-1
    estimator: Estimator = "grpo",
    normalize_std: bool = True,
    eps: float = 1e-6,
) -> torch.Tensor:  # (U,)
    """Advantage of each rollout against the other rollouts of its group."""
    rewards = rewards.to(torch.float32)
    num_groups = int(group.max()) + 1 if group.numel() else 0
    count = _group_sums(torch.ones_like(rewards), group, num_groups)  # (G,)
    mean = _group_sums(rewards, group, num_groups) / count.clamp_min(1)  # (G,)
    centred = rewards - mean[group]  # (U,)
    n = count[group]  # (U,)
    has_baseline = n > 1
    # RLOO: r_i - mean of the others = n/(n-1) (r_i - mean); GRPO: r_i - mean.
    advantages = centred * n / (n - 1).clamp_min(1) if estimator == "rloo" else centred
    if normalize_std:
        variance = _group_sums(centred**2, group, num_groups) / (count - 1).clamp_min(1)  # (G,) unbiased
        advantages = advantages / (variance.sqrt()[group] + eps)
    # Equal rewards centre to float noise (~1e-7), which the std division would blow up to O(0.1): exactly 0.
    signal = has_baseline & ~uniform_groups(rewards, group)[group]  # (U,)
    return torch.where(signal, advantages, torch.zeros_like(advantages))


def uniform_groups(
    rewards: torch.Tensor,  # (U,)
    group: torch.Tensor,  # (U,) int64
) -> torch.Tensor:  # (G,) bool
    """Groups whose rewards are all equal (a group of one included): zero advantage, nothing to learn;
    `uniform_groups(r, g)[g]` marks their rollouts, to skip or report."""
    num_groups = int(group.max()) + 1 if group.numel() else 0
    rewards = rewards.to(torch.float32)
    low = torch.full((num_groups,), float("inf"), device=rewards.device).scatter_reduce(0, group, rewards, "amin")
    high = torch.full((num_groups,), float("-inf"), device=rewards.device).scatter_reduce(0, group, rewards, "amax")
    return high <= low


def token_advantages(
    rollout_advantages: torch.Tensor,  # (U,)
    row_rollout: torch.Tensor,  # (R,) int64 index into the rollouts
    loss_mask: torch.Tensor,  # (R, T)
    step_returns: torch.Tensor | None = None,  # (R, T) step rewards to go of each token's call
    step_reward_coef: float = 0.0,
) -> torch.Tensor:  # (R, T), 0 where loss_mask is 0
    """Broadcast each rollout's advantage to the trained tokens of all its rows (plus per-turn credit)."""
    mask = loss_mask.to(torch.float32)
    advantages = rollout_advantages.to(torch.float32)[row_rollout][:, None] * mask  # (R, T)
    if step_returns is not None and step_reward_coef:
        advantages = advantages + step_reward_coef * step_returns.to(torch.float32) * mask
    return advantages


def aggregation_weights(
    loss_mask: torch.Tensor,  # (R, T)
    row_rollout: torch.Tensor,  # (R,) int64
    aggregation: Aggregation,
) -> torch.Tensor:  # (R, T), sums to 1 over the batch (0 if it has no trained token)
    """How much each token counts in the batch loss; compute on the whole batch, slice for micro-batches."""
    mask = loss_mask.to(torch.float32)
    if aggregation == "token_mean":
        return mask / mask.sum().clamp_min(1)
    row_tokens = mask.sum(1)  # (R,)
    if aggregation == "seq_mean":
        rows = (row_tokens > 0).sum().clamp_min(1)
        return mask / row_tokens.clamp_min(1)[:, None] / rows
    if aggregation == "per_rollout_mean":
        num_rollouts = int(row_rollout.max()) + 1 if row_rollout.numel() else 0
        rollout_tokens = _group_sums(row_tokens, row_rollout, num_rollouts)  # (U,)
        rollouts = (rollout_tokens > 0).sum().clamp_min(1)
        return mask / rollout_tokens[row_rollout].clamp_min(1)[:, None] / rollouts
    raise ValueError(f"aggregation must be 'per_rollout_mean', 'token_mean' or 'seq_mean', got {aggregation!r}")


def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(pi || ref) from samples of pi: exp(ref - logp) - (ref - logp) - 1 >= 0."""
    log_ratio = ref_logprobs - logprobs  # (R, T)
    return torch.exp(log_ratio) - log_ratio - 1


def sft_loss(
    logprobs: torch.Tensor,  # (R, T) current policy logprob of each token, with grad
    loss_mask: torch.Tensor,  # (R, T)
    weights: torch.Tensor,  # (R, T) token_mean weights of the whole batch (this micro-batch's slice)
) -> tuple[torch.Tensor, dict[str, float]]:
    """Supervised loss: the weighted negative log-likelihood of the trained tokens, and its metrics; with
    `aggregation_weights(mask, rows, "token_mean")` the token-mean NLL of the batch."""
    mask = loss_mask > 0  # (R, T) bool
    zero = torch.zeros_like(logprobs)
    nll = -torch.where(mask, logprobs, zero)  # (R, T); where, not *: padding may hold -inf
    loss = (nll * weights).sum()
    return loss, {"loss": float(loss.detach()), "tokens": float(mask.sum())}


def policy_loss(
    logprobs: torch.Tensor,  # (R, T) current policy logprob of each token, with grad
    old_logprobs: torch.Tensor,  # (R, T) pi_old: gateway-recorded, or recomputed by the trainer
    advantages: torch.Tensor,  # (R, T) from token_advantages
    loss_mask: torch.Tensor,  # (R, T)
    weights: torch.Tensor,  # (R, T) from aggregation_weights (this micro-batch's slice)
    config: AlgorithmConfig,
    *,
    ref_logprobs: torch.Tensor | None = None,  # (R, T) reference policy, for kl_coef > 0
    rollout_logprobs: torch.Tensor | None = None,  # (R, T) behaviour (gateway) logprobs when old ones were recomputed
    entropy: torch.Tensor | None = None,  # (R, T) per-token entropy, reported only
) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped policy-gradient loss (a scalar to backpropagate) and metrics over the trained tokens."""
    mask = loss_mask > 0  # (R, T) bool
    # Outside the mask old logprobs are 0 by convention: keep those ratios at 1, not exp(logp).
    log_ratio = torch.where(mask, logprobs - old_logprobs, torch.zeros_like(logprobs))  # (R, T)
    ratio = torch.exp(log_ratio)
    clipped_ratio = ratio.clamp(1 - config.clip_low, 1 + config.clip_high)
    unclipped_loss, clipped_loss = -advantages * ratio, -advantages * clipped_ratio
    token_loss = torch.maximum(unclipped_loss, clipped_loss)  # (R, T) pessimistic bound
    tis_weight = tis_capped = behaviour_ratio = None
    if config.tis_cap is not None and rollout_logprobs is not None:
        behaviour_log_ratio = torch.where(mask, old_logprobs - rollout_logprobs, torch.zeros_like(old_logprobs))
        behaviour_ratio = torch.exp(behaviour_log_ratio).detach()  # (R, T) pi_old / pi_rollout
        tis_capped = behaviour_ratio > config.tis_cap
        tis_weight = behaviour_ratio.clamp(max=config.tis_cap)
        token_loss = token_loss * tis_weight
    zero = torch.zeros_like(token_loss)
    pg_loss = (torch.where(mask, token_loss, zero) * weights).sum()  # where, not *: padding may hold inf
    loss = pg_loss
    kl = None
    if config.kl_coef > 0:
        if ref_logprobs is None:
            raise ValueError(f"kl_coef={config.kl_coef} needs ref_logprobs; pass them or set kl_coef=0")
        kl = torch.where(mask, kl_k3(logprobs, ref_logprobs), zero)
        loss = loss + config.kl_coef * (kl * weights).sum()

    with torch.no_grad():
        active = clipped_loss > unclipped_loss  # the clip decided this token's gradient (it is 0 there)
        exact = {"loss": loss.detach(), "pg_loss": pg_loss.detach(), "tokens": mask.sum().to(torch.float32)}
        per_token = {
            "clip_fraction": active.float(),
            "clip_low_fraction": (active & (ratio < 1)).float(),
            "clip_high_fraction": (active & (ratio > 1)).float(),
            "approx_kl": ratio - 1 - log_ratio,  # k3 of KL(pi_old || pi)
            "ratio_mean": ratio,
            "ratio_max": ratio,
            "advantage_mean": advantages,
            "kl_ref": kl,
            # The importance ratio pi_old / pi_rollout before the cap: how off-policy (stale) the tokens were.
            "tis_ratio_mean": behaviour_ratio,
            "tis_ratio_max": behaviour_ratio,
            "tis_weight_mean": tis_weight,
            "tis_capped_fraction": None if tis_capped is None else tis_capped.float(),
            "entropy": entropy,
        }
        return loss, _masked_metrics(mask, zero, exact, per_token)


def _masked_metrics(
    mask: torch.Tensor,  # (R, T) bool: the trained tokens
    zero: torch.Tensor,  # (R, T) zeros of the loss's dtype
    exact: dict[str, torch.Tensor],
    per_token: dict[str, torch.Tensor | None],  # (R, T) each; None: not reported
) -> dict[str, float]:
    """`exact` as they are, and each per-token tensor as its mean over the trained tokens, or for a `_max` key its
    maximum (0 with no trained token); one device sync for all."""
    tokens = mask.sum().clamp_min(1)
    metrics = dict(exact)
    for key, x in per_token.items():
        if x is None:
            continue
        if key.endswith("_max"):
            metrics[key] = torch.where(mask, x, zero).max() if mask.any() else zero.new_zeros(())
        else:
            metrics[key] = torch.where(mask, x.to(zero.dtype), zero).sum() / tokens
    values = torch.stack([v.to(torch.float32) for v in metrics.values()]).tolist()  # one device sync
    return dict(zip(metrics, values, strict=True))
