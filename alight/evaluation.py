"""The baseline report of a set of rollouts (`EvalReport`): `alight eval` prints it, `alight train` before and after;
comparing two task by task is alight.comparison's (`alight eval --against`).

One convention for every ± alight prints (this report, the before/after table, the plot, the dashboard): a 95%
interval, ± 2 standard errors, the error clustered by task (`mean_and_error`). A task's samples are correlated (an
easy task is easy every time), so counting them as independent would narrow the interval.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from alight.cost import CostSummary, Prices, cost_summary, rollout_cost
from alight.schemas import REVIEW_FLAG, REWARD_HACKING, Event, FailureKind, Rollout, Trajectory

__all__ = [
    "EPISODE",
    "INTERVAL",
    "REVIEW_FLAG",
    "REWARD_HACKING",
    "SUCCESS_AT",
    "EvalReport",
    "Z",
    "build_report",
    "interval",
    "mean_and_error",
    "scored",
    "scores_by_task",
    "success_and_error",
]
EPISODE = "episode"  # rollout events with the harness's command counts (alight_sandbox.guards)
Z = 2.0  # a printed ± is Z standard errors: a 95% interval (1.96, rounded)
SUCCESS_AT = 1.0  # the final reward that counts as a success, unless a report is asked for another
INTERVAL = "± 2 SE: 95% interval, clustered by task"  # what a printed ± means, for headers and legends


def mean_and_error(scores: Mapping[str, Sequence[float]]) -> tuple[float, float]:
    """The mean of all the scores, each task's (cluster's) list of samples, and its clustered standard error.

    The cluster-robust error of a mean over C clusters and N samples, sqrt(C / (C - 1) * sum over clusters of
    (their samples' sum of y - mean)^2) / N: with k samples per task it is stdev(task means) / sqrt(C), with one
    sample per task the ordinary stdev / sqrt(N). NaN mean without scores; NaN error with fewer than two tasks.
    """
    clusters = [list(samples) for samples in scores.values() if samples]
    values = [s for samples in clusters for s in samples]
    if not values:
        return float("nan"), float("nan")
    mean = statistics.fmean(values)
    if len(clusters) < 2:
        return mean, float("nan")
    spread = sum(sum(y - mean for y in samples) ** 2 for samples in clusters)
    return mean, math.sqrt(len(clusters) / (len(clusters) - 1) * spread) / len(values)


def scored(trajectory: Trajectory) -> float | None:
    """A rollout's score: its final reward, 0 when the agent failed without one; None for an infra failure or a
    timeout, which say nothing about the policy."""
    if trajectory.failure_kind in (FailureKind.INFRA, FailureKind.TIMEOUT):
        return None
    return trajectory.final_reward if trajectory.final_reward is not None else 0.0


def scores_by_task(trajectories: Sequence[Trajectory]) -> dict[str, list[float]]:
    """Each task's (cluster's: the rollout's group, else the rollout) scores; infra failures and timeouts left out."""
    by_task: dict[str, list[float]] = {}
    for t in trajectories:
        if (score := scored(t)) is not None:
            by_task.setdefault(t.group_id or t.rollout_id, []).append(score)
    return by_task


def success_and_error(trajectories: Sequence[Trajectory], at: float = SUCCESS_AT) -> tuple[float, float]:
    """The share of scored rollouts scoring at least `at`, and its clustered error (`mean_and_error`)."""
    return mean_and_error({task: [float(s >= at) for s in ss] for task, ss in scores_by_task(trajectories).items()})


def interval(value: float | None, error: float | None) -> str:
    """`value ± Z * error` to 3 places; the value alone without an error (None, or NaN from a single task)."""
    if value is None:
        return "-"
    return f"{value:.3f}" if error is None or math.isnan(error) else f"{value:.3f} ± {Z * error:.3f}"


@dataclass
class EvalReport:
    rollouts: int
    scored: int  # rollouts with a result (infra failures and timeouts are not the policy's)
    tasks: int  # tasks (clusters: a rollout's group, else the rollout) among the scored rollouts
    success_rate: float  # share of scored rollouts whose final reward is at least `success_at`
    success_se: float  # its standard error, clustered by task (`mean_and_error`)
    mean_reward: float  # mean final reward of the scored rollouts (0 for a task failure without one)
    mean_reward_se: float  # its standard error, clustered by task
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
    success_at: float = SUCCESS_AT  # the final reward that counts as a success
    # task -> PAIRED_METRICS name -> one value per scored rollout: what a comparison pairs (alight.comparison).
    # A task is its index in the evaluated task list ("t000"), the same for every candidate evaluated on that list.
    per_task: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    task_digests: dict[str, str] = field(default_factory=dict)  # task -> a hash of its content, to check pairing
    # What the rollouts cost, per success and per accepted patch (`CostSummary.as_dict`); {} in an older report.
    cost: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EvalReport:
        """A report as `as_dict` wrote it (report.json); fields it lacks (an older report's) keep their defaults."""
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})

    def lines(self, title: str = "evaluation") -> list[str]:
        gates = ", ".join(f"{rule} {n}" for rule, n in sorted(self.gate_violations.items())) or "none"
        flags = ", ".join(f"{rule} {n}" for rule, n in sorted(self.review_flags.items())) or "none"
        success = f"success (reward ≥ {self.success_at:g})"
        return [
            f"{title}: {self.rollouts} rollouts, {self.scored} scored, {self.tasks} tasks ({INTERVAL})",
            f"  {success:<21} {interval(self.success_rate, self.success_se)}",
            f"  {'mean reward':<21} {interval(self.mean_reward, self.mean_reward_se)}",
            f"  tool errors    {self.tool_errors}",
            f"  tokens         {self.prompt_tokens} prompt, {self.completion_tokens} completion, {self.model_calls} calls",
            f"  latency        p50 {self.latency_p50_ms:.0f} ms, p95 {self.latency_p95_ms:.0f} ms per call",
            f"  retries        {self.retries} ({self.infra_failures} infra failures)",
            f"  gate violations {gates}",
            f"  review flags   {flags}",
            *(CostSummary.from_dict(self.cost).lines() if self.cost else []),
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
    success_at: float = SUCCESS_AT,
    prices: Prices | None = None,
) -> EvalReport:
    """The report over `rollouts` (their latest trajectories, and the events of any attempt); money from
    `prices` (the config's `prices:`), tokens and seconds without."""
    by_task = scores_by_task(trajectories)
    rate, rate_se = success_and_error(trajectories, success_at)
    mean, mean_se = mean_and_error(by_task)
    calls = [tc.call for t in trajectories for tc in t.calls]
    latencies = [c.latency_ms for c in calls if c.latency_ms is not None]
    tool_errors = sum(1 for t in trajectories for s in t.tool_spans if s.failed)
    tool_errors += sum(int(e.payload.get("command_errors", 0)) for e in events if e.kind == EPISODE)
    gates, flags = _rollouts_per_rule(events, REWARD_HACKING), _rollouts_per_rule(events, REVIEW_FLAG)
    per_task, digests = _per_task(rollouts, trajectories, events, success_at, prices)
    cost = cost_summary(rollouts, trajectories, prices, success_at)
    return EvalReport(
        rollouts=len(rollouts),
        scored=sum(map(len, by_task.values())),
        tasks=len(by_task),
        success_rate=rate,
        success_se=rate_se,
        mean_reward=mean,
        mean_reward_se=mean_se,
        tool_errors=tool_errors,
        prompt_tokens=cost.total.prompt_tokens,
        completion_tokens=cost.total.completion_tokens,
        model_calls=len(calls),
        latency_p50_ms=_quantile(latencies, 0.5),
        latency_p95_ms=_quantile(latencies, 0.95),
        retries=sum(max(0, len(r.attempts) - 1) for r in rollouts) + sum(1 for c in calls if c.status_code == 429),
        infra_failures=sum(scored(t) is None for t in trajectories),
        gate_violations=gates,
        review_flags=flags,
        success_at=success_at,
        per_task=per_task,
        task_digests=digests,
        cost=cost.as_dict(),
    )


def _per_task(
    rollouts: Sequence[Rollout],
    trajectories: Sequence[Trajectory],
    events: Sequence[Event],
    success_at: float,
    prices: Prices | None,
) -> tuple[dict[str, dict[str, list[float]]], dict[str, str]]:
    """Each task's PAIRED_METRICS, one value per scored rollout (and its cost in USD, `usd`, when priced: what the
    comparison's cost per success is made of), and each task's content hash. A task is named by its index in the
    evaluated list (`task_index` in the rollout's metadata), else by its group."""
    by_id = {r.id: r for r in rollouts}
    per_task: dict[str, dict[str, list[float]]] = {}
    digests: dict[str, str] = {}
    events_of: dict[str, list[Event]] = {}
    for e in events:
        events_of.setdefault(e.rollout_id, []).append(e)
    for t in trajectories:
        if (score := scored(t)) is None:
            continue
        rollout = by_id.get(t.rollout_id)
        index = rollout.metadata.get("task_index") if rollout is not None else None
        task = f"t{int(index):03d}" if index is not None else (t.group_id or t.rollout_id)
        content = rollout.task if rollout is not None else t.task
        digests[task] = hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:16]
        mine = events_of.get(t.rollout_id, [])
        values = {
            "success": float(score >= success_at),
            "reward": score,
            "tool_errors": float(sum(1 for s in t.tool_spans if s.failed)
                                 + sum(int(e.payload.get("command_errors", 0)) for e in mine if e.kind == EPISODE)),
            "gate_violations": float(any(e.kind == REWARD_HACKING for e in mine)),
            "review_flags": float(any(e.kind == REVIEW_FLAG for e in mine)),
            "tokens": float(sum(len(c.call.prompt_token_ids) + len(c.call.response_token_ids) for c in t.calls)),
            "model_calls": float(len(t.calls)),
        }  # fmt: skip
        if prices is not None:
            values["usd"] = rollout_cost(t, rollout, prices).usd
        for metric, value in values.items():
            per_task.setdefault(task, {}).setdefault(metric, []).append(value)
    return per_task, digests


def _rollouts_per_rule(events: Sequence[Event], kind: str) -> dict[str, int]:
    """rule -> how many rollouts have an event of `kind` with that rule (several attempts count once)."""
    rollout_rules = {(e.rollout_id, str(e.payload.get("rule"))) for e in events if e.kind == kind}
    return dict(Counter(rule for _, rule in rollout_rules))
