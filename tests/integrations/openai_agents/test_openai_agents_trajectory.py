"""Agents SDK agents as real processes under the controller's environment; the trajectory shows their structure."""

from __future__ import annotations

import json

from alight_server.trainer.step.samples import SampleConfig, build_samples


def test_responses_agent_trajectory_has_calls_under_the_agent_tool_between_and_reward(alight_stack) -> None:
    # The example uses the SDK's default model: the Responses API, which the gateway serves from chat upstreams.
    task = {"question": 'call multiply {"a": 12, "b": 7}', "answer": 84}
    trajectory = alight_stack.trainable_trajectory("examples/openai_agents/agent.py:main", task, calls=2)
    assert [tc.call.flavour.value for tc in trajectory.calls] == ["responses", "responses"]
    for turn, tc in enumerate(trajectory.calls, start=1):
        assert tc.agent_name == "calculator"
        assert tc.span_path[0] == "alight.rollout"
        assert tc.span_path[-3:] == ["invoke_agent calculator", f"turn {turn}", "chat policy"]
    (tool,) = alight_stack.tool_spans_named(trajectory, "execute_tool multiply")
    assert tool.after_call == 0 and tool.agent_name == "calculator"
    assert json.loads(tool.arguments) == {"a": 12, "b": 7}
    assert tool.result == "84.0"
    assert trajectory.final_reward == 1.0
    assert [r.final for r in trajectory.rewards] == [True]


def test_handoff_calls_belong_to_their_agents_and_the_filter_keeps_one(alight_stack) -> None:
    trajectory = alight_stack.trainable_trajectory(
        "tests/integrations/openai_agents/handoff_agent.py:main", {"question": "call transfer_to_math"}, calls=2
    )
    assert [tc.agent_name for tc in trajectory.calls] == ["triage", "math"]
    assert trajectory.final_reward == 1.0
    batch, report = build_samples([trajectory], SampleConfig(agents=["math"]))
    assert batch.row_calls == [(trajectory.calls[1].call.seq,)]
    assert report.dropped_calls["agent_filter"] == 1
