"""SqlStore: the Store protocol over SQLAlchemy Core, on SQLite (WAL) or PostgreSQL; rollouts and attempts here."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, select, update
from sqlalchemy.exc import IntegrityError

from alight.schemas import (
    TERMINAL_STATES,
    Attempt,
    AttemptFinish,
    AttemptStatus,
    FailureKind,
    PolicyVersion,
    Rollout,
    RolloutCreate,
    RolloutState,
    Upstream,
    UpstreamCreate,
    attempt_handle,
)
from alight_server.store import rows, runner_env
from alight_server.store import tables as t
from alight_server.store.base import Conflict, NotFound, SealError
from alight_server.store.browse import SqlRolloutListing
from alight_server.store.gateway_pause import SqlGatewayReplicas
from alight_server.store.keys import upstream as upstream_keys
from alight_server.store.lifecycle import apply_finish, check_transition, end_running_attempt
from alight_server.store.offline import SqlOfflineRollouts
from alight_server.store.records import SqlRecords
from alight_server.store.retention import SqlRetention
from alight_server.store.runner_env import RunnerEnvError
from alight_server.store.runs import SqlRuns


class SqlStore(SqlRecords, SqlGatewayReplicas, SqlRuns, SqlOfflineRollouts, SqlRolloutListing, SqlRetention):
    """The durable store at a SQLAlchemy URL (`sqlite:///path.db`, `postgresql+psycopg://...`)."""

    def _load(self, conn: Connection, rollout_id: str) -> Rollout:
        return self._with_attempts(conn, [self._rollout_row(conn, rollout_id)])[0]

    def _touch(self, conn: Connection, rollout_id: str, **values: Any) -> None:
        """Apply a change to a rollout row and give it the next seq."""
        values.update(seq=self._bump(conn, "rollout_seq"), updated_at=rows.now())
        conn.execute(update(t.rollouts).where(t.rollouts.c.id == rollout_id).values(**values))

    def create_rollouts(self, items: Sequence[RolloutCreate]) -> list[Rollout]:
        for _ in range(3):
            # IntegrityError: another writer created one of these ids between our check and insert; the retry
            # sees it and applies the same-body rule.
            with contextlib.suppress(IntegrityError):
                return self._create_rollouts(items)
        return self._create_rollouts(items)

    def _create_rollouts(self, items: Sequence[RolloutCreate]) -> list[Rollout]:
        ids = [item.id or uuid.uuid4().hex for item in items]
        hashes = [rows.body_hash(runner_env.without_values(item)) for item in items]
        with self._write() as conn:
            c = t.rollouts.c
            existing = {
                row.id: (row.body_hash, row.runner)
                for row in conn.execute(select(c.id, c.body_hash, c.runner).where(c.id.in_(ids)))
            }
            policy, now = self.current_policy_version(conn), rows.now()
            for i, (item, rid, digest) in enumerate(zip(items, ids, hashes, strict=True)):
                if rid in existing:
                    stored_digest, stored_runner = existing[rid]
                    try:
                        same = stored_digest == digest and self._runner_env.same_values(rid, stored_runner, item.runner)
                    except RunnerEnvError as exc:  # not known to differ: the stored values cannot be opened here
                        raise Conflict(
                            f"item {i} retries a create this server cannot compare with the stored one: {exc}"
                        ) from None
                    if not same:
                        raise Conflict(
                            f"rollout {rid!r} (item {i}) already exists with a different body; "
                            "reuse an id only to retry the identical create, or choose a new id"
                        )
                    continue
                sealed = self._runner_env.sealed(item.runner)
                existing[rid] = (digest, None if sealed is None else rows.dumps(sealed))
                self._insert_rollout(
                    conn,
                    item,
                    now,
                    id=rid,
                    body_hash=digest,
                    policy_version=policy,
                    runner=sealed,
                    state=RolloutState.QUEUED,
                    claimable=True,
                    attempt_count=0,
                )
            by_id = self._by_ids(conn, list(dict.fromkeys(ids)))
        return [by_id[rid] for rid in ids]

    def get_rollout(self, rollout_id: str) -> Rollout:
        with self._read() as conn:
            return self._load(conn, rollout_id)

    def transition(self, rollout_id: str, to: RolloutState) -> Rollout:
        to = RolloutState(to)
        with self._write() as conn:
            row = self._rollout_row(conn, rollout_id, lock=True)
            if check_transition(rollout_id, RolloutState(row.state), to):  # else a retried move: a no-op
                if to in TERMINAL_STATES:
                    end_running_attempt(conn, rollout_id, to, self.sealer)
                self._touch(conn, rollout_id, state=to.value, claimable=False)
            return self._load(conn, rollout_id)

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
            # PostgreSQL: SKIP LOCKED, so concurrent controllers never start the same attempt twice.
            stmt = stmt.order_by(c.ordinal).limit(limit).with_for_update(skip_locked=True, key_share=True)
            claimed: list[tuple[str, int]] = []
            for row in conn.execute(stmt).all():
                try:
                    check_transition(row.id, RolloutState(row.state), RolloutState.RUNNING)
                except Conflict:
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
            try:
                stored = self._by_ids(conn, [rid for rid, _ in claimed], sealed=True)
            except SealError:  # a rollout whose content does not open: each is read on its own below
                stored = {}
            started: list[tuple[Rollout, int]] = []
            for rid, attempt in claimed:
                try:
                    rollout = stored[rid] if rid in stored else self._by_ids(conn, [rid], sealed=True)[rid]
                    # The controller that starts the attempt is the one reader of the values themselves.
                    started.append((self._runner_env.opened(rollout), attempt))
                except (RunnerEnvError, SealError) as exc:
                    # Retrying would not open it either: the attempt fails as infra at once, saying why (the other
                    # rollouts of the claim start as usual).
                    finish = AttemptFinish(status="failed", failure_kind=FailureKind.INFRA, message=str(exc))
                    changes = apply_finish(conn, self._rollout_row(conn, rid, lock=True), attempt, finish, self.sealer)
                    if changes is not None:
                        self._touch(conn, rid, **changes)
        return started

    def set_runner_handle(self, rollout_id: str, attempt: int, handle: str) -> Attempt:
        with self._write() as conn:
            self._rollout_row(conn, rollout_id, lock=True)
            a = t.attempts.c
            where = (a.rollout_id == rollout_id) & (a.attempt == attempt)
            if conn.execute(update(t.attempts).where(where).values(runner_handle=handle)).rowcount == 0:
                raise NotFound(f"rollout {rollout_id!r} has no attempt {attempt}")
            self._touch(conn, rollout_id)
            row = conn.execute(select(t.attempts).where(where)).one()
            return rows.from_row(Attempt, t.attempts, row, sealer=self.sealer)

    def finish_attempt(self, rollout_id: str, attempt: int, finish: AttemptFinish) -> Rollout:
        with self._write() as conn:
            row = self._rollout_row(conn, rollout_id, lock=True)
            changes = apply_finish(conn, row, attempt, finish, self.sealer)
            if changes is not None:
                self._touch(conn, rollout_id, **changes)
            return self._load(conn, rollout_id)

    def add_upstream(self, upstream: UpstreamCreate) -> Upstream:
        """Upsert: registering an id again replaces its url, model, key and policy version."""
        uid = upstream.id or uuid.uuid4().hex
        values = upstream.model_dump(exclude={"id", "api_key"})
        # Never plain text at rest: sealed here, so no caller of the store can skip it.
        values["api_key_sealed"] = upstream_keys.seal(upstream.api_key) if upstream.api_key is not None else None
        with self._write() as conn:
            u = t.upstreams.c
            if conn.execute(update(t.upstreams).where(u.id == uid).values(**values)).rowcount == 0:
                conn.execute(t.upstreams.insert().values(id=uid, created_at=rows.now(), **values))
            return _upstream(conn.execute(select(t.upstreams).where(u.id == uid)).one())

    def remove_upstream(self, upstream_id: str) -> None:
        with self._write() as conn:
            if conn.execute(t.upstreams.delete().where(t.upstreams.c.id == upstream_id)).rowcount == 0:
                raise NotFound(f"no upstream with id {upstream_id!r}")

    def list_upstreams(self) -> list[Upstream]:
        with self._read() as conn:
            stmt = select(t.upstreams).order_by(t.upstreams.c.created_at, t.upstreams.c.id)
            return [_upstream(row) for row in conn.execute(stmt)]

    def list_policy_versions(self) -> list[PolicyVersion]:
        with self._read() as conn:
            stmt = select(t.policy_versions).order_by(t.policy_versions.c.version)
            return [rows.from_row(PolicyVersion, t.policy_versions, row) for row in conn.execute(stmt)]

    def add_policy_version(self, metadata: dict[str, object] | None = None) -> PolicyVersion:
        with self._write() as conn:
            version = self._bump(conn, "policy_version")
            values = rows.values(t.policy_versions, version=version, metadata=metadata or {}, created_at=rows.now())
            conn.execute(t.policy_versions.insert().values(**values))
        return rows.from_row(PolicyVersion, t.policy_versions, values)


def _upstream(row: Any) -> Upstream:
    return rows.from_row(Upstream, t.upstreams, row, api_key_encrypted=row.api_key_sealed is not None)
