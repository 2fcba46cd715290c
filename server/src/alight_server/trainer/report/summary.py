"""The end of a run: the plot (also to the trackers), summary.json, the before/after table, and `RunResult`."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alight.evaluation import INTERVAL, SUCCESS_AT, Z, interval
from alight_server.trainer.report.display import RunDisplay, summary_table
from alight_server.trainer.report.metrics import MetricsLog
from alight_server.trainer.report.plots import plot_run


@dataclass
class RunResult:
    run_dir: Path
    history: list[dict[str, Any]]
    val_before: float | None
    val_after: float | None
    plot_path: Path | None
    summary_path: Path
    policy_version: int


def finish_run(
    history: list[dict[str, Any]],
    run_dir: Path,
    model: str,
    steps: int,
    policy_version: int,
    val_tasks: int,
    display: RunDisplay,
    metrics_log: MetricsLog,
) -> RunResult:
    """Validation before/after, train reward over the first and last few steps, written and printed."""
    plot_path = plot_run(history, run_dir / "training.png", model) if history else None
    if plot_path is not None:
        metrics_log.log_plot(plot_path, steps)
    trains = [r for r in history if "train/reward_mean" in r]
    k = max(1, min(3, len(trains) // 2))  # steps averaged at each end
    summary = run_summary(history, k, steps, policy_version, plot_path)
    summary_path = run_dir / "summary.json"
    summary_path.write_text(json.dumps(summary, indent=2))
    _print_summary(display, summary, k, val_tasks, run_dir)
    return RunResult(
        run_dir, history, summary["val_before"], summary["val_after"], plot_path, summary_path, policy_version
    )


def run_summary(
    history: list[dict[str, Any]], k: int, steps: int, policy_version: int, plot_path: Path | None
) -> dict[str, Any]:
    """summary.json's content: validation before/after (mean reward, and success: reward >= 1) with their
    standard errors (1 SE, clustered by task; printed as ± 2 SE) and the gain, mean train reward of the first
    and last `k` steps, and the random audit: how often people rejected what the gates passed."""
    vals = [r for r in history if "val/score" in r]
    audits = [r for r in history if "integrity/audits_decided" in r]
    trains = [r for r in history if "train/reward_mean" in r]

    def mean_of(rows: list[dict[str, Any]]) -> float | None:
        return statistics.fmean(r["train/reward_mean"] for r in rows) if rows else None

    return {
        **_before_after(vals, "val/score", "val"),
        **_before_after(vals, "val/success", "val_success"),
        "train_reward_first": mean_of(trains[:k]),
        "train_reward_last": mean_of(trains[-k:]),
        "steps": steps,
        "policy_version": policy_version,
        "plot": str(plot_path) if plot_path else None,
        "audits_decided": int(audits[-1]["integrity/audits_decided"]) if audits else 0,
        "audit_rejected": audits[-1]["integrity/audit_rejected"] if audits else None,
    }


def _before_after(vals: list[dict[str, Any]], metric: str, name: str) -> dict[str, float | None]:
    """`{name}_before`, `_after`, `_gain` and their `_se` from the first and last validation's `metric`."""
    first, last = vals[0] if vals else {}, vals[-1] if len(vals) > 1 else {}
    before, se_before = first.get(metric), first.get(f"{metric}_se")
    after, se_after = last.get(metric), last.get(f"{metric}_se")
    gain = after - before if before is not None and after is not None else None
    # Paired by task where the last validation recorded it (the same tasks, so an easy one is easy for both);
    # else (a run resumed since its first validation) the independent-samples error of the difference.
    paired_se = last.get(f"{metric}_gain_se")
    independent_se = math.hypot(se_before, se_after) if se_before is not None and se_after is not None else None
    gain_se = paired_se if paired_se is not None else independent_se
    return {f"{name}_before": before, f"{name}_after": after, f"{name}_before_se": se_before,
            f"{name}_after_se": se_after, f"{name}_gain": gain, f"{name}_gain_se": gain_se,
            f"{name}_gain_paired": paired_se is not None}  # fmt: skip


def _print_summary(display: RunDisplay, summary: dict[str, Any], k: int, val_tasks: int, run_dir: Path) -> None:
    """The before/after table (its title says what ± means), the validation gain and where plot and metrics went."""
    rows = [
        (f"validation mean reward ({val_tasks} held-out tasks)",
         interval(summary["val_before"], summary["val_before_se"]), interval(summary["val_after"], summary["val_after_se"])),
    ]  # fmt: skip
    if summary["val_success_before"] is not None:  # runs from before val/success was recorded have none
        rows.append((f"validation success (reward ≥ {SUCCESS_AT:g})",
                     interval(summary["val_success_before"], summary["val_success_before_se"]),
                     interval(summary["val_success_after"], summary["val_success_after_se"])))  # fmt: skip
    rows.append((f"train reward (mean of first/last {k} steps)",
                 interval(summary["train_reward_first"], None), interval(summary["train_reward_last"], None)))  # fmt: skip
    display.console.print(summary_table(rows, title=f"before / after ({INTERVAL})"))
    gain, gain_se = summary["val_gain"], summary["val_gain_se"]
    if gain is not None:
        within = "" if gain_se is None or math.isnan(gain_se) else f" ± {Z * gain_se:.3f}"
        paired = ", paired by task" if summary["val_gain_paired"] else ", unpaired"
        display.console.print(f"validation gain in mean reward: {gain:+.3f}{within} ({INTERVAL}{paired})")
    if summary["audits_decided"]:
        display.console.print(f"random audit: people rejected {summary['audit_rejected']:.1%} of the "
                              f"{summary['audits_decided']} decided audits of rollouts the gates had passed")  # fmt: skip
    if summary["plot"]:
        display.console.print(f"plot: {summary['plot']}")
    display.console.print(f"metrics: {run_dir / 'metrics.jsonl'}  tensorboard: {run_dir / 'tensorboard'}")
