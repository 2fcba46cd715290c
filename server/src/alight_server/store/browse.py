"""The dashboard's rollout browsing: filtered, counted, offset-paged listing in creation order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import and_, func, select

from alight.schemas import FailureKind, Mode, Rollout, RolloutState
from alight_server.store import rows
from alight_server.store import tables as t
from alight_server.store.database import SqlDatabase


@dataclass(frozen=True)
class RolloutFilter:
    """Every field narrows the listing; None matches all."""

    state: Sequence[RolloutState] | None = None
    mode: Mode | None = None
    group_id: str | None = None
    id_prefix: str | None = None  # a training run's rollouts share `<run id>-` (trainer/rollouts.py names them)
    failure_kind: FailureKind | None = None  # of the latest attempt


class SqlRolloutBrowse(SqlDatabase):
    def browse_rollouts(self, where: RolloutFilter, *, offset: int = 0, limit: int = 50) -> tuple[list[Rollout], int]:
        """One page of matching rollouts in creation order (a group's members are adjacent), and the total."""
        r, a = t.rollouts.c, t.attempts.c
        clauses = []
        if where.state:
            clauses.append(r.state.in_([RolloutState(s).value for s in where.state]))
        if where.mode is not None:
            clauses.append(r.mode == Mode(where.mode).value)
        if where.group_id is not None:
            clauses.append(r.group_id == where.group_id)
        if where.id_prefix:
            escaped = where.id_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            clauses.append(r.id.like(escaped + "%", escape="\\"))
        source = t.rollouts
        if where.failure_kind is not None:
            latest = and_(a.rollout_id == r.id, a.attempt == r.attempt_count)
            source = t.rollouts.join(t.attempts, latest)
            clauses.append(a.failure_kind == FailureKind(where.failure_kind).value)
        condition = and_(True, *clauses)
        with self._read() as conn:
            total = int(conn.execute(select(func.count()).select_from(source).where(condition)).scalar_one())
            stmt = select(t.rollouts).select_from(source).where(condition).order_by(r.ordinal)
            found = conn.execute(stmt.offset(offset).limit(limit)).all()
            ids = [row.id for row in found]
            attempts: dict[str, list] = {rid: [] for rid in ids}
            if ids:
                for row in conn.execute(select(t.attempts).where(a.rollout_id.in_(ids)).order_by(a.attempt)):
                    attempts[row.rollout_id].append(rows.attempt_from_row(row))
        return [rows.rollout_from_row(row, attempts[row.id]) for row in found], total
