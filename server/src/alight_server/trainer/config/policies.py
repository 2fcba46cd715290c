"""A training config's `policies:` section: several policies (LoRA adapters over one base), each its own settings."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, Field

from alight_server.policies.routing import GatewayRouting, RoutingConfig, check_policy_names
from alight_server.trainer.config.algorithm import AlgorithmConfig
from alight_server.trainer.config.sections import LoraConfig, OptimizerConfig, Section

S = TypeVar("S", bound=BaseModel)


class PolicyConfig(Section):
    """One policy. Unset sections take the top-level ones; a set section overrides only the keys it names."""

    model: str | None = Field(default=None, min_length=1, description="its base model; default: the top-level model")
    lora: LoraConfig | None = None
    optimizer: OptimizerConfig | None = None
    algorithm: AlgorithmConfig | None = None
    # false: served and recorded but never updated (a fixed opponent, a judge, a role you do not want to move).
    trainable: bool = True
    # a checkpoint folder (a run folder, its checkpoints/ or a step-N) whose LoRA adapter this policy starts from
    init_from: str | None = Field(default=None, min_length=1)
    # the named reward (`alight.reward(v, name=...)`) that scores this policy's calls; unset: the rollout's final one
    reward: str | None = Field(default=None, min_length=1, max_length=200)


def overridden(top: S, override: BaseModel | None) -> S:
    """`top` with the keys `override` sets (its model_fields_set) replaced; `top` itself when unset."""
    if override is None:
        return top
    return top.model_copy(update={key: getattr(override, key) for key in override.model_fields_set})


def check_policies(
    policies: dict[str, PolicyConfig], routing: RoutingConfig | None, model: str, lora: LoraConfig, backend: str
) -> None:
    """The `policies:` / `routing:` pair makes sense; a ValueError saying what to change when it does not."""
    if not policies:
        if routing is not None:
            raise ValueError("routing: sends calls to policies, but policies: is not set; name them under policies:")
        return
    if backend == "verl":
        raise ValueError("trainer.backend: verl trains one policy: several need an actor adapter per policy and a "
                         "rollout LoRA slot per policy, which the verl seam does not pass yet; use "
                         "trainer.backend: embedded with policies: (or remove policies:)")  # fmt: skip
    names = list(policies)
    if routing is None and len(policies) > 1:
        raise ValueError(f"policies: names {len(policies)} policies ({', '.join(names)}) but routing: is not set; "
                         f"add routing: with rules (e.g. {{agent: planner, policy: {names[0]}}}) or a default")  # fmt: skip
    if routing is not None:
        check_policy_names(routing, names)
    if not any(policy.trainable for policy in policies.values()):
        raise ValueError("every policy has trainable: false; at least one must train (set trainable: true on one)")
    for name, policy in policies.items():
        if policy.model is not None and policy.model != model:
            raise ValueError(
                f"policies.{name}.model is {policy.model!r} but model is {model!r}: several policies are LoRA "
                f"adapters over one base model for now (serving several base models is not built); remove it"
            )
        if len(policies) > 1 and policy.trainable and not overridden(lora, policy.lora).enabled:
            raise ValueError(
                f"policies.{name} trains without LoRA, but several policies share one base model: each trainable "
                f"one is its own adapter; set lora.enabled: true (top level or policies.{name}.lora)"
            )


def check_init_folders(policies: dict[str, PolicyConfig]) -> None:
    """Every `init_from` names a folder that exists (paths already made absolute against the config's folder)."""
    for name, policy in policies.items():
        if policy.init_from is not None and not Path(policy.init_from).is_dir():
            raise ValueError(
                f"policies.{name}.init_from is {policy.init_from!r}, which is not a folder; name a run folder, its "
                f"checkpoints/ or one checkpoints/step-N of an earlier run (relative paths start at the config's folder)"
            )


@dataclass(frozen=True)
class ResolvedPolicy:
    """One policy with every setting filled in from the top level: what the trainer builds it from."""

    name: str
    model: str
    lora: LoraConfig
    optimizer: OptimizerConfig
    algorithm: AlgorithmConfig
    trainable: bool
    init_from: str | None = None  # a checkpoint whose adapter it starts from
    reward: str | None = None  # the named reward that scores it; None: the rollout's final reward


def resolve_policies(
    policies: dict[str, PolicyConfig],
    model: str,
    lora: LoraConfig,
    optimizer: OptimizerConfig,
    algorithm: AlgorithmConfig,
) -> list[ResolvedPolicy]:
    """Each policy in config order with the top-level sections its own overrides do not replace."""
    return [
        ResolvedPolicy(
            name,
            policy.model or model,
            overridden(lora, policy.lora),
            overridden(optimizer, policy.optimizer),
            overridden(algorithm, policy.algorithm),
            policy.trainable,
            policy.init_from,
            policy.reward,
        )
        for name, policy in policies.items()
    ]


def gateway_routing(policies: dict[str, PolicyConfig], routing: RoutingConfig | None) -> GatewayRouting | None:
    """What the gateway routes by; None for a single-policy config (today's path, unchanged)."""
    if not policies:
        return None
    routing = routing or RoutingConfig(default=next(iter(policies)))
    return GatewayRouting(policies=list(policies), rules=routing.rules, default=routing.default)
