"""Benchmark agent for benchmarks/async.py: heavy-tailed duration around two tiny-model calls, a vowel reward.

The duration is drawn from the rollout id (log-normal, a few 10x stragglers), so a run is reproducible.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

from openai import OpenAI

import alight

VOWELS = set("aeiouAEIOU")


def duration_s(rollout_id: str, median_s: float, straggler_share: float) -> float:
    rng = random.Random(rollout_id)
    base = rng.lognormvariate(0.0, 0.6) * median_s
    return base * 10 if rng.random() < straggler_share else base


@alight.rollout
def main(task: dict[str, Any]) -> float:
    client = OpenAI(max_retries=20)
    rollout_id = os.environ.get("ALIGHT_ROLLOUT_ID", "")
    wait = duration_s(rollout_id, float(task["median_s"]), float(task["straggler_share"]))
    messages: list[Any] = [{"role": "user", "content": f"Say {task['word']}."}]
    first = client.chat.completions.create(model="policy", messages=messages, max_tokens=4)
    time.sleep(wait)  # the agent's own work: tools, environment, thinking outside the model
    messages += [{"role": "assistant", "content": first.choices[0].message.content or ""},
                 {"role": "user", "content": "Again."}]  # fmt: skip
    second = client.chat.completions.create(model="policy", messages=messages, max_tokens=8)
    text = second.choices[0].message.content or ""
    letters = [c for c in text if c.isalpha()]
    return sum(c in VOWELS for c in letters) / len(letters) if letters else 0.0
