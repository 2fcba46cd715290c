"""Gradient accumulation for the embedded backend's step (embedded.py): rows split by tokens across ranks and
packed into micro-batches, token logprobs on a micro-batch's window, loss metrics summed into the step's means.

Token weights for the batch loss are computed once on the whole batch, so micro-batches (and ranks, one more set
of micro-batches of the same sum) just add up: accumulation by token budget is exact.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from alight_server.trainer.backends.distributed import World, shard_rows
from alight_server.trainer.step.samples import SampleBatch

SUMMED_TERMS = ("loss", "pg_loss", "tokens")  # weighted parts of the batch loss, summed over micro-batches


def token_logprobs(
    model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, first_target: int = 1
) -> torch.Tensor:
    """logp[r, t] = log pi(input_ids[r, t] | tokens before t) for t >= first_target, else 0.  (R, T)

    Only positions from `first_target` on get logits: the prompt's vocabulary projection is skipped."""
    width = input_ids.shape[1]
    first_target = max(1, min(first_target, width - 1))
    keep = width - first_target + 1  # logits at positions first_target-1 .. width-1
    out = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=keep)
    logits = out.logits[:, -keep:-1].float()  # (R, K-1, V) predicting first_target .. width-1
    targets = input_ids[:, first_target:]  # (R, K-1)
    chosen = logits.gather(-1, targets[..., None])[..., 0]  # (R, K-1)
    logp = chosen - torch.logsumexp(logits, dim=-1)  # (R, K-1)
    return torch.cat([logp.new_zeros(input_ids.shape[0], first_target), logp], dim=1)  # (R, T)


def micro_batches(batch: SampleBatch, token_budget: int, rows: Sequence[int] | None = None) -> Iterator[list[int]]:
    """Row indices (of `rows`, default all), grouped so each micro-batch's padded size (rows x longest row)
    stays within the budget."""
    lengths = batch.attention_mask.sum(1).tolist()
    order = sorted(range(len(lengths)) if rows is None else rows, key=lambda r: lengths[r])
    current: list[int] = []
    for row in order:
        longest = max([lengths[r] for r in current] + [lengths[row]])
        if current and longest * (len(current) + 1) > token_budget:
            yield current
            current = []
        current.append(row)
    if current:
        yield current


def rank_micro_batches(batch: SampleBatch, token_budget: int, world: World) -> list[list[int] | None]:
    """This rank's micro-batches, padded with None (a zero-weight pass on row 0) to as many as the busiest
    rank's: all ranks run the same number of passes (FSDP2 gathers parameters in each forward)."""
    lengths = batch.attention_mask.sum(1).tolist()
    plans = [list(micro_batches(batch, token_budget, rows)) for rows in shard_rows(lengths, world.size)]
    passes = max(1, *map(len, plans))
    return [*plans[world.rank], *[None] * (passes - len(plans[world.rank]))]


def window(micro: SampleBatch) -> tuple[int, int]:
    """(width without the batch-wide padding, first trained position) of a micro-batch."""
    width = int(micro.attention_mask.sum(1).max())
    trained = micro.loss_mask[:, :width].sum(0).nonzero()
    return width, int(trained[0]) if trained.numel() else 1


def proximal_logprobs(model: Any, batch: SampleBatch, mine: list[list[int] | None]) -> torch.Tensor:
    """(R, T) logprobs of this rank's rows (`mine`: its micro-batches, None a filler pass) under `model`'s current
    weights, before any update (pi_old for TIS, or of rendered rows)."""
    proximal = torch.zeros_like(batch.old_logprobs)  # (R, T)
    with torch.no_grad():
        for rows in mine:
            micro = batch.select([0] if rows is None else rows)
            width, first = window(micro)
            logp = token_logprobs(model, micro.input_ids[:, :width], micro.attention_mask[:, :width], first)
            if rows is not None:
                index = torch.as_tensor(rows, device=batch.input_ids.device)
                proximal[index, :width] = logp * micro.loss_mask[:, :width]  # (r, w)
    return proximal


def gradient_sync(model: Any, world: World, last: bool) -> contextlib.AbstractContextManager[Any]:
    """Sum gradients over ranks only on the last micro-batch of an update (`model`: DDP- or FSDP2-wrapped)."""
    if world.size == 1:
        return contextlib.nullcontext()
    if world.strategy == "ddp":
        return contextlib.nullcontext() if last else model.no_sync()
    model.set_requires_gradient_sync(last)
    return contextlib.nullcontext()


def add_metrics(totals: dict[str, float], metrics: dict[str, float], rows: int) -> None:
    """One micro-batch's loss metrics into `totals`: loss terms are already weighted parts of the batch loss;
    maxima stay maxima; the rest are row means (weighted by the micro-batch's `rows`)."""
    for key, value in metrics.items():
        if key.endswith("_max"):
            totals[key] = max(totals.get(key, value), value)
        else:
            totals[key] = totals.get(key, 0.0) + value * (1 if key in SUMMED_TERMS else rows)


def step_means(parts: list[dict[str, float]], grad_norm: float, num_rows: int, updates: int) -> dict[str, float]:
    """The step's metrics from every rank's `totals` over `updates` optimizer updates: loss terms and the
    gradient norm per update, maxima over all, the rest per row seen."""
    merged: dict[str, float] = {}
    for part in parts:
        add_metrics(merged, part, rows=1)  # each part already a sum
    merged["grad_norm"] = grad_norm  # the norm of the summed gradient: the same on every rank
    rows_seen = max(num_rows, 1) * updates
    per_update = (*SUMMED_TERMS, "grad_norm")
    out = {k: v if k.endswith("_max") else v / (updates if k in per_update else rows_seen) for k, v in merged.items()}
    out["updates"] = float(updates)
    return out
