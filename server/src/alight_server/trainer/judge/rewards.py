"""A group's judgement: flag answers that address the judge, score them, record the scores as rewards.

Each judged rollout gets its score (0..1, named `judge`) and the combined final reward `verifiable + weight x
score`, which wins over the others (trajectories/join.py `SOURCE_PRECEDENCE`), and a `judgement` event. A judge
that gave no usable answer writes no reward (never a zero): the event says why, and the caller leaves the group
out of training as an infrastructure failure.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from alight.client import AlightClient
from alight.evaluation import scored
from alight.schemas import (
    JUDGEMENT,
    REVIEW_FLAG,
    EventCreate,
    GatePayload,
    RewardCreate,
    RewardSource,
    Trajectory,
)
from alight_server.trainer.judge import injection
from alight_server.trainer.judge.caller import JudgeCaller, JudgeFailed
from alight_server.trainer.judge.config import JudgeConfig
from alight_server.trainer.judge.prompt import (
    JudgeAnswerError,
    build_prompt,
    expected_score,
    parse_scores,
    transcript,
)

MAX_ANSWER_CHARS = 4000  # of the judge's raw answer, in its event


@dataclass(frozen=True)
class Verdict:
    """One judge call's outcome: a score (0..1) per answer, in order, and how it was reached."""

    scores: list[float]
    answer: str
    prompt_sha256: str
    latency_s: float
    prompt_tokens: int
    completion_tokens: int
    tries: int
    digits: dict[str, float] | None = None  # logprobs scoring: each digit's probability as the first token
    cached: bool = False

    def record(self, mode: str, model: str, scores: dict[str, float]) -> dict[str, Any]:
        cut = {"scores": scores, "answer": self.answer[:MAX_ANSWER_CHARS]}  # scores by rollout id
        return {"mode": mode, "model": model, **asdict(self), **cut}


def tied(trajectories: Sequence[Trajectory]) -> bool:
    """The group's verifiable rewards are all equal (all missing counts as equal): they rank nothing."""
    return len({t.final_reward for t in trajectories}) <= 1


class Judge:
    """The run's judge: `judge_group` per finished group; thread-safe, so groups are judged side by side."""

    def __init__(self, config: JudgeConfig, rubric: str, caller: JudgeCaller, client: AlightClient) -> None:
        self.config, self.rubric, self.caller, self.client = config, rubric, caller, client
        self.cache: dict[str, Verdict] = {}
        self.lock = threading.Lock()
        self.flagged = 0  # answers flagged as addressing the judge, for the run's metrics
        self.failed = 0  # groups the judge left unrewarded

    def verdict(self, task: Any, answers: list[str], scored: int = 0) -> Verdict:
        """The judge's scores of `answers` to `task` (logprobs scoring: of `answers[scored]` alone), from the
        cache when the same were judged before."""
        cfg = self.config
        by_digits = cfg.scoring == "logprobs"
        content = [self.rubric, cfg.mode, cfg.scoring, task, answers, scored, self.caller.endpoint.model,
                   cfg.temperature]  # fmt: skip
        key = hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()
        with self.lock:
            if key in self.cache:
                return replace(self.cache[key], cached=True)
        prompt = build_prompt(self.rubric, cfg.mode, task, answers, scored=scored if by_digits else None)
        reply = self.caller.complete(prompt.messages)
        digits = None
        try:
            if by_digits:
                score, digits = expected_score(reply.top_logprobs, cfg.min_digit_mass)
                scores = [score]
            else:
                scores = parse_scores(reply.text, prompt.labels)
        except JudgeAnswerError as exc:
            raise JudgeFailed(f"{exc}; the judge answered {reply.text[:500]!r}") from exc
        found = Verdict(scores, reply.text, prompt.sha256, reply.latency_s, reply.prompt_tokens,
                        reply.completion_tokens, reply.tries, digits)  # fmt: skip
        with self.lock:
            self.cache[key] = found
        return found

    def flag_injections(self, trajectories: Sequence[Trajectory]) -> None:
        """A `judge_injection` review flag on each rollout whose answer addresses its evaluator."""
        for t in trajectories:
            found = injection.findings(transcript(t))
            if not found:
                continue
            with self.lock:
                self.flagged += 1
            payload = GatePayload(rule=injection.RULE, evidence=injection.evidence(found)).model_dump()
            event_id = f"{REVIEW_FLAG}-{injection.RULE}-{t.attempt}"
            self.client.add_event(t.rollout_id, EventCreate(id=event_id, attempt=t.attempt, kind=REVIEW_FLAG,
                                                            payload=payload))  # fmt: skip

    def judge_group(self, trajectories: Sequence[Trajectory]) -> bool:
        """Flag, judge and reward one finished group; False when the judge failed (no reward written)."""
        scorable = [t for t in trajectories if scored(t) is not None]
        self.flag_injections(scorable)
        if not scorable or (self.config.only_when_tied and not tied(scorable)):
            return True
        task = scorable[0].task
        try:
            answers = [transcript(t) for t in scorable]
            if self.config.mode == "absolute":
                judged = [([t], self.verdict(task, [answer])) for t, answer in zip(scorable, answers, strict=True)]
            elif self.config.scoring == "text":
                judged = [(scorable, self.verdict(task, answers))]
            else:  # one digit per call: each rollout's own, with its group in view
                judged = [([t], self.verdict(task, answers, k)) for k, t in enumerate(scorable)]
        except JudgeFailed as exc:
            with self.lock:
                self.failed += 1
            for t in scorable:
                self._event(t, {"mode": self.config.mode, "failed": str(exc)[:MAX_ANSWER_CHARS]})
            return False
        for members, found in judged:
            self._reward(members, found)
        return True

    def _reward(self, members: Sequence[Trajectory], found: Verdict) -> None:
        scores = {t.rollout_id: s for t, s in zip(members, found.scores, strict=True)}
        record = found.record(self.config.mode, self.caller.endpoint.model, scores)
        for t, score in zip(members, found.scores, strict=True):
            verifiable = 0.0 if self.config.replace else (t.final_reward or 0.0)
            combined = verifiable + self.config.weight * score
            judge = RewardSource.JUDGE
            self.client.add_reward(t.rollout_id, RewardCreate(id=f"judge-{t.attempt}", attempt=t.attempt, value=score,
                                                              name="judge", final=True, source=judge))  # fmt: skip
            self.client.add_reward(t.rollout_id, RewardCreate(id=f"judge-{t.attempt}-combined", attempt=t.attempt,
                                                              value=combined, final=True, source=judge))  # fmt: skip
            self._event(t, record)

    def _event(self, t: Trajectory, payload: dict[str, Any]) -> None:
        event = EventCreate(id=f"{JUDGEMENT}-{t.attempt}", attempt=t.attempt, kind=JUDGEMENT, payload=payload)
        self.client.add_event(t.rollout_id, event)
