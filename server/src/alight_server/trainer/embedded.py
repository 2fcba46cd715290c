"""Embedded trainer backend: a transformers policy on CPU or one GPU, optional LoRA, one RL step per batch.

One `step(batch)`:
1. Group advantages per rollout (GRPO/RLOO), broadcast to every trained token of its rows.
2. Token weights for the batch loss (per_rollout_mean / token_mean / seq_mean), computed once on the
   whole batch so that micro-batches just add up: gradient accumulation by token budget is exact.
3. For each of `updates_per_batch` optimizer updates: recompute the policy's logprobs micro-batch by
   micro-batch, apply the clipped loss against the gateway-recorded logprobs, backpropagate, then clip
   the gradient norm and step AdamW.
`policy_weights()` gives plain (LoRA-merged) tensors named like the served model's, for weight sync.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch

from alight_server.trainer.algorithm import (
    AlgorithmConfig,
    aggregation_weights,
    group_advantages,
    policy_loss,
    token_advantages,
    uniform_groups,
)
from alight_server.trainer.config import AlgorithmOptions, LoraConfig, OptimizerConfig
from alight_server.trainer.samples import SampleBatch


def pick_device(device: str | None) -> torch.device:
    return torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))


def pick_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """`auto`: bfloat16 on a GPU that supports it, float32 elsewhere (bf16 matmuls are slow on most CPUs)."""
    if dtype == "auto":
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    return getattr(torch, dtype)


def token_logprobs(
    model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, first_target: int = 1
) -> torch.Tensor:
    """logp[r, t] = log pi(input_ids[r, t] | tokens before t) for t >= first_target, else 0.  (R, T)

    Only positions from `first_target` on get logits (`logits_to_keep`): the prompt needs hidden
    states but no vocabulary projection, which is much of the cost with a large vocabulary.
    """
    width = input_ids.shape[1]
    first_target = max(1, min(first_target, width - 1))
    keep = width - first_target + 1  # logits at positions first_target-1 .. width-1
    out = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=keep)
    logits = out.logits[:, -keep:-1].float()  # (R, K-1, V) predicting first_target .. width-1
    targets = input_ids[:, first_target:]  # (R, K-1)
    chosen = logits.gather(-1, targets[..., None])[..., 0]  # (R, K-1)
    logp = chosen - torch.logsumexp(logits, dim=-1)  # (R, K-1)
    return torch.cat([logp.new_zeros(input_ids.shape[0], first_target), logp], dim=1)  # (R, T)


def micro_batches(batch: SampleBatch, token_budget: int) -> Iterator[list[int]]:
    """Row indices, grouped so each micro-batch's padded size (rows x longest row) stays within the budget."""
    lengths = batch.attention_mask.sum(1).tolist()
    order = sorted(range(len(lengths)), key=lambda r: lengths[r])
    current: list[int] = []
    for row in order:
        longest = max([lengths[r] for r in current] + [lengths[row]])
        if current and longest * (len(current) + 1) > token_budget:
            yield current
            current = []
        current.append(row)
    if current:
        yield current


class EmbeddedTrainer:
    """Owns the trainable policy and its optimizer; see the module docstring for one step."""

    def __init__(
        self,
        model: Any,
        optimizer: OptimizerConfig,
        algorithm: AlgorithmOptions,
        lora: LoraConfig | None = None,
    ) -> None:
        self.device = next(model.parameters()).device
        self.options = algorithm
        self.optim_config = optimizer
        self.algorithm = AlgorithmConfig(
            estimator=algorithm.estimator,
            normalize_std=algorithm.normalize_std,
            aggregation=algorithm.aggregation,
            clip_low=algorithm.clip_low,
            clip_high=algorithm.clip_high,
            kl_coef=algorithm.kl_coef,
            tis_cap=algorithm.tis_cap,
        )
        self.lora = lora if lora is not None and lora.enabled else None
        if self.lora is not None:
            model = _with_lora(model, self.lora)
        self.model = model
        self.model.train()
        self.reference: Any = None
        if algorithm.kl_coef > 0:
            self.reference = _frozen_copy(model)
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            trainable, lr=optimizer.lr, betas=optimizer.betas, weight_decay=optimizer.weight_decay
        )
        self.updates = 0

    # -- one RL step ---------------------------------------------------------------------------
    def step(self, batch: SampleBatch) -> dict[str, float]:
        """Train on one batch of rows; returns averaged loss metrics plus update counts."""
        batch = batch.to(self.device)
        advantages = group_advantages(
            batch.rollout_reward, batch.rollout_group, self.algorithm.estimator, self.algorithm.normalize_std
        )  # (U,)
        token_adv = token_advantages(advantages, batch.row_rollout, batch.loss_mask)  # (R, T)
        weights = aggregation_weights(batch.loss_mask, batch.row_rollout, self.algorithm.aggregation)  # (R, T)
        totals: dict[str, float] = {}
        for _ in range(self.options.updates_per_batch):
            self.optimizer.zero_grad(set_to_none=True)
            for rows in micro_batches(batch, self.optim_config.micro_batch_tokens):
                micro = batch.select(rows)
                width = int(micro.attention_mask.sum(1).max())  # trim the batch-wide padding
                ids, attn = micro.input_ids[:, :width], micro.attention_mask[:, :width]
                trained = micro.loss_mask[:, :width].sum(0).nonzero()
                first = int(trained[0]) if trained.numel() else 1
                logp = token_logprobs(self.model, ids, attn, first)  # (r, w)
                ref = None
                if self.reference is not None:
                    with torch.no_grad():
                        ref = token_logprobs(self.reference, ids, attn, first)
                index = torch.as_tensor(rows, device=self.device)
                loss, metrics = policy_loss(
                    logp,
                    micro.old_logprobs[:, :width],
                    token_adv[index, :width],
                    micro.loss_mask[:, :width],
                    weights[index, :width],
                    self.algorithm,
                    ref_logprobs=ref,
                )
                loss.backward()
                for key, value in metrics.items():
                    # loss terms are already weighted parts of the batch loss; the rest are averaged below
                    totals[key] = totals.get(key, 0.0) + value * (
                        1 if key in ("loss", "pg_loss", "tokens") else len(rows)
                    )
            totals["grad_norm"] = totals.get("grad_norm", 0.0) + self._clip_and_step()
        updates = self.options.updates_per_batch
        rows_seen = max(batch.num_rows, 1) * updates
        out = {
            k: v / (updates if k in ("loss", "pg_loss", "tokens", "grad_norm") else rows_seen)
            for k, v in totals.items()
        }
        out["uniform_groups"] = float(uniform_groups(batch.rollout_reward, batch.rollout_group).sum())
        out["updates"] = float(updates)
        return out

    def _clip_and_step(self) -> float:
        params = [p for p in self.model.parameters() if p.grad is not None]
        norm = 0.0
        if params:
            max_norm = self.optim_config.max_grad_norm or math.inf
            norm = float(torch.nn.utils.clip_grad_norm_(params, max_norm))
        self.optimizer.step()
        self.updates += 1
        return norm

    # -- weights out ---------------------------------------------------------------------------
    def policy_weights(self) -> dict[str, torch.Tensor]:
        """Detached tensors named like the plain model's (LoRA merged in), for `engine.update_weights`."""
        if self.lora is None:
            return {name: tensor.detach() for name, tensor in self.model.state_dict().items()}
        self.model.merge_adapter()
        try:
            merged = {}
            for name, tensor in self.model.get_base_model().state_dict().items():
                if "lora_" in name:
                    continue
                merged[name.replace(".base_layer.", ".")] = tensor.detach().clone()
            return merged
        finally:
            self.model.unmerge_adapter()

    def trainable_parameters(self) -> dict[str, torch.Tensor]:
        return {n: p.detach().clone() for n, p in self.model.named_parameters() if p.requires_grad}

    # -- checkpoints ---------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        trainable = {n: p.detach().cpu() for n, p in self.model.named_parameters() if p.requires_grad}
        return {"trainable": trainable, "optimizer": self.optimizer.state_dict(), "updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        params = dict(self.model.named_parameters())
        missing = sorted(set(state["trainable"]) - set(params))
        if missing:
            raise ValueError(f"checkpoint has parameters this model lacks, e.g. {missing[:3]}; same model and LoRA?")
        with torch.no_grad():
            for name, tensor in state["trainable"].items():
                params[name].copy_(tensor.to(params[name].device))
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state["updates"])


def _with_lora(model: Any, lora: LoraConfig) -> Any:
    try:
        from peft import LoraConfig as PeftLoraConfig
        from peft import get_peft_model
    except ImportError as exc:
        raise RuntimeError("LoRA needs peft: pip install 'alight-server[train]'") from exc
    peft_config = PeftLoraConfig(
        r=lora.r, lora_alpha=int(lora.alpha), lora_dropout=lora.dropout, target_modules=list(lora.target_modules)
    )
    return get_peft_model(model, peft_config)


def _frozen_copy(model: Any) -> Any:
    import copy

    reference = copy.deepcopy(model)
    reference.eval()
    for p in reference.parameters():
        p.requires_grad_(False)
    return reference
