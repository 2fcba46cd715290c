"""The server's periodic purge (`retention:` in its config): ended rollouts and old step metrics go, nothing else."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import httpx
import pytest
from pydantic import ValidationError

from alight.schemas import RunStepReport
from alight_sandbox.harness.workspace import WORKSPACE_ROOT_ENV, CliTask, make_workspace, workspace_name
from alight_server.app import create_app
from alight_server.config import RetentionConfig, ServerConfig
from alight_server.stacks.server_thread import ServerThread, free_port
from alight_server.store import Store, open_store
from alight_server.store.keys.kek import KekSource
from tests.conftest import ADMIN_KEY
from tests.server.retention_data import ended, group, run, started

MINUTE = 1 / (24 * 60)  # in days
T = TypeVar("T")
AUTH = {"Authorization": f"Bearer {ADMIN_KEY}"}


def _eventually(check: Callable[[], T], done: Callable[[T], bool], timeout_s: float = 20.0) -> T:
    """`check()` until `done` holds of its value (a purge round runs beside the test), or its last value."""
    deadline = time.monotonic() + timeout_s
    while not done(value := check()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return value


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_store_url")


@pytest.fixture
def keyed_store(db_url: str) -> Iterator[Store]:
    """A store sealed under the key the server derives from its admin key (so its rows open after create_app)."""
    store = open_store(db_url, KekSource.parse("secret", admin_key=ADMIN_KEY))
    yield store
    store.close()


def test_the_server_purges_what_its_retention_period_has_passed_and_keeps_what_a_training_needs(
    keyed_store: Store, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(WORKSPACE_ROOT_ENV, str(tmp_path / "workspaces"))
    store = keyed_store
    run(store, "live")
    needed = group(store, "live-s00000-t000", 2, tmp_path)  # ended, but their run is still training
    old = ended(store, "old", run_dir=tmp_path)
    (tmp_path / "logs" / "old").mkdir(parents=True)
    task = CliTask(prompt="fix the bug", files={"notes.txt": "what the agent saw"})
    old_workspace = make_workspace(task, workspace_name("claude", old, 1)).root
    needed_workspace = make_workspace(task, workspace_name("claude", needed[0], 1)).root
    unfinished = "unfinished"
    started(store, unfinished)
    run(store, "done", "succeeded")
    store.add_run_step("done", RunStepReport(step=1, metrics={"loss": 1.0}))
    time.sleep(0.1)  # the retention period below is 6 ms: all of the above is past it
    retention = RetentionConfig(content_days=0.0001 * MINUTE, step_metrics_days=0.0001 * MINUTE, interval_s=0.2)
    config = ServerConfig(admin_key=ADMIN_KEY, db_url=db_url, port=free_port(), retention=retention)

    app = create_app(config, store=store)
    with ServerThread(app, port=config.port) as url, httpx.Client(base_url=url, headers=AUTH) as client:
        gone = _eventually(lambda: client.get(f"/api/rollouts/{old}"), lambda a: a.status_code == 410)
        assert gone.status_code == 410, gone.text
        assert "retention: content kept" in gone.json()["error"]["message"]
        # the store's rows go first, then the files, in the same round
        assert not _eventually(lambda: (tmp_path / "logs" / "old").exists() or old_workspace.exists(), lambda e: not e)
        assert needed_workspace.exists()
        for rid in [*needed, unfinished]:
            assert client.get(f"/api/rollouts/{rid}").status_code == 200
        assert _eventually(lambda: client.get("/api/runs/done/steps").json()["steps"], lambda s: s == []) == []


def test_retention_is_off_unless_configured_and_refuses_a_period_that_is_not_positive() -> None:
    assert not ServerConfig().retention.enabled()
    assert RetentionConfig(content_days=30).enabled()
    with pytest.raises(ValidationError, match="content_days"):
        RetentionConfig(content_days=0)
    with pytest.raises(ValidationError, match="retention"):
        ServerConfig.model_validate({"retention": {"content_day": 30}})  # a misspelt key is refused, not ignored
