"""How an ended attempt becomes the outcome reported to the server: succeeded, or failed as task|infra|timeout."""

from __future__ import annotations

import signal
from collections.abc import Callable, Collection

from alight import envvars
from alight.schemas import AttemptFinish, FailureKind
from alight_server.controller.base import RunPhase, RunStatus

MESSAGE_TAIL_CHARS = 2000  # of the agent's output, quoted in a task failure's message


def decide(
    status: RunStatus,
    handle: str,
    stopped: tuple[FailureKind, str] | None = None,
    log_tail: Callable[[int], str] = lambda _: "",
    withheld_env: Callable[[], Collection[str]] = list,
) -> AttemptFinish:
    """The outcome of an attempt that ended with `status`.

    `stopped` is (kind, why) when the controller itself killed it (timeout, shutdown): that reason outranks whatever
    exit code the kill produced. A task failure whose output names a variable of `withheld_env()` (set where the
    runner runs, not passed to the agent) says which setting to fix.
    """

    def failed(kind: FailureKind, message: str) -> AttemptFinish:
        return AttemptFinish(
            status="failed", failure_kind=kind, exit_code=status.exit_code, message=message, runner_handle=handle
        )

    if stopped is not None:
        return failed(*stopped)
    if status.phase in (RunPhase.FAILED_TO_START, RunPhase.LOST, RunPhase.KILLED):
        return failed(FailureKind.INFRA, status.message or f"attempt {handle} {status.phase}")
    if status.phase is RunPhase.DEADLINE:
        return failed(FailureKind.TIMEOUT, status.message or f"attempt {handle} ran past its deadline")
    if status.exit_code == 0:
        return AttemptFinish(status="succeeded", exit_code=0, runner_handle=handle)
    if status.exit_code == -signal.SIGKILL:
        # Not sent by the controller (that case is `stopped`): the kernel's out-of-memory killer,
        # most likely. The agent did nothing wrong, so it is retried rather than scored.
        return failed(
            FailureKind.INFRA, "the agent was killed by a SIGKILL the controller did not send (out of memory?)"
        )
    tail = log_tail(MESSAGE_TAIL_CHARS)[-MESSAGE_TAIL_CHARS:].strip()  # a runner that returns more is cut too
    hint = envvars.withheld_hint(tail, withheld_env()) if tail else None
    return failed(
        FailureKind.TASK,
        f"agent exited with code {status.exit_code}"
        + (f"; {hint}" if hint else "")
        + (f"; last output:\n{tail}" if tail else ""),
    )
