"""Test agent for the trainer: two model calls around a lookup tool, a vowel reward; OpenAI client or plain httpx.

The reward (share of vowels in the final reply) is trivially learnable by the untrained tiny model,
which makes it a learning test that can fail: it only rises if gradients reach the served policy.
`main` uses the OpenAI client; `main_http` sends the same two requests with httpx, for runs of hundreds
of rollouts (the learning test), where importing openai (~1.5 CPU-seconds per agent process) is most of
an agent's cost on 2 cores and says nothing about learning.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
GLOSSARY = {
    "apple": "a fruit",
    "river": "flowing water",
    "stone": "a hard rock",
    # never trained on: the learning test's held-out validation words
    "cloud": "water in the sky",
    "forest": "many trees",
}
VOWELS = set("aeiouAEIOU")
MAX_PAUSED_RETRIES = 60  # x Retry-After (1 s): an update pauses the gateway for well under a minute


def lookup(word: str) -> str:
    with trace.get_tracer("test-agent").start_as_current_span(
        f"{semconv.OP_EXECUTE_TOOL} lookup",
        attributes={semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL, semconv.GEN_AI_TOOL_NAME: "lookup"},
    ):
        return GLOSSARY.get(word, "unknown")


def vowel_share(text: str) -> float:
    letters = [c for c in text if c.isalpha()]
    return sum(c in VOWELS for c in letters) / len(letters) if letters else 0.0


# complete(messages, max_tokens, tools) -> the reply's text
Complete = Callable[[list[Any], int, "list[Any] | None"], str]


def episode(task: dict[str, Any], complete: Complete) -> float:
    messages: list[Any] = [{"role": "user", "content": f"Define {task['word']}."}]
    messages.append({"role": "assistant", "content": complete(messages, 4, TOOLS)})
    if task.get("mark_dir"):  # async tests: say this rollout has made its first call (one file per rollout)
        marks = Path(task["mark_dir"])
        marks.mkdir(parents=True, exist_ok=True)
        (marks / uuid.uuid4().hex).touch()
    if task.get("hold_until"):  # a deliberately slow rollout (async tests): wait until the path exists
        _wait_for(lambda: Path(task["hold_until"]).exists())
    if task.get("hold_until_marks"):  # {"dir": ..., "count": n}: wait until n rollouts made their first call
        marks, count = Path(task["hold_until_marks"]["dir"]), int(task["hold_until_marks"]["count"])
        _wait_for(lambda: marks.is_dir() and len(list(marks.iterdir())) >= count)
    messages.append({"role": "user", "content": f"lookup result: {lookup(task['word'])}"})
    return vowel_share(complete(messages, int(task.get("max_tokens", 8)), None))


@alight.rollout
def main(task: dict[str, Any]) -> float:
    from openai import OpenAI, omit  # here: main_http's processes never pay for the import

    client = OpenAI(max_retries=10)

    def complete(messages: list[Any], max_tokens: int, tools: list[Any] | None) -> str:
        reply = client.chat.completions.create(
            model="policy", messages=messages, tools=tools or omit, max_tokens=max_tokens
        )
        return reply.choices[0].message.content or ""

    return episode(task, complete)


@alight.rollout
def main_http(task: dict[str, Any]) -> float:
    import httpx

    # OPENAI_BASE_URL / OPENAI_API_KEY: the attempt's gateway and token, as the OpenAI client reads them
    headers = {"Authorization": f"Bearer {os.environ['OPENAI_API_KEY']}"}
    with httpx.Client(base_url=os.environ["OPENAI_BASE_URL"], headers=headers, timeout=120) as client:

        def complete(messages: list[Any], max_tokens: int, tools: list[Any] | None) -> str:
            body = {
                "model": "policy",
                "messages": messages,
                "max_tokens": max_tokens,
                **({"tools": tools} if tools else {}),
            }
            reply = client.post("/chat/completions", json=body)
            # While a weight update pauses it, the gateway answers 429 + Retry-After (an asynchronous run's agents
            # meet it); the OpenAI client retries by itself, a plain httpx agent has to.
            for _ in range(MAX_PAUSED_RETRIES):
                if reply.status_code != 429:
                    break
                time.sleep(float(reply.headers.get("retry-after", "1")))
                reply = client.post("/chat/completions", json=body)
            reply.raise_for_status()
            return reply.json()["choices"][0]["message"]["content"] or ""

        return episode(task, complete)


def _wait_for(ready: Callable[[], bool], timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready() and time.monotonic() < deadline:
        time.sleep(0.1)
