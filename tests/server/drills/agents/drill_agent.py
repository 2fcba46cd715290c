"""Drill agent: one model call, a note of what the gateway answered, a pause, a reward that varies.

The note (a file named after the response id, under task["answered_dir"]) is written only after the
agent saw the answer: the drill checks that each one is in the store after a crash.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from openai import OpenAI

import alight


@alight.rollout
def main(task: dict[str, Any]) -> float:
    client = OpenAI(max_retries=int(task.get("max_retries", 0)))
    # The attempt in the prompt: a deterministic upstream then answers each attempt with its own id.
    attempt = f"{os.environ.get('ALIGHT_ROLLOUT_ID')}/{os.environ.get('ALIGHT_ATTEMPT')}"
    messages: list[Any] = [{"role": "user", "content": f"Define {task['word']} ({attempt})."}]
    reply = client.chat.completions.create(model="policy", messages=messages, max_tokens=4)
    (Path(task["answered_dir"]) / f"{reply.id}.{os.getpid()}").touch()
    time.sleep(float(task.get("pause_s", 1.0)))
    text = reply.choices[0].message.content or ""
    letters = [c for c in text if c.isalpha()]
    return sum(c in "aeiou" for c in letters) / len(letters) if letters else 0.0
