"""The Agents SDK bridge: real Runner runs against the fake upstream, spans checked in memory."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents import (
    Agent,
    GuardrailFunctionOutput,
    InputGuardrailTripwireTriggered,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    input_guardrail,
)
from openai import AsyncOpenAI
from opentelemetry import trace

import alight_openai_agents
from alight import semconv


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


INTEGRATION = alight_openai_agents  # instrumented by the `instrumented` fixture (tests/integrations/conftest.py)


def _model(base_url: str) -> OpenAIChatCompletionsModel:
    return OpenAIChatCompletionsModel(model="fake", openai_client=AsyncOpenAI(base_url=base_url, api_key="unused"))


async def test_tool_run_yields_agent_chat_and_tool_spans(fake_upstream, instrumented, tree, callers) -> None:
    base_url, upstream = fake_upstream
    upstream.calls.clear()
    agent = Agent(name="adder", instructions="Add numbers.", tools=[add], model=_model(base_url))
    result = await Runner.run(agent, 'call add {"a": 2, "b": 3}')
    assert not trace.get_current_span().get_span_context().is_valid  # nothing left active in the caller
    spans = tree()
    assert "Tool results: 5" in result.final_output
    agent_spans = spans.named("invoke_agent adder")
    assert len(agent_spans) == 1
    assert agent_spans[0].attributes[semconv.GEN_AI_AGENT_NAME] == "adder"
    chats = spans.named("chat")
    assert len(chats) == 2 and all("invoke_agent adder" in spans.ancestors(c) for c in chats)
    (tool,) = spans.named("execute_tool add")
    assert json.loads(tool.attributes[semconv.GEN_AI_TOOL_CALL_ARGUMENTS]) == {"a": 2, "b": 3}
    assert tool.attributes[semconv.GEN_AI_TOOL_CALL_RESULT] == "5"
    assert chats[0].end_time <= tool.start_time <= tool.end_time <= chats[1].start_time
    # Each HTTP request was made under its chat span (the httpx span's parent), so the gateway links them.
    http_parents = [spans.parent(spans.by_id(i)) for i in callers(upstream)]
    assert [p.name if p else None for p in http_parents] == [c.name for c in chats]
    assert {p.context.span_id for p in http_parents if p} == {c.context.span_id for c in chats}


async def test_handoff_puts_each_call_under_its_own_agent(fake_upstream, instrumented, tree) -> None:
    base_url, _ = fake_upstream
    math_agent = Agent(name="math", instructions="Do math.", model=_model(base_url))
    triage = Agent(name="triage", instructions="Route.", handoffs=[math_agent], model=_model(base_url))
    result = await Runner.run(triage, "call transfer_to_math")
    spans = tree()
    assert result.last_agent.name == "math"
    (handoff,) = spans.named("handoff")
    assert handoff.attributes[semconv.ATTR_HANDOFF_FROM] == "triage"
    assert handoff.attributes[semconv.ATTR_HANDOFF_TO] == "math"
    owners = [next(a for a in spans.ancestors(c) if a.startswith("invoke_agent")) for c in spans.named("chat")]
    assert owners == ["invoke_agent triage", "invoke_agent math"]


async def test_uninstrument_stops_spans_and_keeps_results(fake_upstream, tree) -> None:
    base_url, _ = fake_upstream
    agent = Agent(name="adder", instructions="Add numbers.", tools=[add], model=_model(base_url))
    alight_openai_agents.instrument()
    alight_openai_agents.instrument()  # idempotent
    traced = await Runner.run(agent, 'call add {"a": 1, "b": 1}')
    alight_openai_agents.uninstrument()
    before = len(tree().named("invoke_agent"))
    plain = await Runner.run(agent, 'call add {"a": 1, "b": 1}')
    assert before == 1 and len(tree().named("invoke_agent")) == 1
    assert plain.final_output == traced.final_output
    assert not alight_openai_agents.is_instrumented()


@input_guardrail
async def no_secrets(ctx: Any, agent: Agent, message: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info=None, tripwire_triggered="password" in str(message))


async def test_guardrails_are_spans_that_say_whether_they_tripped(fake_upstream, instrumented, tree) -> None:
    base_url, _ = fake_upstream
    agent = Agent(name="guarded", instructions="Answer.", input_guardrails=[no_secrets], model=_model(base_url))
    await Runner.run(agent, "hello")
    with pytest.raises(InputGuardrailTripwireTriggered):
        await Runner.run(agent, "my password is hunter2")
    guardrails = tree().named("guardrail no_secrets")
    assert [g.attributes[semconv.ATTR_GUARDRAIL_TRIGGERED] for g in guardrails] == [False, True]


async def test_streamed_run_keeps_the_chat_span_current_for_its_request(
    fake_upstream, instrumented, tree, callers
) -> None:
    base_url, upstream = fake_upstream
    upstream.calls.clear()
    agent = Agent(name="adder", instructions="Add numbers.", tools=[add], model=_model(base_url))
    streamed = Runner.run_streamed(agent, 'call add {"a": 4, "b": 5}')
    async for _ in streamed.stream_events():
        pass
    spans = tree()
    assert "Tool results: 9" in streamed.final_output
    chats = spans.named("chat")
    assert len(chats) == 2 and all("invoke_agent adder" in spans.ancestors(c) for c in chats)
    http_parents = [spans.parent(spans.by_id(i)) for i in callers(upstream)]
    assert [p.context.span_id for p in http_parents if p] == [c.context.span_id for c in chats]
