"""The live console view of a run (rich): a step bar, the current phase, and one line per finished step.

In a pipe or a log file the bar stays still until the end, so a heartbeat line (trainer/report/heartbeat.py) says
where the run is instead. `alight eval` shows its rollouts through the same view.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from alight.commands.console import output_console
from alight_server.trainer.report.heartbeat import Heartbeat


class RunDisplay:
    """A bar of `total` `unit`s (steps of a run, rollouts of an evaluation) and the current phase."""

    def __init__(self, total: int, console: Console | None = None, enabled: bool = True, unit: str = "step") -> None:
        self.console = console or output_console()
        self.enabled = enabled
        # Where rich does not move the bar (not a terminal), a line every few seconds says what the bar would.
        self.heartbeat = Heartbeat(self.console) if enabled and not self.console.is_terminal else None
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn(f"[bold]{unit}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[status]}"),
            console=self.console,
            transient=False,
            disable=not enabled,
        )
        self.task = self.progress.add_task(unit, total=total, status="starting")

    def __enter__(self) -> RunDisplay:
        self.progress.start()
        if self.heartbeat is not None:
            self.heartbeat.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the bar (it stays as it ended) and the heartbeat; a second call does nothing."""
        if self.heartbeat is not None:
            self.heartbeat.stop()
        self.progress.stop()

    def status(self, text: str, completed: int | None = None) -> None:
        """What runs now, with its counts (`step 3 rollouts: 5/8 rollouts done, ...`); `completed` moves the bar."""
        if self.heartbeat is not None:
            self.heartbeat.status = text
        self.progress.update(self.task, status=text, completed=completed)  # None leaves the bar where it is

    def line(self, text: str) -> None:
        if self.enabled:
            self.progress.console.print(text)

    def step_line(self, step: int, m: dict[str, Any]) -> None:
        """The step's line, printed when its update ends (its validation, if any, prints its own line after)."""
        # step 1's rollouts ran beside the first validation, timed from there (trainer/run/loop.py says why)
        overlap = " (overlapped validation)" if m.get("time/overlapped_val_s") else ""
        parts = [
            f"step {step:>3}",
            # the rollouts' spread, not an interval: every ± alight prints is ± 2 SE (alight.evaluation INTERVAL)
            f"reward {m.get('train/reward_mean', float('nan')):.3f} sd {m.get('train/reward_std', float('nan')):.3f}",
            f"{m.get('perf/tokens_per_s', 0):.0f} tok/s{overlap}",
            f"failed {int(m.get('rollouts/failed', 0))}",
            f"skipped groups {int(m.get('train/uniform_groups', 0))}",
            f"time rollouts {m.get('time/rollouts_s', 0):.1f}s{overlap} train {m.get('time/train_s', 0):.1f}s "
            f"sync {m.get('time/sync_s', 0):.1f}s",
        ]
        self.line("  ".join(parts))

    def val_line(self, step: int, m: dict[str, Any]) -> None:
        """The validation's line at `step` (0: before training); nothing without a validation score."""
        if "val/score" in m:
            when = " (before training)" if step == 0 else ""
            self.line(f"step {step:>3}  [bold green]val {m['val/score']:.3f}[/]{when}")


def summary_table(rows: list[tuple[str, str, str]], title: str = "before / after") -> Table:
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("before", justify="right")
    table.add_column("after", justify="right")
    for name, before, after in rows:
        table.add_row(name, before, after)
    return table
