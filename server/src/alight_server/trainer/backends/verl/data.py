"""SampleBatch -> verl's DataProto: the recorded tokens as a left-padded prompt and a right-padded response.

A row's prompt is everything before its first trained token; its response is the rest, context tokens inside it
(tool results, user turns) kept with response mask 0, as verl's own multi-turn rollouts lay them out. Every id,
mask and logprob is copied from the batch; nothing is retokenized.
"""
# pyright: reportMissingImports=false
# (verl and omegaconf live in their own venv, .venv-verl; the type check runs in .venv)

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from alight_server.trainer.backends.verl.install import require_verl
from alight_server.trainer.step.samples import SampleBatch


@dataclass(frozen=True)
class RowKey:
    """verl's `uid` of one row: its group (verl groups rows by uid) and rollout, so each rollout counts once.
    `rowless_rewards`: the group's rollouts that produced no row still count in its statistics."""

    group: str
    rollout: str
    rowless_rewards: tuple[float, ...] = ()

    def __str__(self) -> str:
        return self.group


def row_keys(batch: SampleBatch) -> np.ndarray:
    """(R,) object array of RowKey."""
    with_rows = set(batch.row_rollout.tolist())
    rowless: dict[int, list[float]] = {}
    for u, group in enumerate(batch.rollout_group.tolist()):
        if u not in with_rows:
            rowless.setdefault(group, []).append(float(batch.rollout_reward[u]))
    keys = np.empty(batch.num_rows, dtype=object)  # empty + fill: np.array would unpack the dataclasses
    for r, (u, g) in enumerate(zip(batch.row_rollout.tolist(), batch.row_group.tolist(), strict=True)):
        keys[r] = RowKey(batch.group_ids[g], batch.rollout_ids[u], tuple(rowless.get(g, ())))
    return keys


def to_data_proto(batch: SampleBatch, pad_token_id: int = 0, token_rewards: torch.Tensor | None = None) -> Any:
    """The batch as a verl `DataProto`: each row split at its first trained token into left-padded prompts (R, P)
    and responses (R, A), the rollout's final reward on the row's last trained token, `token_rewards` (R, T) (a
    teacher's distillation reward) as distill_rewards (R, A), and each row's RowKey as its uid."""
    require_verl()
    from verl import DataProto
    from verl.utils.model import compute_position_id_with_mask

    ids, loss_mask = batch.input_ids, batch.loss_mask  # (R, T)
    rows, width = ids.shape
    lengths = batch.attention_mask.sum(1)  # (R,)
    trained = loss_mask > 0  # (R, T)
    # The first trained token starts the response; a row without one is all prompt.
    first = torch.where(trained.any(1), trained.to(torch.int8).argmax(1), lengths)  # (R,)
    prompt_len, response_len = first, lengths - first  # (R,)
    p_width = int(prompt_len.max()) if rows else 0
    a_width = max(int(response_len.max()) if rows else 0, 1)

    # Prompt column j of row r holds token j - (P - prompt_len[r]): negative is left padding.
    p_source = torch.arange(p_width)[None, :] - (p_width - prompt_len)[:, None]  # (R, P)
    p_valid = p_source >= 0
    prompts = torch.where(p_valid, ids.gather(1, p_source.clamp(0, max(width - 1, 0))), pad_token_id)

    a_valid = torch.arange(a_width)[None, :] < response_len[:, None]  # (R, A)
    a_source = (first[:, None] + torch.arange(a_width)[None, :]).clamp(max=max(width - 1, 0))  # (R, A)

    def response(values: torch.Tensor, fill: float) -> torch.Tensor:  # (R, T) -> (R, A)
        return torch.where(a_valid, values.gather(1, a_source), torch.full_like(values[:, :1], fill))

    responses = response(ids, pad_token_id)
    response_mask = response(loss_mask, 0).to(torch.int64)
    logprobs = response(batch.old_logprobs, 0.0)
    attention = torch.cat([p_valid, a_valid], 1).to(torch.int64)  # (R, P + A)

    last = (response_mask * torch.arange(1, a_width + 1)).argmax(1)  # (R,) last trained column
    rewards = torch.zeros(rows, a_width, dtype=torch.float32)
    rewards[torch.arange(rows), last] = batch.row_reward.to(torch.float32) * response_mask.any(1)

    tensors = {
        "prompts": prompts,
        "responses": responses,
        "input_ids": torch.cat([prompts, responses], 1),
        "attention_mask": attention,
        "position_ids": compute_position_id_with_mask(attention),
        "response_mask": response_mask,
        "old_log_probs": logprobs,
        "rollout_log_probs": logprobs.clone(),
        "token_level_rewards": rewards,
        "token_level_scores": rewards.clone(),
    }
    if token_rewards is not None:
        tensors["distill_rewards"] = response(token_rewards.to(torch.float32), 0.0)
    return DataProto.from_dict(tensors=tensors, non_tensors={"uid": row_keys(batch)})
