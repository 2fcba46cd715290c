"""The sample builder's account of what it kept, dropped, cut and why rows broke."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from alight_server.trainer.step.samples.breaks import BreakCause, BreakExample


@dataclass
class BuildReport:
    """Counts for one `build_samples` call. Every model call lands in exactly one place:
    `calls == calls_used + sum(dropped_calls.values())`."""

    mode: str
    trajectories: int = 0
    rollouts: int = 0  # rollouts in the batch (with a reward), including ones left without rows
    calls: int = 0  # model calls seen
    calls_used: int = 0  # calls with generated tokens in a row (a truncated row may keep part of one)
    rows: int = 0
    tokens: int = 0  # real (non-padding) tokens in the rows
    trained_tokens: int = 0  # tokens with loss mask 1
    # A row starts for each new conversation (the first call of an attempt, a
    # sub-agent's first call) and for each break: rows before limits = conversations + breaks.
    conversations: int = 0
    dropped_rollouts: Counter[str] = field(default_factory=Counter)  # reason -> trajectories
    dropped_calls: Counter[str] = field(default_factory=Counter)  # reason -> model calls
    dropped_rows: Counter[str] = field(default_factory=Counter)  # reason -> rows
    dropped_row_tokens: int = 0
    truncated_rows: int = 0
    truncated_tokens: int = 0  # tokens cut off the end of truncated rows
    truncated_trained_tokens: int = 0  # of those, generated tokens that would have had loss mask 1
    breaks: Counter[BreakCause] = field(default_factory=Counter)
    break_examples: list[BreakExample] = field(default_factory=list)

    @property
    def total_breaks(self) -> int:
        return sum(self.breaks.values())

    def metrics(self, prefix: str = "samples/") -> dict[str, float]:
        """Flat numbers for a metrics log: totals, then breaks and drops by cause."""
        flat = {
            "rows": self.rows,
            "tokens": self.tokens,
            "trained_tokens": self.trained_tokens,
            "calls": self.calls,
            "calls_used": self.calls_used,
            "conversations": self.conversations,
            "breaks": self.total_breaks,
            "truncated_rows": self.truncated_rows,
            "truncated_tokens": self.truncated_tokens,
            "dropped_row_tokens": self.dropped_row_tokens,
        }
        for name, counter in (
            ("breaks", self.breaks),
            ("dropped_rollouts", self.dropped_rollouts),
            ("dropped_calls", self.dropped_calls),
            ("dropped_rows", self.dropped_rows),
        ):
            flat.update({f"{name}/{reason}": count for reason, count in counter.items()})
        return {prefix + key: float(value) for key, value in flat.items()}

    def summary(self) -> str:
        """A few lines for a log or a progress display."""
        lines = [
            f"{self.mode}: {self.trajectories} trajectories -> {self.rows} rows, {self.tokens} tokens "
            f"({self.trained_tokens} trained), {self.calls_used}/{self.calls} calls used",
            f"rows started: {self.conversations} conversations + {self.total_breaks} breaks {dict(self.breaks)}",
        ]
        if self.dropped_rollouts:
            lines.append(f"dropped rollouts: {dict(self.dropped_rollouts)}")
        if self.dropped_calls:
            lines.append(f"dropped calls: {dict(self.dropped_calls)}")
        if self.dropped_rows or self.truncated_rows:
            lines.append(
                f"dropped rows: {dict(self.dropped_rows)} ({self.dropped_row_tokens} tokens); "
                f"truncated rows: {self.truncated_rows} ({self.truncated_tokens} tokens cut)"
            )
        lines.extend(
            f"  {e.cause} at {e.rollout_id}/{e.attempt} call {e.call_seq} (after call {e.previous_call_seq}), "
            f"token {e.position}: row {e.row_ids} vs prompt {e.prompt_ids}"
            for e in self.break_examples
        )
        return "\n".join(lines)
