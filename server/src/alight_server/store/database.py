"""The SQL store's database: engines for SQLite (WAL) and PostgreSQL, transactions, the schema check.

Long because: the one object every store module's SQL runs through (transactions, the schema check) and
the engines it opens, whose connect and begin hooks those transactions rely on (WAL, BEGIN IMMEDIATE).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, func, inspect, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.pool import StaticPool

from alight.schemas import RolloutCreate
from alight_server.store import rows
from alight_server.store import tables as t
from alight_server.store.base import NotFound, Purged, SchemaTooNew, StoreError
from alight_server.store.keys import upstream as upstream_keys
from alight_server.store.keys.kek import KekSource
from alight_server.store.keys.keyring import Keyring
from alight_server.store.keys.sealing import CellSealer, DataKeys
from alight_server.store.runner_env import RunnerEnvBox

log = logging.getLogger("alight.store")
# A counter: 1 while the store may hold content cells in the clear (written before schema 4, or with sealing
# off), which are then read as they are; `alight data encrypt` seals them and sets it to 0.
CLEAR_CONTENT = "clear_content"


def redacted_url(url: str) -> str:
    """A database URL as a person may see it: the password hidden."""
    return make_url(url).render_as_string(hide_password=True)


class SqlDatabase:
    """Connections, transactions and counters at a SQLAlchemy URL; the store's methods build on these."""

    def __init__(self, url: str, data_key: KekSource | None = None) -> None:
        self.url = url
        self.is_sqlite = make_url(url).get_backend_name() == "sqlite"
        self.engine = make_engine(url)
        # SQLite has one writer; queueing writers on a lock here beats spinning on SQLITE_BUSY.
        self._write_lock = threading.Lock() if self.is_sqlite else None
        # An in-memory database is one shared connection: readers must queue too.
        self._read_lock = self._write_lock if _in_memory(url) else None
        self._unwaiting: Any = None  # `_driver_write_now`'s connection, made on first use
        self._runner_env = RunnerEnvBox()  # seals runner env values (store/runner_env.py)
        clear_content = self._open_schema()  # may content cells be in the clear (read as they are)?
        # The data keys that seal content cells (store/keys/keyring.py), wrapped under `data_key`'s KEK.
        self.keyring = Keyring.open(self.engine, data_key or KekSource.default())
        self.sealer = CellSealer(self.keyring, clear_allowed=clear_content)

    def use_data_keys(self, keys: DataKeys | None) -> None:
        """Seal content under `keys` (the store's keyring); None writes it clear (a benchmark's baseline only)."""
        if keys is None:
            with self._write() as conn:
                conn.execute(update(t.counters).where(t.counters.c.name == CLEAR_CONTENT).values(value=1))
        self.sealer = CellSealer(keys, clear_allowed=self.sealer.clear_allowed)

    def holds_clear_content(self) -> bool:
        """Whether content cells written in the clear may remain (`alight data encrypt` seals them)."""
        with self._read() as conn:
            found = conn.execute(select(t.counters.c.value).where(t.counters.c.name == CLEAR_CONTENT)).scalar()
        return bool(found)

    def seal_runner_env_under(self, secret: str) -> None:
        self._runner_env.derive_fallback(secret)

    def use_data_key(self, source: KekSource) -> None:
        if not self.keyring.source.same_as(source):
            self.keyring = Keyring.open(self.engine, source)
            self.sealer = CellSealer(self.keyring, clear_allowed=self.sealer.clear_allowed)

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self._write_lock or nullcontext(), self.engine.begin() as conn:
            yield conn

    @contextmanager
    def _driver_write(self) -> Iterator[Any]:
        """A write transaction on the driver's own connection, yielding its cursor (the capture hot path).

        SQLAlchemy's Connection, Transaction and event dispatch cost more than a small
        transaction's statements; here the pool hands out the connection and nothing else
        runs between the driver and the database. Commits before returning, like `_write`.
        """
        with self._write_lock or nullcontext():
            conn = self.engine.raw_connection()
            try:
                with _committing(conn) as cursor:
                    if self.is_sqlite:  # autocommit mode (see _on_connect): begin by hand
                        cursor.execute("BEGIN IMMEDIATE")
                    yield cursor
            finally:
                conn.close()  # back to the pool

    @contextmanager
    def _driver_write_now(self) -> Iterator[Any | None]:
        """As `_driver_write` if the transaction can begin without waiting, else it yields None.

        For a caller that must not block (the gateway's event loop committing a call that is alone): SQLite only, on a
        connection of its own that gives up at once while another writer, in this process or another, holds the
        database. A file database only (an in-memory one is a single shared connection); PostgreSQL always yields None,
        as its statements are network round trips, which belong on a thread.
        """
        lock = self._write_lock
        if lock is None or self._read_lock is not None or not lock.acquire(blocking=False):
            yield None
            return
        try:
            conn = self._unwaiting_connection()
            cursor = conn.cursor()
            try:
                cursor.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:  # "database is locked": another process is writing
                cursor.close()
                yield None
                return
            with _committing(conn, cursor):
                yield cursor
        finally:
            lock.release()

    def _unwaiting_connection(self) -> Any:
        if self._unwaiting is None:  # closed by `close`, its busy timeout stays its own
            self._unwaiting = self._own_connection()
            self._unwaiting.execute("PRAGMA busy_timeout=0")
        return self._unwaiting

    def _own_connection(self) -> Any:
        """A driver connection set up by the engine's connect hook, never back in the pool: the caller closes it."""
        pooled = self.engine.raw_connection()
        pooled.detach()
        conn = pooled.dbapi_connection
        assert conn is not None
        return conn

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self._read_lock or nullcontext(), self.engine.connect().execution_options(alight_read=True) as conn:
            yield conn

    def _open_schema(self) -> bool:
        """Create or migrate the schema; whether the store may hold content cells in the clear."""
        with self._write() as conn:
            if inspect(conn).has_table("schema_version"):
                found = conn.execute(select(func.max(t.schema_version.c.version))).scalar()
                if found is not None and found > t.SCHEMA_VERSION:
                    raise SchemaTooNew(
                        f"the database at {redacted_url(self.url)} has schema "
                        f"version {found}, but this alight-server understands versions up to {t.SCHEMA_VERSION}; "
                        "upgrade alight-server (pip install -U alight-server) or point --db at another database"
                    )
                if found == 1:
                    self._spans_keyed_by_attempt(conn)
                if found in (1, 2):
                    _seal_upstream_keys(conn)
            else:
                found = None
            t.metadata.create_all(conn)
            if conn.execute(select(func.count()).select_from(t.schema_version)).scalar() == 0:
                conn.execute(t.schema_version.insert().values(version=t.SCHEMA_VERSION))
            else:
                conn.execute(update(t.schema_version).values(version=t.SCHEMA_VERSION))
            for name in ("rollout_seq", "rollout_ordinal", "policy_version", "gateway_paused", "gateway_pause_epoch"):
                if conn.execute(select(t.counters.c.value).where(t.counters.c.name == name)).first() is None:
                    conn.execute(t.counters.insert().values(name=name, value=0))
            clear = conn.execute(select(t.counters.c.value).where(t.counters.c.name == CLEAR_CONTENT)).scalar()
            if clear is None:  # schema 4 begins: a store made before it holds its content in the clear
                clear = int(found is not None and found < 4)
                conn.execute(t.counters.insert().values(name=CLEAR_CONTENT, value=clear))
        if clear:
            log.warning(
                "the store at %s may hold captured content in the clear (written before schema 4); new content is "
                "sealed, and `alight data encrypt` (with the server's --config, or --db URL) seals the rest",
                redacted_url(self.url),
            )
        return bool(clear)

    def _spans_keyed_by_attempt(self, conn: Connection) -> None:
        """Schema 1 -> 2: the spans table's primary key gains rollout_id and attempt; every row is kept."""
        if not self.is_sqlite:
            name = inspect(conn).get_pk_constraint("spans")["name"]
            conn.execute(
                text(
                    f'ALTER TABLE spans DROP CONSTRAINT "{name}", ADD PRIMARY KEY (rollout_id, attempt, trace_id, span_id)'
                )
            )
            return
        # SQLite cannot change a primary key: rebuild the table under its new definition.
        conn.execute(text("ALTER TABLE spans RENAME TO spans_v1"))
        conn.execute(text("DROP INDEX IF EXISTS ix_spans_attempt"))
        t.spans.create(conn)
        columns = ", ".join(c.name for c in t.spans.columns)
        conn.execute(text(f"INSERT INTO spans ({columns}) SELECT {columns} FROM spans_v1"))
        conn.execute(text("DROP TABLE spans_v1"))

    def current_policy_version(self, conn: Connection | None = None) -> int:
        with nullcontext(conn) if conn is not None else self._read() as c:
            return int(c.execute(select(func.coalesce(func.max(t.policy_versions.c.version), 0))).scalar_one())

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
            p = t.purged_rollouts.c
            tombstone = conn.execute(select(p.purged_at, p.reason).where(p.rollout_id == rollout_id)).first()
            if tombstone is not None:
                raise Purged(rollout_id, rows.utc(tombstone.purged_at), tombstone.reason)
            raise NotFound(f"no rollout with id {rollout_id!r}")
        return row

    def _insert_rollout(self, conn: Connection, item: RolloutCreate, now: datetime, **values: Any) -> None:
        """A new rollout row of `item` with `values`, next in creation order (`ordinal`) and change order (`seq`)."""
        ordinal, seq = self._bump(conn, "rollout_ordinal"), self._bump(conn, "rollout_seq")
        values.update(created_at=now, updated_at=now, ordinal=ordinal, seq=seq)
        conn.execute(t.rollouts.insert().values(rows.values(t.rollouts, item, sealer=self.sealer, **values)))

    def _upsert(self, table: Any) -> Any:
        """An INSERT of this dialect, which has `on_conflict_do_nothing` / `on_conflict_do_update`."""
        return (sqlite if self.is_sqlite else postgresql).insert(table)

    def _insert_ignore(self, table: Any) -> Any:
        return self._upsert(table).on_conflict_do_nothing()

    def close(self) -> None:
        if self._unwaiting is not None:
            self._unwaiting.close()
            self._unwaiting = None
        self.engine.dispose()


def _seal_upstream_keys(conn: Connection) -> None:
    """Schema 2 -> 3: plain-text upstream api keys are encrypted in place and the plain column dropped.

    Without ALIGHT_SECRET_KEY the store refuses to open (the transaction rolls back, nothing changes):
    leaving the keys readable, or dropping them unasked, would both be wrong.
    """
    if "upstreams" not in inspect(conn).get_table_names():
        return
    columns = {c["name"] for c in inspect(conn).get_columns("upstreams")}
    for name, kind in (("api_key_sealed", "TEXT"), ("api_key_env", "VARCHAR(200)"), ("api_key_file", "TEXT")):
        if name not in columns:
            conn.execute(text(f"ALTER TABLE upstreams ADD COLUMN {name} {kind}"))
    if "api_key" not in columns:
        return
    plain = conn.execute(text("SELECT id, api_key FROM upstreams WHERE api_key IS NOT NULL")).all()
    if plain and not upstream_keys.has_secret_key():
        raise StoreError(
            f"this database stores the api_key of {len(plain)} upstream(s) in plain text (written before schema 3); "
            f"set {upstream_keys.SECRET_KEY_ENV} and open it again, which encrypts them (make a key with: "
            f"{upstream_keys.MAKE_KEY})"
        )
    secure_delete(conn)
    for upstream_id, api_key in plain:
        sealed = upstream_keys.seal(api_key)
        conn.execute(
            text("UPDATE upstreams SET api_key_sealed = :s, api_key = NULL WHERE id = :i"),
            {"s": sealed, "i": upstream_id},
        )
    conn.execute(text("ALTER TABLE upstreams DROP COLUMN api_key"))


def secure_delete(conn: Connection) -> None:
    """SQLite: zero the pages this transaction frees, so deleted or overwritten text does not linger in the file."""
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("PRAGMA secure_delete = ON")


@contextmanager
def _committing(conn: Any, cursor: Any = None) -> Iterator[Any]:
    """A driver cursor on `conn` (or `cursor`): committed after the block, rolled back if it raised, then closed."""
    cursor = cursor if cursor is not None else conn.cursor()
    try:
        yield cursor
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    finally:
        cursor.close()


def make_engine(url: str) -> Engine:
    """An engine on `url` set up as the store's own (SQLite: WAL, busy timeout), for tools that open no store."""
    if make_url(url).get_backend_name() == "sqlite":
        return _sqlite_engine(url)
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


WAL_LIMIT_BYTES = 64 * 1024 * 1024


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
            # A new, empty file only (setting it on one in use waits for the write lock): a purge can then hand
            # freed pages back to the file system a few at a time (store/retention.py), not by rewriting the file.
            if cur.execute("PRAGMA page_count").fetchone()[0] == 0:
                cur.execute("PRAGMA auto_vacuum=INCREMENTAL")
            cur.execute("PRAGMA journal_mode=WAL")
            # A WAL keeps its high-water size until a checkpoint can truncate it, which a server that always
            # writes rarely allows: a purge's or a vacuum's burst would stay on disk. Cut back when it resets.
            cur.execute(f"PRAGMA journal_size_limit={WAL_LIMIT_BYTES}")
        # WAL + NORMAL: a commit survives a killed process (the OS has the WAL pages);
        # only a power cut can lose the last transactions.
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # Writers take the write lock up front, so two writers never deadlock upgrading.
        # Straight to the driver: SQLAlchemy's execution path cost more than the BEGIN itself.
        driver = conn.connection.driver_connection
        assert driver is not None  # a connection that begins is attached
        driver.execute("BEGIN" if conn.get_execution_options().get("alight_read") else "BEGIN IMMEDIATE")

    return engine
