"""The embedded engine training and `alight eval` serve the policy with: one function from the `inference:` section."""

from __future__ import annotations

import torch

from alight_server.trainer.config.sections import InferenceSettings
from alight_server.trainer.run.policy_engine import policy_engine

# The section's settings that are not the engine's: the stack's sampling temperatures, the gateway's cap,
# the process's threads, and which backend serves at all.
NOT_THE_ENGINE_S = {"backend", "vllm", "train_temperature", "val_temperature", "torch_threads", "max_output_tokens"}


def test_the_engine_takes_every_engine_setting_of_the_inference_section() -> None:
    section = InferenceSettings(
        device="cpu", dtype="float16", max_batch_size=3, prefix_cache_tokens=7, overlap_prefill=False
    )
    assert set(InferenceSettings.model_fields) - NOT_THE_ENGINE_S == section.model_fields_set  # each one set here
    engine = policy_engine("tiny", section)
    assert (engine.model_name, engine.device, next(engine.model.parameters()).dtype) == (
        "tiny",
        torch.device("cpu"),
        torch.float16,
    )
    assert (engine.max_batch_size, engine.prefix_cache.max_tokens, engine._prefiller.overlap) == (3, 7, False)
