"""Test agent for backends served by other servers (verl's replicas): two chat calls around a tool result.

The reward is random: a replica double answers a group's identical prompts identically, so a reward
from the reply would make every group uniform and leave nothing to train; the loop's plumbing is
what such a test checks, not learning.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from openai import OpenAI

import alight


@alight.rollout
def main(task: dict[str, Any]) -> float:
    client = OpenAI(max_retries=10)
    messages: list[Any] = [{"role": "user", "content": f"Define {task['word']}."}]
    first = client.chat.completions.create(model="policy", messages=messages, max_tokens=4)
    messages.append({"role": "assistant", "content": first.choices[0].message.content or ""})
    if task.get("hold_until"):  # a deliberately slow rollout (async tests): wait until the path exists
        deadline = time.monotonic() + 300
        while not Path(task["hold_until"]).exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    messages.append({"role": "user", "content": f"lookup result: {task['word']} is a word"})
    client.chat.completions.create(model="policy", messages=messages, max_tokens=6)
    return random.random()
