"""SqlStore: the Store protocol over SQLAlchemy Core, on SQLite (WAL) or PostgreSQL; rollouts and attempts here.

Every write runs in one transaction that commits before the method returns.
SQLite write transactions start with BEGIN IMMEDIATE (one writer at a time,
no lock upgrades mid-transaction); PostgreSQL claims use FOR UPDATE SKIP
LOCKED so concurrent controllers never start the same attempt twice.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

from sqlalchemy import Connection, func, select, update
from sqlalchemy.exc import IntegrityError

from alight.schemas import (
    TERMINAL_STATES,
    TRANSITIONS,
    Attempt,
    AttemptFinish,
    AttemptStatus,
    Mode,
    PolicyVersion,
    Rollout,
    RolloutCreate,
    RolloutState,
    Upstream,
    UpstreamCreate,
)
from alight_server.controller.base import attempt_handle
from alight_server.store import rows
from alight_server.store import tables as t
from alight_server.store.base import Conflict, NotFound
from alight_server.store.browse import SqlRolloutBrowse
from alight_server.store.gateway_pause import SqlGatewayReplicas
from alight_server.store.lifecycle import apply_finish, end_running_attempt
from alight_server.store.records import SqlRecords
from alight_server.store.runs import SqlRuns


class SqlStore(SqlRecords, SqlGatewayReplicas, SqlRuns, SqlRolloutBrowse):
    """The durable store at a SQLAlchemy URL (`sqlite:///path.db`, `postgresql+psycopg://...`)."""

    def _attempts(self, conn: Connection, rollout_ids: Sequence[str]) -> dict[str, list[Attempt]]:
        out: dict[str, list[Attempt]] = {rid: [] for rid in rollout_ids}
        if not rollout_ids:
            return out
        stmt = select(t.attempts).where(t.attempts.c.rollout_id.in_(rollout_ids)).order_by(t.attempts.c.attempt)
        for row in conn.execute(stmt):
            out[row.rollout_id].append(rows.attempt_from_row(row))
        return out

    def _load(self, conn: Connection, rollout_id: str) -> Rollout:
        row = self._rollout_row(conn, rollout_id)
        return rows.rollout_from_row(row, self._attempts(conn, [rollout_id])[rollout_id])

    def _touch(self, conn: Connection, rollout_id: str, **values: Any) -> None:
        """Apply a change to a rollout row and give it the next seq."""
        values.update(seq=self._bump(conn, "rollout_seq"), updated_at=rows.now())
        conn.execute(update(t.rollouts).where(t.rollouts.c.id == rollout_id).values(**values))

    # ---- rollouts

    def create_rollouts(self, items: Sequence[RolloutCreate]) -> list[Rollout]:
        for _ in range(3):
            try:
                return self._create_rollouts(items)
            except IntegrityError:
                # Another writer created one of these ids between our check and insert: the
                # retry sees it and applies the same-body rule.
                continue
        return self._create_rollouts(items)

    def _create_rollouts(self, items: Sequence[RolloutCreate]) -> list[Rollout]:
        ids = [item.id or uuid.uuid4().hex for item in items]
        hashes = [rows.body_hash(item) for item in items]
        with self._write() as conn:
            existing = {
                row.id: row.body_hash
                for row in conn.execute(select(t.rollouts.c.id, t.rollouts.c.body_hash).where(t.rollouts.c.id.in_(ids)))
            }
            policy = self.current_policy_version(conn)
            for i, (item, rid, digest) in enumerate(zip(items, ids, hashes, strict=True)):
                if rid in existing:
                    if existing[rid] != digest:
                        raise Conflict(
                            f"rollout {rid!r} (item {i}) already exists with a different body; "
                            "reuse an id only to retry the identical create, or choose a new id"
                        )
                    continue
                existing[rid] = digest
                ordinal = self._bump(conn, "rollout_ordinal")
                seq = self._bump(conn, "rollout_seq")
                conn.execute(t.rollouts.insert().values(rows.rollout_values(item, rid, policy, ordinal, seq)))
            stored = self._list(conn, ids=list(dict.fromkeys(ids)), limit=len(ids) + 1)
        by_id = {r.id: r for r in stored}
        return [by_id[rid] for rid in ids]

    def get_rollout(self, rollout_id: str) -> Rollout:
        with self._read() as conn:
            return self._load(conn, rollout_id)

    def list_rollouts(
        self,
        *,
        state: Sequence[RolloutState] | None = None,
        mode: Mode | None = None,
        group_id: str | None = None,
        ids: Sequence[str] | None = None,
        since_seq: int = 0,
        limit: int = 100,
    ) -> list[Rollout]:
        with self._read() as conn:
            return self._list(
                conn, state=state, mode=mode, group_id=group_id, ids=ids, since_seq=since_seq, limit=limit
            )

    def _list(
        self,
        conn: Connection,
        *,
        state: Sequence[RolloutState] | None = None,
        mode: Mode | None = None,
        group_id: str | None = None,
        ids: Sequence[str] | None = None,
        since_seq: int = 0,
        limit: int = 100,
    ) -> list[Rollout]:
        c = t.rollouts.c
        stmt = select(t.rollouts).where(c.seq > since_seq).order_by(c.seq).limit(limit)
        if state:
            stmt = stmt.where(c.state.in_([RolloutState(s).value for s in state]))
        if mode is not None:
            stmt = stmt.where(c.mode == Mode(mode).value)
        if group_id is not None:
            stmt = stmt.where(c.group_id == group_id)
        if ids is not None:
            stmt = stmt.where(c.id.in_(list(ids)))
        found = conn.execute(stmt).all()
        attempts = self._attempts(conn, [row.id for row in found])
        return [rows.rollout_from_row(row, attempts[row.id]) for row in found]

    def transition(self, rollout_id: str, to: RolloutState) -> Rollout:
        to = RolloutState(to)
        with self._write() as conn:
            row = self._rollout_row(conn, rollout_id, lock=True)
            current = RolloutState(row.state)
            if to == current:
                return self._load(conn, rollout_id)  # a retried move is a no-op, not a conflict
            if to not in TRANSITIONS[current]:
                allowed = ", ".join(sorted(TRANSITIONS[current])) or "none: it is final"
                raise Conflict(
                    f"rollout {rollout_id!r} cannot move from {current.value} to {to.value}; allowed: {allowed}"
                )
            if to in TERMINAL_STATES:
                end_running_attempt(conn, rollout_id, to)
            self._touch(conn, rollout_id, state=to.value, claimable=False)
            return self._load(conn, rollout_id)

    # ---- attempts

    def claim_attempts(
        self, limit: int, ids: Sequence[str] | None = None, runner: str | None = None
    ) -> list[tuple[Rollout, int]]:
        if limit <= 0:
            return []
        with self._write() as conn:
            c = t.rollouts.c
            stmt = select(c.id, c.state, c.attempt_count).where(c.claimable.is_(True))
            if ids is not None:
                stmt = stmt.where(c.id.in_(list(ids)))
            stmt = stmt.order_by(c.ordinal).limit(limit).with_for_update(skip_locked=True, key_share=True)
            claimed: list[tuple[str, int]] = []
            for row in conn.execute(stmt).all():
                current = RolloutState(row.state)
                if current != RolloutState.RUNNING and RolloutState.RUNNING not in TRANSITIONS[current]:
                    continue  # claimable is only ever set on queued/running rows; belt and braces
                attempt = row.attempt_count + 1
                conn.execute(
                    t.attempts.insert().values(
                        rollout_id=row.id,
                        attempt=attempt,
                        status=AttemptStatus.RUNNING.value,
                        started_at=rows.now(),
                        runner_handle=None if runner is None else attempt_handle(runner, row.id, attempt),
                    )
                )
                self._touch(conn, row.id, state=RolloutState.RUNNING.value, claimable=False, attempt_count=attempt)
                claimed.append((row.id, attempt))
            stored = {r.id: r for r in self._list(conn, ids=[rid for rid, _ in claimed], limit=len(claimed) + 1)}
        return [(stored[rid], attempt) for rid, attempt in claimed]

    def set_runner_handle(self, rollout_id: str, attempt: int, handle: str) -> Attempt:
        with self._write() as conn:
            self._rollout_row(conn, rollout_id, lock=True)
            a = t.attempts.c
            where = (a.rollout_id == rollout_id) & (a.attempt == attempt)
            if conn.execute(update(t.attempts).where(where).values(runner_handle=handle)).rowcount == 0:
                raise NotFound(f"rollout {rollout_id!r} has no attempt {attempt}")
            self._touch(conn, rollout_id)
            return rows.attempt_from_row(conn.execute(select(t.attempts).where(where)).one())

    def finish_attempt(self, rollout_id: str, attempt: int, finish: AttemptFinish) -> Rollout:
        with self._write() as conn:
            row = self._rollout_row(conn, rollout_id, lock=True)
            changes = apply_finish(conn, row, attempt, finish)
            if changes is not None:
                self._touch(conn, rollout_id, **changes)
            return self._load(conn, rollout_id)

    # ---- upstreams and policy versions

    def add_upstream(self, upstream: UpstreamCreate) -> Upstream:
        """Upsert: registering an id again replaces its url, model, key and policy version."""
        uid = upstream.id or uuid.uuid4().hex
        values = upstream.model_dump(exclude={"id"})
        with self._write() as conn:
            u = t.upstreams.c
            if conn.execute(update(t.upstreams).where(u.id == uid).values(**values)).rowcount == 0:
                conn.execute(t.upstreams.insert().values(id=uid, created_at=rows.now(), **values))
            return rows.upstream_from_row(conn.execute(select(t.upstreams).where(u.id == uid)).one())

    def remove_upstream(self, upstream_id: str) -> None:
        with self._write() as conn:
            if conn.execute(t.upstreams.delete().where(t.upstreams.c.id == upstream_id)).rowcount == 0:
                raise NotFound(f"no upstream with id {upstream_id!r}")

    def list_upstreams(self) -> list[Upstream]:
        with self._read() as conn:
            stmt = select(t.upstreams).order_by(t.upstreams.c.created_at, t.upstreams.c.id)
            return [rows.upstream_from_row(row) for row in conn.execute(stmt)]

    def current_policy_version(self, conn: Connection | None = None) -> int:
        with nullcontext(conn) if conn is not None else self._read() as c:
            return int(c.execute(select(func.coalesce(func.max(t.policy_versions.c.version), 0))).scalar_one())

    def list_policy_versions(self) -> list[PolicyVersion]:
        with self._read() as conn:
            stmt = select(t.policy_versions).order_by(t.policy_versions.c.version)
            return [rows.policy_version_from_row(row) for row in conn.execute(stmt)]

    def add_policy_version(self, metadata: dict[str, object] | None = None) -> PolicyVersion:
        with self._write() as conn:
            version = self._bump(conn, "policy_version")
            values = {"version": version, "metadata": rows.dumps(metadata or {}, "metadata"), "created_at": rows.now()}
            conn.execute(t.policy_versions.insert().values(**values))
            return rows.policy_version_from_row(
                conn.execute(select(t.policy_versions).where(t.policy_versions.c.version == version)).one()
            )
