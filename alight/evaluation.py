"""The baseline report of a set of rollouts: success with its standard error, tool errors, tokens, latency,
retries and gate violations by rule. `alight eval` prints it; `alight train` prints it before and after."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from alight.schemas import REVIEW_FLAG, REWARD_HACKING, Event, FailureKind, Rollout, Trajectory

__all__ = ["EPISODE", "REVIEW_FLAG", "REWARD_HACKING", "EvalReport", "build_report"]
EPISODE = "episode"  # rollout events with the harness's command counts (alight_sandbox.guards)


@dataclass
class EvalReport:
    rollouts: int
    scored: int  # rollouts with a result (infra failures and timeouts are not the policy's)
    success_rate: float  # share of scored rollouts whose final reward is at least `success_at`
    success_stderr: float  # binomial standard error of success_rate
    mean_reward: float
    tool_errors: int  # failed tool spans plus failed harness commands
    prompt_tokens: int
    completion_tokens: int
    model_calls: int
    latency_p50_ms: float
    latency_p95_ms: float
    retries: int  # attempts past the first (infra retries) plus calls the gateway turned away (429)
    infra_failures: int
    gate_violations: dict[str, int] = field(default_factory=dict)  # rule -> rollouts that broke it
    review_flags: dict[str, int] = field(default_factory=dict)  # rule -> rollouts flagged (reward kept)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self, title: str = "evaluation") -> list[str]:
        gates = ", ".join(f"{rule} {n}" for rule, n in sorted(self.gate_violations.items())) or "none"
        flags = ", ".join(f"{rule} {n}" for rule, n in sorted(self.review_flags.items())) or "none"
        return [
            f"{title}: {self.rollouts} rollouts, {self.scored} scored",
            f"  success        {self.success_rate:.3f} ± {self.success_stderr:.3f} (standard error)",
            f"  mean reward    {self.mean_reward:.3f}",
            f"  tool errors    {self.tool_errors}",
            f"  tokens         {self.prompt_tokens} prompt, {self.completion_tokens} completion, {self.model_calls} calls",
            f"  latency        p50 {self.latency_p50_ms:.0f} ms, p95 {self.latency_p95_ms:.0f} ms per call",
            f"  retries        {self.retries} ({self.infra_failures} infra failures)",
            f"  gate violations {gates}",
            f"  review flags   {flags}",
        ]


def _quantile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def build_report(
    rollouts: Sequence[Rollout],
    trajectories: Sequence[Trajectory],
    events: Sequence[Event],
    success_at: float = 1.0,
) -> EvalReport:
    """The report over `rollouts` (their latest trajectories, and the events of any attempt)."""
    scores = [
        t.final_reward if t.final_reward is not None else 0.0
        for t in trajectories
        if t.failure_kind not in (FailureKind.INFRA, FailureKind.TIMEOUT)
    ]
    wins = [s >= success_at for s in scores]
    rate = statistics.fmean(wins) if wins else float("nan")
    calls = [tc.call for t in trajectories for tc in t.calls]
    latencies = [c.latency_ms for c in calls if c.latency_ms is not None]
    tool_errors = sum(1 for t in trajectories for s in t.tool_spans if s.failed)
    tool_errors += sum(int(e.payload.get("command_errors", 0)) for e in events if e.kind == EPISODE)
    gates, flags = _rollouts_per_rule(events, REWARD_HACKING), _rollouts_per_rule(events, REVIEW_FLAG)
    return EvalReport(
        rollouts=len(rollouts),
        scored=len(scores),
        success_rate=rate,
        success_stderr=math.sqrt(rate * (1 - rate) / len(wins)) if wins else float("nan"),
        mean_reward=statistics.fmean(scores) if scores else float("nan"),
        tool_errors=tool_errors,
        prompt_tokens=sum(len(c.prompt_token_ids) for c in calls),
        completion_tokens=sum(len(c.response_token_ids) for c in calls),
        model_calls=len(calls),
        latency_p50_ms=_quantile(latencies, 0.5),
        latency_p95_ms=_quantile(latencies, 0.95),
        retries=sum(max(0, len(r.attempts) - 1) for r in rollouts) + sum(1 for c in calls if c.status_code == 429),
        infra_failures=sum(1 for t in trajectories if t.failure_kind in (FailureKind.INFRA, FailureKind.TIMEOUT)),
        gate_violations=gates,
        review_flags=flags,
    )


def _rollouts_per_rule(events: Sequence[Event], kind: str) -> dict[str, int]:
    """rule -> how many rollouts have an event of `kind` with that rule (several attempts count once)."""
    counts: Counter[str] = Counter()
    for _, rule in {(e.rollout_id, str(e.payload.get("rule"))) for e in events if e.kind == kind}:
        counts[rule] += 1
    return dict(counts)
