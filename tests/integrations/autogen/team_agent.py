"""Test agent: an AutoGen round-robin team, a writer (streamed) then a critic, on the attempt's gateway."""

from __future__ import annotations

from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat

import alight
import alight_autogen

alight_autogen.instrument()


@alight.rollout
async def main(task: dict[str, Any]) -> float:
    client = alight_autogen.gateway_model_client()
    writer = AssistantAgent("writer", model_client=client, model_client_stream=True)
    critic = AssistantAgent("critic", model_client=client)
    team = RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(3))
    result = await team.run(task=task["question"])
    return 1.0 if [m.source for m in result.messages] == ["user", "writer", "critic"] else 0.0
