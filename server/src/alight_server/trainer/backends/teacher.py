"""The distillation teacher: a frozen model the inference side can load, scoring the student's tokens by a prefill."""

from __future__ import annotations

import time
from typing import Any

import torch

from alight_server.trainer.backends.accumulation import micro_batches, proximal_logprobs
from alight_server.trainer.config.algorithm import DistillConfig
from alight_server.trainer.step.distill import reverse_kl_metrics
from alight_server.trainer.step.samples import SampleBatch


def load_teacher(distill: DistillConfig, student: str, device: Any, dtype: Any = None) -> Any:
    """`distill.teacher` loaded as the inference side loads a policy, frozen (eval mode, no gradient); a ValueError
    when its tokenizer is not the student's (it scores the student's token ids, which would then name other text)."""
    from transformers import AutoTokenizer

    from alight_server.inference.models import load_policy, resolve_model

    model, tokenizer = load_policy(distill.teacher, device=device, dtype=dtype)
    student_vocab = AutoTokenizer.from_pretrained(resolve_model(student)).get_vocab()
    if tokenizer.get_vocab() != student_vocab:
        raise ValueError(
            f"algorithm.distill.teacher {distill.teacher!r} has another tokenizer than the student {student!r} "
            f"({len(tokenizer.get_vocab())} vs {len(student_vocab)} tokens): it would score other text; pick a "
            "teacher of the student's model family (an SFT'd checkpoint of it, or a larger sibling with its vocabulary)"
        )
    return model.requires_grad_(False)


def score_batch(teacher: Any, batch: SampleBatch, token_budget: int) -> tuple[torch.Tensor | None, dict[str, float]]:
    """The teacher's (R, T) logprobs of every trained token of the batch (one prefill per micro-batch, no
    generation; 0 elsewhere) and the `distill/*` metrics; (None, {}) without a teacher."""
    if teacher is None:
        return None, {}
    start = time.perf_counter()
    plan: list[list[int] | None] = list(micro_batches(batch, token_budget))
    teacher_logprobs = proximal_logprobs(teacher, batch, plan)  # (R, T)
    seconds = time.perf_counter() - start
    return teacher_logprobs, reverse_kl_metrics(teacher_logprobs, batch.old_logprobs, batch.loss_mask, seconds)
