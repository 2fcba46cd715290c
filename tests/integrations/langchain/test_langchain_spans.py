"""The LangChain handler: real ChatOpenAI, create_react_agent and a StateGraph against the fake upstream."""

from __future__ import annotations

import json
import warnings
from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, MessagesState, StateGraph
from opentelemetry import trace

import alight_langchain
from alight import semconv
from alight.integrations import MAX_ATTRIBUTE_CHARS

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # create_react_agent moved to langchain.agents in LangGraph 1.x; still supported
    from langgraph.prebuilt import create_react_agent


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def repeat(n: int) -> str:
    """A result of n characters."""
    return "x" * n


INTEGRATION = alight_langchain  # instrumented by the `instrumented` fixture (tests/integrations/conftest.py)


def _llm(base_url: str) -> ChatOpenAI:
    return ChatOpenAI(model="fake", base_url=base_url, api_key="unused")


async def test_react_agent_run_yields_agent_node_chat_and_tool_spans(
    fake_upstream, instrumented, tree, callers
) -> None:
    base_url, upstream = fake_upstream
    upstream.calls.clear()
    agent = create_react_agent(_llm(base_url), [add], name="calc")
    out = await agent.ainvoke({"messages": [("user", 'call add {"a": 2, "b": 3}')]})
    assert not trace.get_current_span().get_span_context().is_valid  # nothing left active in the caller
    spans = tree()
    assert "Tool results: 5" in out["messages"][-1].content
    (root,) = spans.named("invoke_agent")
    assert root.attributes[semconv.GEN_AI_AGENT_NAME] == "calc"
    chats = spans.named("chat fake")
    assert len(chats) == 2
    assert all(spans.ancestors(c)[:2] == ["node agent", "invoke_agent calc"] for c in chats)
    assert all(c.attributes[semconv.GEN_AI_RESPONSE_ID].startswith("chatcmpl-") for c in chats)
    (tool_span,) = spans.named("execute_tool add")
    assert spans.ancestors(tool_span)[0] == "node tools"
    assert json.loads(tool_span.attributes[semconv.GEN_AI_TOOL_CALL_ARGUMENTS]) == {"a": 2, "b": 3}
    assert tool_span.attributes[semconv.GEN_AI_TOOL_CALL_RESULT] == "5"
    assert chats[0].end_time <= tool_span.start_time <= tool_span.end_time <= chats[1].start_time
    http_parents = [spans.parent(spans.by_id(i)) for i in callers(upstream)]
    assert [p.context.span_id for p in http_parents if p] == [c.context.span_id for c in chats]


def test_graph_with_two_llm_nodes_puts_each_call_under_its_node(fake_upstream, instrumented, tree) -> None:
    base_url, _ = fake_upstream
    llm = _llm(base_url)

    def planner(state: MessagesState) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    def solver(state: MessagesState) -> dict[str, Any]:
        return {"messages": [llm.invoke([*state["messages"], HumanMessage("now solve it")])]}

    graph = StateGraph(MessagesState)
    graph.add_node("planner", planner)
    graph.add_node("solver", solver)
    graph.add_edge(START, "planner")
    graph.add_edge("planner", "solver")
    graph.add_edge("solver", END)
    graph.compile(name="plan_and_solve").invoke({"messages": [("user", "what is 2 + 3?")]})
    spans = tree()
    owners = [spans.ancestors(c)[0] for c in spans.named("chat fake")]
    assert owners == ["node planner", "node solver"]
    assert {s.attributes[semconv.ATTR_GRAPH_NODE] for s in spans.named("node")} == {"planner", "solver"}


def test_uninstrument_stops_spans_and_keeps_results(fake_upstream, tree) -> None:
    base_url, _ = fake_upstream
    agent = create_react_agent(_llm(base_url), [add], name="calc")
    question = {"messages": [("user", 'call add {"a": 1, "b": 1}')]}
    alight_langchain.instrument()
    alight_langchain.instrument()  # idempotent
    traced = agent.invoke(question)
    alight_langchain.uninstrument()
    assert len(tree().named("invoke_agent")) == 1
    plain = agent.invoke(question)
    assert len(tree().named("invoke_agent")) == 1
    assert plain["messages"][-1].content == traced["messages"][-1].content
    assert not alight_langchain.is_instrumented()


def test_a_long_tool_result_is_clipped_as_the_sdk_clips_every_integrations(instrumented, tree) -> None:
    repeat.invoke({"n": MAX_ATTRIBUTE_CHARS + 10})
    (tool_span,) = tree().named("execute_tool repeat")
    assert tool_span.attributes[semconv.GEN_AI_TOOL_CALL_RESULT] == "x" * MAX_ATTRIBUTE_CHARS + "...[10 more chars]"
