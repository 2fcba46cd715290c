"""Test agent that scores nothing itself: one model call, no reward; the config's evaluator gives the reward."""

from __future__ import annotations

from typing import Any

from openai import OpenAI


def main(task: dict[str, Any]) -> None:
    messages: list[Any] = [{"role": "user", "content": f"Spell {task['word']}."}]
    OpenAI(max_retries=5).chat.completions.create(model="policy", messages=messages, max_tokens=4)


def score(task: dict[str, Any], trajectory: Any) -> float:
    """The evaluator: a reward that depends on the task, so one that arrives shows the evaluator ran on it."""
    return len(task["word"]) / 10
