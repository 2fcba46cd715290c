"""Benchmark agent for benchmarks/async.py: heavy-tailed duration around two tiny-model calls, a vowel reward.

The duration is drawn from the task's number and the rollout's sample index (log-normal, a few 10x stragglers),
not from the run's ids: the synchronous and asynchronous runs of one benchmark face the same workload, task
for task, and a rerun faces it again.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

from openai import OpenAI

import alight

VOWELS = set("aeiouAEIOU")
SIGMA = 0.6  # of the log-normal: p90 / median = e^(1.28 * 0.6) = 2.2
STRAGGLER_FACTOR = 10.0


def draw(task: dict[str, Any], rollout_id: str) -> tuple[float, bool]:
    """The agent's wait outside the model (tools, environment): log-normal, a `straggler_share` of them 10x.
    Returns (seconds, straggler or not)."""
    sample = rollout_id.rsplit("-k", 1)[-1]  # the k-th rollout of its group, in either mode's ids
    rng = random.Random(f"{task['n']}-{sample}")
    median_s, straggler_share = float(task["median_s"]), float(task["straggler_share"])
    base = rng.lognormvariate(0.0, SIGMA) * median_s
    straggler = rng.random() < straggler_share
    return (base * STRAGGLER_FACTOR if straggler else base), straggler


@alight.rollout
def main(task: dict[str, Any]) -> float:
    client = OpenAI(max_retries=20)
    rollout_id = os.environ.get("ALIGHT_ROLLOUT_ID", "")
    wait, _ = draw(task, rollout_id)
    messages: list[Any] = [{"role": "user", "content": f"Say {task['word']}."}]
    first = client.chat.completions.create(model="policy", messages=messages, max_tokens=4)
    time.sleep(wait)  # the agent's own work: tools, environment, thinking outside the model
    messages += [{"role": "assistant", "content": first.choices[0].message.content or ""},
                 {"role": "user", "content": "Again."}]  # fmt: skip
    second = client.chat.completions.create(model="policy", messages=messages, max_tokens=8)
    text = second.choices[0].message.content or ""
    letters = [c for c in text if c.isalpha()]
    return sum(c in VOWELS for c in letters) / len(letters) if letters else 0.0
