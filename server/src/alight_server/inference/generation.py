"""What one generation request is and what it yields: its handle, token events, finished completions."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from alight_server.inference.sampling import SamplingParams


@dataclass
class TokenEvent:
    """One generated token of one choice, with the text it releases and, on the last one, why it stopped."""

    choice: int
    token_id: int
    logprob: float
    top_logprobs: list[tuple[int, float]]
    text: str
    finish_reason: str | None
    policy_version: int


@dataclass
class Completion:
    """A finished choice, assembled from its events (what `generate` returns)."""

    index: int
    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish_reason: str | None = None
    policy_version: int = 0


@dataclass(eq=False)  # identity: handles are kept in sets
class GenerationHandle:
    """A submitted request; `cancel()` retires its choices at the next step (a client went away)."""

    prompt_ids: list[int]
    params: SamplingParams
    max_tokens: int
    sink: Callable[[Any], object]
    row: str | None = None  # peft's adapter name for its rows (an engine with adapters), else None
    cancelled: bool = field(default=False, init=False)

    def cancel(self) -> None:
        self.cancelled = True

    def fail(self, error: BaseException) -> None:
        with suppress(Exception):  # its consumer may be gone; the engine's threads must survive
            self.sink(error)
