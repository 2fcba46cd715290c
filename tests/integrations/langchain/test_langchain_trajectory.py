"""LangChain agents as real processes under the controller's environment; the trajectory shows their structure."""

from __future__ import annotations

import json

from alight_server.trainer.step.samples import SampleConfig, build_samples


def test_react_agent_trajectory_has_calls_under_the_agent_tool_between_and_reward(alight_stack) -> None:
    trajectory = alight_stack.trainable_trajectory(
        "examples/langchain/agent.py:main", {"question": 'call add {"a": 2, "b": 3}', "answer": 5}, calls=2
    )
    for tc in trajectory.calls:
        assert tc.agent_name == "calculator"
        assert tc.span_path[:4] == ["alight.rollout", "invoke_agent calculator", "node agent", "chat policy"]
    (tool,) = alight_stack.tool_spans_named(trajectory, "execute_tool add")
    assert tool.after_call == 0
    assert json.loads(tool.arguments) == {"a": 2, "b": 3}
    assert tool.result == "5.0"
    assert tool.span_path[:3] == ["alight.rollout", "invoke_agent calculator", "node tools"]
    assert trajectory.final_reward == 1.0
    (reward,) = trajectory.rewards
    assert reward.final and reward.span_id  # linked to the rollout's root span


def test_agent_filter_keeps_only_the_solver_nodes_calls(alight_stack) -> None:
    trajectory = alight_stack.trainable_trajectory(
        "tests/integrations/langchain/two_node_agent.py:main", {"question": "what is 2 + 3?"}, calls=2
    )
    assert [tc.span_path[2] for tc in trajectory.calls] == ["node planner", "node solver"]
    batch, report = build_samples([trajectory], SampleConfig(agents=["solver"]))
    assert [seqs for seqs in batch.row_calls] == [(trajectory.calls[1].call.seq,)]
    assert report.dropped_calls["agent_filter"] == 1
