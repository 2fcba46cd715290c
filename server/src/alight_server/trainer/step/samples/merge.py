"""Merging one attempt's model calls into rows: extend while the prompt continues the row.

A row is a token sequence with the spans the model generated marked. Calls arrive in order; each is a retry of a
row's last call, extends a row, or starts a row (a new conversation or a break, `breaks.classify_break`): the
rule, exactly, in docs/samples.md, "The merge rule, exactly".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from alight.schemas import ModelCall
from alight_server.trainer.step.samples.breaks import Decode, classify_break, common_prefix_length, make_example
from alight_server.trainer.step.samples.report import BuildReport


@dataclass
class Segment:
    """One call's generated tokens inside a row."""

    # The recorded lists themselves, never copied: comparing Python lists is cheaper than converting every prompt
    # to an array, and only the rows' final tokens are converted (when padding).
    call: ModelCall
    prompt: list[int]  # (p,) the call's prompt ids
    response: list[int]  # (n,) ids the model produced
    logprobs: list[float]  # (n,) their recorded logprobs
    step_return: float  # step rewards of this call and every later call of the attempt

    @property
    def start(self) -> int:
        """Row index of the first response token: a merged row repeats each call's prompt."""
        return len(self.prompt)

    @property
    def end(self) -> int:
        return self.start + len(self.response)


@dataclass
class Row:
    """A training row under construction: the last call's prompt plus every merged call's response."""

    segments: list[Segment] = field(default_factory=list)
    # Answers to the same prompt as the last segment, replaced by a retry; one may still win.
    retried: list[Segment] = field(default_factory=list)

    @property
    def prompt(self) -> list[int]:
        """The last merged call's prompt: it contains every earlier turn of the row."""
        return self.segments[-1].prompt

    def ids(self) -> np.ndarray:
        last = self.segments[-1]
        return np.asarray(last.prompt + last.response, dtype=np.int64)  # (len,)

    def continuation(self, prompt: list[int]) -> Segment | None:
        """The row's last answer (or a retried alternative to it) that `prompt` continues exactly, if any."""
        for last in (self.segments[-1], *self.retried):
            n = len(last.prompt)
            if len(prompt) >= last.end and prompt[:n] == last.prompt and prompt[n : last.end] == last.response:
                return last
        return None


class AttemptRows:
    """Rows of one attempt, fed call by call (see the module docstring for the rule)."""

    def __init__(self, report: BuildReport, decode: Decode | None, max_break_examples: int) -> None:
        self.rows: list[Row] = []
        self._report = report
        self._decode = decode
        self._max_examples = max_break_examples

    def add(self, segment: Segment) -> None:
        call, prompt = segment.call, segment.prompt
        for row in reversed(self.rows):
            if len(row.prompt) == len(prompt) and row.prompt == prompt:
                row.retried.append(row.segments[-1])
                row.segments[-1] = segment
                self._report.dropped_calls["retried"] += 1
                return
        continued = [(row, last) for row in self.rows if (last := row.continuation(prompt)) is not None]
        if continued:
            row, last = max(continued, key=lambda pair: pair[1].end)
            row.segments[-1] = last  # the answer the agent carried on from; any other stays dropped
            row.segments.append(segment)
            row.retried.clear()
            return
        self._note_new_row(call, np.asarray(prompt, dtype=np.int64))
        self.rows.append(Row([segment]))

    def _note_new_row(self, call: ModelCall, prompt: np.ndarray) -> None:
        report = self._report
        if not self.rows:
            report.conversations += 1
            return
        shared = [(common_prefix_length(row.ids(), prompt), i) for i, row in enumerate(self.rows)]
        closest = self.rows[max(shared)[1]]
        previous, row_ids = closest.segments[-1].call, closest.ids()
        cause = classify_break(call, previous, row_ids, prompt, self._decode)
        if cause == "new_conversation":
            report.conversations += 1
            return
        report.breaks[cause] += 1
        if len(report.break_examples) < self._max_examples:
            report.break_examples.append(make_example(call, previous, cause, row_ids, prompt))
