"""A plain OpenAI-client agent for reasoning-gym tasks: it asks the question and answers; it scores nothing.

The reward is reasoning-gym's own score_answer of its last answer, run by the server
(`evaluator: {source: reasoning_gym}`, docs/environments.md).
"""

from __future__ import annotations

from typing import Any

from openai import OpenAI

SYSTEM = "Answer with the final number only."
# One worked example: small models follow a shown format far better than a described one.
EXAMPLE = [
    {"role": "user", "content": "State the final answer to the following arithmetic problem: 3 + 4 ="},
    {"role": "assistant", "content": "7"},
]


def main(task: dict[str, Any]) -> None:
    messages = [{"role": "system", "content": SYSTEM}, *EXAMPLE, {"role": "user", "content": task["question"]}]
    OpenAI(max_retries=5).chat.completions.create(model="policy", messages=messages, max_tokens=16)
