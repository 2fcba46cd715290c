"""What the sealing tests share: a database's bytes as an attacker with the disk reads them, and a store as
schema 3 left it (content in the clear)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import make_url
from store_testkit import model_call

from alight.schemas import AttemptFinish, EventCreate, FailureKind, RolloutCreate, RunReport, RunStatus, SpanRecord
from alight_server.store.keys.kek import KekSource
from alight_server.store.sql import SqlStore
from alight_server.store.tables import metadata


def raw_bytes(url: str) -> bytes:
    """SQLite: the file and its -wal, byte for byte. PostgreSQL: a pg_dump of the test's schema (else every row
    of every table, each column cast to text)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        path = Path(parsed.database or "")
        wal = path.with_name(path.name + "-wal")
        return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    schema = str(parsed.query.get("options", "")).removeprefix("-csearch_path=")
    plain = parsed.set(drivername="postgresql", query={}).render_as_string(hide_password=False)
    if shutil.which("pg_dump"):
        return subprocess.run(
            ["pg_dump", "--dbname", plain, "--schema", schema, "--data-only"], capture_output=True, check=True
        ).stdout
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            out = [
                repr(row).encode()
                for table in metadata.sorted_tables
                for row in conn.execute(sa.text(f"SELECT * FROM {table.name}"))
            ]
    finally:
        engine.dispose()
    return b"\n".join(out)


def file_kek(tmp_path: Path) -> KekSource:
    """A lasting key-encryption key (a file), so a store reopened in another process opens what it sealed."""
    path = tmp_path / "kek.hex"
    path.write_text("5a" * 32)
    return KekSource.parse(f"file:{path}")


def write_content(store: SqlStore, rollout_id: str, marker: str) -> None:
    """A rollout with `marker` in every content column: task, metadata, a model call, a span, an event, an
    attempt's message and a run's config."""
    store.create_rollouts([RolloutCreate(id=rollout_id, task={"q": marker}, metadata={"note": marker})])
    [(_, attempt)] = store.claim_attempts(1, ids=[rollout_id])
    call = model_call(f"{rollout_id}-c", rollout_id, attempt)
    store.add_model_calls([call.model_copy(update={"request": {"messages": [{"content": marker}]}, "error": marker})])
    span = SpanRecord(
        trace_id="ab" * 16,
        span_id="cd" * 8,
        rollout_id=rollout_id,
        attempt=attempt,
        name=f"tool {marker}",
        start_time_ns=1,
        attributes={"tool.result": marker},
        status_message=marker,
    )
    store.add_spans([span])
    store.add_event(rollout_id, EventCreate(kind="gate", attempt=attempt, payload={"evidence": marker}))
    store.finish_attempt(
        rollout_id, attempt, AttemptFinish(status="failed", failure_kind=FailureKind.TASK, message=marker)
    )
    store.report_run(RunReport(id=f"run-{rollout_id}", status=RunStatus.RUNNING, config={"system_prompt": marker}))


def make_legacy_store(url: str, rollout_ids: list[str], marker: str) -> None:
    """A store as schema 3 wrote it: the same rows, every content cell in the clear, no data keys."""
    store = SqlStore(url)
    store.use_data_keys(None)
    for rollout_id in rollout_ids:
        write_content(store, rollout_id, marker)
    store.close()
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE data_keys"))
        conn.execute(sa.text("DELETE FROM counters WHERE name = 'clear_content'"))
        conn.execute(sa.text("UPDATE schema_version SET version = 3"))
    engine.dispose()
