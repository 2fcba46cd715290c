"""Pause, drain and resume around weight updates: new calls wait outside, in-flight calls finish."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass


@dataclass
class DrainResult:
    drained: bool
    in_flight_at_start: int
    waited_s: float
    replicas: int = 1


class PauseGate:
    """Counts calls in flight and refuses new ones while paused.

    A call is admitted by `enter()` and leaves by `leave()` once its response
    is fully sent, so a pause never cuts a call that already started.
    One per gateway process; `Replicas` keeps the gates of all processes on
    one store in step.
    """

    def __init__(self) -> None:
        self.paused = False
        self.in_flight = 0
        self.paused_since: float | None = None
        self.paused_total_s = 0.0
        self._idle = asyncio.Event()
        self._idle.set()

    def enter(self) -> bool:
        """Admit a call; False while paused."""
        if self.paused:
            return False
        self.in_flight += 1
        self._idle.clear()
        return True

    def leave(self) -> None:
        self.in_flight -= 1
        if self.in_flight <= 0:
            self.in_flight = 0
            self._idle.set()

    def pause(self) -> None:
        if not self.paused:
            self.paused = True
            self.paused_since = time.monotonic()

    def resume(self) -> float:
        """Open the gate; returns how long it was paused."""
        if not self.paused or self.paused_since is None:
            return 0.0
        spent = time.monotonic() - self.paused_since
        self.paused_total_s += spent
        self.paused, self.paused_since = False, None
        return spent

    def paused_seconds(self) -> float:
        """Total time spent paused, including the current pause."""
        current = time.monotonic() - self.paused_since if self.paused_since is not None else 0.0
        return self.paused_total_s + current

    async def drain(self, timeout_s: float) -> DrainResult:
        start, at_start = time.monotonic(), self.in_flight
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        return DrainResult(drained=self.in_flight == 0, in_flight_at_start=at_start, waited_s=time.monotonic() - start)
