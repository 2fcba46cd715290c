"""The live console view of a run (rich): a step bar, the current phase, and one line per finished step."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from alight.commands.console import output_console


class RunDisplay:
    def __init__(self, total_steps: int, console: Console | None = None, enabled: bool = True) -> None:
        self.console = console or output_console()
        self.enabled = enabled
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]step"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[status]}"),
            console=self.console,
            transient=False,
            disable=not enabled,
        )
        self.task = self.progress.add_task("train", total=total_steps, status="starting")

    def __enter__(self) -> RunDisplay:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def status(self, text: str, completed: int | None = None) -> None:
        if completed is None:
            self.progress.update(self.task, status=text)
        else:
            self.progress.update(self.task, status=text, completed=completed)

    def line(self, text: str) -> None:
        if self.enabled:
            self.progress.console.print(text)

    def step_line(self, step: int, m: dict[str, Any]) -> None:
        parts = [
            f"step {step:>3}",
            # the rollouts' spread, not an interval: every ± alight prints is ± 2 SE (alight.evaluation INTERVAL)
            f"reward {m.get('train/reward_mean', float('nan')):.3f} sd {m.get('train/reward_std', float('nan')):.3f}",
        ]
        if "val/score" in m:
            parts.append(f"[bold green]val {m['val/score']:.3f}[/]")
        parts += [
            f"{m.get('perf/tokens_per_s', 0):.0f} tok/s",
            f"failed {int(m.get('rollouts/failed', 0))}",
            f"skipped groups {int(m.get('train/uniform_groups', 0))}",
            f"time rollouts {m.get('time/rollouts_s', 0):.1f}s train {m.get('time/train_s', 0):.1f}s "
            f"sync {m.get('time/sync_s', 0):.1f}s",
        ]
        self.line("  ".join(parts))


def summary_table(rows: list[tuple[str, str, str]], title: str = "before / after") -> Table:
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("before", justify="right")
    table.add_column("after", justify="right")
    for name, before, after in rows:
        table.add_row(name, before, after)
    return table
