"""A scripted judge on loopback (the fake upstream speaking the real OpenAI protocol) and finished groups to judge."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from samples_fixtures import model_call

from alight.client import AlightClient
from alight.schemas import AttemptFinish, Mode, RewardCreate, Rollout, RolloutCreate
from alight_server.config import RateLimit
from alight_server.stacks.server_thread import ServerThread
from alight_server.trainer.judge.caller import Endpoint, JudgeCaller
from alight_server.trainer.judge.config import JudgeConfig
from alight_server.trainer.judge.rewards import Judge
from alight_server.trainer.run.judging import Judging
from alight_server.trainer.run.rollouts import RolloutPhase, collect
from alight_testing.fake_upstream import FakeUpstreamState, Faults, create_fake_upstream

LABELS = re.compile(r"^SCORE (\S+): <0 to 10>$", re.MULTILINE)
BLOCK = re.compile(r"<<<BEGIN (\w+) (\S+)>>>\n(.*?)\n<<<END \1 \2>>>", re.DOTALL)


def judged_blocks(messages: list[dict[str, Any]]) -> dict[str, str]:
    """The data blocks of a judge prompt by label (TASK and each answer's), as a judge reads them."""
    return {label: text for _, label, text in BLOCK.findall(messages[-1]["content"])}


def keyword_judge(messages: list[dict[str, Any]]) -> str:
    """Scores 9 an answer holding '42', 2 any other; the reply starts on a new line (the fake prefixes a tag)."""
    labels = LABELS.findall(messages[0]["content"])
    blocks = judged_blocks(messages)
    return "\n" + "\n".join(f"SCORE {label}: {9 if '42' in blocks[label] else 2}" for label in labels)


@dataclass
class ScriptedJudge:
    """The judge upstream: its state (calls, faults) and the `rule` it answers by (swappable per test)."""

    url: str
    state: FakeUpstreamState
    key_file: Path
    rule: list[Callable[[list[dict[str, Any]]], str]] = field(default_factory=lambda: [keyword_judge])

    @property
    def calls(self) -> int:
        return len(self.state.calls)


@pytest.fixture
def scripted_judge(tmp_path: Path) -> Iterator[ScriptedJudge]:
    rule: list[Callable[[list[dict[str, Any]]], str]] = [keyword_judge]
    app = create_fake_upstream("judge", faults=Faults(), chat_rule=lambda messages: rule[0](messages))
    key_file = tmp_path / "judge.key"
    key_file.write_text("judge-key\n")
    with ServerThread(app) as url:
        yield ScriptedJudge(f"{url}/v1", app.state.fake, key_file, rule)


def make_judging(
    client: AlightClient,
    judge: ScriptedJudge,
    budget: RateLimit | None = None,
    waits: list[float] | None = None,
    **settings: Any,
) -> Judging:
    """The run's judging against the scripted judge; `settings` are judge: keys. Waits between tries and for the
    budget are recorded on `waits` instead of slept."""
    config = JudgeConfig.model_validate({"url": judge.url, "key_file": str(judge.key_file), "rubric": "Is it 42?",
                                         "retries": 2, "timeout_s": 10, **settings})  # fmt: skip
    waits = [] if waits is None else waits
    caller = JudgeCaller(Endpoint(judge.url, "judge-key", "judge"), retries=config.retries, timeout_s=config.timeout_s,
                         sampling=config.sampling(), budget=budget,
                         sleep=waits.append)  # fmt: skip
    return Judging(Judge(config, config.rubric, caller, client), client)


def finished_group(
    client: AlightClient,
    live_server: Any,
    name: str,
    answers: list[str],
    rewards: list[float | None] | None = None,
    task: Any = None,
) -> list[Rollout]:
    """One group, a rollout per answer, each with one model call answering it and (when given) a final reward."""
    created = client.create_rollouts([
        RolloutCreate(id=f"{name}-k{k}", task=task or {"question": "6 x 7?"}, mode=Mode.TRAIN, group_id=name)
        for k in range(len(answers))
    ])  # fmt: skip
    ids = [r.id for r in created]
    for start in client.claim_attempts(limit=len(ids), ids=ids):
        rid = start.rollout.id
        k = ids.index(rid)
        live_server.store.add_model_call(model_call(0, [1, 2], [3, 4], rollout_id=rid, reply=answers[k]))
        if rewards is not None and rewards[k] is not None:
            client.add_reward(rid, RewardCreate(attempt=start.attempt, value=float(rewards[k] or 0), final=True))
        client.finish_attempt(rid, start.attempt, AttemptFinish(status="succeeded"))
    return [client.get_rollout(rid) for rid in ids]


def phase_of(client: AlightClient, *groups: list[Rollout]) -> RolloutPhase:
    return collect(client, [r for g in groups for r in g], time.monotonic())
