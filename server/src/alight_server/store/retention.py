"""Retention in the SQL store: which ended rollouts may go, deleting them with their rows, tombstones, free space.

What a running training still needs, and so is kept: docs/data.md "What a running training still needs".
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from contextlib import nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, exists, func, not_, or_, select
from sqlalchemy.engine import make_url

from alight.schemas import TERMINAL_STATES, Rollout, RunStatus
from alight_server.store import rows
from alight_server.store import tables as t
from alight_server.store.base import Conflict, NotFound, PurgeReport, PurgeScope, SealError
from alight_server.store.database import SqlDatabase, secure_delete

log = logging.getLogger("alight.store")

BATCH = 50  # rollouts per write transaction: a short hold of the write lock (benchmarks/purge.py)
VACUUM_STEP = 2048  # pages an incremental vacuum frees per hold of the write lock (8 MiB at 4 KiB pages)
# Rows under a rollout, deleted before it (explicitly: each table's count goes in the report).
CHILDREN = (t.model_calls, t.spans, t.events, t.rewards, t.attempts)
_ENDED = [s.value for s in TERMINAL_STATES]


class SqlRetention(SqlDatabase):
    def purge_rollouts(self, scope: PurgeScope, *, dry_run: bool = False) -> PurgeReport:
        report = PurgeReport(dry_run=dry_run, deleted={table.name: 0 for table in (*CHILDREN, t.rollouts)})
        with self._read() as conn:
            wanted = self._wanted(conn, scope)
            report.kept = self._kept(conn, wanted)
        if scope.rollout_id is not None and report.kept:
            raise Conflict(f"rollout {scope.rollout_id!r} is kept: {next(iter(report.kept))}; purge it after that")
        after = -1  # ordinal cursor: each batch starts past the last one looked at
        while True:
            with self._read() if dry_run else self._write() as conn:
                found = self._batch(conn, wanted, after, lock=not dry_run)
                if not found:
                    return report
                after = found[-1].ordinal
                self._purge_batch(conn, found, scope.reason, report, dry_run=dry_run)

    def purge_run_steps(self, before: datetime, *, dry_run: bool = False) -> int:
        where = t.run_steps.c.created_at < before.astimezone(UTC)
        with self._read() if dry_run else self._write() as conn:
            if dry_run:
                return int(conn.execute(select(func.count()).select_from(t.run_steps).where(where)).scalar_one())
            secure_delete(conn)
            return int(conn.execute(t.run_steps.delete().where(where)).rowcount)

    def reclaim_space(self, *, full: bool = True) -> tuple[int, int]:
        """SQLite: free pages back to the file system (`full`: a VACUUM when the store cannot do it a few
        pages at a time), then the WAL truncated; the file's bytes (with its WAL) before and after.

        PostgreSQL: nothing here (autovacuum makes the space reusable; docs/data.md); (0, 0).
        """
        path = self._file()
        if path is None:
            return 0, 0
        before = _bytes(path)
        driver = self._own_connection()  # in autocommit: VACUUM cannot run inside a transaction
        try:
            incremental = driver.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
            if incremental:
                free, left = -1, driver.execute("PRAGMA freelist_count").fetchone()[0]
                while 0 < left != free:  # stops when nothing is left, or a step freed nothing (a reader holds it)
                    with self._write_lock or nullcontext():
                        driver.execute(f"PRAGMA incremental_vacuum({VACUUM_STEP})").fetchall()
                    free, left = left, driver.execute("PRAGMA freelist_count").fetchone()[0]
            elif full:
                with self._write_lock or nullcontext():
                    driver.execute("PRAGMA auto_vacuum=INCREMENTAL")
                    driver.execute("VACUUM")  # rewrites the file: this once, then incremental from now on
            driver.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        finally:
            driver.close()
        return before, _bytes(path)

    def _wanted(self, conn: Connection, scope: PurgeScope) -> ColumnElement[bool]:
        """The rollouts the scope names (ended or not); NotFound for an unknown run or rollout."""
        r = t.rollouts.c
        clauses: list[ColumnElement[bool]] = []
        if scope.rollout_id is not None:
            self._rollout_row(conn, scope.rollout_id)  # NotFound, or Purged (already gone) for the caller
            clauses.append(r.id == scope.rollout_id)
        if scope.run_id is not None:
            if conn.execute(select(t.runs.c.id).where(t.runs.c.id == scope.run_id)).first() is None:
                raise NotFound(f"no run with id {scope.run_id!r}; the runs page (/ui) and GET /api/runs list them")
            clauses.append(self._of_run(conn, scope.run_id))
        if scope.before is not None:
            clauses.append(r.updated_at < scope.before.astimezone(UTC))
        if not clauses:
            raise ValueError("a purge needs a scope: before a time, a run, or a rollout")
        return and_(*clauses)

    def _of_run(self, conn: Connection, run_id: str) -> ColumnElement[bool]:
        """The run's rollouts: ids `<run id>-...`, less those of another run whose id extends it (`<run id>-b`)."""
        r = t.rollouts.c
        longer = conn.execute(select(t.runs.c.id).where(t.runs.c.id.startswith(f"{run_id}-", autoescape=True)))
        mine = r.id.startswith(f"{run_id}-", autoescape=True)
        return and_(mine, *(not_(r.id.startswith(f"{o}-", autoescape=True)) for o in longer.scalars()))

    def _needed(self, conn: Connection) -> dict[str, ColumnElement[bool]]:
        """Why a rollout is still needed by a training, each reason as a condition on `rollouts`."""
        r = t.rollouts.c
        member = t.rollouts.alias("member")
        running = conn.execute(select(t.runs.c.id).where(t.runs.c.status == RunStatus.RUNNING.value)).scalars()
        of_running = [r.id.startswith(f"{run_id}-", autoescape=True) for run_id in running]
        return {
            "not ended": r.state.not_in(_ENDED),
            "a member of its group has not ended": exists().where(
                member.c.group_id == r.group_id, member.c.state.not_in(_ENDED)
            ),
            "its training run is running": or_(False, *of_running),
        }

    def _kept(self, conn: Connection, wanted: ColumnElement[bool]) -> dict[str, int]:
        """How many of the wanted rollouts each reason keeps (the first reason that holds counts)."""
        kept: dict[str, int] = {}
        earlier: list[ColumnElement[bool]] = []
        for reason, condition in self._needed(conn).items():
            where = and_(wanted, condition, *(not_(e) for e in earlier))
            count = int(conn.execute(select(func.count()).select_from(t.rollouts).where(where)).scalar_one())
            if count:
                kept[reason] = count
            earlier.append(condition)
        return kept

    def _batch(self, conn: Connection, wanted: ColumnElement[bool], after: int, *, lock: bool) -> Sequence[Any]:
        """The next batch of wanted rollouts nothing needs, checked inside this transaction."""
        r = t.rollouts.c
        needed = self._needed(conn).values()
        stmt = (
            select(t.rollouts)
            .where(wanted, r.ordinal > after, *(not_(c) for c in needed))
            .order_by(r.ordinal)
            .limit(BATCH)
        )
        return conn.execute(stmt.with_for_update() if lock and not self.is_sqlite else stmt).all()

    def _purge_batch(
        self, conn: Connection, found: Sequence[Any], reason: str, report: PurgeReport, *, dry_run: bool
    ) -> None:
        ids = [row.id for row in found]
        report.rollouts += [(row.id, self._run_dir(row)) for row in found]
        if not dry_run:
            secure_delete(conn)
        for table in CHILDREN:
            where = table.c.rollout_id.in_(ids)
            if dry_run:
                count = conn.execute(select(func.count()).select_from(table).where(where)).scalar_one()
            else:
                count = conn.execute(table.delete().where(where)).rowcount
            report.deleted[table.name] += int(count)
        if dry_run:
            report.deleted[t.rollouts.name] += len(ids)
            return
        report.deleted[t.rollouts.name] += int(
            conn.execute(t.rollouts.delete().where(t.rollouts.c.id.in_(ids))).rowcount
        )
        now = rows.now()
        stmt = self._upsert(t.purged_rollouts)
        conn.execute(
            stmt.on_conflict_do_update(
                index_elements=[t.purged_rollouts.c.rollout_id],
                set_={"purged_at": stmt.excluded.purged_at, "reason": stmt.excluded.reason},
            ),
            [{"rollout_id": rid, "purged_at": now, "reason": reason} for rid in ids],
        )

    def _run_dir(self, row: Any) -> str | None:
        """The run folder the trainer put in the rollout's metadata (its attempt logs are under it), if any.

        A row this store's keys do not open is purged all the same (it is unreadable anyway): the folder is
        then unknown, and only a logs folder the caller names is searched.
        """
        try:
            found = rows.from_row(Rollout, t.rollouts, row, sealer=self.sealer, attempts=[]).metadata.get("run_dir")
        except SealError as exc:
            log.warning("purging rollout %r without its run folder: %s", row.id, exc)
            return None
        return found if isinstance(found, str) else None

    def _file(self) -> Path | None:
        """The SQLite database file; None for PostgreSQL or an in-memory database."""
        if not self.is_sqlite or self._read_lock is not None:
            return None
        return Path(make_url(self.url).database or "").expanduser()


def _bytes(path: Path) -> int:
    """The database's bytes on disk: the file and its write-ahead log."""
    wal = Path(f"{path}-wal")
    return sum(os.path.getsize(p) for p in (path, wal) if p.exists())
