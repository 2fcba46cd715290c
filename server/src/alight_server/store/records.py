"""What a rollout accumulates in the SQL store: events, rewards, the gateway's model calls, OTLP spans."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, bindparam, func, select

from alight.schemas import Event, EventCreate, ModelCall, Reward, RewardCreate, SpanRecord
from alight_server.store import rows
from alight_server.store import tables as t
from alight_server.store.base import Conflict, NotFound
from alight_server.store.engine import SqlDatabase


class SqlRecords(SqlDatabase):
    """Append-mostly records keyed by rollout; each write is idempotent on its id."""

    def add_event(self, rollout_id: str, event: EventCreate) -> Event:
        values = {
            "rollout_id": rollout_id,
            "id": event.id or uuid.uuid4().hex,
            "attempt": event.attempt,
            "kind": event.kind,
            "payload": rows.dumps(event.payload, "payload"),
            "created_at": rows.now(),
        }
        stored = rows.event_from_row(self._insert_once(t.events, rollout_id, values))
        if (stored.attempt, stored.kind, stored.payload) != (event.attempt, event.kind, event.payload):
            raise Conflict(f"event {stored.id!r} of rollout {rollout_id!r} already exists with a different body")
        return stored

    def list_events(self, rollout_id: str, *, attempt: int | None = None, kind: str | None = None) -> list[Event]:
        with self._read() as conn:
            self._rollout_row(conn, rollout_id)
            stmt = select(t.events).where(t.events.c.rollout_id == rollout_id).order_by(t.events.c.pk)
            if attempt is not None:
                stmt = stmt.where(t.events.c.attempt == attempt)
            if kind is not None:
                stmt = stmt.where(t.events.c.kind == kind)
            return [rows.event_from_row(row) for row in conn.execute(stmt)]

    def add_reward(self, rollout_id: str, reward: RewardCreate) -> Reward:
        values = reward.model_dump(mode="json")
        values.update(rollout_id=rollout_id, id=reward.id or uuid.uuid4().hex, created_at=rows.now())
        stored = rows.reward_from_row(self._insert_once(t.rewards, rollout_id, values))
        fields = set(RewardCreate.model_fields) - {"id"}
        if stored.model_dump(include=fields) != reward.model_dump(include=fields):
            raise Conflict(f"reward {stored.id!r} of rollout {rollout_id!r} already exists with a different body")
        return stored

    def list_rewards(self, rollout_id: str, *, attempt: int | None = None) -> list[Reward]:
        with self._read() as conn:
            self._rollout_row(conn, rollout_id)
            stmt = select(t.rewards).where(t.rewards.c.rollout_id == rollout_id).order_by(t.rewards.c.pk)
            if attempt is not None:
                stmt = stmt.where(t.rewards.c.attempt == attempt)
            return [rows.reward_from_row(row) for row in conn.execute(stmt)]

    def _insert_once(self, table: Any, rollout_id: str, values: dict[str, Any]) -> Any:
        """Insert a (rollout_id, id)-keyed row unless it exists; return the stored row."""
        where = (table.c.rollout_id == rollout_id) & (table.c.id == values["id"])
        with self._write() as conn:
            self._rollout_row(conn, rollout_id)
            conn.execute(self._insert_ignore(table).values(**values))
            return conn.execute(select(table).where(where)).one()

    # ---- gateway captures

    def add_model_call(self, call: ModelCall) -> ModelCall:
        """The gateway's hot path: prebuilt statements with bound parameters, four round trips."""
        with self._write() as conn:
            return self._add_call(conn, call)

    def add_model_calls(self, calls: Sequence[ModelCall]) -> list[ModelCall]:
        """Group commit in four statements whatever the group's size: lock, known ids, last seqs, insert."""
        if len(calls) <= 1:
            return [self.add_model_call(c) for c in calls]
        with self._write() as conn:
            # Rollout row locks serialise writers per rollout (seq stays gap-free and unique);
            # taking them in id order keeps concurrent batches on PostgreSQL from deadlocking.
            wanted = sorted({c.rollout_id for c in calls})
            locked = set(conn.execute(_LOCK_ROLLOUTS, {"ids": wanted}).scalars())
            if missing := [rid for rid in wanted if rid not in locked]:
                raise NotFound(f"no rollout with id {missing[0]!r}")
            ids = list({c.id for c in calls})
            stored = {row.id: rows.model_call_from_row(row) for row in conn.execute(_STORED_CALLS, {"ids": ids})}
            next_seq = {(r, a): last + 1 for r, a, last in conn.execute(_LAST_SEQS, {"ids": wanted})}
            values: list[dict[str, Any]] = []
            out: list[ModelCall] = []
            for call in calls:
                if call.id not in stored:  # a retried id (here or earlier) returns the stored call
                    key = (call.rollout_id, call.attempt)
                    seq = next_seq.get(key, 0)
                    next_seq[key] = seq + 1
                    values.append(rows.model_call_values(call, seq))
                    stored[call.id] = call.model_copy(update={"seq": seq})
                out.append(stored[call.id])
            if values:
                conn.execute(_INSERT_CALL, values)
        return out

    def _add_call(self, conn: Connection, call: ModelCall) -> ModelCall:
        params = {"rollout_id": call.rollout_id, "attempt": call.attempt, "id": call.id}
        # The rollout row lock serialises calls of one rollout, so seq is gap-free and unique.
        if conn.execute(_LOCK_ROLLOUT, params).first() is None:
            raise NotFound(f"no rollout with id {call.rollout_id!r}")
        if conn.execute(_CALL_EXISTS, params).first() is not None:
            existing = conn.execute(select(t.model_calls).where(t.model_calls.c.id == call.id)).one()
            return rows.model_call_from_row(existing)
        last = conn.execute(_LAST_CALL_SEQ, params).scalar()
        seq = 0 if last is None else last + 1
        conn.execute(_INSERT_CALL, rows.model_call_values(call, seq))
        return call.model_copy(update={"seq": seq})

    def list_model_calls(self, rollout_id: str, attempt: int | None = None) -> list[ModelCall]:
        with self._read() as conn:
            m = t.model_calls.c
            stmt = select(t.model_calls).where(m.rollout_id == rollout_id).order_by(m.attempt, m.seq)
            if attempt is not None:
                stmt = stmt.where(m.attempt == attempt)
            return [rows.model_call_from_row(row) for row in conn.execute(stmt)]

    # ---- OTLP spans

    def add_spans(self, spans: Sequence[SpanRecord]) -> int:
        if not spans:
            return 0
        with self._write() as conn:
            wanted = sorted({s.rollout_id for s in spans})
            known = set(conn.execute(select(t.rollouts.c.id).where(t.rollouts.c.id.in_(wanted))).scalars())
            if missing := [rid for rid in wanted if rid not in known]:
                raise NotFound(f"spans name unknown rollout ids {missing}")
            stmt = self._insert_ignore(t.spans).returning(t.spans.c.span_id)
            return len(conn.execute(stmt, [rows.span_values(span) for span in spans]).all())

    def list_spans(self, rollout_id: str, attempt: int | None = None) -> list[SpanRecord]:
        with self._read() as conn:
            s = t.spans.c
            stmt = select(t.spans).where(s.rollout_id == rollout_id).order_by(s.attempt, s.start_time_ns, s.span_id)
            if attempt is not None:
                stmt = stmt.where(s.attempt == attempt)
            return [rows.span_from_row(row) for row in conn.execute(stmt)]


_LOCK_ROLLOUT = (
    select(t.rollouts.c.id).where(t.rollouts.c.id == bindparam("rollout_id")).with_for_update(key_share=True)
)
_LOCK_ROLLOUTS = (
    select(t.rollouts.c.id)
    .where(t.rollouts.c.id.in_(bindparam("ids", expanding=True)))
    .order_by(t.rollouts.c.id)
    .with_for_update(key_share=True)
)
_LAST_SEQS = (
    select(t.model_calls.c.rollout_id, t.model_calls.c.attempt, func.max(t.model_calls.c.seq))
    .where(t.model_calls.c.rollout_id.in_(bindparam("ids", expanding=True)))
    .group_by(t.model_calls.c.rollout_id, t.model_calls.c.attempt)
)
_CALL_EXISTS = select(t.model_calls.c.id).where(t.model_calls.c.id == bindparam("id"))
_LAST_CALL_SEQ = select(func.max(t.model_calls.c.seq)).where(
    (t.model_calls.c.rollout_id == bindparam("rollout_id")) & (t.model_calls.c.attempt == bindparam("attempt"))
)
_INSERT_CALL = t.model_calls.insert()
_STORED_CALLS = select(t.model_calls).where(t.model_calls.c.id.in_(bindparam("ids", expanding=True)))
