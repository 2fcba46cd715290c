"""A test agent given as an entrypoint: an @alight.rollout-style function that returns a reward."""

from __future__ import annotations


def main(task: dict) -> float:
    print(f"solving {task['question']}", flush=True)
    if task.get("fail"):
        raise RuntimeError("the agent could not solve it")
    return 1.0
