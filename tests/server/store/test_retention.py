"""Purging ended rollouts from the store (SQLite and PostgreSQL): what goes, what a running training keeps, space."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from alight.schemas import RunStepReport
from alight_server.store import tables as t
from alight_server.store.base import Conflict, NotFound, Purged, PurgeScope, SealError
from alight_server.store.keys.kek import KekSource
from alight_server.store.rows import now
from alight_server.store.sql import SqlStore
from tests.server.retention_data import TABLES, ended, group, marker, run, started


def rows_of(store: SqlStore, ids: Iterable[str]) -> dict[str, int]:
    """Rows per table that belong to these rollouts, counted in SQL."""
    ids = list(ids)
    with store.engine.connect() as conn:
        counts = {}
        for name in TABLES:
            table = t.metadata.tables[name]
            column = table.c.id if name == "rollouts" else table.c.rollout_id
            counts[name] = conn.execute(select(func.count()).select_from(table).where(column.in_(ids))).scalar_one()
        return counts


def test_purge_before_a_time_deletes_the_rollouts_ended_before_it_and_every_row_under_them(any_store: SqlStore) -> None:
    old = [ended(any_store, f"old{i}") for i in range(3)]
    cut = now()
    new = [ended(any_store, f"new{i}") for i in range(2)]
    assert rows_of(any_store, old) == dict.fromkeys(TABLES, 3)

    report = any_store.purge_rollouts(PurgeScope(before=cut, reason="retention test"))

    assert report.deleted == {name: 3 for name in TABLES}
    assert sorted(rid for rid, _ in report.rollouts) == old
    assert rows_of(any_store, old) == dict.fromkeys(TABLES, 0)
    assert rows_of(any_store, new) == dict.fromkeys(TABLES, 2)


def test_purge_by_run_deletes_that_runs_rollouts_only(any_store: SqlStore) -> None:
    run(any_store, "abc", "succeeded")
    run(any_store, "abc-b", "succeeded")  # a run whose id extends the first: not the first run's rollouts
    run(any_store, "xyz", "succeeded")
    mine = group(any_store, "abc-s00000-t000")
    others = group(any_store, "abc-b-s00000-t000") + group(any_store, "xyz-s00000-t000")

    report = any_store.purge_rollouts(PurgeScope(run_id="abc"))

    assert sorted(rid for rid, _ in report.rollouts) == mine
    assert rows_of(any_store, mine)["rollouts"] == 0
    assert rows_of(any_store, others) == dict.fromkeys(TABLES, len(others))


def test_a_purged_rollout_is_answered_with_the_date_and_reason_of_its_purge(any_store: SqlStore) -> None:
    ended(any_store, "gone")
    any_store.purge_rollouts(PurgeScope(rollout_id="gone", reason="erasure request 42"))

    with pytest.raises(Purged) as caught:
        any_store.get_rollout("gone")
    assert caught.value.purged_at.date() == now().date()
    assert f"purged on {caught.value.purged_at:%Y-%m-%d}" in str(caught.value)
    assert "erasure request 42" in str(caught.value)
    with pytest.raises(NotFound, match="no rollout with id 'never'") as unknown:
        any_store.get_rollout("never")
    assert not isinstance(unknown.value, Purged)


def test_a_running_trainings_rollouts_are_kept_each_for_its_reason(any_store: SqlStore) -> None:
    run(any_store, "live")  # a run whose trainer reports it running
    of_live_run = group(any_store, "live-s00000-t000")
    run(any_store, "done", "succeeded")
    ended(any_store, "done-g000001-t000-k00", "done-g000001-t000")
    started(any_store, "done-g000001-t000-k01", "done-g000001-t000")  # its group is not complete
    started(any_store, "solo")  # not ended
    free = group(any_store, "done-s00000-t000")
    everything = [*of_live_run, "done-g000001-t000-k00", "done-g000001-t000-k01", "solo", *free]

    report = any_store.purge_rollouts(PurgeScope(before=now()))

    assert sorted(rid for rid, _ in report.rollouts) == free
    assert report.kept == {
        "not ended": 2,
        "a member of its group has not ended": 1,
        "its training run is running": 2,
    }
    assert rows_of(any_store, everything)["rollouts"] == len(everything) - len(free)


def test_purging_one_rollout_a_running_training_needs_is_refused_naming_why(any_store: SqlStore) -> None:
    run(any_store, "live")
    (rid, _) = group(any_store, "live-s00000-t000")
    with pytest.raises(Conflict, match="its training run is running"):
        any_store.purge_rollouts(PurgeScope(rollout_id=rid))
    assert rows_of(any_store, [rid])["model_calls"] == 1


def test_a_dry_run_counts_what_would_go_and_deletes_nothing(any_store: SqlStore) -> None:
    ids = group(any_store, "g", 3)
    report = any_store.purge_rollouts(PurgeScope(before=now()), dry_run=True)
    assert report.deleted == dict.fromkeys(TABLES, 3)
    assert rows_of(any_store, ids) == dict.fromkeys(TABLES, 3)
    with pytest.raises(NotFound):
        any_store.purge_rollouts(PurgeScope(run_id="nope"), dry_run=True)


def test_more_rollouts_than_one_batch_are_all_purged(any_store: SqlStore, monkeypatch: pytest.MonkeyPatch) -> None:
    from alight_server.store import retention

    monkeypatch.setattr(retention, "BATCH", 2)
    ids = [ended(any_store, f"r{i}") for i in range(5)]
    assert len(any_store.purge_rollouts(PurgeScope(before=now())).rollouts) == 5
    assert rows_of(any_store, ids) == dict.fromkeys(TABLES, 0)


def test_step_metrics_reported_before_a_time_are_deleted(any_store: SqlStore) -> None:
    run(any_store, "r", "succeeded")
    any_store.add_run_step("r", RunStepReport(step=1, metrics={"loss": 1.0}))
    cut = now()
    any_store.add_run_step("r", RunStepReport(step=2, metrics={"loss": 0.5}))
    assert any_store.purge_run_steps(cut, dry_run=True) == 1
    assert any_store.purge_run_steps(cut) == 1
    assert [s.step for s in any_store.list_run_steps("r")] == [2]


def _file_bytes(store: SqlStore) -> int:
    path = Path(str(store.engine.url.database))
    return sum(os.path.getsize(p) for p in (path, Path(f"{path}-wal")) if p.exists())


def test_purge_gives_the_space_back_and_the_sqlite_file_shrinks(store: SqlStore) -> None:
    for i in range(40):  # ~1 MB of content
        ended(store, f"r{i:02d}")
    store.reclaim_space()  # start from a checkpointed file
    before = _file_bytes(store)

    store.purge_rollouts(PurgeScope(before=now()))
    reported = store.reclaim_space(full=False)  # a new store vacuums incrementally: no rewrite needed

    after = _file_bytes(store)
    assert reported[1] == after
    assert after < before / 3, (before, after)


def test_an_old_sqlite_store_is_rewritten_once_and_vacuums_incrementally_after(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:  # made before incremental vacuuming: auto_vacuum off
        conn.execute("CREATE TABLE filler (x)")
    store = SqlStore(f"sqlite:///{path}")
    try:
        for i in range(20):
            ended(store, f"r{i:02d}")
        store.purge_rollouts(PurgeScope(before=now()))

        def pragma(name: str) -> int:
            with sqlite3.connect(path) as conn:
                return conn.execute(f"PRAGMA {name}").fetchone()[0]

        assert pragma("auto_vacuum") == 0
        store.reclaim_space(full=False)  # the periodic task's call: no rewrite, the freed pages stay in the file
        freed, size = pragma("freelist_count"), _file_bytes(store)
        assert freed > 0
        store.reclaim_space()
        assert pragma("freelist_count") == 0
        assert _file_bytes(store) < size / 2, (size, _file_bytes(store))
        assert pragma("auto_vacuum") == 2  # incremental from now on
    finally:
        store.close()


def test_the_deleted_rows_do_not_linger_in_the_sqlite_file_or_its_wal(store: SqlStore) -> None:
    def raw() -> bytes:
        path = Path(str(store.engine.url.database))
        return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())

    ended(store, "erased")
    ended(store, "kept")
    assert marker("erased").encode() in raw()
    store.purge_rollouts(PurgeScope(rollout_id="erased"))
    store.reclaim_space()
    assert marker("kept").encode() in raw()
    assert marker("erased").encode() not in raw()


def test_purge_needs_a_scope() -> None:
    assert PurgeScope().before is None  # the CLI says what to pass; the store refuses an empty scope
    with pytest.raises(ValueError, match="needs a scope"):
        SqlStore("sqlite://").purge_rollouts(PurgeScope())


def test_a_time_before_everything_purges_nothing(any_store: SqlStore) -> None:
    ids = group(any_store, "g")
    report = any_store.purge_rollouts(PurgeScope(before=now() - timedelta(days=1)))
    assert report.rollouts == [] and report.kept == {}
    assert rows_of(any_store, ids)["rollouts"] == 2


def test_a_rollout_this_stores_keys_cannot_open_is_purged_without_its_run_folder(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'alight.db'}"
    first = SqlStore(url, KekSource.parse("secret", admin_key="alk_first"))
    ended(first, "sealed-elsewhere", run_dir=tmp_path)
    first.close()
    other = SqlStore(url, KekSource.parse("secret", admin_key="alk_other"))
    try:
        with pytest.raises(SealError):
            other.list_rollouts()
        report = other.purge_rollouts(PurgeScope(rollout_id="sealed-elsewhere"))
        assert report.rollouts == [("sealed-elsewhere", None)]
        assert rows_of(other, ["sealed-elsewhere"]) == dict.fromkeys(TABLES, 0)
    finally:
        other.close()
