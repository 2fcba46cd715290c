"""MCP client instrumentation and the calculator server, in process: real ClientSession, real MCPServer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp.client import Client
from mcp_types import CallToolResult, TextContent

import alight_mcp
from alight import semconv
from alight_mcp.calculator import create_calculator, evaluate

INTEGRATION = alight_mcp  # instrumented by the `instrumented` fixture (tests/integrations/conftest.py)


def _client_spans(spans: Any) -> Any:
    # The in-process server emits its own spans (mcp's server middleware); these tests look at the client's.
    return [s for s in spans.spans if s.attributes.get(semconv.ATTR_FRAMEWORK) == "mcp"]


async def test_call_tool_is_an_execute_tool_span_with_arguments_and_result(instrumented, tree) -> None:
    async with Client(create_calculator()) as client:
        await client.call_tool("calculate", {"expression": "(3 + 4) * 12"})
    spans = tree()
    (tool,) = [s for s in _client_spans(spans) if s.name == "execute_tool calculate"]
    assert tool.attributes[semconv.GEN_AI_OPERATION_NAME] == semconv.OP_EXECUTE_TOOL
    assert tool.attributes[semconv.GEN_AI_TOOL_NAME] == "calculate"
    assert json.loads(tool.attributes[semconv.GEN_AI_TOOL_CALL_ARGUMENTS]) == {"expression": "(3 + 4) * 12"}
    assert json.loads(tool.attributes[semconv.GEN_AI_TOOL_CALL_RESULT]) == {"result": 84.0}
    assert tool.status.is_ok


async def test_other_requests_are_spans_named_by_method(instrumented, tree) -> None:
    async with Client(create_calculator()) as client:
        listed = await client.list_tools()
    assert {t.name for t in listed.tools} == {"calculate", "check_answer"}
    methods = [s.attributes[semconv.ATTR_MCP_METHOD] for s in _client_spans(tree())]
    assert "tools/list" in methods


async def test_a_failing_tool_marks_its_span_as_an_error(instrumented, tree) -> None:
    async with Client(create_calculator()) as client:
        result = await client.call_tool("calculate", {"expression": "__import__('os')"})
    assert result.is_error
    (tool,) = [s for s in _client_spans(tree()) if s.name == "execute_tool calculate"]
    assert not tool.status.is_ok and "unsupported element" in tool.attributes[semconv.GEN_AI_TOOL_CALL_RESULT]


async def test_a_reward_in_the_tool_result_becomes_a_reward_event_on_the_tool_span(instrumented, tree) -> None:
    async with Client(create_calculator()) as client:
        await client.call_tool("check_answer", {"answer": "so it is 84.", "expected": 84})
        await client.call_tool("check_answer", {"answer": "83", "expected": 84})
    checks = [s for s in _client_spans(tree()) if s.name == "execute_tool check_answer"]
    rewards = [(dict(e.attributes or {})) for s in checks for e in s.events if e.name == semconv.EVENT_REWARD]
    assert [
        (r[semconv.ATTR_REWARD_VALUE], r[semconv.ATTR_REWARD_NAME], r[semconv.ATTR_REWARD_FINAL]) for r in rewards
    ] == [
        (1.0, "correct", True),
        (0.0, "correct", True),
    ]


def test_reward_is_read_from_meta_or_structured_content_and_junk_is_ignored() -> None:
    text = [TextContent(type="text", text="ok")]
    assert alight_mcp.reward_in_result(
        CallToolResult(content=text, _meta={"alight.reward": 0.5})
    ) == alight_mcp.ToolReward(0.5, None, False)
    structured = CallToolResult(content=text, structured_content={"alight.reward": 2, "alight.reward.name": "steps"})
    assert alight_mcp.reward_in_result(structured) == alight_mcp.ToolReward(2.0, "steps", False)
    for junk in ("high", True, float("nan"), None):
        assert alight_mcp.reward_in_result(CallToolResult(content=text, _meta={"alight.reward": junk})) is None
    assert alight_mcp.reward_in_result(CallToolResult(content=text)) is None


def test_calculator_rejects_what_is_not_arithmetic() -> None:
    assert evaluate("2 ** 10 - 24 / 4") == 1018.0
    for bad, message in [
        ("2 +", "cannot parse"),
        ("x * 2", "unsupported element"),
        ("1 / 0", "division by zero"),
        ("9 ** 999", "exponent"),
    ]:
        with pytest.raises(ValueError, match=message):
            evaluate(bad)


async def test_uninstrument_restores_the_session_and_results(tree) -> None:
    alight_mcp.instrument()
    alight_mcp.instrument()  # idempotent
    async with Client(create_calculator()) as client:
        traced = await client.call_tool("calculate", {"expression": "1 + 1"})
    alight_mcp.uninstrument()
    assert not alight_mcp.is_instrumented()
    before = len(_client_spans(tree()))
    async with Client(create_calculator()) as client:
        plain = await client.call_tool("calculate", {"expression": "1 + 1"})
    assert len(_client_spans(tree())) == before > 0
    assert plain.structured_content == traced.structured_content
