"""A calculator agent on the OpenAI Agents SDK; alight trains it with `alight train examples/openai_agents/config.yaml`.

Run it alone with any OpenAI-compatible server (OPENAI_BASE_URL, OPENAI_API_KEY, AGENT_MODEL): it answers
and prints its reward; under alight the same code is one rollout.
"""

from __future__ import annotations

import asyncio
import os
import re
from typing import Any

from agents import Agent, MaxTurnsExceeded, ModelBehaviorError, ModelSettings, Runner, function_tool

import alight
import alight_openai_agents

alight_openai_agents.instrument()

MODEL = os.environ.get("AGENT_MODEL", "policy")  # the gateway serves the policy being trained whatever the name
MAX_TOKENS = 256  # an arithmetic answer is short; a cap keeps a wandering policy from burning a rollout


@function_tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@function_tool
def multiply(a: float, b: float) -> float:
    """Multiply two numbers."""
    return a * b


agent = Agent(
    name="calculator",
    instructions="Answer arithmetic questions. Use the add and multiply tools, then give the final number.",
    tools=[add, multiply],
    model=MODEL,
    model_settings=ModelSettings(max_tokens=MAX_TOKENS),
)


def score(answer: str, expected: float) -> float:
    """The reward: 1.0 when the answer's last number is the expected one, partial credit for a near miss.

    A wrong number earns 0.5 / (1 + relative error), so 10% off scores about 0.45 and a wild guess near 0;
    no number scores 0. Closeness gives a group of rollouts different rewards before any is exactly right,
    which is the signal GRPO learns from; capping it at half keeps an exact answer clearly best.
    """
    numbers = re.findall(r"-?\d+(?:\.\d+)?", answer.replace(",", ""))
    if not numbers:
        return 0.0
    error = abs(float(numbers[-1]) - expected) / max(abs(expected), 1.0)
    return 1.0 if error < 1e-6 else 0.5 / (1.0 + error)


@alight.rollout
async def main(task: dict[str, Any]) -> float:
    try:
        result = await Runner.run(agent, task["question"], max_turns=6)
    except (MaxTurnsExceeded, ModelBehaviorError):
        # An answer cut at MAX_TOKENS (the SDK raises on `incomplete`) or a tool loop scores 0; the rollout still counts.
        return 0.0
    return score(str(result.final_output), float(task["answer"]))


if __name__ == "__main__":
    print(asyncio.run(main({"question": "What is 12 times 7, plus 5?", "answer": 89})))
