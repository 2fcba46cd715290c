"""Test agent with two roles for several-policy runs: a planner's call, then an executor's call that reads the plan.

Each call names its role in the X-Alight-Agent header (as an integration does), so the gateway routes it to
that role's policy. Each role's reply is scored by its share of vowels, reported as a named reward
(`plan`, `answer`); the rollout's reward is their mean. Plain httpx: agents start fast on 2 cores.
"""

from __future__ import annotations

import os
import time
from typing import Any

import httpx

import alight
from alight import semconv

VOWELS = set("aeiouAEIOU")


def vowel_share(text: str) -> float:
    letters = [c for c in text if c.isalpha()]
    return sum(c in VOWELS for c in letters) / len(letters) if letters else 0.0


def complete(client: httpx.Client, role: str, messages: list[Any], max_tokens: int) -> str:
    body = {"model": "policy", "messages": messages, "max_tokens": max_tokens}
    headers = {semconv.HEADER_AGENT: role}
    reply = client.post("/chat/completions", json=body, headers=headers)
    for _ in range(60):  # a weight update of this role's policy pauses its calls: 429 + Retry-After
        if reply.status_code != 429:
            break
        time.sleep(float(reply.headers.get("retry-after", "1")))
        reply = client.post("/chat/completions", json=body, headers=headers)
    reply.raise_for_status()
    return reply.json()["choices"][0]["message"]["content"] or ""


@alight.rollout
def main(task: dict[str, Any]) -> float:
    headers = {"Authorization": f"Bearer {os.environ['OPENAI_API_KEY']}"}
    with httpx.Client(base_url=os.environ["OPENAI_BASE_URL"], headers=headers, timeout=120) as client:
        plan = complete(client, "planner", [{"role": "user", "content": f"Plan: define {task['word']}."}], 4)
        answer = complete(
            client, "executor", [{"role": "user", "content": f"Plan: {plan}\nNow define {task['word']}."}], 6
        )
    plan_score, answer_score = vowel_share(plan), vowel_share(answer)
    alight.reward(plan_score, name="plan")
    alight.reward(answer_score, name="answer")
    return (plan_score + answer_score) / 2
