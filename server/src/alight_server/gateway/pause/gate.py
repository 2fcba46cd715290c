"""Pause, drain and resume around weight updates: new calls wait outside, in-flight calls finish.

With several policies a pause can also cover one policy: its calls get the 429 once routed, the
other policies' calls run on, and that policy's drain waits only for its own calls in flight.
"""

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
    """Counts calls in flight (in all, and per routed policy) and refuses new ones while paused.

    A call leaves once its response is fully sent, so a pause never cuts a call that already started.
    """

    def __init__(self) -> None:
        self.paused = False
        self.in_flight = 0
        self.paused_since: float | None = None
        self.paused_total_s = 0.0
        self._idle = asyncio.Event()
        self._idle.set()
        self.in_flight_by_policy: dict[str, int] = {}
        self.policy_paused_since: dict[str, float] = {}  # the policies paused on their own, since when
        self._policy_idle: dict[str, asyncio.Event] = {}

    @property
    def paused_policies(self) -> list[str]:
        return sorted(self.policy_paused_since)

    def enter(self) -> bool:
        """Admit a call; False while paused."""
        if self.paused:
            return False
        self.in_flight += 1
        self._idle.clear()
        return True

    def enter_policy(self, policy: str) -> bool:
        """Count an admitted call as `policy`'s, once routed; False while that policy is paused."""
        if policy in self.policy_paused_since:
            return False
        self.in_flight_by_policy[policy] = self.in_flight_by_policy.get(policy, 0) + 1
        self._policy_event(policy).clear()
        return True

    def leave(self, policy: str | None = None) -> None:
        """The call's response is sent; `policy` is the one it entered with `enter_policy`, if any."""
        self.in_flight -= 1
        if self.in_flight <= 0:
            self.in_flight = 0
            self._idle.set()
        if policy is not None:
            left = max(self.in_flight_by_policy.get(policy, 0) - 1, 0)
            self.in_flight_by_policy[policy] = left
            if left == 0:
                self._policy_event(policy).set()

    def pause(self, policy: str | None = None) -> None:
        if policy is not None:
            self.policy_paused_since.setdefault(policy, time.monotonic())
        elif not self.paused:
            self.paused = True
            self.paused_since = time.monotonic()

    def resume(self, policy: str | None = None) -> float:
        """Open the gate (or `policy`'s); returns how long it was paused."""
        if policy is not None:
            since = self.policy_paused_since.pop(policy, None)
            return 0.0 if since is None else time.monotonic() - since
        if not self.paused or self.paused_since is None:
            return 0.0
        spent = time.monotonic() - self.paused_since
        self.paused_total_s += spent
        self.paused, self.paused_since = False, None
        return spent

    def paused_seconds(self) -> float:
        """Total time spent paused (the whole gateway), including the current pause."""
        current = time.monotonic() - self.paused_since if self.paused_since is not None else 0.0
        return self.paused_total_s + current

    def busy(self, policy: str | None = None) -> int:
        """Calls in flight: all of them, or `policy`'s."""
        return self.in_flight if policy is None else self.in_flight_by_policy.get(policy, 0)

    async def drain(self, timeout_s: float, policy: str | None = None) -> DrainResult:
        """Wait until no call (or none of `policy`'s) is in flight here, or `timeout_s` passes."""
        start, at_start = time.monotonic(), self.busy(policy)
        idle = self._idle if policy is None else self._policy_event(policy)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(idle.wait(), timeout_s)
        return DrainResult(
            drained=self.busy(policy) == 0, in_flight_at_start=at_start, waited_s=time.monotonic() - start
        )

    def _policy_event(self, policy: str) -> asyncio.Event:
        event = self._policy_idle.get(policy)
        if event is None:
            event = self._policy_idle[policy] = asyncio.Event()
            event.set()
        return event
