"""`alight data purge` against rollout ids a purge could confuse: ids that are path parts, ids with glob
characters, and ids whose folders looked alike; on SQLite and PostgreSQL, the real command."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from alight.attempt_logs import attempt_dir, attempt_log_path
from alight.cli import app as cli
from alight_server.store import Store, open_store
from alight_server.store.keys.kek import KekSource
from tests.server.retention_data import ended

ADMIN_KEY = "alk_purge-attacks-key"
DOTTED = ["..", "_..", ".", "_.", "__..", "a"]


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = open_store(store_url, KekSource.parse("secret", admin_key=ADMIN_KEY))
    yield opened
    opened.close()


def _purge(url: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["data", "purge", "--db", url, "--admin-key", ADMIN_KEY, *args])
    return result.exit_code, " ".join(re.sub(r"[│╭╮╰╯─]", " ", result.output).split())


def _logs(store: Store, run_dir: Path, ids: list[str]) -> dict[str, Path]:
    for rid in ids:
        ended(store, rid, run_dir=run_dir)
        path = attempt_log_path(run_dir / "logs", rid, 1)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"attempt output of {rid}\n")
    return {rid: attempt_log_path(run_dir / "logs", rid, 1) for rid in ids}


def test_dotted_ids_and_their_underscored_twins_have_folders_of_their_own(tmp_path: Path) -> None:
    folders = [attempt_dir(tmp_path, rid) for rid in DOTTED]
    assert len(set(folders)) == len(DOTTED)  # ".." and "_.." shared "_.." before
    assert all(f.parent == tmp_path and f.name not in (".", "..") for f in folders)


@pytest.mark.parametrize("victim", ["..", "."])
def test_purging_a_dotted_rollout_erases_its_folder_only(
    store: Store, store_url: str, tmp_path: Path, victim: str
) -> None:
    logs = _logs(store, tmp_path / "run", DOTTED)
    code, output = _purge(store_url, "--rollout", victim)
    assert code == 0, output
    assert not logs[victim].exists()
    assert all(path.read_text() == f"attempt output of {rid}\n" for rid, path in logs.items() if rid != victim)
    assert (tmp_path / "run" / "logs").is_dir() and (tmp_path / "run").is_dir()


@pytest.mark.parametrize("pattern", ["erase-*", "erase-?", "erase-[12]", "../run", "%", "erase%", "erase_1"])
def test_a_rollout_id_with_glob_path_or_like_characters_matches_nothing_and_deletes_nothing(
    store: Store, store_url: str, tmp_path: Path, pattern: str
) -> None:
    logs = _logs(store, tmp_path / "run", ["erase-1", "erase-2", "eraseX1"])
    code, output = _purge(store_url, "--rollout", pattern)
    assert code != 0 and "no rollout" in output and pattern in output, output
    assert all(path.exists() for path in logs.values())
    assert [store.get_rollout(rid).id for rid in logs] == list(logs)
