"""The sample batch: padded row tensors for any trainer backend, and the padding that builds them."""

from __future__ import annotations

import array
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import numpy as np
import torch

from alight_server.trainer.step.samples.merge import Segment


@dataclass
class SampleBatch:
    """Padded rows ready for any trainer backend. R rows, T tokens, U rollouts, G groups."""

    input_ids: torch.Tensor  # (R, T) int64, right-padded with pad_token_id
    attention_mask: torch.Tensor  # (R, T) int64, 1 on real tokens
    loss_mask: torch.Tensor  # (R, T) float32, 1 on tokens the model generated (trained on)
    # Recorded (gateway) logprob of input_ids[r, t] itself, so it pairs with logits[r, t - 1]; 0 where loss_mask is 0.
    old_logprobs: torch.Tensor  # (R, T) float32
    step_returns: torch.Tensor  # (R, T) float32, step rewards to go of the call that produced the token; 0 elsewhere
    row_rollout: torch.Tensor  # (R,) int64, index into rollout_ids
    row_group: torch.Tensor  # (R,) int64, index into group_ids
    row_reward: torch.Tensor  # (R,) float32, the row's rollout's final reward
    row_policy_version: torch.Tensor  # (R,) int64, oldest policy version among the row's calls; -1 unknown
    # (R,) float32, multiplies the row's token weights in the loss: 1, or < 1 for a down-weighted stale group
    row_weight: torch.Tensor
    # (R,) bool, True when a call of the row is of fidelity `rendered` (imported as text): its old_logprobs are
    # not recorded, so a policy-gradient step refuses, drops or recomputes it (algorithm.rendered_rows)
    row_rendered: torch.Tensor
    rollout_ids: list[str]  # (U,) every rollout with a reward, rows or not (all count in group statistics)
    rollout_group: torch.Tensor  # (U,) int64, index into group_ids
    rollout_reward: torch.Tensor  # (U,) float32
    group_ids: list[str]  # (G,) the rollout's group_id, or "rollout:<id>" for an ungrouped rollout
    row_calls: list[tuple[int, ...]]  # (R,) seq of each model call whose response the row trains on

    @property
    def num_rows(self) -> int:
        return int(self.input_ids.shape[0])

    def select(self, rows: Sequence[int] | torch.Tensor) -> SampleBatch:
        """A batch of some rows (a micro-batch); the rollout tables (`rollout_*`) and group ids are kept whole."""
        index = torch.as_tensor(rows, dtype=torch.long)
        tensors = {f.name: v for f in fields(self) if isinstance(v := getattr(self, f.name), torch.Tensor)}
        picked = {name: v[index] for name, v in tensors.items() if not name.startswith("rollout_")}
        return replace(self, **picked, row_calls=[self.row_calls[i] for i in index.tolist()])

    def to(self, device: torch.device | str) -> SampleBatch:
        moved = {f.name: v.to(device) for f in fields(self) if isinstance(v := getattr(self, f.name), torch.Tensor)}
        return replace(self, **moved)


def pad_rows(
    rows: list[tuple[int, list[Segment]]],  # (rollout index, segments of the row)
    rollout_ids: list[str],
    rollout_rewards: list[float],
    rollout_groups: list[str],
    pad_token_id: int,
) -> SampleBatch:
    """Pad rows into tensors, vectorised: every list is converted once and scattered in one go. Row-major order of
    the (R, T) masks is the order of the rows' tokens and segments, so boolean-mask assignment places each exactly."""
    segments = [s for _, row in rows for s in row]
    lengths = np.array([row[-1].end for _, row in rows], dtype=np.int64)  # (R,)
    width = int(lengths.max()) if rows else 0
    attention = np.arange(width)[None, :] < lengths[:, None]  # (R, T) bool
    input_ids = np.full((len(rows), width), pad_token_id, dtype=np.int64)  # (R, T)
    # The last prompt of a row already holds every earlier turn: each token is converted once.
    parts = [part for _, row in rows for part in (_int64(row[-1].prompt), _int64(row[-1].response))]
    input_ids[attention] = _concat(parts, np.int64)

    # Loss mask by a difference array: +1 where a segment starts, -1 where it ends.
    segment_row = np.repeat(np.arange(len(rows)), [len(row) for _, row in rows])  # (S,)
    starts = segment_row * width + np.array([s.start for s in segments], dtype=np.int64)  # (S,) flat
    ends = segment_row * width + np.array([s.end for s in segments], dtype=np.int64)  # (S,) flat
    delta = np.zeros(len(rows) * width + 1, dtype=np.int32)  # (R*T+1,)
    delta[starts] += 1  # segments never overlap: starts are distinct, and so are ends
    delta[ends] -= 1
    generated = (np.cumsum(delta[:-1], dtype=np.int32) > 0).reshape(len(rows), width)  # (R, T) bool
    old_logprobs = np.zeros((len(rows), width), dtype=np.float32)  # (R, T)
    old_logprobs[generated] = _concat([np.frombuffer(array.array("d", s.logprobs)) for s in segments], np.float64)
    step_returns = np.zeros((len(rows), width), dtype=np.float32)  # (R, T)
    step_returns[generated] = np.repeat([s.step_return for s in segments], [len(s.response) for s in segments])

    versions = [[s.call.policy_version for s in row if s.call.policy_version is not None] for _, row in rows]
    group_ids = list(dict.fromkeys(rollout_groups))
    group_of = {g: i for i, g in enumerate(group_ids)}
    rollout_group = torch.tensor([group_of[g] for g in rollout_groups], dtype=torch.long)  # (U,)
    rollout_reward = torch.tensor(rollout_rewards, dtype=torch.float32)  # (U,)
    row_rollout = torch.tensor([u for u, _ in rows], dtype=torch.long)  # (R,)
    return SampleBatch(
        input_ids=torch.from_numpy(input_ids),
        attention_mask=torch.from_numpy(attention.astype(np.int64)),
        loss_mask=torch.from_numpy(generated.astype(np.float32)),
        old_logprobs=torch.from_numpy(old_logprobs),
        step_returns=torch.from_numpy(step_returns),
        row_rollout=row_rollout,
        row_group=rollout_group[row_rollout],
        row_reward=rollout_reward[row_rollout],
        row_policy_version=torch.tensor([min(v, default=-1) for v in versions], dtype=torch.long),
        row_weight=torch.ones(len(rows), dtype=torch.float32),
        row_rendered=torch.tensor([any(s.call.rendered for s in row) for _, row in rows], dtype=torch.bool),
        rollout_ids=rollout_ids,
        rollout_group=rollout_group,
        rollout_reward=rollout_reward,
        group_ids=group_ids,
        row_calls=[tuple(s.call.seq for s in row) for _, row in rows],
    )


def _int64(values: list[int]) -> np.ndarray:
    return np.frombuffer(array.array("q", values), dtype=np.int64)  # faster than numpy's own list conversion


def _concat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)
