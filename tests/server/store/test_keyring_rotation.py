"""`alight data rotate-key`: every data key re-wrapped under the new KEK (cells untouched), resumable after kill -9."""

from __future__ import annotations

import fcntl
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import func, select

from alight.attempt_logs import attempt_log_path
from alight.schemas import RolloutCreate
from alight_server.store import tables as t
from alight_server.store.database import make_engine
from alight_server.store.keys.kek import KekSource
from alight_server.store.keys.keyring import Keyring, add_data_key
from alight_server.store.keys.sealed_logs import LogSeal
from alight_server.store.sql import SqlStore

ALIGHT = str(Path(sys.executable).parent / "alight")
OLD_MARKER = "task-before-rotation-6f1c"
NEW_MARKER = "task-after-rotation-9a2e"


def _kek(path: Path, byte: int) -> str:
    path.write_text(bytes([byte]).hex() * 32)
    return f"file:{path}"


def _rotate(url: str, old: str, new: str, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [ALIGHT, "data", "rotate-key", "--db", url, "--old-kek", old, "--new-kek", new, *extra]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def _kek_ids(url: str) -> list[str]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(select(t.data_keys.c.kek_id)).scalars())
    finally:
        engine.dispose()


def test_rows_sealed_before_and_after_a_rotation_open_with_the_new_kek_only(store_url: str, tmp_path: Path) -> None:
    old, new = _kek(tmp_path / "old", 1), _kek(tmp_path / "new", 2)
    store = SqlStore(store_url, KekSource.parse(old))
    store.create_rollouts([RolloutCreate(id="before", task={"text": OLD_MARKER})])
    old_key = store.keyring.current()
    store.close()

    done = _rotate(store_url, old, new)
    assert done.returncode == 0, done.stderr
    assert "1 data key(s) re-wrapped" in done.stdout

    (tmp_path / "old").unlink()  # the old KEK is gone for good
    after = SqlStore(store_url, KekSource.parse(new))
    try:
        assert after.keyring.current()[0] != old_key[0]  # a new data key for new cells
        assert after.keyring.key(old_key[0]) == old_key[1]
        after.create_rollouts([RolloutCreate(id="after", task={"text": NEW_MARKER})])
        assert after.get_rollout("before").task == {"text": OLD_MARKER}
        assert after.get_rollout("after").task == {"text": NEW_MARKER}
    finally:
        after.close()


def _hold_sqlite(url: str, proc: subprocess.Popen[str]) -> Callable[[], list[str]]:
    """Once the rotation reports its first key, take SQLite's write lock: it waits at its next batch.
    Returns the release, which answers the data keys' kek ids as they were while it held the lock."""
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("re-wrapped 1/")
    blocker = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    under = [row[0] for row in blocker.execute("SELECT kek_id FROM data_keys")]

    def release() -> list[str]:
        blocker.rollback()
        blocker.close()
        return under

    return release


def _hold_postgresql(url: str, proc: subprocess.Popen[str], at: int = 100) -> Callable[[], list[str]]:
    """Lock the data key the rotation re-wraps after its first `at` (its order: created_at, id): it commits
    those, one per batch, then waits on the lock. Returns the release, answering the kek ids seen meanwhile."""
    engine = make_engine(url)
    conn = engine.connect()
    d = t.data_keys.c
    order = conn.execute(select(d.id).order_by(d.created_at, d.id)).scalars().all()
    conn.execute(select(d.id).where(d.id == order[at]).with_for_update())  # held until rollback
    assert proc.stdout is not None
    while not (line := proc.stdout.readline()).startswith(f"re-wrapped {at}/"):
        assert line, f"the rotation ended before re-wrapping {at} keys: {proc.stderr.read() if proc.stderr else ''}"
    with engine.connect() as other:
        under = list(other.execute(select(d.kek_id)).scalars())

    def release() -> list[str]:
        conn.rollback()
        conn.close()
        engine.dispose()
        return under

    return release


def test_a_rotation_killed_midway_finishes_when_run_again(store_url: str, tmp_path: Path) -> None:
    old, new = _kek(tmp_path / "old", 1), _kek(tmp_path / "new", 2)
    source = KekSource.parse(old)
    engine = make_engine(store_url)
    keys = dict([Keyring.open(engine, source).current()])
    keys.update(add_data_key(engine, source.ids()[0], source.keys()[0]) for _ in range(400))
    engine.dispose()

    command = [ALIGHT, "data", "rotate-key", "--db", store_url, "--old-kek", old, "--new-kek", new, "--batch", "1"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # A one-page pipe that nobody reads past the first line: the rotation blocks writing its progress after about
    # 130 of 402 committed batches, however slowly this test is scheduled (seen on a loaded machine: it had
    # re-wrapped all 402 before SQLite's lock below was taken).
    assert proc.stdout is not None
    fcntl.fcntl(proc.stdout.fileno(), fcntl.F_SETPIPE_SZ, 4096)
    hold = _hold_sqlite if store_url.startswith("sqlite") else _hold_postgresql
    release = hold(store_url, proc)  # the rotation now waits mid-way: it is killed there for sure
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    under = release()
    new_id = KekSource.parse(new).ids()[0]
    assert 0 < under.count(new_id) < len(under) - 1  # some re-wrapped, some not: interrupted for real

    done = _rotate(store_url, old, new)
    assert done.returncode == 0, done.stderr
    assert "already under the new KEK" in done.stdout and "new cells are sealed" not in done.stdout  # no 2nd key
    assert set(_kek_ids(store_url)) == {new_id}
    (tmp_path / "old").unlink()
    engine = make_engine(store_url)
    ring = Keyring.open(engine, KekSource.parse(new))
    assert all(ring.key(key_id) == key for key_id, key in keys.items())
    engine.dispose()


def test_a_wrong_old_kek_is_refused_naming_the_option_and_nothing_changes(sqlite_url: str, tmp_path: Path) -> None:
    SqlStore(sqlite_url, KekSource.parse(_kek(tmp_path / "real", 1))).close()
    before = _kek_ids(sqlite_url)
    done = _rotate(sqlite_url, _kek(tmp_path / "wrong", 3), _kek(tmp_path / "new", 2))
    assert done.returncode == 1
    assert "--old-kek" in done.stderr and "nothing was changed" in done.stderr
    assert _kek_ids(sqlite_url) == before


def test_a_new_kek_that_cannot_be_read_is_refused_before_the_store_is_touched(sqlite_url: str, tmp_path: Path) -> None:
    SqlStore(sqlite_url, KekSource.parse(_kek(tmp_path / "real", 1))).close()
    before = _kek_ids(sqlite_url)
    (tmp_path / "short").write_text("not a key")
    done = _rotate(sqlite_url, f"file:{tmp_path / 'real'}", f"file:{tmp_path / 'short'}")
    assert done.returncode == 1
    assert "short" in done.stderr and "64 hex digits" in done.stderr
    assert _kek_ids(sqlite_url) == before


def test_an_embedded_runs_keys_and_sealed_logs_move_from_its_admin_key_to_alight_secret_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ALIGHT_SECRET_KEY", raising=False)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "stack.json").write_text('{"server_port": 1, "inference_port": 2, "admin_key": "the-runs-admin"}')
    url = f"sqlite:///{run_dir / 'alight.db'}"
    store = SqlStore(url, KekSource.parse("secret", admin_key="the-runs-admin"))
    key_id, key = store.keyring.current()
    store.close()
    log = attempt_log_path(run_dir / "logs", "r1", 1)
    log.parent.mkdir(parents=True)
    log.write_text("what the agent printed\n")
    sealed = LogSeal(KekSource.parse("secret", admin_key="the-runs-admin")).seal(log)
    secret = "k" * 43 + "="
    env = {**os.environ, "ALIGHT_SECRET_KEY": secret}
    command = [ALIGHT, "data", "rotate-key", "--run-dir", str(run_dir), "--new-kek", "secret"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False, env=env)
    assert done.returncode == 0, done.stderr
    monkeypatch.setenv("ALIGHT_SECRET_KEY", secret)
    assert "1 sealed attempt log(s) re-wrapped" in done.stdout
    ring = Keyring.open(make_engine(url), KekSource.parse("secret"))  # no admin key: ALIGHT_SECRET_KEY alone
    assert ring.key(key_id) == key
    assert LogSeal(KekSource.parse("secret")).read(sealed) == b"what the agent printed\n"
    engine = make_engine(url)
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(t.data_keys)).scalar() == 2
    engine.dispose()


def test_the_old_kek_is_the_servers_own_data_key_from_its_config_file(sqlite_url: str, tmp_path: Path) -> None:
    old, new = _kek(tmp_path / "old", 1), _kek(tmp_path / "new", 2)
    SqlStore(sqlite_url, KekSource.parse(old)).close()
    config = tmp_path / "server.yaml"
    config.write_text(f"db_url: {sqlite_url}\ndata_key:\n  file: {tmp_path / 'old'}\n")
    command = [ALIGHT, "data", "rotate-key", "--config", str(config), "--new-kek", new]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert set(_kek_ids(sqlite_url)) == {KekSource.parse(new).ids()[0]}
