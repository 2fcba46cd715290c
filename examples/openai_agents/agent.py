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
    # Streamed so that a reply cut at MAX_TOKENS is still graded, as the chat-completions examples grade theirs:
    # the SDK raises on such a reply, but only after streaming its `response.incomplete` event with the text.
    run = Runner.run_streamed(agent, task["question"], max_turns=6)
    cut_reply: str | None = None
    try:
        async for event in run.stream_events():
            if event.type == "raw_response_event" and event.data.type == "response.incomplete":
                cut_reply = event.data.response.output_text
    except ModelBehaviorError:
        if cut_reply is None:
            return 0.0  # a malformed tool call or the like; the rollout still counts
        return score(cut_reply, float(task["answer"]))
    except MaxTurnsExceeded:
        return 0.0  # a tool loop that never answers
    return score(str(run.final_output), float(task["answer"]))


if __name__ == "__main__":
    print(asyncio.run(main({"question": "What is 12 times 7, plus 5?", "answer": 89})))
