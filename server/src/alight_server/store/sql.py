"""SqlStore: the Store protocol over SQLAlchemy Core, on SQLite (WAL) or PostgreSQL.

Every write runs in one transaction that commits before the method returns.
SQLite write transactions start with BEGIN IMMEDIATE (one writer at a time,
no lock upgrades mid-transaction); PostgreSQL claims use FOR UPDATE SKIP
LOCKED so concurrent controllers never start the same attempt twice.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, bindparam, create_engine, event, func, inspect, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.pool import StaticPool

from alight.schemas import (
    TERMINAL_STATES,
    TRANSITIONS,
    Attempt,
    AttemptFinish,
    AttemptStatus,
    Event,
    EventCreate,
    Mode,
    ModelCall,
    PolicyVersion,
    Reward,
    RewardCreate,
    Rollout,
    RolloutCreate,
    RolloutState,
    SpanRecord,
    Upstream,
    UpstreamCreate,
)
from alight_server.store import rows
from alight_server.store import tables as t
from alight_server.store.base import Conflict, NotFound, SchemaTooNew, StoreError
from alight_server.store.lifecycle import apply_finish, end_running_attempt


class SqlStore:
    """The durable store at a SQLAlchemy URL (`sqlite:///path.db`, `postgresql+psycopg://...`)."""

    def __init__(self, url: str) -> None:
        self.url = url
        parsed = make_url(url)
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        self.engine = _sqlite_engine(url) if self.is_sqlite else _server_engine(url)
        # SQLite has one writer; queueing writers on a lock here beats spinning on SQLITE_BUSY.
        self._write_lock = threading.Lock() if self.is_sqlite else None
        # An in-memory database is one shared connection: readers must queue too.
        self._read_lock = self._write_lock if _in_memory(url) else None
        self._open_schema()

    # ---- plumbing

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self._write_lock or nullcontext(), self.engine.begin() as conn:
            yield conn

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self._read_lock or nullcontext(), self.engine.connect().execution_options(alight_read=True) as conn:
            yield conn

    def _open_schema(self) -> None:
        with self._write() as conn:
            if inspect(conn).has_table("schema_version"):
                found = conn.execute(select(func.max(t.schema_version.c.version))).scalar()
                if found is not None and found > t.SCHEMA_VERSION:
                    raise SchemaTooNew(
                        f"the database at {make_url(self.url).render_as_string(hide_password=True)} has schema "
                        f"version {found}, but this alight-server understands versions up to {t.SCHEMA_VERSION}; "
                        "upgrade alight-server (pip install -U alight-server) or point --db at another database"
                    )
            t.metadata.create_all(conn)
            if conn.execute(select(func.count()).select_from(t.schema_version)).scalar() == 0:
                conn.execute(t.schema_version.insert().values(version=t.SCHEMA_VERSION))
            for name in ("rollout_seq", "rollout_ordinal", "policy_version"):
                if conn.execute(select(t.counters.c.value).where(t.counters.c.name == name)).first() is None:
                    conn.execute(t.counters.insert().values(name=name, value=0))

    def _bump(self, conn: Connection, name: str, by: int = 1) -> int:
        """Add `by` to a counter and return the new value; the row lock orders concurrent writers."""
        stmt = (
            update(t.counters)
            .where(t.counters.c.name == name)
            .values(value=t.counters.c.value + by)
            .returning(t.counters.c.value)
        )
        return int(conn.execute(stmt).scalar_one())

    def _rollout_row(self, conn: Connection, rollout_id: str, *, lock: bool = False) -> Any:
        stmt = select(t.rollouts).where(t.rollouts.c.id == rollout_id)
        # FOR NO KEY UPDATE: serialises writers of this rollout without blocking the foreign-key
        # checks of concurrent event/model-call inserts (PostgreSQL; SQLite has one writer anyway).
        row = conn.execute(stmt.with_for_update(key_share=True) if lock else stmt).first()
        if row is None:
            raise NotFound(f"no rollout with id {rollout_id!r}")
        return row

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

    def _insert_ignore(self, table: Any) -> Any:
        dialect = sqlite if self.is_sqlite else postgresql
        return dialect.insert(table).on_conflict_do_nothing()

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

    def claim_attempts(self, limit: int, ids: Sequence[str] | None = None) -> list[tuple[Rollout, int]]:
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
                        rollout_id=row.id, attempt=attempt, status=AttemptStatus.RUNNING.value, started_at=rows.now()
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

    # ---- events and rewards

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
        """Group commit: one transaction, one lock per rollout, one seq read per attempt, one multi-row insert."""
        if len(calls) <= 1:
            return [self.add_model_call(c) for c in calls]
        with self._write() as conn:
            # Rollout row locks serialise writers per rollout (seq stays gap-free and unique);
            # taking them in sorted order keeps concurrent batches on PostgreSQL from deadlocking.
            for rollout_id in sorted({c.rollout_id for c in calls}):
                if conn.execute(_LOCK_ROLLOUT, {"rollout_id": rollout_id}).first() is None:
                    raise NotFound(f"no rollout with id {rollout_id!r}")
            ids = list({c.id for c in calls})
            stored = {row.id: rows.model_call_from_row(row) for row in conn.execute(_STORED_CALLS, {"ids": ids})}
            next_seq: dict[tuple[str, int], int] = {}
            values: list[dict[str, Any]] = []
            out: list[ModelCall] = []
            for call in calls:
                if call.id not in stored:  # a retried id (here or earlier) returns the stored call
                    key = (call.rollout_id, call.attempt)
                    if key not in next_seq:
                        last = conn.execute(_LAST_CALL_SEQ, {"rollout_id": key[0], "attempt": key[1]}).scalar()
                        next_seq[key] = 0 if last is None else last + 1
                    seq = next_seq[key]
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

    def close(self) -> None:
        self.engine.dispose()


_LOCK_ROLLOUT = (
    select(t.rollouts.c.id).where(t.rollouts.c.id == bindparam("rollout_id")).with_for_update(key_share=True)
)
_CALL_EXISTS = select(t.model_calls.c.id).where(t.model_calls.c.id == bindparam("id"))
_LAST_CALL_SEQ = select(func.max(t.model_calls.c.seq)).where(
    (t.model_calls.c.rollout_id == bindparam("rollout_id")) & (t.model_calls.c.attempt == bindparam("attempt"))
)
_INSERT_CALL = t.model_calls.insert()
_STORED_CALLS = select(t.model_calls).where(t.model_calls.c.id.in_(bindparam("ids", expanding=True)))


def _server_engine(url: str) -> Engine:
    try:
        return create_engine(url, pool_pre_ping=True, pool_size=10)
    except ModuleNotFoundError as exc:
        raise StoreError(
            f"the database driver for {make_url(url).drivername} is not installed ({exc.name}); "
            "for PostgreSQL use a postgresql+psycopg:// URL and pip install 'alight-server[postgres]'"
        ) from exc


def _in_memory(url: str) -> bool:
    parsed = make_url(url)
    database = parsed.database or ""
    return parsed.get_backend_name() == "sqlite" and (
        database in ("", ":memory:") or database.startswith("file::memory:") or "mode=memory" in database
    )


def _sqlite_engine(url: str) -> Engine:
    in_memory = _in_memory(url)
    if not in_memory:
        Path(make_url(url).database or "").expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": 30},
        # One shared connection keeps an in-memory database alive and shared.
        **({"poolclass": StaticPool} if in_memory else {}),
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event issue BEGIN itself (pysqlite's own is deferred and lazy).
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        if not in_memory:
            cur.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL: a commit survives a killed process (the OS has the WAL pages);
        # only a power cut can lose the last transactions.
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # Writers take the write lock up front, so two writers never deadlock upgrading.
        conn.exec_driver_sql("BEGIN" if conn.get_execution_options().get("alight_read") else "BEGIN IMMEDIATE")

    return engine
