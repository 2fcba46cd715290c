"""On-policy distillation: a teacher's logprobs of the student's own sampled tokens as a dense per-token reward.

Per trained token, reward = weight x (teacher logprob - student logprob): the negative one-sample estimate of the
reverse KL(student || teacher). `estimator: distill` trains on it alone; with GRPO / RLOO it is added to every
token's group advantage (docs/algorithm.md)."""

from __future__ import annotations

import torch

from alight_server.trainer.step.algorithm import AlgorithmConfig, group_advantages, token_advantages
from alight_server.trainer.step.samples import SampleBatch


def distill_rewards(
    teacher_logprobs: torch.Tensor,  # (R, T) the teacher's logprob of each sampled token
    student_logprobs: torch.Tensor,  # (R, T) the student's, as recorded when it sampled them
    loss_mask: torch.Tensor,  # (R, T)
    weight: float,
) -> torch.Tensor:  # (R, T), 0 where loss_mask is 0
    """weight x (teacher - student) on every trained token: the negative reverse-KL estimate, scaled."""
    mask = loss_mask > 0
    gap = (teacher_logprobs - student_logprobs).to(torch.float32)  # (R, T)
    return torch.where(mask, weight * gap, torch.zeros_like(gap))  # where, not *: padding may hold -inf


def step_advantages(
    batch: SampleBatch,
    config: AlgorithmConfig,
    teacher_logprobs: torch.Tensor | None = None,  # (R, T) with algorithm.distill
) -> torch.Tensor:  # (R, T)
    """Every trained token's advantage: its rollout's group advantage plus per-turn credit (GRPO / RLOO), plus the
    distillation reward when a teacher scored the batch; the distillation reward alone with estimator distill."""
    if config.estimator == "distill":
        advantages = torch.zeros_like(batch.loss_mask, dtype=torch.float32)  # (R, T)
    else:
        rollout_adv = group_advantages(
            batch.rollout_reward, batch.rollout_group, config.estimator, config.normalize_std, config.eps
        )  # (U,)
        advantages = token_advantages(
            rollout_adv, batch.row_rollout, batch.loss_mask, batch.step_returns, config.step_reward_coef
        )  # (R, T)
    if config.distill is None:
        return advantages
    if teacher_logprobs is None:
        raise ValueError(f"algorithm.distill (teacher {config.distill.teacher!r}) needs the teacher's logprobs")
    return advantages + distill_rewards(teacher_logprobs, batch.old_logprobs, batch.loss_mask, config.distill.weight)


def reverse_kl_metrics(
    teacher_logprobs: torch.Tensor,  # (R, T)
    student_logprobs: torch.Tensor,  # (R, T)
    loss_mask: torch.Tensor,  # (R, T)
    seconds: float,
) -> dict[str, float]:
    """`distill/reverse_kl` (mean over trained tokens of student - teacher logprob), and what scoring cost."""
    mask = loss_mask > 0
    tokens = int(mask.sum())
    gap = torch.where(mask, student_logprobs - teacher_logprobs, torch.zeros_like(student_logprobs))
    return {
        "distill/reverse_kl": float(gap.sum()) / max(tokens, 1),
        "distill/teacher_tokens": float(tokens),
        "distill/teacher_s": seconds,
    }
