"""The AutoGen integration: real AssistantAgent and RoundRobinGroupChat against the fake upstream."""

from __future__ import annotations

import json

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core.models import ModelInfo
from autogen_ext.models.openai import OpenAIChatCompletionClient
from opentelemetry import trace

import alight_autogen
from alight import semconv

MODEL_INFO = ModelInfo(
    vision=False, function_calling=True, json_output=False, family="unknown", structured_output=False
)


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


INTEGRATION = alight_autogen  # instrumented by the `instrumented` fixture (tests/integrations/conftest.py)


def _client(base_url: str) -> OpenAIChatCompletionClient:
    return OpenAIChatCompletionClient(model="fake", base_url=base_url, api_key="unused", model_info=MODEL_INFO)


async def test_assistant_run_yields_chat_spans_under_autogens_agent_span(
    fake_upstream, instrumented, tree, callers
) -> None:
    base_url, upstream = fake_upstream
    upstream.calls.clear()
    agent = AssistantAgent("adder", model_client=_client(base_url), tools=[add], reflect_on_tool_use=True)
    result = await agent.run(task='call add {"a": 2, "b": 3}')
    assert not trace.get_current_span().get_span_context().is_valid
    spans = tree()
    assert "Tool results: 5" in str(result.messages[-1].content)
    (agent_span,) = spans.named("invoke_agent adder")  # autogen-core's own span, not a copy
    assert agent_span.attributes[semconv.GEN_AI_AGENT_NAME] == "adder"
    chats = spans.named("chat fake")
    assert len(chats) == 2 and all("invoke_agent adder" in spans.ancestors(c) for c in chats)
    (tool_span,) = spans.named("execute_tool add")
    assert json.loads(tool_span.attributes[semconv.GEN_AI_TOOL_CALL_ARGUMENTS]) == {"a": 2, "b": 3}
    assert tool_span.attributes[semconv.GEN_AI_TOOL_CALL_RESULT] == "5"
    assert chats[0].end_time <= tool_span.start_time <= tool_span.end_time <= chats[1].start_time
    http_parents = [spans.parent(spans.by_id(i)) for i in callers(upstream)]
    assert [p.context.span_id for p in http_parents if p] == [c.context.span_id for c in chats]


async def test_team_turns_put_each_call_under_its_agent(fake_upstream, instrumented, tree) -> None:
    base_url, _ = fake_upstream
    writer = AssistantAgent("writer", model_client=_client(base_url), model_client_stream=True)
    critic = AssistantAgent("critic", model_client=_client(base_url))
    team = RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(3))
    result = await team.run(task="write one line about adding 2 and 3")
    spans = tree()
    assert [m.source for m in result.messages] == ["user", "writer", "critic"]
    owners = [next(a for a in spans.ancestors(c) if a.startswith("invoke_agent")) for c in spans.named("chat fake")]
    assert owners == ["invoke_agent writer", "invoke_agent critic"]


async def test_uninstrument_restores_the_clients_and_tools(fake_upstream, tree) -> None:
    base_url, _ = fake_upstream
    original = OpenAIChatCompletionClient.create
    alight_autogen.instrument()
    alight_autogen.instrument()  # idempotent
    agent = AssistantAgent("adder", model_client=_client(base_url), tools=[add], reflect_on_tool_use=True)
    traced = await agent.run(task='call add {"a": 1, "b": 1}')
    alight_autogen.uninstrument()
    assert OpenAIChatCompletionClient.create is original
    assert len(tree().named("chat fake")) == 2
    again = AssistantAgent("adder", model_client=_client(base_url), tools=[add], reflect_on_tool_use=True)
    plain = await again.run(task='call add {"a": 1, "b": 1}')
    assert len(tree().named("chat fake")) == 2
    assert plain.messages[-1].content == traced.messages[-1].content
