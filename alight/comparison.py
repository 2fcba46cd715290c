"""Two reports of the same tasks compared task by task (`alight eval --against`, `alight train`'s last validation
against its first): each metric's difference is the mean of the per-task differences, its error the paired one
(`paired_difference`), and its verdict says whether the ± 2 SE interval of the difference leaves zero (`verdict`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from alight.evaluation import INTERVAL, SUCCESS_AT, EvalReport, Z, mean_and_error

__all__ = [
    "COST_PER_SUCCESS",
    "PAIRED_METRICS",
    "Comparison",
    "MetricDifference",
    "compare_reports",
    "cost_per_success",
    "paired_difference",
    "signed_interval",
    "verdict",
]


def paired_difference(
    baseline: Mapping[str, Sequence[float]], candidate: Mapping[str, Sequence[float]]
) -> tuple[float, float, int]:
    """candidate - baseline over the tasks both have samples of: the mean of the per-task differences of means, its
    paired standard error stdev(differences) / sqrt(tasks), and how many tasks were paired (NaN difference without a
    shared task; NaN error with fewer than two).

    Pairing removes what the two share: an easy task is easy for both, so the per-task differences vary far less
    than either candidate's scores. With the same samples per task the mean difference is the difference of means.
    """
    differences = {
        task: [statistics.fmean(candidate[task]) - statistics.fmean(samples)]
        for task, samples in baseline.items()
        if samples and candidate.get(task)
    }
    difference, error = mean_and_error(differences)
    return difference, error, len(differences)


def verdict(difference: float, error: float, direction: int = 1) -> str:
    """ "better" or "worse" when the difference's 95% interval (± Z errors) leaves zero, else "within noise";
    `direction` 1: higher is better, -1: lower is better, 0: neither ("higher" or "lower"). "too few tasks" when
    there is no error to judge by (fewer than two paired tasks)."""
    if math.isnan(difference) or math.isnan(error):
        return "too few tasks"
    if abs(difference) <= Z * error:
        return "within noise"
    higher = difference > 0
    if direction == 0:
        return "higher" if higher else "lower"
    return "better" if higher == (direction > 0) else "worse"


def signed_interval(difference: float, error: float) -> str:
    """A difference as `+value ± Z * error` to 3 places; the value alone without an error (NaN)."""
    return f"{difference:+.3f}" + ("" if math.isnan(error) else f" ± {Z * error:.3f}")


# The per-rollout metrics a report keeps per task for comparisons: name, label, direction (1: higher is better,
# -1: lower is better, 0: neither, a change in behaviour to notice: the comparison says "higher" or "lower").
PAIRED_METRICS: tuple[tuple[str, str, int], ...] = (
    ("success", f"success (reward ≥ {SUCCESS_AT:g})", 1),
    ("reward", "mean reward", 1),
    ("tool_errors", "tool errors per rollout", -1),
    ("gate_violations", "gate violations (share)", -1),  # rollouts with a reward_hacking event
    ("review_flags", "review flags (share)", -1),
    ("tokens", "tokens per rollout", 0),  # prompt and completion
    ("model_calls", "model calls per rollout", 0),
)
# Not a per-rollout mean but a ratio over the paired tasks (`cost_per_success`): every rollout's cost over the
# successes, in USD per 1000 successes when both reports are priced, else in tokens.
COST_PER_SUCCESS = "cost_per_success"


@dataclass
class MetricDifference:
    metric: str  # a PAIRED_METRICS name
    label: str
    baseline: float  # the mean over the paired tasks (of each task's mean)
    candidate: float
    difference: float  # candidate - baseline
    error: float  # its paired standard error (1 SE; printed as ± Z SE)
    verdict: str  # better, worse, within noise, higher, lower, too few tasks


@dataclass
class Comparison:
    """A candidate against the baseline, paired by task (`compare_reports`)."""

    baseline: str
    candidate: str
    tasks: int  # tasks paired
    unpaired: int  # tasks only one side has a scored rollout of
    metrics: list[MetricDifference]
    z: float = Z  # verdicts are at ± z standard errors

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def row(self, metric: str) -> MetricDifference:
        return next(m for m in self.metrics if m.metric == metric)

    def lines(self) -> list[str]:
        """The table for people: each metric's two values, the difference ± Z SE and the verdict."""
        width = max(12, len(self.baseline), len(self.candidate))
        unpaired = f", {self.unpaired} unpaired left out" if self.unpaired else ""
        lines = [
            f"{self.candidate} vs {self.baseline}: {self.tasks} tasks paired{unpaired} (difference {INTERVAL}, paired)",
            f"  {'metric':<27} {self.baseline:>{width}} {self.candidate:>{width}}  {'difference':<18} verdict",
        ]
        for m in self.metrics:
            change = signed_interval(m.difference, m.error)
            lines.append(
                f"  {m.label:<27} {m.baseline:>{width}.3f} {m.candidate:>{width}.3f}  {change:<18} {m.verdict}"
            )
        return lines


def cost_per_success(
    baseline: Mapping[str, Mapping[str, Sequence[float]]], candidate: Mapping[str, Mapping[str, Sequence[float]]]
) -> MetricDifference:
    """The cost of a success on each side, R = sum of task costs / sum of task success rates over the tasks both
    scored (each task's mean, so a task weighs the same on both sides), and R' - R with its paired error.

    The error is the delta method's, clustered by task: R's deviation from task t is u_t = (c_t - R s_t) / sum s,
    so the difference's is the `mean_and_error` error of T (u'_t - u_t), whose mean is 0 by construction."""
    tasks = [t for t in baseline if baseline[t].get("success") and candidate.get(t, {}).get("success")]
    units = [u for u in ("usd", "tokens") if all(side[t].get(u) for side in (baseline, candidate) for t in tasks)]
    unit = units[0] if units else "tokens"
    tasks = tasks if units else []  # a report without costs (an older one): nothing to compare
    scale = 1000.0 if unit == "usd" else 1.0
    ratios, deviations = [], []
    for side in (baseline, candidate):
        costs = {t: scale * statistics.fmean(side[t][unit]) for t in tasks}
        rates = {t: statistics.fmean(side[t]["success"]) for t in tasks}
        successes = sum(rates.values())
        ratio = sum(costs.values()) / successes if successes else math.nan
        ratios.append(ratio)
        deviations.append({t: (costs[t] - ratio * rates[t]) / successes if successes else math.nan for t in tasks})
    difference = ratios[1] - ratios[0]
    _, error = mean_and_error({t: [len(tasks) * (deviations[1][t] - deviations[0][t])] for t in tasks})
    label = "USD per 1000 successes" if unit == "usd" else "tokens per success"
    return MetricDifference(COST_PER_SUCCESS, label, ratios[0], ratios[1], difference, error,
                            verdict(difference, error, direction=-1))  # fmt: skip


def compare_reports(baseline: EvalReport, candidate: EvalReport, names: tuple[str, str]) -> Comparison:
    """`candidate` against `baseline`, paired by task, each of PAIRED_METRICS and the cost per success. ValueError when
    a report has no per-task results (an older one) or a task of both differs in content (not the same task list:
    another dataset, seed or validation.max_tasks)."""
    for name, report in zip(names, (baseline, candidate), strict=True):
        if not report.per_task:
            raise ValueError(f"{name}: the report has no per-task results to pair (none scored, or an older report)")
    shared = baseline.per_task.keys() & candidate.per_task.keys()
    differ = sorted(t for t in shared if baseline.task_digests.get(t) != candidate.task_digests.get(t))
    if differ:
        raise ValueError(
            f"{names[1]} and {names[0]} ran different tasks under the same names ({', '.join(differ[:3])}): compare "
            "candidates on the same task list (dataset, seed and validation settings)"
        )
    rows = []
    for metric, label, direction in PAIRED_METRICS:
        before = {t: baseline.per_task[t].get(metric, []) for t in shared}
        after = {t: candidate.per_task[t].get(metric, []) for t in shared}
        difference, error, _ = paired_difference(before, after)
        paired = [t for t in shared if before[t] and after[t]]
        mean_before = statistics.fmean(statistics.fmean(before[t]) for t in paired) if paired else float("nan")
        mean_after = statistics.fmean(statistics.fmean(after[t]) for t in paired) if paired else float("nan")
        rows.append(MetricDifference(metric, label, mean_before, mean_after, difference, error,
                                     verdict(difference, error, direction)))  # fmt: skip
    rows.append(cost_per_success({t: baseline.per_task[t] for t in shared}, candidate.per_task))
    return Comparison(names[0], names[1], len(shared), len(baseline.per_task.keys() ^ candidate.per_task.keys()), rows)
