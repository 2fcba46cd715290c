"""Embedded trainer backend: a transformers policy on CPU or GPUs, optional LoRA, data-parallel over ranks.

A step weighs the whole batch's tokens once, so the micro-batches each rank packs just add up (accumulation.py);
then each of `updates_per_batch` updates runs the clipped loss (or `sft_loss`) micro-batch by micro-batch, clips
the gradient norm and steps AdamW. A distillation teacher (teacher.py) scores the batch first.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import torch
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_state_dict,
    set_model_state_dict,
    set_state_dict,
)

from alight_server.trainer.backends.accumulation import (
    add_metrics,
    gradient_sync,
    proximal_logprobs,
    rank_micro_batches,
    step_means,
    token_logprobs,
    window,
)
from alight_server.trainer.backends.devices import pick_dtype
from alight_server.trainer.backends.distributed import World, join, parallelize, unwrap
from alight_server.trainer.backends.heap import release_freed_memory
from alight_server.trainer.backends.teacher import load_teacher, score_batch
from alight_server.trainer.backends.weights import adapter_weights, frozen_copy, load_adapter, merged_weights, with_lora
from alight_server.trainer.config.sections import LoraConfig, OptimizerConfig
from alight_server.trainer.run.weight_sync import WeightSync
from alight_server.trainer.step.algorithm import AlgorithmConfig, aggregation_weights, policy_loss, sft_loss
from alight_server.trainer.step.distill import step_advantages
from alight_server.trainer.step.rendered import needs_recompute, refuse_rendered
from alight_server.trainer.step.samples import SampleBatch

if TYPE_CHECKING:
    from alight_server.trainer.config.run import TrainConfig


class EmbeddedBackend:
    """The default `TrainerBackend`: the policy, its optimizer and this process's rank. On rank 0 every public
    method first announces itself, so the other ranks (`follow`) enter the same collectives."""

    def __init__(
        self,
        model: Any,
        optimizer: OptimizerConfig,
        algorithm: AlgorithmConfig,
        lora: LoraConfig | None = None,
        world: World | None = None,
        teacher: Any = None,  # load_teacher's frozen model
    ) -> None:
        if algorithm.distill is not None and teacher is None:
            raise ValueError(f"algorithm.distill needs its teacher {algorithm.distill.teacher!r} loaded: pass teacher=")
        self.teacher = teacher
        self.world = world or World(device=next(model.parameters()).device)
        self.device = self.world.device
        self.algorithm = algorithm
        self.optim_config = optimizer
        self.lora = lora if lora is not None and lora.enabled else None
        if self.lora is not None:
            model = with_lora(model, self.lora)
        model.train()
        self.reference: Any = None
        if algorithm.kl_coef > 0:
            # FSDP2 shards the reference too (it fits no better than the policy); under DDP each rank holds one.
            reference = frozen_copy(model)
            self.reference = parallelize(reference, self.world) if self.world.strategy == "fsdp" else reference
        self.model = parallelize(model, self.world)  # DDP wrapper, FSDP2-sharded in place, or the model
        trainable = [p for p in self.model.parameters() if p.requires_grad]  # after sharding: DTensors under FSDP2
        self.optimizer = torch.optim.AdamW(
            trainable, lr=optimizer.lr, betas=optimizer.betas, weight_decay=optimizer.weight_decay
        )
        self.updates = 0

    def step(self, batch: SampleBatch) -> dict[str, float]:
        """Train on one batch of rows; returns averaged loss metrics plus update counts."""
        self.world.announce("step", batch)
        return self._step(batch)

    def _step(self, batch: SampleBatch) -> dict[str, float]:
        refuse_rendered(batch, self.algorithm)
        batch = batch.to(self.device)
        sft = self.algorithm.estimator == "sft"
        teacher_logprobs, distill = score_batch(self.teacher, batch, self.optim_config.micro_batch_tokens)  # (R, T)
        token_adv = (
            torch.zeros_like(batch.loss_mask) if sft else step_advantages(batch, self.algorithm, teacher_logprobs)
        )
        aggregation = "token_mean" if sft else self.algorithm.aggregation
        weights = aggregation_weights(batch.loss_mask, batch.row_rollout, aggregation)  # (R, T)
        weights = weights * batch.row_weight[:, None]  # stale groups down-weighted (async_rollout.stale)
        mine = rank_micro_batches(batch, self.optim_config.micro_batch_tokens, self.world)
        totals: dict[str, float] = {}
        if needs_recompute(batch, self.algorithm):
            # pi_old of rendered rows: the current weights', taken as if they had sampled the logged text
            current = proximal_logprobs(self.model, batch, mine)  # (R, T)
            batch = replace(batch, old_logprobs=torch.where(batch.row_rendered[:, None], current, batch.old_logprobs))
        proximal = (
            proximal_logprobs(self.model, batch, mine) if self.algorithm.tis_cap is not None and not sft else None
        )
        for _ in range(self.algorithm.updates_per_batch):
            self.optimizer.zero_grad(set_to_none=True)
            for index, rows in enumerate(mine):
                with gradient_sync(self.model, self.world, index == len(mine) - 1):
                    self._micro_step(batch, rows, token_adv, weights, totals, proximal)
            totals["grad_norm"] = totals.get("grad_norm", 0.0) + self._clip_and_step()
        # No gradients kept until the next step (4 B a parameter); freed activations go back (backends/heap.py).
        self.optimizer.zero_grad(set_to_none=True)
        release_freed_memory()
        parts = self.world.gather(totals)
        return step_means(parts, totals["grad_norm"], batch.num_rows, self.algorithm.updates_per_batch) | distill

    def _micro_step(
        self,
        batch: SampleBatch,
        rows: list[int] | None,
        token_adv: torch.Tensor,  # (R, T)
        weights: torch.Tensor,  # (R, T)
        totals: dict[str, float],
        proximal: torch.Tensor | None = None,  # (R, T) pi_old by the current weights, for TIS
    ) -> None:
        """Forward and backward on some rows (None: a zero-weight pass that keeps the ranks in step)."""
        filler = rows is None
        rows = [0] if rows is None else rows
        micro = batch.select(rows)
        width, first = window(micro)
        ids, attn = micro.input_ids[:, :width], micro.attention_mask[:, :width]
        logp = token_logprobs(self.model, ids, attn, first)  # (r, w)
        index = torch.as_tensor(rows, device=self.device)
        mask, weight = micro.loss_mask[:, :width], weights[index, :width] * (0.0 if filler else 1.0)  # (r, w)
        if self.algorithm.estimator == "sft":
            loss, metrics = sft_loss(logp, mask, weight)
        else:
            ref = None
            if self.reference is not None:
                with torch.no_grad():
                    ref = token_logprobs(self.reference, ids, attn, first)  # (r, w)
            recorded = micro.old_logprobs[:, :width]  # (r, w) what the gateway recorded: the behaviour policy
            pi_old, rollout = (recorded, None) if proximal is None else (proximal[index, :width], recorded)
            advantages = token_adv[index, :width]
            loss, metrics = policy_loss(
                logp, pi_old, advantages, mask, weight, self.algorithm, ref_logprobs=ref, rollout_logprobs=rollout
            )
        # DDP and FSDP2 average gradients over ranks; the weights already sum to 1 over the whole batch.
        (loss * self.world.size).backward()
        if not filler:
            add_metrics(totals, metrics, len(rows))

    def _clip_and_step(self) -> float:
        params = [p for p in self.model.parameters() if p.grad is not None]
        norm = 0.0
        if params:
            total: Any = torch.nn.utils.clip_grad_norm_(params, self.optim_config.max_grad_norm or math.inf)
            norm = float(total.full_tensor() if hasattr(total, "full_tensor") else total)  # FSDP2: a DTensor
        self.optimizer.step()
        self.updates += 1
        return norm

    def push_weights(self, sync: WeightSync, metadata: dict[str, Any]) -> tuple[int, float]:
        """Merged weights into inference, asked for only when the target needs them (a vLLM LoRA target takes
        the adapter alone, so merged weights are never built)."""
        return sync.push(self.policy_weights, metadata)

    def policy_weights(self) -> dict[str, torch.Tensor]:
        """Detached tensors named like the plain model's (LoRA merged in), for `engine.update_weights`."""
        self.world.announce("weights")
        return merged_weights(self.model, self.lora, self.world)

    def adapter_weights(self) -> dict[str, torch.Tensor]:
        return adapter_weights(self.model, self.lora, self.world)

    def load_adapter(self, tensors: dict[str, torch.Tensor]) -> None:
        """Start from another adapter (`policies.NAME.init_from`); the optimizer's state is untouched."""
        load_adapter(self.model, self.adapter_weights(), tensors, self.device)

    def state_dict(self) -> dict[str, Any]:
        """Trainable weights and optimizer state by parameter name (whole, also under FSDP2: a run can resume on
        another world size or strategy), and the update count."""
        self.world.announce("state")
        return self._state_dict()

    def _state_dict(self) -> dict[str, Any]:
        options = StateDictOptions(full_state_dict=True, cpu_offload=True, ignore_frozen_params=True)
        trainable, optimizer = get_state_dict(self.model, self.optimizer, options=options)
        if self.lora is not None:
            # the adapter alone: ignore_frozen_params keeps a frozen weight tied to a trained name (lm_head)
            trained = {n for n, p in unwrap(self.model).named_parameters(remove_duplicate=False) if p.requires_grad}
            trainable = {n: t for n, t in trainable.items() if n in trained}
        return {"trainable": trainable, "optimizer": optimizer, "updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        known = set(unwrap(self.model).state_dict())  # tied weights appear under each of their names
        missing = sorted(set(state["trainable"]) - known)
        if missing:
            raise ValueError(f"checkpoint has parameters this model lacks, e.g. {missing[:3]}; same model and LoRA?")
        self.world.announce("load", state)
        self._load_state_dict(state)

    def _load_state_dict(self, state: dict[str, Any]) -> None:
        """Weights, and the optimizer state where the checkpoint kept it (`--init-from` reads the weights alone)."""
        options = StateDictOptions(full_state_dict=True, strict=False)
        if "optimizer" not in state:
            set_model_state_dict(self.model, state["trainable"], options=options)
        else:
            set_state_dict(self.model, self.optimizer, model_state_dict=state["trainable"],
                           optim_state_dict=state["optimizer"], options=options)  # fmt: skip
        self.updates = int(state["updates"])

    def follow(self) -> None:
        """On ranks other than 0: run rank 0's commands until it closes."""
        commands: dict[str, Callable[[Any], Any]] = {
            "step": self._step,
            "weights": lambda _: merged_weights(self.model, self.lora, self.world),
            "state": lambda _: self._state_dict(),
            "load": self._load_state_dict,
        }
        while (message := self.world.receive())[0] != "close":
            command, payload = message
            if command not in commands:
                raise RuntimeError(f"rank {self.world.rank}: unknown command {command!r} from rank 0")
            commands[command](payload)
        self.world.close()

    def close(self) -> None:
        self.world.close()  # on rank 0 this tells the other ranks to stop; closing twice is harmless


def make_embedded_backend(config: TrainConfig) -> EmbeddedBackend:
    """The embedded backend for this process's rank: joins (or starts) the ranks, loads the policy on its device."""
    from alight_server.inference.models import load_policy

    world = join(config)
    torch.manual_seed(config.seed)  # the same LoRA initialisation on every rank
    dtype = pick_dtype(config.inference.dtype, world.device)
    model, _ = load_policy(config.model, device=world.device, dtype=dtype)
    distill = config.algorithm.distill
    teacher = load_teacher(distill, config.model, world.device, dtype) if distill is not None else None
    return EmbeddedBackend(model, config.optimizer, config.algorithm, config.lora, world=world, teacher=teacher)
