"""Several policies: which policy serves a model call, by agent name, requested model or harness role (pure)."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, model_validator

from alight.semconv import HEADER_AGENT

# A policy's name is also the model name the gateway sends upstream and the engine's adapter name.
POLICY_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
POLICY_FLAG = "policy:"  # a recorded call's flag: "policy:<name>", the policy that served it


class RoutingRule(BaseModel):
    """One rule: calls matching its one condition go to `policy`. `agent` and `model` take glob patterns."""

    model_config = ConfigDict(extra="forbid")

    policy: str = Field(pattern=POLICY_NAME)
    agent: str | None = Field(default=None, min_length=1, description="the caller's gen_ai.agent.name")
    model: str | None = Field(default=None, min_length=1, description="the model name the agent asked for")
    role: str | None = Field(default=None, min_length=1, description="the harness role (X-Alight-Role)")

    @model_validator(mode="after")
    def _one_condition(self) -> RoutingRule:
        given = [key for key in ("agent", "model", "role") if getattr(self, key) is not None]
        if len(given) != 1:
            raise ValueError(
                f"a routing rule has exactly one of agent, model or role (got {', '.join(given) or 'none'}); "
                f"e.g. {{agent: planner, policy: {self.policy}}}"
            )
        return self

    def matches(self, call: CallFacts) -> bool:
        for pattern, value in ((self.agent, call.agent), (self.model, call.model), (self.role, call.role)):
            if pattern is not None:
                return value is not None and fnmatch.fnmatchcase(value, pattern)
        return False  # pragma: no cover - the validator requires one condition


class RoutingConfig(BaseModel):
    """`routing:`: rules tried in order, the first match wins; no match goes to `default`, or is refused."""

    model_config = ConfigDict(extra="forbid")

    rules: list[RoutingRule] = Field(default_factory=list[RoutingRule])
    default: str | None = Field(default=None, pattern=POLICY_NAME)


class GatewayRouting(RoutingConfig):
    """What the gateway needs of a several-policy run: the policies' names and the routing."""

    policies: list[str] = Field(min_length=1)

    @model_validator(mode="after")
    def _known_policies(self) -> GatewayRouting:
        check_policy_names(self, self.policies)
        return self


def check_policy_names(routing: RoutingConfig, policies: list[str]) -> None:
    """Every rule and the default name a policy of `policies`; a ValueError naming the first that does not."""
    known = ", ".join(policies)
    for i, rule in enumerate(routing.rules):
        if rule.policy not in policies:
            raise ValueError(
                f"routing.rules[{i}] sends calls to policy {rule.policy!r}, which policies: lacks ({known})"
            )
    if routing.default is not None and routing.default not in policies:
        raise ValueError(f"routing.default is {routing.default!r}, which policies: lacks ({known})")


@dataclass(frozen=True, slots=True)
class CallFacts:
    """What the gateway knows about a call when it arrives."""

    agent: str | None = None
    model: str | None = None
    role: str | None = None


class Unroutable(ValueError):
    """No rule matches a call and there is no default; the message names the rule to add."""


def route(routing: RoutingConfig, call: CallFacts) -> str:
    """The name of the policy that serves `call`: the first matching rule's, else the default's."""
    for rule in routing.rules:
        if rule.matches(call):
            return rule.policy
    if routing.default is not None:
        return routing.default
    raise Unroutable(f"no routing rule matches this call ({_describe(call)}) and routing.default is unset; "
                     f"add a rule for it to routing.rules, e.g. {_suggest(call)}, or set routing.default")  # fmt: skip


def _describe(call: CallFacts) -> str:
    parts = [f"{key} {value!r}" for key, value in (("agent", call.agent), ("model", call.model), ("role", call.role))
             if value is not None]  # fmt: skip
    return ", ".join(parts) or "no agent name, model or role"


def _suggest(call: CallFacts) -> str:
    for key, value in (("agent", call.agent), ("role", call.role), ("model", call.model)):
        if value is not None:
            return f"{{{key}: {value}, policy: NAME}}"
    return f"an {HEADER_AGENT} header on the agent's requests with {{agent: NAME, policy: NAME}}"


def policy_of(flags: list[str]) -> str | None:
    """The policy a recorded call's flags name (POLICY_FLAG), or None for a single-policy run's call."""
    return next((flag.removeprefix(POLICY_FLAG) for flag in flags if flag.startswith(POLICY_FLAG)), None)
