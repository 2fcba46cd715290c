"""Each integration names the calling agent (X-Alight-Agent): with routing on, every call reaches its agent's policy.

Real agent processes (Agents SDK, LangGraph, AutoGen) under the controller's environment, against the real
server and gateway with routing by agent name only, and a fake upstream serving one adapter per policy.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from alight.schemas import UpstreamCreate
from alight_server.config import GatewayConfig, ServerConfig
from alight_server.policies.routing import GatewayRouting, RoutingRule, policy_of
from alight_server.stacks.server_thread import ServerThread
from alight_testing.fake_upstream import create_fake_upstream
from tests.integrations.conftest import AlightStack

AGENTS = ("triage", "math", "planner", "solver", "writer", "critic")
# By agent name alone: every agent asks for the same model, and no default catches a call without a name.
ROUTING = GatewayRouting(
    policies=[f"p-{a}" for a in AGENTS], rules=[RoutingRule(agent=a, policy=f"p-{a}") for a in AGENTS]
)


@pytest.fixture
def server_config(server_config: ServerConfig) -> ServerConfig:
    return server_config.model_copy(update={"gateway": GatewayConfig(routing=ROUTING)})


@pytest.fixture
def routed_stack(live_server: Any) -> Iterator[AlightStack]:
    app = create_fake_upstream("base", adapters=tuple(ROUTING.policies))
    with ServerThread(app) as url:
        live_server.store.add_upstream(UpstreamCreate(id="policy", url=f"{url}/v1", model="base"))
        yield AlightStack(live_server, app.state.fake)


def policies_of_calls(stack: AlightStack, target: str, task: dict[str, Any]) -> list[str | None]:
    run = stack.run_agent(target, task)
    assert run.returncode == 0, run.output
    return [policy_of(call.flags) for call in stack.server.store.list_model_calls(run.rollout_id)]


def test_agents_sdk_calls_reach_the_running_agents_policy_across_a_handoff(routed_stack: AlightStack) -> None:
    task = {"question": "call transfer_to_math"}
    policies = policies_of_calls(routed_stack, "tests/integrations/openai_agents/handoff_agent.py:main", task)
    assert policies == ["p-triage", "p-math"]
    assert [call.request["model"] for call in routed_stack.upstream.calls] == ["p-triage", "p-math"]


def test_langgraph_calls_reach_their_nodes_policy(routed_stack: AlightStack) -> None:
    target = "tests/integrations/langchain/two_node_agent.py:main"
    assert policies_of_calls(routed_stack, target, {"question": "2 + 3"}) == ["p-planner", "p-solver"]


def test_autogen_team_turns_reach_each_agents_policy_streamed_or_not(routed_stack: AlightStack) -> None:
    target = "tests/integrations/autogen/team_agent.py:main"
    assert policies_of_calls(routed_stack, target, {"question": "one line about 2 + 3"}) == ["p-writer", "p-critic"]
