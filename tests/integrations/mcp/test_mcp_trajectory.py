"""The MCP example as a real process: a plain OpenAI-client loop whose tools are on the calculator server."""

from __future__ import annotations

import json

import pytest


@pytest.mark.harness(harness="MCP tools (openai client loop)", api="chat", streamed=False, tools=True)
def test_mcp_tool_spans_sit_between_calls_and_the_tool_result_reward_is_linked(alight_stack) -> None:
    task = {"question": 'call calculate {"expression": "(3 + 4) * 12"}', "answer": 84}
    trajectory = alight_stack.trainable_trajectory("examples/mcp/agent.py:main", task, calls=2)
    (calculate,) = alight_stack.tool_spans_named(trajectory, "execute_tool calculate")
    assert calculate.after_call == 0
    assert json.loads(calculate.arguments) == {"expression": "(3 + 4) * 12"}
    assert json.loads(calculate.result) == {"result": 84.0}
    (check,) = alight_stack.tool_spans_named(trajectory, "execute_tool check_answer")
    assert check.after_call == 1
    (reward,) = trajectory.rewards
    assert (reward.value, reward.final, reward.span_id) == (1.0, True, check.span_id)
    assert trajectory.final_reward == 1.0
