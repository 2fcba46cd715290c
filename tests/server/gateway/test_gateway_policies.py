"""Several policies at the gateway: each call routed to its policy, recorded with it, sent upstream as its model."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from alight.schemas import RolloutCreate, UpstreamCreate
from alight.semconv import HEADER_AGENT, HEADER_ROLE
from alight_server.config import GatewayConfig, ServerConfig
from alight_server.http.auth import issue_attempt_token
from alight_server.policies.routing import GatewayRouting, RoutingRule, policy_of
from alight_server.stacks.server_thread import ServerThread
from alight_testing import FakeUpstreamState, create_fake_upstream

ROUTING = GatewayRouting(
    policies=["triage", "specialist"],
    rules=[RoutingRule(agent="Triage*", policy="triage"), RoutingRule(role="specialist", policy="specialist")],
)


@dataclass
class Routed:
    server: Any  # tests/conftest.py LiveServer
    upstream: FakeUpstreamState
    base_url: str  # the attempt's OPENAI_BASE_URL
    token: str
    rollout_id: str

    def chat(self, headers: dict[str, str], stream: bool = False, model: str = "gpt-4o") -> httpx.Response:
        body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "stream": stream}
        auth = {"authorization": f"Bearer {self.token}", **headers}
        return httpx.post(f"{self.base_url}/chat/completions", json=body, headers=auth, timeout=30)

    def recorded(self) -> list[Any]:
        return self.server.store.list_model_calls(self.rollout_id)


def routed_gateway(live_server: Any, adapters: tuple[str, ...]) -> Iterator[Routed]:
    app = create_fake_upstream(model="base", adapters=adapters)
    with ServerThread(app) as url:
        store = live_server.store
        store.add_upstream(UpstreamCreate(id="u1", url=url + "/v1", model="base"))
        (rollout,) = store.create_rollouts([RolloutCreate(task={"i": 0})])
        ((claimed, attempt),) = store.claim_attempts(limit=1, ids=[rollout.id])
        rid = claimed.id
        token = issue_attempt_token(live_server.app.state.token_secret, rid, attempt, ttl_s=3600)
        yield Routed(live_server, app.state.fake, f"{live_server.url}/gw/{rid}/{attempt}/v1", token, rid)


@pytest.fixture
def routing() -> GatewayRouting | None:
    """Two policies; a test parametrizes it to None for a single-policy gateway (today's configs)."""
    return ROUTING


@pytest.fixture
def server_config(server_config: ServerConfig, routing: GatewayRouting | None) -> ServerConfig:
    return server_config.model_copy(update={"gateway": GatewayConfig(routing=routing)})


@pytest.fixture
def routed(live_server: Any) -> Iterator[Routed]:
    yield from routed_gateway(live_server, adapters=("triage", "specialist"))


def test_every_call_of_a_two_role_rollout_is_recorded_with_its_policy(routed: Routed) -> None:
    roles = [{HEADER_AGENT: "Triage agent"}, {HEADER_ROLE: "specialist"}, {HEADER_AGENT: "Triage agent"}]
    for headers in roles:
        assert routed.chat(headers).status_code == 200
    assert [policy_of(call.flags) for call in routed.recorded()] == ["triage", "specialist", "triage"]


def test_the_upstream_is_asked_for_the_routed_policy_as_its_model(routed: Routed) -> None:
    routed.chat({HEADER_ROLE: "specialist"})
    routed.chat({HEADER_AGENT: "Triage"})
    assert [call.request["model"] for call in routed.upstream.calls] == ["specialist", "triage"]


def test_the_recorded_request_keeps_the_model_the_agent_asked_for(routed: Routed) -> None:
    routed.chat({HEADER_AGENT: "Triage"}, model="gpt-4o-mini")
    assert routed.recorded()[0].request["model"] == "gpt-4o-mini"


def test_a_streamed_call_is_recorded_with_its_policy(routed: Routed) -> None:
    reply = routed.chat({HEADER_ROLE: "specialist"}, stream=True)
    assert reply.status_code == 200 and "data: [DONE]" in reply.text
    (call,) = routed.recorded()
    assert policy_of(call.flags) == "specialist" and call.response_token_ids


def test_an_unroutable_call_is_refused_naming_the_rule_to_add(routed: Routed) -> None:
    reply = routed.chat({HEADER_AGENT: "Billing"})
    assert reply.status_code == 400
    message = reply.json()["error"]["message"]
    assert "agent 'Billing'" in message and "{agent: Billing, policy: NAME}" in message
    assert routed.upstream.calls == [] and routed.recorded() == []


@pytest.mark.parametrize("routing", [None])
def test_without_routing_calls_go_upstream_as_today(live_server: Any) -> None:
    for routed in routed_gateway(live_server, adapters=()):
        assert routed.chat({HEADER_AGENT: "Billing"}).status_code == 200
        (call,) = routed.recorded()
        assert policy_of(call.flags) is None
        assert routed.upstream.calls[0].request["model"] == "base"
