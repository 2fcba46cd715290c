"""What a person reads at the end of a run: the plot's step axis, and the console's lines in a log file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from alight_server.trainer.report.plots import run_figure

HISTORY: list[dict[str, Any]] = [
    {"step": 0, "val/score": -0.4167, "val/score_se": 0.1425},
    *({"step": s, "train/reward_mean": 0.25 * s, "train/reward_std": 0.5, "perf/tokens_per_s": 1234.0,
       "time/rollouts_s": 1.0, "time/train_s": 2.0, "time/sync_s": 0.5} for s in (1, 2, 3)),
    {"step": 3, "val/score": 0.5833, "val/score_se": 0.1425},
]  # fmt: skip


@pytest.mark.parametrize("last_step", [1, 2, 3, 40])
def test_the_plots_step_axis_has_only_whole_step_ticks(last_step: int) -> None:
    history = [{"step": s, "train/reward_mean": 0.1 * s} for s in range(1, last_step + 1)]
    history += [{"step": 0, "val/score": 0.2}, {"step": last_step, "val/score": 0.5}]
    (ax,) = run_figure(history).axes
    low, high = ax.get_xlim()
    ticks = [t for t in ax.get_xticks() if low <= t <= high]
    assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks), ticks


# A run's console in a child whose stdout is a log file (not a terminal): one finished step's line, then the
# end-of-run summary with a validation of 1200 tasks, whose before/after table is wider than 80 columns.
RUN_CONSOLE = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from alight_server.trainer.report.display import RunDisplay
    from alight_server.trainer.report.summary import finish_run

    class NoTrackers:
        def log_plot(self, path, step):
            pass

    history = json.loads(sys.argv[2])
    with RunDisplay(3) as display:
        display.step_line(3, history[-2])
    finish_run(history, Path(sys.argv[1]), "tiny", 3, 3, 1200, display, NoTrackers())
""")


def _line(text: str, start: str) -> str:
    """The one line of `text` that holds `start`."""
    lines = [line for line in text.splitlines() if start in line]
    assert len(lines) == 1, f"{start!r} is on {len(lines)} lines of:\n{text}"
    return lines[0]


@pytest.mark.parametrize("columns", ["80", None], ids=["COLUMNS=80", "COLUMNS unset"])
def test_a_run_printed_into_a_log_file_keeps_every_column_of_the_before_after_table(
    tmp_path: Path, columns: str | None
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR", "TTY_COMPATIBLE")}
    if columns is not None:
        env["COLUMNS"] = columns
    log = tmp_path / "run.log"
    with log.open("w") as out:
        subprocess.run(
            [sys.executable, "-c", RUN_CONSOLE, str(tmp_path / "run"), json.dumps(HISTORY)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.PIPE, env=env, timeout=120, check=True,
        )  # fmt: skip
    text = log.read_text()
    assert "before" in (header := _line(text, " metric ")) and "after" in header, text
    assert "before / after (± 2 SE: 95% interval, clustered by task)" in text, text
    assert "-0.417 ± 0.285" in (val := _line(text, "validation mean reward (1200 held-out tasks)")), text
    assert "0.583 ± 0.285" in val, text
    first, last = "0.250", "0.750"  # one step each side (k = 1 of 3 steps)
    assert first in (train := _line(text, "train reward (mean of first/last 1 steps)")) and last in train, text
    assert "validation gain in mean reward: +1.000 ± 0.403 (± 2 SE" in text, text
    assert "time rollouts 1.0s train 2.0s sync 0.5s" in _line(text, "step   3  reward 0.750 sd 0.500"), text
