"""What a rollout accumulates in the SQL store: events, rewards, the gateway's model calls, OTLP spans."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import Any

from sqlalchemy import ColumnElement, DateTime, Dialect, Table, select, true

from alight.schemas import AttemptStatus, Event, EventCreate, ModelCall, Reward, RewardCreate, SpanRecord
from alight_server.store import rows
from alight_server.store import tables as t
from alight_server.store.base import AttemptEnded, Conflict, NotFound
from alight_server.store.database import SqlDatabase
from alight_server.store.keys.sealing import CellSealer


class CaptureSql:
    """The capture path's statements as driver SQL for one dialect, and rows as the driver takes them (content
    sealed by the store's sealer, in the thread that builds the row)."""

    def __init__(self, dialect: Dialect) -> None:
        self._mark = "?" if dialect.paramstyle == "qmark" else "%s"
        # FOR NO KEY UPDATE serialises writers of a rollout without blocking foreign-key checks (PostgreSQL).
        self._lock = " FOR NO KEY UPDATE" if dialect.name == "postgresql" else ""
        columns = list(t.model_calls.columns)
        self.names = [c.name for c in columns]
        self.insert_call = f"INSERT INTO model_calls ({', '.join(self.names)}) VALUES ({self._marks(len(columns))})"
        # What SQLAlchemy would do to each value on the way in and out (datetimes as SQLite text, for one).
        self._processors: list[tuple[int, Callable[[Any], Any]]] = [
            (i, proc) for i, c in enumerate(columns) if (proc := c.type.dialect_impl(dialect).bind_processor(dialect))
        ]
        # Out, only timestamps differ from what the driver hands back (SQLite keeps them as text).
        self._result_processors: list[tuple[int, Callable[[Any], Any]]] = [
            (i, proc)
            for i, c in enumerate(columns)
            if isinstance(c.type, DateTime) and (proc := c.type.dialect_impl(dialect).result_processor(dialect, None))
        ]

    def _marks(self, n: int) -> str:
        return ", ".join([self._mark] * n)

    def lock_rollouts(self, n: int) -> str:
        return f"SELECT id FROM rollouts WHERE id IN ({self._marks(n)}) ORDER BY id{self._lock}"

    def known_ids(self, n: int) -> str:
        return f"SELECT id FROM model_calls WHERE id IN ({self._marks(n)})"

    def stored_calls(self, n: int) -> str:
        return f"SELECT {', '.join(self.names)} FROM model_calls WHERE id IN ({self._marks(n)})"

    def last_seqs(self, n: int) -> str:
        """The last seq of each of `n` (rollout_id, attempt) pairs (NULL for an attempt with no call yet).

        One index seek per pair: a GROUP BY over the rollouts' calls would read every call
        stored so far, which made each commit slower as an attempt's calls accumulated.
        """
        pairs = ", ".join([f"({self._mark}, {self._mark})"] * n)
        return (
            f"WITH k(rollout_id, attempt) AS (VALUES {pairs}) SELECT k.rollout_id, k.attempt, "
            "(SELECT MAX(m.seq) FROM model_calls m WHERE m.rollout_id = k.rollout_id AND m.attempt = k.attempt) "
            "FROM k"
        )

    def row(self, values: dict[str, Any]) -> tuple[Any, ...]:
        """The driver's parameters for an insert of `values` (a row from rows.values, content already sealed)."""
        row = [values[name] for name in self.names]
        for i, proc in self._processors:
            row[i] = proc(row[i])
        return tuple(row)

    def stored(self, row: Sequence[Any], sealer: CellSealer) -> ModelCall:
        """The ModelCall a `stored_calls` row holds."""
        values = list(row)
        for i, proc in self._result_processors:
            values[i] = proc(values[i])
        return rows.from_row(ModelCall, t.model_calls, dict(zip(self.names, values, strict=True)), sealer=sealer)


class SqlRecords(SqlDatabase):
    """Append-mostly records keyed by rollout; each write is idempotent on its id."""

    @cached_property
    def _capture_sql(self) -> CaptureSql:
        return CaptureSql(self.engine.dialect)

    def add_event(self, rollout_id: str, event: EventCreate, *, while_running: bool = False) -> Event:
        stored = self._insert_once(Event, t.events, rollout_id, event, while_running)
        if (stored.attempt, stored.kind, stored.payload) != (event.attempt, event.kind, event.payload):
            raise Conflict(f"event {stored.id!r} of rollout {rollout_id!r} already exists with a different body")
        return stored

    def list_events(
        self, rollout_id: str, *, attempt: int | None = None, kind: str | tuple[str, ...] | None = None
    ) -> list[Event]:
        kinds = true() if kind is None else t.events.c.kind.in_((kind,) if isinstance(kind, str) else kind)
        return self._records(Event, t.events, rollout_id, attempt, [t.events.c.pk], where=kinds, known=True)

    def add_reward(self, rollout_id: str, reward: RewardCreate, *, while_running: bool = False) -> Reward:
        stored = self._insert_once(Reward, t.rewards, rollout_id, reward, while_running)
        fields = set(RewardCreate.model_fields) - {"id"}
        if stored.model_dump(include=fields) != reward.model_dump(include=fields):
            raise Conflict(f"reward {stored.id!r} of rollout {rollout_id!r} already exists with a different body")
        return stored

    def list_rewards(self, rollout_id: str, *, attempt: int | None = None) -> list[Reward]:
        return self._records(Reward, t.rewards, rollout_id, attempt, [t.rewards.c.pk], known=True)

    def _records(
        self,
        model: type[rows.M],
        table: Table,
        rollout_id: str,
        attempt: int | None,
        order: list[Any],
        *,
        where: ColumnElement[bool] | None = None,
        known: bool = False,
    ) -> list[rows.M]:
        """The rollout's rows of `table` (of one attempt when given) in `order`; `known`: NotFound when the
        rollout is unknown (else an empty list)."""
        stmt = select(table).where(table.c.rollout_id == rollout_id, true() if where is None else where)
        if attempt is not None:
            stmt = stmt.where(table.c.attempt == attempt)
        with self._read() as conn:
            if known:
                self._rollout_row(conn, rollout_id)
            return [rows.from_row(model, table, row, sealer=self.sealer) for row in conn.execute(stmt.order_by(*order))]

    def _insert_once(
        self, model: type[rows.M], table: Table, rollout_id: str, item: EventCreate | RewardCreate, while_running: bool
    ) -> rows.M:
        """Insert `item` as a (rollout_id, id)-keyed row unless it exists; return the stored one.

        `while_running` (and `item.attempt` given): a new row needs that attempt to be running; the rollout
        row lock orders this against the attempt's finish, so no write lands after it.
        """
        item_id = item.id or uuid.uuid4().hex
        values = rows.values(table, item, sealer=self.sealer, rollout_id=rollout_id, id=item_id, created_at=rows.now())
        where = (table.c.rollout_id == rollout_id) & (table.c.id == item_id)
        running = item.attempt if while_running else None
        with self._write() as conn:
            self._rollout_row(conn, rollout_id, lock=running is not None)
            if running is not None and conn.execute(select(table.c.id).where(where)).first() is None:
                a = t.attempts.c
                found = conn.execute(
                    select(a.status).where((a.rollout_id == rollout_id) & (a.attempt == running))
                ).first()
                if found is None or found.status != AttemptStatus.RUNNING.value:
                    state = "was never started" if found is None else f"ended ({found.status})"
                    raise AttemptEnded(
                        f"attempt {running} of rollout {rollout_id!r} {state}; an agent may write events and "
                        "rewards only while its attempt runs (score finished attempts with an evaluator)"
                    )
            conn.execute(self._insert_ignore(table).values(**values))
            row = conn.execute(select(table).where(where)).one()
        return rows.from_row(model, table, row, sealer=self.sealer)

    def add_model_call(self, call: ModelCall) -> ModelCall:
        return self.add_model_calls([call])[0]

    def add_model_calls(self, calls: Sequence[ModelCall]) -> list[ModelCall]:
        """The gateway's group commit: four driver statements whatever the group's size, sent to the driver's
        cursor as prepared SQL (SQLAlchemy's per-statement work was most of what a small group cost)."""
        if not calls:
            return []
        rows_by_id = self._call_rows(calls)  # before the transaction: the write lock is held for the SQL alone
        with self._driver_write() as cursor:
            return self._insert_calls(cursor, calls, rows_by_id)

    def add_model_calls_now(self, calls: Sequence[ModelCall]) -> list[ModelCall] | None:
        with self._driver_write_now() as cursor:
            return None if cursor is None else self._insert_calls(cursor, calls, self._call_rows(calls))

    def _call_rows(self, calls: Sequence[ModelCall]) -> dict[str, dict[str, Any]]:
        """Each call's row, its JSON encoded and content sealed (bound to the call's id); its seq is set on insert."""
        return {call.id: rows.values(t.model_calls, call, sealer=self.sealer, seq=-1) for call in calls}

    def _insert_calls(
        self, cursor: Any, calls: Sequence[ModelCall], rows_by_id: dict[str, dict[str, Any]]
    ) -> list[ModelCall]:
        """The group commit's statements, in the transaction `cursor` belongs to."""
        sql = self._capture_sql
        # Rollout row locks serialise writers per rollout (seq stays gap-free and unique);
        # taking them in id order keeps concurrent groups on PostgreSQL from deadlocking.
        wanted = sorted({c.rollout_id for c in calls})
        cursor.execute(sql.lock_rollouts(len(wanted)), wanted)
        locked = {row[0] for row in cursor.fetchall()}
        if missing := [rid for rid in wanted if rid not in locked]:
            raise NotFound(f"no rollout with id {missing[0]!r}")
        ids = list({c.id for c in calls})
        cursor.execute(sql.known_ids(len(ids)), ids)
        known = [row[0] for row in cursor.fetchall()]
        stored: dict[str, ModelCall] = {}
        if known:  # retried ids return what was stored for them
            cursor.execute(sql.stored_calls(len(known)), known)
            stored = {call.id: call for call in (sql.stored(row, self.sealer) for row in cursor.fetchall())}
        keys = list(dict.fromkeys((c.rollout_id, c.attempt) for c in calls))
        cursor.execute(sql.last_seqs(len(keys)), [v for key in keys for v in key])
        next_seq = {(rid, attempt): last + 1 for rid, attempt, last in cursor.fetchall() if last is not None}
        values: list[tuple[Any, ...]] = []
        out: list[ModelCall] = []
        for call in calls:
            if call.id not in stored:  # the same id twice in one group is stored once
                key = (call.rollout_id, call.attempt)
                seq = next_seq.get(key, 0)
                next_seq[key] = seq + 1
                values.append(sql.row({**rows_by_id[call.id], "seq": seq}))
                stored[call.id] = call.model_copy(update={"seq": seq})
            out.append(stored[call.id])
        if values:
            cursor.executemany(sql.insert_call, values)
        return out

    def list_model_calls(self, rollout_id: str, attempt: int | None = None) -> list[ModelCall]:
        m = t.model_calls.c
        return self._records(ModelCall, t.model_calls, rollout_id, attempt, [m.attempt, m.seq])

    def add_spans(self, spans: Sequence[SpanRecord]) -> int:
        if not spans:
            return 0
        with self._write() as conn:
            wanted = sorted({s.rollout_id for s in spans})
            known = set(conn.execute(select(t.rollouts.c.id).where(t.rollouts.c.id.in_(wanted))).scalars())
            if missing := [rid for rid in wanted if rid not in known]:
                raise NotFound(f"spans name unknown rollout ids {missing}")
            stmt = self._insert_ignore(t.spans).returning(t.spans.c.span_id)
            return len(conn.execute(stmt, [rows.values(t.spans, span, sealer=self.sealer) for span in spans]).all())

    def list_spans(self, rollout_id: str, attempt: int | None = None) -> list[SpanRecord]:
        s = t.spans.c
        return self._records(SpanRecord, t.spans, rollout_id, attempt, [s.attempt, s.start_time_ns, s.span_id])
