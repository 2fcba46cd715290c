"""The end-of-run plot: train reward (mean and spread) and validation mean reward (± 2 SE) per step, as a PNG; and
a comparison's plot: each metric's paired difference from the baseline per candidate (`alight eval --against`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from alight.comparison import Comparison
from alight.evaluation import INTERVAL, Z

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def plot_run(history: list[dict[str, Any]], path: Path, title: str = "alight training") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    run_figure(history, title).savefig(path)
    return path


def run_figure(history: list[dict[str, Any]], title: str = "alight training") -> Figure:
    """The plot of the run's metric records, on a figure of its own (no pyplot, no display)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    train = [r for r in history if "train/reward_mean" in r]
    val = [r for r in history if "val/score" in r]
    fig = Figure(figsize=(7, 4), dpi=120)
    ax = fig.subplots()
    if train:
        steps = [r["step"] for r in train]
        mean = [r["train/reward_mean"] for r in train]
        std = [r.get("train/reward_std", 0.0) for r in train]
        # mean ± 1 sd leaves the reward's range for rewards in {0, 1}: clip the band to the rewards seen
        low = min((r.get("train/reward_min", r["train/reward_mean"]) for r in train), default=0.0)
        high = max((r.get("train/reward_max", r["train/reward_mean"]) for r in train), default=1.0)
        ax.plot(steps, mean, marker="o", ms=3, label="train reward (mean; band: 1 sd of rollouts)")
        ax.fill_between(steps, [max(low, m - s) for m, s in zip(mean, std, strict=True)],
                        [min(high, m + s) for m, s in zip(mean, std, strict=True)], alpha=0.15)  # fmt: skip
    if val:
        # No standard error (missing, or NaN from a single task): no error bar, not a KeyError.
        errors = [Z * se if (se := r.get("val/score_se")) is not None and se == se else 0.0 for r in val]
        ax.errorbar([r["step"] for r in val], [r["val/score"] for r in val], yerr=errors, marker="s", lw=2,
                    capsize=4, label=f"validation mean reward ({INTERVAL})")  # fmt: skip
    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole: no tick at step 0.5
    ax.set_ylabel("reward")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    return fig


def plot_comparison(comparisons: list[Comparison], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    comparison_figure(comparisons).savefig(path)
    return path


def comparison_figure(comparisons: list[Comparison]) -> Figure:
    """Each metric's paired difference (candidate - baseline, ± Z SE) per candidate, one panel per metric
    (`alight.comparison.Comparison`s against one baseline): a bar that leaves zero is a verdict beyond noise."""
    from matplotlib.figure import Figure

    metrics = [(m.metric, m.label) for m in comparisons[0].metrics] if comparisons else []
    fig = Figure(figsize=(4 * min(4, max(1, len(metrics))), 1.2 + 2.2 * math.ceil(len(metrics) / 4)), dpi=120)
    axes = list(fig.subplots(max(1, math.ceil(len(metrics) / 4)), min(4, max(1, len(metrics))), squeeze=False).flat)
    names = [c.candidate for c in comparisons]
    for ax, (metric, label) in zip(axes, metrics, strict=False):
        rows = [c.row(metric) for c in comparisons]
        errors = [Z * r.error if r.error == r.error else 0.0 for r in rows]  # NaN (one task): no bar
        colors = [VERDICT_COLORS.get(r.verdict, "tab:gray") for r in rows]
        ax.axvline(0.0, color="black", lw=0.8)
        for y, (r, e, c) in enumerate(zip(rows, errors, colors, strict=True)):
            ax.errorbar([r.difference], [y], xerr=[e], fmt="o", color=c, capsize=4)
        ax.set_yticks(range(len(names)), names)
        ax.set_ylim(-0.6, len(names) - 0.4)
        ax.set_title(label, fontsize=9)
        ax.grid(alpha=0.3, axis="x")
    for ax in axes[len(metrics) :]:
        ax.set_visible(False)
    baseline = comparisons[0].baseline if comparisons else "baseline"
    fig.suptitle(f"difference from {baseline} ({INTERVAL}, paired)", fontsize=10)
    fig.tight_layout()
    return fig


VERDICT_COLORS = {"better": "tab:green", "worse": "tab:red", "higher": "tab:blue", "lower": "tab:blue"}
