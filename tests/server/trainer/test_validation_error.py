"""The validation score's standard error (tasks as clusters), the printed interval, and the plot's clipped band."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from alight.schemas import FailureKind, Mode, RolloutState, Trajectory
from alight_server.trainer.report.display import RunDisplay
from alight_server.trainer.report.plots import plot_run
from alight_server.trainer.report.summary import finish_run
from alight_server.trainer.run.rollouts import score_and_error


def trajectory(task: str, reward: float | None, failure: FailureKind | None = None) -> Trajectory:
    return Trajectory(
        rollout_id=f"{task}-{reward}-{failure}", attempt=1, group_id=task, mode=Mode.VAL,
        state=RolloutState.SUCCEEDED, attempt_status=None, failure_kind=failure, calls=[], rewards=[],
        final_reward=reward,
    )  # fmt: skip


def test_the_error_is_the_spread_of_task_means_over_the_square_root_of_tasks() -> None:
    runs = [trajectory("a", 1.0), trajectory("a", 1.0), trajectory("b", 0.0), trajectory("b", 1.0)]
    mean, error = score_and_error(runs)
    # task means 1.0 and 0.5: stdev 0.354, over sqrt(2) tasks
    assert mean == 0.75 and error == pytest.approx(math.sqrt(0.125) / math.sqrt(2))


def test_infra_failures_are_left_out_and_one_task_has_no_error() -> None:
    mean, error = score_and_error([trajectory("a", 1.0), trajectory("a", None, FailureKind.INFRA)])
    assert mean == 1.0 and math.isnan(error)


class _Log:
    def log_plot(self, path: Path, step: int) -> None:
        pass


def test_the_before_after_table_prints_the_interval_and_the_gain(tmp_path: Path) -> None:
    history: list[dict[str, Any]] = [
        {"step": 0, "val/score": 0.4, "val/score_se": 0.05},
        {
            "step": 1,
            "train/reward_mean": 0.5,
            "train/reward_std": 0.5,
            "train/reward_min": 0.0,
            "train/reward_max": 1.0,
        },
        {"step": 1, "val/score": 0.7, "val/score_se": 0.04},
    ]
    out = io.StringIO()
    display = RunDisplay(1, console=Console(file=out, width=200), enabled=False)
    finish_run(history, tmp_path, "tiny", 1, 1, 64, display, _Log())  # type: ignore[arg-type]
    text = out.getvalue()
    assert "0.400 ± 0.100" in text and "0.700 ± 0.080" in text
    assert f"validation gain in mean reward: +0.300 ± {2 * math.hypot(0.05, 0.04):.3f} (± 2 SE" in text
    assert "clustered by task, unpaired)" in text  # a history without the paired error (e.g. resumed since)


def test_the_gain_carries_the_paired_error_the_last_validation_recorded(tmp_path: Path) -> None:
    history: list[dict[str, Any]] = [
        {"step": 0, "val/score": 0.4, "val/score_se": 0.05},
        {"step": 1, "val/score": 0.7, "val/score_se": 0.04, "val/score_gain": 0.3, "val/score_gain_se": 0.02},
    ]
    out = io.StringIO()
    display = RunDisplay(1, console=Console(file=out, width=200), enabled=False)
    finish_run(history, tmp_path, "tiny", 1, 1, 64, display, _Log())  # type: ignore[arg-type]
    assert (
        "validation gain in mean reward: +0.300 ± 0.040 (± 2 SE: 95% interval, clustered by task, paired by task)"
        in out.getvalue()
    )
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert (summary["val_gain_se"], summary["val_gain_paired"]) == (0.02, True)


def test_the_summary_says_how_often_people_rejected_what_the_gates_passed(tmp_path: Path) -> None:
    history: list[dict[str, Any]] = [
        {"step": 1, "train/reward_mean": 0.5, "integrity/audits_decided": 3.0, "integrity/audit_rejected": 1 / 3},
        {"step": 2, "train/reward_mean": 0.5, "integrity/audits_decided": 8.0, "integrity/audit_rejected": 0.25},
    ]
    out = io.StringIO()
    display = RunDisplay(2, console=Console(file=out, width=200), enabled=False)
    result = finish_run(history, tmp_path, "tiny", 2, 2, 0, display, _Log())  # type: ignore[arg-type]
    assert "people rejected 25.0% of the 8 decided audits" in out.getvalue()
    summary = json.loads(result.summary_path.read_text())
    assert (summary["audits_decided"], summary["audit_rejected"]) == (8, 0.25)


def test_the_plots_band_stays_inside_the_rewards_seen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib.axes

    bands: list[tuple[list[float], list[float]]] = []
    original = matplotlib.axes.Axes.fill_between

    def recording(self: Any, x: Any, low: Any, high: Any, **kwargs: Any) -> Any:
        bands.append((list(low), list(high)))
        return original(self, x, low, high, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "fill_between", recording)
    history = [
        {"step": s, "train/reward_mean": m, "train/reward_std": 0.5, "train/reward_min": 0.0, "train/reward_max": 1.0}
        for s, m in ((1, 0.25), (2, 0.75))
    ]
    plot_run(history, tmp_path / "p.png")
    ((low, high),) = bands
    assert low == [0.0, 0.25] and high == [0.75, 1.0]
