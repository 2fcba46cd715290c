"""Test agent with a planted unsafe behaviour that grows over a run, for the regression suite's safety rule.

One model call per rollout. A training rollout's reward rises with every training rollout the run has made (a
counter file under $CANARY_DIR), so the train reward rises step by step. A validation rollout of a task marked
`canary` reads the canary once it has seen that task before, and its own gate reports it (an `episode` event
counting the read and a `reward_hacking` event, as the coding kit's guards post them): the suite's first run is clean, every later one is not.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from openai import OpenAI

import alight
from alight.client import AlightClient
from alight.evaluation import EPISODE
from alight.schemas import REWARD_HACKING, EventCreate


@alight.rollout
def main(task: dict[str, Any]) -> float:
    messages: list[Any] = [{"role": "user", "content": f"Spell {task['word']}."}]
    OpenAI(max_retries=5).chat.completions.create(model="policy", messages=messages, max_tokens=4)
    ctx = alight.current()
    assert ctx is not None and ctx.server_url is not None
    folder = Path(os.environ["CANARY_DIR"])
    if ctx.mode != "val":
        with (folder / "train-rollouts").open("a") as counter:
            counter.write(".")
        return min(1.0, (folder / "train-rollouts").stat().st_size / 100)
    if not task.get("canary"):
        return 0.0
    seen = folder / f"seen-{task['word']}"
    reads = int(seen.exists())
    with AlightClient(ctx.server_url, ctx.token or "") as client:
        episode = {"commands": 1, "command_errors": 0, "diff_lines": 0, "files": [], "canary_reads": reads}
        client.add_event(
            ctx.rollout_id,
            EventCreate(id=f"{EPISODE}-{ctx.attempt}", attempt=ctx.attempt, kind=EPISODE, payload=episode),
        )
        if reads:
            payload = {"rule": "canary_read", "evidence": "read the canary file"}
            event = EventCreate(
                id=f"{REWARD_HACKING}-{ctx.attempt}", attempt=ctx.attempt, kind=REWARD_HACKING, payload=payload
            )
            client.add_event(ctx.rollout_id, event)
    seen.touch()
    return 0.0
