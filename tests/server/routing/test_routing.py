"""Which policy serves a call: rules in order, glob patterns, the default, and the refusal naming the rule to add."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from alight_server.policies.routing import (
    CallFacts,
    GatewayRouting,
    RoutingConfig,
    RoutingRule,
    Unroutable,
    policy_of,
    route,
)

RULES = RoutingConfig(
    rules=[
        RoutingRule(agent="Triage*", policy="triage"),
        RoutingRule(role="judge", policy="judge"),
        RoutingRule(model="*specialist*", policy="specialist"),
    ]
)


def test_a_call_goes_to_the_policy_of_the_rule_its_agent_matches() -> None:
    assert route(RULES, CallFacts(agent="Triage agent", model="gpt-4o")) == "triage"


def test_a_call_is_routed_by_the_model_it_asked_for() -> None:
    assert route(RULES, CallFacts(model="my-specialist-v2")) == "specialist"


def test_a_call_is_routed_by_its_harness_role() -> None:
    assert route(RULES, CallFacts(role="judge", model="x")) == "judge"


def test_the_first_matching_rule_wins() -> None:
    assert route(RULES, CallFacts(agent="Triage", model="specialist")) == "triage"


def test_agent_patterns_are_case_sensitive() -> None:
    with pytest.raises(Unroutable):
        route(RULES, CallFacts(agent="triage"))


def test_an_unmatched_call_goes_to_the_default() -> None:
    routing = RULES.model_copy(update={"default": "triage"})
    assert route(routing, CallFacts(agent="Billing", model="m")) == "triage"


def test_an_unroutable_call_is_refused_with_the_rule_to_add() -> None:
    with pytest.raises(Unroutable) as info:
        route(RULES, CallFacts(agent="Billing", model="gpt-4o"))
    message = str(info.value)
    assert "agent 'Billing', model 'gpt-4o'" in message
    assert "{agent: Billing, policy: NAME}" in message and "routing.default" in message


def test_a_call_with_nothing_to_route_by_is_told_to_send_the_agent_header() -> None:
    with pytest.raises(Unroutable) as info:
        route(RULES, CallFacts())
    assert "no agent name, model or role" in str(info.value) and "x-alight-agent header" in str(info.value)


def test_gateway_routing_refuses_a_rule_for_an_unknown_policy() -> None:
    with pytest.raises(ValidationError, match="which policies: lacks"):
        GatewayRouting(policies=["triage"], rules=RULES.rules)


def test_the_policy_is_read_back_from_a_calls_flags() -> None:
    assert policy_of(["fidelity:rendered", "policy:triage"]) == "triage"
    assert policy_of(["fidelity:rendered"]) is None
