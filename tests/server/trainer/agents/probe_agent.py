"""Test agent for `alight data clean --probe`: one model call, then the reward the task asks for.

`solved: always` scores 1, `never` scores 0, `once` scores 1 for the first of its rollouts to claim the
task's marker file and 0 for the rest, so k >= 2 probe rollouts of it have mixed outcomes.
"""

from __future__ import annotations

import os
from typing import Any

from openai import OpenAI

import alight


def _first_claim(marker: str) -> bool:
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))  # atomic: one rollout wins
    except FileExistsError:
        return False
    return True


@alight.rollout
def main(task: dict[str, Any]) -> float:
    client = OpenAI(max_retries=10)
    client.chat.completions.create(
        model="policy", messages=[{"role": "user", "content": task["problem_statement"]}], max_tokens=2
    )
    if task["solved"] == "once":
        return 1.0 if _first_claim(task["marker"]) else 0.0
    return 1.0 if task["solved"] == "always" else 0.0
