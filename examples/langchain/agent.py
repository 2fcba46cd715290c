"""A calculator agent on LangGraph's prebuilt ReAct agent; alight trains it with `alight train examples/langchain/config.yaml`.

Run it alone with any OpenAI-compatible server (OPENAI_BASE_URL, OPENAI_API_KEY, AGENT_MODEL): it answers
and prints its reward; under alight the same code is one rollout.
"""

from __future__ import annotations

import os
import re
import warnings
from typing import Any

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.errors import GraphRecursionError

import alight
import alight_langchain

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # LangGraph 1.x points at langchain.agents; the prebuilt agent still works
    from langgraph.prebuilt import create_react_agent

alight_langchain.instrument()

MODEL = os.environ.get("AGENT_MODEL", "policy")  # the gateway serves the policy being trained whatever the name
MAX_TOKENS = 256  # an arithmetic answer is short; a cap keeps a wandering policy from burning a rollout


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@tool
def multiply(a: float, b: float) -> float:
    """Multiply two numbers."""
    return a * b


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
def main(task: dict[str, Any]) -> float:
    # Built per rollout: ChatOpenAI reads OPENAI_BASE_URL / OPENAI_API_KEY, which alight sets per attempt.
    agent = create_react_agent(
        ChatOpenAI(model=MODEL, temperature=1.0, max_completion_tokens=MAX_TOKENS), [add, multiply], name="calculator"
    )
    try:
        state = agent.invoke({"messages": [("user", task["question"])]}, {"recursion_limit": 12})
    except GraphRecursionError:
        return 0.0  # a tool loop that never answers scores 0; the rollout still counts
    return score(str(state["messages"][-1].content), float(task["answer"]))


if __name__ == "__main__":
    print(main({"question": "What is 12 times 7, plus 5?", "answer": 89}))
