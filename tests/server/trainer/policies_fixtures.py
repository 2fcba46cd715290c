"""Shared pieces of the several-policies tests: a two-policy config, a tensor hash, one step of a policy."""

from __future__ import annotations

import hashlib
from typing import Any

import torch

from alight_server.trainer.backends.embedded import EmbeddedBackend
from alight_server.trainer.backends.policy_set import PolicySet
from alight_testing.batches import batch_for

TWO = {
    "lora": {"enabled": True, "r": 2, "alpha": 4},
    "optimizer": {"lr": 1e-2},
    "policies": {"planner": {}, "executor": {"optimizer": {"lr": 5e-3}}},
    "routing": {"rules": [{"agent": "executor*", "policy": "executor"}], "default": "planner"},
    # a repeated prompt served from the prefix cache gets logprobs ~1e-6 off its first serving's (measured);
    # outputs are compared bit for bit here, so nothing is cached
    "inference": {"prefix_cache_tokens": 0},
}


def digest(tensors: dict[str, torch.Tensor]) -> str:
    """One hash of every tensor's name and bytes."""
    sha = hashlib.sha256()
    for name in sorted(tensors):
        sha.update(name.encode())
        sha.update(tensors[name].detach().cpu().contiguous().numpy().tobytes())
    return sha.hexdigest()


def embedded(policies: PolicySet, name: str) -> EmbeddedBackend:
    """Policy `name`'s backend: with `policies:` every trainable policy's is embedded."""
    backend = policies.backends[name]
    assert isinstance(backend, EmbeddedBackend)
    return backend


def step(policies: PolicySet, name: str) -> dict[str, float]:
    return policies.backends[name].step(batch_for(embedded(policies, name).model))


PROMPTS = [[1, 504, 218, 314, 350, 30], [1, 504, 147, 28, 253, 143, 30]]


def greedy(engine: Any, adapter: str) -> list[tuple[list[int], list[float]]]:
    """Each of PROMPTS' greedy tokens and their logprobs as a started engine serves `adapter`."""
    from alight_server.inference.sampling import SamplingParams

    done = [
        engine.generate(prompt, SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True, adapter=adapter))[0]
        for prompt in PROMPTS
    ]
    return [(c.token_ids, c.logprobs) for c in done]
