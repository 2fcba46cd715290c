"""How rollouts move: the one check of the state machine (TRANSITIONS), and an attempt's end with its retry rules."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Row, select, update

from alight.schemas import TRANSITIONS, AttemptFinish, AttemptStatus, FailureKind, RolloutState
from alight_server.store import rows
from alight_server.store import tables as t
from alight_server.store.base import Conflict, NotFound
from alight_server.store.keys.sealing import CellSealer

# Infra and timeout failures say nothing about the policy: retry them as new attempts.
RETRYABLE = frozenset({FailureKind.INFRA, FailureKind.TIMEOUT})


def check_transition(rollout_id: str, current: RolloutState, to: RolloutState, cause: str = "") -> bool:
    """Whether the rollout moves (False: it is already there, so a retried move is a no-op).

    Conflict, naming the moves allowed, when TRANSITIONS forbids it. `cause` says who asked
    ("an attempt finishing"), for the message.
    """
    if to == current:
        return False
    if to not in TRANSITIONS[current]:
        allowed = ", ".join(sorted(TRANSITIONS[current])) or "none: it is final"
        by = f" by {cause}" if cause else ""
        raise Conflict(f"rollout {rollout_id!r} cannot move from {current.value} to {to.value}{by}; allowed: {allowed}")
    return True


def end_running_attempt(conn: Connection, rollout_id: str, to: RolloutState, sealer: CellSealer) -> None:
    """A rollout moved to a final state by hand: close its running attempt to match."""
    a = t.attempts.c
    status = AttemptStatus.SUCCEEDED if to == RolloutState.SUCCEEDED else AttemptStatus.FAILED
    where = (a.rollout_id == rollout_id) & (a.status == AttemptStatus.RUNNING.value)
    for attempt in conn.execute(select(a.attempt).where(where)).scalars().all():
        message = f"rollout moved to {to.value} while this attempt ran"
        values = {"status": status.value, "message": message, "ended_at": rows.now(), "ended_by_transition": True}
        values = sealer.seal_row(t.attempts, values, (rollout_id, attempt))
        conn.execute(update(t.attempts).where((a.rollout_id == rollout_id) & (a.attempt == attempt)).values(**values))


def apply_finish(
    conn: Connection, rollout: Row[Any], attempt: int, finish: AttemptFinish, sealer: CellSealer
) -> dict[str, Any] | None:
    """Record the attempt's end; return the rollout columns to change, or None for a no-op."""
    a = t.attempts.c
    where = (a.rollout_id == rollout.id) & (a.attempt == attempt)
    row = conn.execute(select(t.attempts).where(where)).first()
    if row is None:
        raise NotFound(f"rollout {rollout.id!r} has no attempt {attempt}")
    status = AttemptStatus(finish.status)
    kind = None if status == AttemptStatus.SUCCEEDED else (finish.failure_kind or FailureKind.TASK)
    if row.status != AttemptStatus.RUNNING.value:
        if row.ended_by_transition or (row.status, row.failure_kind) == (status.value, kind and kind.value):
            return None  # the runner reporting after a cancel, or a retried report
        raise Conflict(
            f"attempt {attempt} of rollout {rollout.id!r} already finished as {row.status}"
            f"{f'/{row.failure_kind}' if row.failure_kind else ''}; cannot finish it again as "
            f"{status.value}{f'/{kind.value}' if kind else ''}"
        )
    current = RolloutState(rollout.state)
    retry = kind in RETRYABLE and attempt == rollout.attempt_count and rollout.attempt_count < rollout.max_attempts
    target = RolloutState.RUNNING if retry else (RolloutState.SUCCEEDED if kind is None else RolloutState.FAILED)
    check_transition(rollout.id, current, target, "an attempt finishing")
    values: dict[str, Any] = {
        "status": status.value,
        "failure_kind": kind.value if kind else None,
        "exit_code": finish.exit_code,
        "message": finish.message,
        "ended_at": rows.now(),
    }
    if finish.runner_handle is not None:
        values["runner_handle"] = finish.runner_handle
    conn.execute(update(t.attempts).where(where).values(**sealer.seal_row(t.attempts, values, (rollout.id, attempt))))
    return {"state": target.value, "claimable": retry}
