"""Sealing the clear content cells of a store written before schema 4 (`alight data encrypt`), safe to interrupt.

The walk, why a store without the `clear_content` mark is left alone, and what SQLite and PostgreSQL keep of
the clear text: docs/data.md "Stores written before schema 4".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import ColumnElement, Table, and_, false, not_, or_, select, tuple_, update

from alight_server.store import tables as t
from alight_server.store.database import CLEAR_CONTENT, SqlDatabase, secure_delete
from alight_server.store.keys.sealing import PREFIX, identity, sealed_columns

DEFAULT_BATCH = 200  # rows per write transaction: a short hold of SQLite's one write lock
SEALED_TABLES = tuple(table for table in t.metadata.sorted_tables if sealed_columns(table))
# Progress: (table, rows sealed in it so far).
Progress = Callable[[str, int], None]


@dataclass
class Encryption:
    """What a run sealed: rows and cells per table, and whether the store's clear mark was cleared."""

    rows: dict[str, int] = field(default_factory=dict)
    cells: dict[str, int] = field(default_factory=dict)
    wal_truncated: bool | None = None  # SQLite: whether the WAL was emptied (a reader may hold it); else None


def seal_existing(store: SqlDatabase, *, batch: int = DEFAULT_BATCH, progress: Progress | None = None) -> Encryption:
    """Seal every clear content cell of `store` in place, a batch of rows per transaction (module docstring)."""
    if not store.sealer.enabled:
        raise ValueError("this store was opened with sealing off: open it with its data keys to encrypt it")
    done = Encryption()
    if not store.holds_clear_content():
        return done  # all sealed since schema 4 (or an earlier run finished): nothing of alight's is clear
    for table in SEALED_TABLES:
        rows, cells = _seal_table(store, table, batch, progress)
        done.rows[table.name], done.cells[table.name] = rows, cells
    with store._write() as conn:
        conn.execute(update(t.counters).where(t.counters.c.name == CLEAR_CONTENT).values(value=0))
    store.sealer.clear_allowed = False
    if store.is_sqlite:
        conn = store.engine.raw_connection()  # autocommit: a checkpoint cannot run inside a transaction
        try:
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            conn.close()
        done.wal_truncated = busy == 0
    return done


def _seal_table(store: SqlDatabase, table: Table, batch: int, progress: Progress | None) -> tuple[int, int]:
    columns = sealed_columns(table)
    keys = list(table.primary_key.columns)  # the walk's order (events: its pk, not its identity)
    ident = identity(table)
    # Sealed: `enc1:<a key id of this store>:...`; any other cell is legacy text, even one that looks sealed.
    with store.engine.connect() as conn:
        heads = tuple(f"{PREFIX}{key_id}:" for key_id in conn.execute(select(t.data_keys.c.id)).scalars())

    def is_clear(column: str) -> ColumnElement[bool]:
        sealed = or_(false(), *(table.c[column].startswith(head, autoescape=True) for head in heads))
        return and_(table.c[column].is_not(None), not_(sealed))

    clear = or_(*(is_clear(c) for c in columns))
    wanted = list(dict.fromkeys([*(k.name for k in keys), *ident, *columns]))
    after: tuple[object, ...] | None = None
    rows = cells = 0
    while True:
        with store._write() as conn:
            secure_delete(conn)
            stmt = select(*(table.c[name] for name in wanted)).where(clear).order_by(*keys).limit(batch)
            if after is not None:
                stmt = stmt.where(tuple_(*keys) > tuple_(*after))
            # PostgreSQL: the rows stay as read until the batch commits (SQLite's writer holds the whole file).
            found = conn.execute(stmt if store.is_sqlite else stmt.with_for_update()).all()
            for row in found:
                m = row._mapping
                values = {c: m[c] for c in columns if m[c] is not None and not m[c].startswith(heads)}
                store.sealer.seal_row(table, values, [m[name] for name in ident])
                conn.execute(update(table).where(*(k == m[k.name] for k in keys)).values(**values))
                cells += len(values)
        if not found:
            return rows, cells
        rows += len(found)
        after = tuple(found[-1]._mapping[k.name] for k in keys)
        if progress is not None:
            progress(table.name, rows)
