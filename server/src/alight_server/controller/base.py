"""The runner protocol: how the controller starts, watches and stops one attempt, wherever it runs.

A runner is the only part of the controller that knows where agents run (a local subprocess, a Kubernetes Job);
the reconcile loop (loop.py) speaks to it through the verbs of `Runner` and never holds anything a restart would
lose. Handles are a pure function of (runner name, rollout id, attempt), so a controller that reconciles twice, or
restarts between `start` and recording the handle, finds the same attempt again instead of starting a second copy.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Protocol

from alight.schemas import AttemptStart


class RunPhase(enum.StrEnum):
    RUNNING = "running"
    EXITED = "exited"  # the agent ended by itself (or after our kill); exit_code says how
    FAILED_TO_START = "failed_to_start"  # missing executable, bad cwd, image pull error: infra
    LOST = "lost"  # the runner can no longer see the attempt or its outcome: infra
    KILLED = "killed"  # the platform stopped it, not the agent (OOM kill, eviction, node lost): infra
    DEADLINE = "deadline"  # the platform's own deadline for the attempt passed (a Job's DeadlineExceeded): timeout


@dataclass(frozen=True)
class RunStatus:
    phase: RunPhase
    # Negative for "killed by signal -code", as subprocess reports it.
    exit_code: int | None = None
    message: str | None = None
    # Wall-clock start (time.time()), so an adopted attempt keeps its original deadline.
    started_at: float | None = None

    @property
    def ended(self) -> bool:
        return self.phase is not RunPhase.RUNNING


class SpawnError(Exception):
    """The runner could not start the attempt at all (an infra failure, retried as a new attempt)."""


class Runner(Protocol):
    """Starts and watches attempts. All methods are synchronous, quick, and safe to call twice.

    A new runner only has to implement these methods; for example one that runs nothing and reports success
    (`attempt_handle` is alight.schemas'):

        class NoopRunner:
            name = "noop"
            def handle_for(self, rollout_id, attempt): return attempt_handle(self.name, rollout_id, attempt)
            def start(self, start): return self.handle_for(start.rollout.id, start.attempt)
            def poll(self, handle): return RunStatus(RunPhase.EXITED, exit_code=0)
            def kill(self, handle, grace_s): pass
            def handles(self): return []
            def release(self, handle): pass
            def log_tail(self, handle, max_bytes): return ""
            def withheld_env(self, handle): return []
            def launched(self, handle): return None
    """

    @property
    def name(self) -> str:
        """Prefix of every handle this runner makes; a controller fails only handles with its own name."""
        ...

    def handle_for(self, rollout_id: str, attempt: int) -> str: ...

    def start(self, start: AttemptStart) -> str:
        """Start the attempt unless it already runs; return its handle. Raises SpawnError."""
        ...

    def poll(self, handle: str) -> RunStatus:
        """Where the attempt is now. Works for handles started by an earlier runner instance (adoption)."""
        ...

    def kill(self, handle: str, grace_s: float) -> None:
        """Ask the attempt to stop now and force it after grace_s; returns at once, poll sees the end."""
        ...

    def handles(self) -> list[str]:
        """Handles of attempts not yet released, including ones started before a restart."""
        ...

    def release(self, handle: str) -> None:
        """Forget a finished attempt's state; its captured log is kept."""
        ...

    def log_tail(self, handle: str, max_bytes: int) -> str:
        """The last max_bytes of the attempt's captured stdout+stderr ('' when there is none)."""
        ...

    def withheld_env(self, handle: str) -> list[str]:
        """Names set in the runner's own environment that the attempt's environment lacked (for the hint a
        failed attempt's message carries when its output names one); [] when the runner cannot tell."""
        ...

    def launched(self, handle: str) -> dict[str, Any] | None:
        """What the attempt ran, uploaded as its `image` event (the Kubernetes runner: each container's image and
        digest); None when there is nothing to record beyond the runner spec (a local process)."""
        ...
