"""A store written before schema 4 (content in the clear): it opens and reads, and `alight data encrypt` seals it,
killed with SIGKILL mid-way and run again: nothing lost, nothing left clear (SQLite and PostgreSQL)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from sealing_testkit import make_legacy_store, raw_bytes

from alight.schemas import RolloutCreate
from alight_server.store.base import SealError
from alight_server.store.keys.kek import KekSource
from alight_server.store.keys.seal_existing import SEALED_TABLES
from alight_server.store.keys.sealing import PREFIX, sealed_columns
from alight_server.store.sql import SqlStore

ADMIN_KEY = "alk_sealing-migration"
ALIGHT = str(Path(sys.executable).with_name("alight"))


def _clear_and_sealed(url: str) -> tuple[int, int]:
    """How many content cells are stored clear, and how many sealed."""
    clear = sealed = 0
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        for table in SEALED_TABLES:
            for row in conn.execute(sa.select(*(table.c[c] for c in sealed_columns(table)))):
                for cell in row:
                    if cell is not None:
                        sealed += cell.startswith(PREFIX)
                        clear += not cell.startswith(PREFIX)
    engine.dispose()
    return clear, sealed


def _assert_all_content(store: SqlStore, rollout_ids: list[str], marker: str) -> None:
    for rid in rollout_ids:
        rollout = store.get_rollout(rid)
        assert (rollout.task, rollout.metadata) == ({"q": marker}, {"note": marker})
        assert rollout.attempts[0].message == marker
        [call] = store.list_model_calls(rid)
        assert (call.request, call.error, call.prompt_token_ids) == (
            {"messages": [{"content": marker}]},
            marker,
            [1, 2, 3],
        )
        [span] = store.list_spans(rid)
        assert (span.name, span.attributes, span.status_message) == (f"tool {marker}", {"tool.result": marker}, marker)
        assert [e.payload for e in store.list_events(rid)] == [{"evidence": marker}]
        assert store.get_run(f"run-{rid}").config == {"system_prompt": marker}


def _encrypt(url: str, *extra: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ALIGHT_SECRET_KEY", "ALIGHT_DATA_KEY")}
    return subprocess.Popen(
        [ALIGHT, "data", "encrypt", "--db", url, "--admin-key", ADMIN_KEY, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**env, "PYTHONUNBUFFERED": "1"},
    )


def test_a_schema_3_store_opens_reads_its_clear_content_and_says_to_encrypt(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    marker = "legacy-" + uuid.uuid4().hex
    make_legacy_store(store_url, ["r1"], marker)
    with caplog.at_level(logging.WARNING, logger="alight.store"):
        store = SqlStore(store_url)
    try:
        assert "alight data encrypt" in caplog.text
        assert store.holds_clear_content()
        _assert_all_content(store, ["r1"], marker)
        store.create_rollouts([RolloutCreate(id="new", task={"q": "new"})])  # new content is sealed at once
        with store.engine.connect() as conn:
            task = conn.execute(sa.text("SELECT task FROM rollouts WHERE id = 'new'")).scalar_one()
        assert task.startswith(PREFIX)
        assert store.get_rollout("new").task == {"q": "new"}
    finally:
        store.close()


def test_encrypt_killed_mid_way_then_run_again_seals_every_cell_and_loses_none(store_url: str) -> None:
    marker = "legacy-" + uuid.uuid4().hex
    ids = [f"r{i:03d}" for i in range(60)]
    make_legacy_store(store_url, ids, marker)
    before, _ = _clear_and_sealed(store_url)
    assert marker.encode() in raw_bytes(store_url)  # what the check below looks for is there to find
    first = _encrypt(store_url, "--batch", "2")
    assert first.stdout is not None
    for line in first.stdout:  # the first batch has committed: kill it in the middle of the rest
        if "rows sealed" in line:
            os.kill(first.pid, signal.SIGKILL)
            break
    first.wait(timeout=60)
    assert first.returncode == -signal.SIGKILL
    clear, sealed = _clear_and_sealed(store_url)
    assert 0 < clear < before and sealed > 0 and clear + sealed == before  # really mid-way, and nothing lost
    second = _encrypt(store_url)
    out, _ = second.communicate(timeout=120)
    assert second.returncode == 0, out
    assert "the store holds no content in the clear" in out
    assert _clear_and_sealed(store_url) == (0, before)
    assert marker.encode() not in raw_bytes(store_url)  # SQLite: the file and its WAL; PostgreSQL: a dump
    store = SqlStore(store_url, KekSource.parse("secret", admin_key=ADMIN_KEY))
    try:
        assert not store.holds_clear_content()
        _assert_all_content(store, ids, marker)
    finally:
        store.close()


def test_encrypt_under_another_kek_than_the_servers_is_refused_before_anything_is_sealed(store_url: str) -> None:
    make_legacy_store(store_url, ["r1"], "x")
    SqlStore(store_url, KekSource.parse("secret", admin_key=ADMIN_KEY)).close()  # the server, upgraded, opened it
    before = _clear_and_sealed(store_url)
    env = {k: v for k, v in os.environ.items() if k not in ("ALIGHT_SECRET_KEY", "ALIGHT_DATA_KEY")}
    done = subprocess.run(
        [ALIGHT, "data", "encrypt", "--db", store_url, "--admin-key", "alk_another-key"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "wrapped under another key-encryption key" in done.stderr and "--admin-key" in done.stderr
    assert _clear_and_sealed(store_url) == before


def test_encrypt_without_any_key_encryption_key_says_what_to_set_and_changes_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    make_legacy_store(url, ["r1"], "x")
    before = _clear_and_sealed(url)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALIGHT_")}
    done = subprocess.run(
        [ALIGHT, "data", "encrypt", "--db", url], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "cannot encrypt" in done.stderr and "ALIGHT_SECRET_KEY" in done.stderr
    assert _clear_and_sealed(url) == before


def test_encrypt_never_seals_a_clear_cell_planted_in_a_store_that_is_all_sealed(store_url: str) -> None:
    """Sealing it would make a forged cell pass for one alight wrote: it stays clear, and refused."""
    store = SqlStore(store_url, KekSource.parse("secret", admin_key=ADMIN_KEY))
    store.create_rollouts([RolloutCreate(id="r1", task={"q": "real"})])
    store.close()
    engine = sa.create_engine(store_url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE rollouts SET task = :t WHERE id = 'r1'"), {"t": '{"q": "forged"}'})
    engine.dispose()
    done = _encrypt(store_url)
    out, _ = done.communicate(timeout=120)
    assert done.returncode == 0 and "nothing to seal" in out, out
    assert _clear_and_sealed(store_url)[0] == 1
    store = SqlStore(store_url, KekSource.parse("secret", admin_key=ADMIN_KEY))
    try:
        with pytest.raises(SealError, match="rollouts row id='r1' column task holds clear text"):
            store.get_rollout("r1")
    finally:
        store.close()
