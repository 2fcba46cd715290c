"""Hand-made sample batches for trainer backend tests and the GPU check, with on-policy logprobs from the model."""

from __future__ import annotations

from typing import Any

import torch

from alight_server.trainer.backends.accumulation import token_logprobs
from alight_server.trainer.step.samples import SampleBatch


def batch_for(model: Any, rows: int = 4, prompt: int = 6, response: int = 5) -> SampleBatch:
    """Groups of two rollouts (the last alone when `rows` is odd), one row each, rewards 1/0 in each group."""
    torch.manual_seed(0)
    ids = torch.randint(3, 200, (rows, prompt + response))
    mask = torch.zeros(rows, prompt + response)
    mask[:, prompt:] = 1
    device = next(model.parameters()).device
    with torch.no_grad():
        old = token_logprobs(model, ids.to(device), torch.ones_like(ids, device=device)).cpu() * mask  # (R, T)
    groups = torch.arange(rows) // 2
    rewards = (torch.arange(rows) % 2 == 0).float()
    return SampleBatch(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        loss_mask=mask,
        old_logprobs=old,
        step_returns=torch.zeros(rows, prompt + response),
        row_rollout=torch.arange(rows),
        row_group=groups,
        row_reward=rewards,
        row_policy_version=torch.zeros(rows, dtype=torch.long),
        row_weight=torch.ones(rows),
        row_rendered=torch.zeros(rows, dtype=torch.bool),
        rollout_ids=[f"r{i}" for i in range(rows)],
        rollout_group=groups,
        rollout_reward=rewards,
        group_ids=[f"g{g}" for g in range((rows + 1) // 2)],
        row_calls=[(0,)] * rows,
    )
