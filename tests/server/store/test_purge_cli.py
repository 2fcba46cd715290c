"""`alight data purge`, the real command, on a store a live server is serving (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from alight.attempt_logs import attempt_log_path
from alight.cli import app as cli
from alight_sandbox.harness.workspace import WORKSPACE_ROOT_ENV, CliTask, make_workspace, workspace_name
from alight_server.app import create_app
from alight_server.config import ServerConfig
from alight_server.stacks.server_thread import ServerThread, free_port
from alight_server.store import Store, open_store
from alight_server.store.keys.kek import KekSource
from tests.server.retention_data import TABLES, ended, group, run

ADMIN_KEY = "alk_purge-test-key"


@dataclass
class Served:
    url: str
    db: str
    store: Store
    api: httpx.Client
    run_dir: Path  # the run folder the rollouts name in their metadata (its logs/ has their attempt logs)


@pytest.fixture(autouse=True)
def workspaces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """CLI agents' workspaces are made (and purged) under this test's own root."""
    root = tmp_path / "workspaces"
    monkeypatch.setenv(WORKSPACE_ROOT_ENV, str(root))
    return root


@pytest.fixture
def served(store_url: str, tmp_path: Path) -> Iterator[Served]:
    store = open_store(store_url, KekSource.parse("secret", admin_key=ADMIN_KEY))
    config = ServerConfig(admin_key=ADMIN_KEY, db_url=store_url, port=free_port())
    with ServerThread(create_app(config, store=store), port=config.port) as url:
        headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
        with httpx.Client(base_url=url, headers=headers, timeout=30) as api:
            yield Served(url, store_url, store, api, tmp_path / "run")
    store.close()


def purge(db: str, *args: str) -> tuple[int, str]:
    """The command's exit code and its output, Rich's boxes and line wrapping undone."""
    result = CliRunner().invoke(cli, ["data", "purge", "--db", db, "--admin-key", ADMIN_KEY, *args])
    return result.exit_code, " ".join(re.sub(r"[│╭╮╰╯─]", " ", result.output).split())


def report(db: str, *args: str) -> dict[str, Any]:
    code, output = purge(db, *args, "--json")
    assert code == 0, output
    return json.loads(output)


def with_logs(folder: Path, rollout_ids: list[str]) -> list[Path]:
    """An attempt log per rollout, where the local runner writes it under `folder`; the rollouts' folders."""
    for rid in rollout_ids:
        path = attempt_log_path(folder, rid, 1)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"attempt output of {rid}\n")
    return [attempt_log_path(folder, rid, 1).parent for rid in rollout_ids]


def test_purge_by_run_reports_rows_per_table_and_erases_its_attempt_logs(served: Served, tmp_path: Path) -> None:
    run(served.store, "done", "succeeded")
    run(served.store, "live")
    done = group(served.store, "done-s00000-t000", 3, served.run_dir)
    live = group(served.store, "live-s00000-t000", 2, served.run_dir)
    controller_logs = tmp_path / "controller-logs"
    gone = with_logs(served.run_dir / "logs", done) + with_logs(controller_logs, done)
    kept = with_logs(served.run_dir / "logs", live)

    summary = report(served.db, "--run", "done", "--logs-dir", str(controller_logs))

    assert summary["deleted"] == {**dict.fromkeys(TABLES, 3), "run_steps": 0}
    assert sorted(summary["rollouts"]) == done
    assert sorted(summary["folders"]) == sorted(map(str, gone))
    assert not any(folder.exists() for folder in gone)
    assert all(folder.exists() for folder in kept)
    assert [served.api.get(f"/api/rollouts/{rid}").status_code for rid in live] == [200, 200]
    if served.db.startswith("sqlite"):
        assert summary["bytes_after"] < summary["bytes_before"], summary


def test_purging_one_rollout_erases_it_everywhere_and_the_api_answers_purged_on_its_date(served: Served) -> None:
    ended(served.store, "erase-me", run_dir=served.run_dir)
    ended(served.store, "keep-me", run_dir=served.run_dir)
    (folder,) = with_logs(served.run_dir / "logs", ["erase-me"])

    summary = report(served.db, "--rollout", "erase-me", "--reason", "erasure request 7")

    assert summary["rollouts"] == ["erase-me"]
    assert summary["deleted"]["model_calls"] == 1
    assert not folder.exists()
    for path in ("", "/trajectory"):
        answer = served.api.get(f"/api/rollouts/erase-me{path}")
        assert answer.status_code == 410, answer.text
        error = answer.json()["error"]
        assert error["type"] == "not_found_error"
        assert re.search(r"purged on \d{4}-\d\d-\d\d \d\d:\d\d UTC \(erasure request 7\)", error["message"])
    for path in ("view", "tokens"):  # what the dashboard's rollout page reads
        assert served.api.get(f"/api/ui/rollouts/erase-me/{path}").status_code == 410
    assert served.api.get("/api/rollouts/keep-me/trajectory").status_code == 200
    assert served.api.get("/api/rollouts/never-was").status_code == 404
    code, output = purge(served.db, "--rollout", "erase-me")
    assert code == 0
    assert "nothing to do" in output and "was purged on" in output


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A folder outside every logs folder, which a planted link points at."""
    folder = tmp_path / "elsewhere"
    (folder / "inner").mkdir(parents=True)
    (folder / "keep.txt").write_text("not the rollout's")
    return folder


def test_a_log_folder_replaced_by_a_link_is_unlinked_not_followed(served: Served, elsewhere: Path) -> None:
    ended(served.store, "linked", run_dir=served.run_dir)
    folder = attempt_log_path(served.run_dir / "logs", "linked", 1).parent
    folder.parent.mkdir(parents=True)
    folder.symlink_to(elsewhere)  # what an agent writing beside its own log could plant

    summary = report(served.db, "--rollout", "linked")

    assert summary["folders"] == [str(folder)]
    assert not folder.is_symlink()
    assert (elsewhere / "keep.txt").read_text() == "not the rollout's"


def test_a_link_inside_a_log_folder_goes_with_the_folder_and_its_target_stays(served: Served, elsewhere: Path) -> None:
    ended(served.store, "with-link", run_dir=served.run_dir)
    (folder,) = with_logs(served.run_dir / "logs", ["with-link"])
    (folder / "escape").symlink_to(elsewhere)

    report(served.db, "--rollout", "with-link")

    assert not folder.exists()
    assert (elsewhere / "keep.txt").read_text() == "not the rollout's"
    assert (elsewhere / "inner").is_dir()


def test_purging_a_rollout_erases_its_cli_workspaces_and_no_other_rollouts(served: Served, workspaces: Path) -> None:
    task = CliTask(prompt="fix the bug", files={"notes.txt": "what the agent saw"})
    for rid in ("ws", "ws-1", "other"):
        ended(served.store, rid, run_dir=served.run_dir)
    gone = [make_workspace(task, workspace_name("claude", "ws", n)).root for n in (1, 2)]
    kept = [  # "ws-1" attempt 2 is named like "ws" attempt 1 would be, up to the last dash
        make_workspace(task, workspace_name("claude", "ws-1", 2)).root,
        make_workspace(task, workspace_name("codex", "other", 1)).root,
    ]

    summary = report(served.db, "--rollout", "ws")

    assert sorted(summary["folders"]) == sorted(map(str, gone))
    assert not any(root.exists() for root in gone)
    assert all((root / "work" / "notes.txt").exists() for root in kept)


def test_a_rollout_a_running_training_needs_is_refused_naming_why(served: Served) -> None:
    run(served.store, "live")
    rid, _ = group(served.store, "live-s00000-t000")
    code, output = purge(served.db, "--rollout", rid)
    assert code == 1
    assert f"rollout {rid!r} is kept: its training run is running" in output
    assert served.api.get(f"/api/rollouts/{rid}/trajectory").status_code == 200


def test_a_dry_run_prints_what_would_go_and_deletes_nothing(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'alight.db'}"
    store = open_store(db, KekSource.parse("secret", admin_key=ADMIN_KEY))
    group(store, "g", 2)
    store.close()
    code, output = purge(db, "--before", "2999-01-01", "--dry-run")
    assert code == 0, output
    assert "would delete 2 rollouts" in output and "model_calls 2" in output
    store = open_store(db, KekSource.parse("secret", admin_key=ADMIN_KEY))
    assert len(store.list_model_calls("g-k00")) == 1
    store.close()


@pytest.mark.parametrize("value", ["last tuesday", "2026-13-01", "01/11/2026"])
def test_a_date_that_does_not_parse_is_refused_naming_the_format(tmp_path: Path, value: str) -> None:
    code, output = purge(f"sqlite:///{tmp_path / 'a.db'}", "--before", value)
    assert code == 2
    assert "--before" in output and "ISO 8601" in output and f"got {value!r}" in output


def test_an_unknown_run_is_refused_by_name(tmp_path: Path) -> None:
    code, output = purge(f"sqlite:///{tmp_path / 'a.db'}", "--run", "nope")
    assert code == 1
    assert "nothing purged: no run with id 'nope'" in output


def test_a_purge_without_a_scope_says_what_to_pass(tmp_path: Path) -> None:
    code, output = purge(f"sqlite:///{tmp_path / 'a.db'}")
    assert code == 2
    assert "say what to purge: --before DATE, --run ID, --rollout ID" in output
