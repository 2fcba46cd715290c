"""The embedded engine that serves the policy, built from a config's `inference:` section (training and `alight eval`)."""

from __future__ import annotations

from alight_server.inference.engine import InferenceEngine
from alight_server.inference.models import load_policy
from alight_server.trainer.config_sections import InferenceSettings
from alight_server.trainer.devices import pick_device, pick_dtype


def policy_engine(model: str, inference: InferenceSettings) -> InferenceEngine:
    """`model` loaded on the section's device and dtype, behind an engine with the section's batching and caching."""
    device = pick_device(inference.device)
    served, tokenizer = load_policy(model, device=device, dtype=pick_dtype(inference.dtype, device))
    return InferenceEngine(
        served,
        tokenizer,
        model_name=model,
        max_batch_size=inference.max_batch_size,
        prefix_cache_tokens=inference.prefix_cache_tokens,
        overlap_prefill=inference.overlap_prefill,
    )
