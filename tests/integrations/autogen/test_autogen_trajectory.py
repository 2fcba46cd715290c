"""The AutoGen example as a real process: AssistantAgent calculating through the MCP calculator server."""

from __future__ import annotations

import json


def test_assistant_with_mcp_tool_trajectory_has_structure_and_the_servers_reward(alight_stack) -> None:
    task = {"question": 'call calculate {"expression": "12 * 7 + 5"}', "answer": 89}
    trajectory = alight_stack.trainable_trajectory("examples/autogen/agent.py:main", task, calls=2)
    for tc in trajectory.calls:
        assert tc.agent_name == "calculator"
        assert tc.span_path[-2:] == ["invoke_agent calculator", "chat policy"]
    # autogen-core's own tool span, enriched; the MCP request it made is a tool span inside it.
    (agent_tool,) = alight_stack.tool_spans_named(trajectory, "execute_tool calculate")[:1]
    assert agent_tool.after_call == 0 and agent_tool.agent_name == "calculator"
    assert json.loads(agent_tool.arguments) == {"expression": "12 * 7 + 5"}
    assert json.loads(agent_tool.result) == {"result": 89.0}
    mcp_tools = [s for s in trajectory.tool_spans if s.parent_span_id == agent_tool.span_id]
    assert [s.tool_name for s in mcp_tools] == ["calculate"]
    # The reward came back inside check_answer's MCP result and was recorded on that tool span.
    (check,) = alight_stack.tool_spans_named(trajectory, "execute_tool check_answer")
    (reward,) = trajectory.rewards
    assert (reward.value, reward.name, reward.final, reward.span_id) == (1.0, "correct", True, check.span_id)
    assert trajectory.final_reward == 1.0
