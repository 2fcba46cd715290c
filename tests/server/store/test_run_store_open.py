"""A store a training run sealed opens with what the run leaves: `alight serve --run-dir RUN`; any other key is
refused in one sentence naming the run folder, before the store is touched (stacks/run_store.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from alight.schemas import RolloutCreate, RunReport
from alight_server.config import ServerConfig
from alight_server.stacks.state import load_or_create
from alight_server.store import tables as t
from alight_server.store.database import make_engine
from alight_server.store.sql import SqlStore
from tests.server.api.test_serve import ALIGHT, serve

TASK = {"question": "what is 6 * 7?"}
RUN_ID, ROLLOUT_ID = "quick", "quick-g000001-k0"  # the trainer names a run's rollouts `<run id>-...`


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """runs/quickstart under tmp_path as a training run leaves it: stack.json and a store its server sealed."""
    for name in ("ALIGHT_SECRET_KEY", "ALIGHT_DATA_KEY", "ALIGHT_ADMIN_KEY", "ALIGHT_DB", "ALIGHT_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "runs" / "quickstart"
    state = load_or_create(folder)  # the embedded stack's identity, as `alight train` writes it
    config = ServerConfig(db_url=f"sqlite:///{folder / 'alight.db'}", admin_key=state.admin_key)  # as stacks/kinds.py
    store = SqlStore(config.db_url, config.kek_source())
    try:
        store.report_run(RunReport(id=RUN_ID, config={"model": "tiny"}))
        store.create_rollouts([RolloutCreate(id=ROLLOUT_ID, task=TASK)])
    finally:
        store.close()
    return folder


def _data_keys(run_dir: Path) -> int:
    engine = make_engine(f"sqlite:///{run_dir / 'alight.db'}")
    try:
        with engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(t.data_keys)).scalar_one()
    finally:
        engine.dispose()


def test_serve_run_dir_answers_the_dashboard_api_with_the_run_s_key(run_dir: Path) -> None:
    admin_key = load_or_create(run_dir).admin_key
    with serve(["--run-dir", str(run_dir)]) as (_, url):
        headers = {"Authorization": f"Bearer {admin_key}"}
        rollout = httpx.get(f"{url}/api/rollouts/{ROLLOUT_ID}", headers=headers, timeout=10)
        assert rollout.status_code == 200, rollout.text
        assert rollout.json()["task"] == TASK  # a sealed column, opened with the run's key
        assert httpx.get(f"{url}/ui/", timeout=10).status_code == 200


@pytest.mark.parametrize("key", [[], ["--admin-key", "not-the-runs-key-0123456789"]], ids=["generated", "other"])
def test_a_run_s_store_opened_with_another_key_is_refused_naming_the_run_folder(run_dir: Path, key: list[str]) -> None:
    before = _data_keys(run_dir)
    command = [ALIGHT, "serve", "--port", "1", "--db", "runs/quickstart/alight.db", *key]
    done = subprocess.run(
        command, cwd=run_dir.parents[1], capture_output=True, text=True, timeout=60, check=False, env=dict(os.environ)
    )
    assert done.returncode == 1, done.stdout + done.stderr
    sentence = "this store was sealed by the training run in runs/quickstart: open it with --run-dir runs/quickstart"
    assert done.stderr.strip().endswith(sentence), done.stderr
    assert _data_keys(run_dir) == before  # refused before the store was touched: no key of its own added


def test_serve_run_dir_refuses_a_folder_no_run_wrote(tmp_path: Path) -> None:
    done = subprocess.run(
        [ALIGHT, "serve", "--port", "1", "--run-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert f"{tmp_path} is not a training run's folder (no readable stack.json" in done.stderr


def test_data_export_run_dir_reads_the_run_s_store_with_the_run_s_key(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "export.jsonl"
    command = [ALIGHT, "data", "export", RUN_ID, "--run-dir", str(run_dir), "-o", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines[0]["run_id"] == RUN_ID
    assert [(line["rollout_id"], line["task"]) for line in lines if line.get("kind") == "rollout"] == [
        (ROLLOUT_ID, TASK)
    ]
