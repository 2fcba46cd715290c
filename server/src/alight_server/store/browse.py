"""Listing rollouts: one filter's SQL for the seq-cursor pages (API, controller), the dashboard's offset pages, and
the rollouts with given event kinds (the review queue)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, FromClause, Row, and_, func, select

from alight.api_models import RolloutFilter, RolloutQuery
from alight.schemas import Attempt, FailureKind, Mode, Rollout, RolloutState
from alight_server.store import rows, runner_env
from alight_server.store import tables as t
from alight_server.store.database import SqlDatabase

__all__ = ["RolloutFilter", "RolloutQuery", "SqlRolloutListing"]


def _matching(where: RolloutFilter) -> tuple[FromClause, ColumnElement[bool]]:
    """What to select rollouts from (joined to their latest attempt when that is filtered on), and the condition."""
    r, a = t.rollouts.c, t.attempts.c
    clauses: list[ColumnElement[bool]] = []
    if where.state:
        clauses.append(r.state.in_([RolloutState(s).value for s in where.state]))
    if where.mode is not None:
        clauses.append(r.mode == Mode(where.mode).value)
    if where.group_id is not None:
        clauses.append(r.group_id == where.group_id)
    if where.ids is not None:
        clauses.append(r.id.in_(list(where.ids)))
    if where.id_prefix:
        clauses.append(r.id.startswith(where.id_prefix, autoescape=True))
    source: FromClause = t.rollouts
    if where.failure_kind is not None:
        source = t.rollouts.join(t.attempts, and_(a.rollout_id == r.id, a.attempt == r.attempt_count))
        clauses.append(a.failure_kind == FailureKind(where.failure_kind).value)
    return source, and_(True, *clauses)


class SqlRolloutListing(SqlDatabase):
    def list_rollouts(self, query: RolloutQuery | None = None) -> list[Rollout]:
        query = query or RolloutQuery()
        source, condition = _matching(query)
        c = t.rollouts.c
        stmt = select(t.rollouts).select_from(source).where(condition, c.seq > query.since_seq)
        with self._read() as conn:
            return self._with_attempts(conn, conn.execute(stmt.order_by(c.seq).limit(query.limit)).all())

    def browse_rollouts(self, where: RolloutFilter, *, offset: int = 0, limit: int = 50) -> tuple[list[Rollout], int]:
        return self._page(*_matching(where), offset, limit)

    def rollouts_with_events(
        self, any_of: Sequence[str], *, none_of: Sequence[str] = (), offset: int = 0, limit: int = 100
    ) -> tuple[list[Rollout], int]:
        r, e = t.rollouts.c, t.events.c
        condition = r.id.in_(select(e.rollout_id).where(e.kind.in_(list(any_of))))
        if none_of:
            condition = and_(condition, r.id.not_in(select(e.rollout_id).where(e.kind.in_(list(none_of)))))
        return self._page(t.rollouts, condition, offset, limit)

    def _page(
        self, source: FromClause, condition: ColumnElement[bool], offset: int, limit: int
    ) -> tuple[list[Rollout], int]:
        """A page of the rollouts matching `condition` in creation order, and how many match in all."""
        with self._read() as conn:
            total = int(conn.execute(select(func.count()).select_from(source).where(condition)).scalar_one())
            stmt = select(t.rollouts).select_from(source).where(condition).order_by(t.rollouts.c.ordinal)
            return self._with_attempts(conn, conn.execute(stmt.offset(offset).limit(limit)).all()), total

    def _by_ids(self, conn: Connection, ids: Sequence[str], *, sealed: bool = False) -> dict[str, Rollout]:
        """The stored rollouts of these ids, however many (the store's own reads after a write)."""
        found = conn.execute(select(t.rollouts).where(t.rollouts.c.id.in_(list(ids)))).all() if ids else []
        return {r.id: r for r in self._with_attempts(conn, found, sealed=sealed)}

    def _with_attempts(self, conn: Connection, found: Sequence[Row[Any]], *, sealed: bool = False) -> list[Rollout]:
        """The rollouts of these rows with their attempts; runner env values masked, or (`sealed`, for a claim
        to open) as stored."""
        a = t.attempts.c
        attempts: dict[str, list[Attempt]] = {row.id: [] for row in found}
        if attempts:
            for row in conn.execute(select(t.attempts).where(a.rollout_id.in_(list(attempts))).order_by(a.attempt)):
                attempts[row.rollout_id].append(rows.from_row(Attempt, t.attempts, row, sealer=self.sealer))
        stored = [
            rows.from_row(Rollout, t.rollouts, row, sealer=self.sealer, attempts=attempts[row.id]) for row in found
        ]
        return stored if sealed else [runner_env.masked(r) for r in stored]
