"""Test agent for the trainer: plain OpenAI client, two model calls around a lookup tool, a vowel reward.

The reward (share of vowels in the final reply) is trivially learnable by the untrained tiny model,
which makes it a learning test that can fail: it only rises if gradients reach the served policy.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from openai import OpenAI
from opentelemetry import trace

import alight
from alight import semconv

TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look a word up.",
            "parameters": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
        },
    }
]
GLOSSARY = {"apple": "a fruit", "river": "flowing water", "stone": "a hard rock"}
VOWELS = set("aeiouAEIOU")


def lookup(word: str) -> str:
    with trace.get_tracer("test-agent").start_as_current_span(
        f"{semconv.OP_EXECUTE_TOOL} lookup",
        attributes={semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL, semconv.GEN_AI_TOOL_NAME: "lookup"},
    ):
        return GLOSSARY.get(word, "unknown")


def vowel_share(text: str) -> float:
    letters = [c for c in text if c.isalpha()]
    return sum(c in VOWELS for c in letters) / len(letters) if letters else 0.0


@alight.rollout
def main(task: dict[str, Any]) -> float:
    client = OpenAI(max_retries=10)
    max_tokens = int(task.get("max_tokens", 8))
    messages: list[Any] = [{"role": "user", "content": f"Define {task['word']}."}]
    first = client.chat.completions.create(model="policy", messages=messages, tools=TOOLS, max_tokens=4)
    messages.append({"role": "assistant", "content": first.choices[0].message.content or ""})
    if task.get("hold_until"):  # a deliberately slow rollout (async tests): wait until the path exists
        _wait_for(Path(task["hold_until"]))
    messages.append({"role": "user", "content": f"lookup result: {lookup(task['word'])}"})
    second = client.chat.completions.create(model="policy", messages=messages, max_tokens=max_tokens)
    return vowel_share(second.choices[0].message.content or "")


def _wait_for(path: Path, timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
