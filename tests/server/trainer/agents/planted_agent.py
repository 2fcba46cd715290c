"""Test agent with a planted difference: one model call, then reward 1 when its env says PLANTED=right, else 0.

Two candidates that differ only in `agent.env.PLANTED` differ in nothing but their success, whatever the model
says: what a comparison must call better or worse, and candidates of the same PLANTED within noise.
"""

from __future__ import annotations

import os
from typing import Any

from openai import OpenAI

import alight


@alight.rollout
def main(task: dict[str, Any]) -> float:
    messages: list[Any] = [{"role": "user", "content": f"Spell {task['word']}."}]
    OpenAI(max_retries=5).chat.completions.create(model="policy", messages=messages, max_tokens=4)
    return 1.0 if os.environ.get("PLANTED") == "right" else 0.0
