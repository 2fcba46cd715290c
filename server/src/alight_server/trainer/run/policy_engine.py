"""The embedded engine that serves the policy, built from a config's `inference:` section (training and `alight eval`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from alight_server.inference.engine import InferenceEngine
from alight_server.inference.models import load_policy
from alight_server.trainer.backends.devices import pick_device, pick_dtype
from alight_server.trainer.config.sections import InferenceSettings

if TYPE_CHECKING:
    from alight_server.inference.adapters import AdapterSpec
    from alight_server.trainer.config.run import TrainConfig


def policy_engine(
    model: str, inference: InferenceSettings, adapters: Mapping[str, AdapterSpec | None] | None = None
) -> InferenceEngine:
    """`model` loaded on the section's device and dtype, behind an engine with the section's batching and caching;
    with `adapters` (several policies) it serves each name: a LoRA adapter over `model`, or (None) `model` itself."""
    device = pick_device(inference.device)
    served, tokenizer = load_policy(model, device=device, dtype=pick_dtype(inference.dtype, device))
    return InferenceEngine(
        served,
        tokenizer,
        model_name=model,
        max_batch_size=inference.max_batch_size,
        prefix_cache_tokens=inference.prefix_cache_tokens,
        overlap_prefill=inference.overlap_prefill,
        adapters=adapters,
    )


def engine_adapters(config: TrainConfig) -> dict[str, AdapterSpec | None] | None:
    """What the engine serves for `config.policies`: a zero-initialised adapter per LoRA policy (a trained one gets
    its tensors at each step, an `init_from` one at the start), the base model for a frozen one without LoRA;
    None with one policy (today's engine, unchanged)."""
    from alight_server.inference.adapters import AdapterSpec

    if not config.policies:
        return None
    return {
        policy.name: AdapterSpec(policy.lora.r, float(policy.lora.alpha), tuple(policy.lora.target_modules))
        if policy.lora.enabled
        else None
        for policy in config.resolved_policies()
    }
