"""The `verl:` section of a training config: where verl runs and how it serves the policy (no verl import)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from alight_server.trainer.config.sections import Section


class VerlSettings(Section):
    """Used with `trainer.backend: verl`; alight's own keys (optimizer, algorithm, lora) map onto verl's."""

    ray_address: str | None = Field(default=None, description="an existing Ray cluster; default: ray.init() here")
    nnodes: int = Field(default=1, ge=1)
    n_gpus_per_node: int = Field(default=1, ge=1)
    rollout: Literal["vllm", "sglang"] = Field(default="vllm", description="verl's rollout engine")
    tensor_parallel_size: int = Field(default=1, ge=1, description="GPUs per rollout replica")
    gpu_memory_utilization: float = Field(default=0.5, gt=0, le=1, description="the rollout engine's share")
    strategy: Literal["fsdp", "fsdp2"] = "fsdp2"
    max_model_len: int | None = Field(default=None, ge=16, description="longest prompt + response a replica serves")
    # Any other verl key, dotted (actor_rollout_ref.actor.fsdp_config.param_offload: true), applied last.
    overrides: dict[str, Any] = Field(default_factory=dict)
