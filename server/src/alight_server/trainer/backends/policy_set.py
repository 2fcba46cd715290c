"""The policies' trainers: a one-policy run's backend as a set of one, or one per trainable policy (issue 32).

With `policies:` each trainable policy gets its own `EmbeddedBackend` over its own copy of the base model (its own
LoRA, optimizer and algorithm), so a step of one never touches another's tensors; a frozen policy has no backend
(inference serves the base model, or its `init_from` adapter). One process only.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from alight.client import AlightClient
from alight_server.trainer.backends.base import TrainerBackend, make_backend
from alight_server.trainer.backends.embedded import EmbeddedBackend
from alight_server.trainer.config.policies import ResolvedPolicy
from alight_server.trainer.run.weight_sync import WeightSync

if TYPE_CHECKING:
    from alight_server.trainer.config.run import TrainConfig

Weights = dict[str, torch.Tensor]
ONE_POLICY = "policy"  # a one-policy run's policy (no `policies:`): a name no metric or checkpoint shows


class PolicySet:
    """The trainable policies' backends by name, the frozen policies' starting adapters, and each policy's own
    version (the number of weight updates that changed it). `named`: the config's `policies:` (else one policy)."""

    def __init__(
        self,
        policies: list[ResolvedPolicy],
        backends: dict[str, TrainerBackend],
        frozen: dict[str, Weights],
        named: bool = True,
    ) -> None:
        self.policies = {policy.name: policy for policy in policies}
        self.backends = backends  # trainable policies only
        self.frozen = frozen  # frozen LoRA policies that start from a checkpoint's adapter
        self.named = named
        self.own_versions = {policy.name: 0 for policy in policies}

    @property
    def one(self) -> TrainerBackend | None:
        """A one-policy run's backend (no `policies:`); None with `policies:`."""
        return None if self.named else self.backends[ONE_POLICY]

    @property
    def starts_from_checkpoints(self) -> bool:
        """A policy starts from an `init_from` adapter, which inference must get before the first rollout."""
        return any(policy.init_from for policy in self.policies.values())

    def weights(self, name: str) -> Weights:
        """What inference loads for `name`: its adapter's tensors (C1 names)."""
        if name in self.frozen:
            return self.frozen[name]
        backend = self.backends[name]
        assert isinstance(backend, EmbeddedBackend), "with policies: every trainable policy is embedded"
        return backend.adapter_weights()

    def push(self, sync: WeightSync, name: str, metadata: dict[str, Any]) -> tuple[int, float]:
        """Load policy `name`'s weights into inference, pausing only its calls (a one-policy run's backend pushes
        its own way, pausing every call); (new global version, seconds)."""
        if self.named:
            version, seconds = sync.push(lambda: self.weights(name), metadata, policy=name)
        else:
            version, seconds = self.backends[name].push_weights(sync, metadata)
        self.own_versions[name] += 1
        return version, seconds

    def push_weights(self, sync: WeightSync, metadata: dict[str, Any]) -> tuple[int, float]:
        """Every policy inference does not serve as it starts (after a resume, or from `init_from`), one by one:
        the trainable ones and the frozen ones with a starting adapter. (last global version, seconds in all)."""
        version, total = 0, 0.0
        for name in [*self.backends, *self.frozen]:
            version, seconds = self.push(sync, name, metadata)
            total += seconds
        return version, total

    def state_dict(self) -> dict[str, Any]:
        """Every trainable policy's backend state and the own versions; a one-policy run's: its backend's own."""
        if (one := self.one) is not None:
            return one.state_dict()
        return {
            "policies": {name: backend.state_dict() for name, backend in self.backends.items()},
            "own_versions": dict(self.own_versions),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore every trainable policy; a checkpoint of another set of policies is refused by name."""
        if (one := self.one) is not None:
            return one.load_state_dict(state)
        if "policies" not in state:
            raise ValueError("the checkpoint was written by a one-policy run; resume it without policies:")
        saved = state["policies"]
        if set(saved) != set(self.backends):
            raise ValueError(
                f"the checkpoint trained the policies {sorted(saved)}, this config trains {sorted(self.backends)}; "
                "resume with the same policies: (or start a new run with init_from)"
            )
        for name, backend in self.backends.items():
            backend.load_state_dict(saved[name])
        self.own_versions.update(state.get("own_versions", {}))

    def close(self) -> None:
        for backend in self.backends.values():
            backend.close()


def make_policy_set(config: TrainConfig, client: AlightClient | None = None) -> PolicySet:
    """A backend per trainable policy of `config.policies` (each loading its own copy of the base model), and the
    frozen policies' `init_from` adapters; without `policies:` the set of the run's one backend (`client`: as
    `make_backend` takes it)."""
    if not config.policies:
        one = ResolvedPolicy(ONE_POLICY, config.model, config.lora, config.optimizer, config.algorithm, True)
        return PolicySet([one], {ONE_POLICY: make_backend(config, client)}, {}, named=False)
    from alight_server.inference.models import load_policy
    from alight_server.trainer.backends.devices import pick_device, pick_dtype
    from alight_server.trainer.backends.distributed import World
    from alight_server.trainer.run.init_from import checkpoint_adapter

    if (config.trainer.world_size or 1) > 1 or int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise ValueError(
            "several policies train in one process for now: set trainer.world_size: 1 (or remove it) and run "
            "`alight train` without torchrun"
        )
    device = pick_device(config.inference.device)
    dtype = pick_dtype(config.inference.dtype, device)
    policies = config.resolved_policies()
    backends: dict[str, TrainerBackend] = {}
    frozen: dict[str, Weights] = {}
    for policy in policies:
        start = checkpoint_adapter(Path(policy.init_from), policy.name) if policy.init_from else None
        if not policy.trainable:
            if start is not None:
                frozen[policy.name] = start
            continue
        if not policy.lora.enabled:  # the engine's base is shared by every policy: only adapters change
            raise ValueError(
                f"policies.{policy.name} trains without LoRA, but under policies: inference updates adapters only; "
                f"set lora.enabled: true (top level or policies.{policy.name}.lora), or remove policies:"
            )
        torch.manual_seed(config.seed)  # each policy's LoRA starts as a one-policy run's would
        model, _ = load_policy(policy.model, device=device, dtype=dtype)
        backend = EmbeddedBackend(model, policy.optimizer, policy.algorithm, policy.lora, world=World(device=device))
        if start is not None:
            backend.load_adapter(start)
        backends[policy.name] = backend
    return PolicySet(policies, backends, frozen)
