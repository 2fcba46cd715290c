"""Test agent: a triage agent hands off to a math agent (Agents SDK, chat-completions model from OPENAI_BASE_URL)."""

from __future__ import annotations

from typing import Any

from agents import Agent, OpenAIChatCompletionsModel, Runner
from openai import AsyncOpenAI

import alight
import alight_openai_agents

alight_openai_agents.instrument()


@alight.rollout
async def main(task: dict[str, Any]) -> float:
    model = OpenAIChatCompletionsModel(model="policy", openai_client=AsyncOpenAI())
    math_agent = Agent(name="math", instructions="Do math.", model=model)
    triage = Agent(name="triage", instructions="Route math questions to math.", handoffs=[math_agent], model=model)
    result = await Runner.run(triage, task["question"])
    return 1.0 if result.last_agent.name == "math" else 0.0
