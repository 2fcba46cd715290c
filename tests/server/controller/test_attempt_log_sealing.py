"""Attempt logs at rest: an ended attempt's output is sealed in the logs folder, still shown by `alight logs`."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from controller_testkit import create_rollout, wait_terminal, wait_until

from alight.attempt_logs import attempt_log_path, sealed_log
from alight.client import AlightClient
from alight_server.controller.local import LocalRunner
from alight_server.controller.loop import Controller
from alight_server.store.base import SealError
from alight_server.store.keys.kek import KekSource
from alight_server.store.keys.sealed_logs import MAGIC, LogSeal, open_attempt_log

ALIGHT = str(Path(sys.executable).parent / "alight")
MARKER = "the agent printed plum tomato sunrise"


def _folder_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


@pytest.fixture
def sealing_controller(live_server: Any, logs_dir: Path) -> Iterator[Controller]:
    """A controller whose local runner seals logs under the server's own KEK source (its admin key)."""
    seal = LogSeal(live_server.config.kek_source())
    controller = Controller(
        AlightClient(live_server.url, admin_key=live_server.admin_key),
        LocalRunner(logs_dir, log_seal=seal),
        concurrency=2,
        poll_interval=0.05,
        kill_grace_s=0.3,
        watch_interval=0.1,
    )
    yield controller
    controller.stop(kill_running=True)


def test_an_agents_output_is_absent_from_the_logs_folder_once_its_attempt_ended_and_the_dashboard_shows_it(
    sealing_controller: Controller, admin_client: httpx.Client, logs_dir: Path, live_server: Any
) -> None:
    create_rollout(admin_client, "sealed-log", task={"say": MARKER})
    sealing_controller.start()
    assert wait_terminal(admin_client, "sealed-log")["state"] == "succeeded"
    sealed = wait_until(lambda: (p := sealed_log(attempt_log_path(logs_dir, "sealed-log", 1))).exists() and p)
    assert not attempt_log_path(logs_dir, "sealed-log", 1).exists()
    assert MARKER.encode() not in _folder_bytes(logs_dir)
    assert MARKER in open_attempt_log(sealed, live_server.admin_key)  # and the key opens it
    view = admin_client.get("/api/ui/rollouts/sealed-log/view")  # the dashboard shows the uploaded copy
    assert view.status_code == 200 and MARKER in view.json()["log"]


def test_alight_logs_prints_a_sealed_local_log_with_the_admin_key(
    sealing_controller: Controller, admin_client: httpx.Client, logs_dir: Path, live_server: Any
) -> None:
    create_rollout(admin_client, "shown-log", task={"say": MARKER})
    sealing_controller.start()
    wait_terminal(admin_client, "shown-log")
    wait_until(lambda: sealed_log(attempt_log_path(logs_dir, "shown-log", 1)).exists())
    env = {k: v for k, v in os.environ.items() if k not in ("ALIGHT_SECRET_KEY", "ALIGHT_DATA_KEY")}
    command = [ALIGHT, "logs", "shown-log", "--logs-dir", str(logs_dir)]
    shown = subprocess.run([*command, "--admin-key", live_server.admin_key], capture_output=True, text=True, env=env)
    assert shown.returncode == 0, shown.stderr
    assert MARKER in shown.stdout
    refused = subprocess.run([*command, "--admin-key", "another-key"], capture_output=True, text=True, env=env)
    assert refused.returncode == 1 and MARKER not in refused.stdout
    assert "key-encryption key" in refused.stderr and "admin key" in refused.stderr


def test_the_runner_still_reads_a_sealed_logs_tail(logs_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "kek").write_text("5a" * 32)
    seal = LogSeal(KekSource.parse(f"file:{tmp_path / 'kek'}"))
    path = attempt_log_path(logs_dir, "r1", 1)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"x" * (3 << 20) + MARKER.encode())  # several frames
    seal.seal(path)
    runner = LocalRunner(logs_dir, log_seal=seal)
    assert runner.log_tail(runner.handle_for("r1", 1), len(MARKER)) == MARKER


def _sealed(logs_dir: Path, tmp_path: Path, rollout: str, text: bytes) -> tuple[LogSeal, Path]:
    (tmp_path / "kek").write_text("5a" * 32)
    seal = LogSeal(KekSource.parse(f"file:{tmp_path / 'kek'}"))
    path = attempt_log_path(logs_dir, rollout, 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text)
    return seal, seal.seal(path)


def test_a_sealed_log_moved_to_another_attempt_is_refused_naming_the_file(logs_dir: Path, tmp_path: Path) -> None:
    seal, sealed = _sealed(logs_dir, tmp_path, "r1", MARKER.encode())
    other = sealed_log(attempt_log_path(logs_dir, "r2", 1))
    other.parent.mkdir(parents=True)
    sealed.rename(other)
    with pytest.raises(SealError, match=r"r2/1\.log\.sealed does not open as the log of attempt r2/1"):
        seal.read(other)


def test_a_sealed_log_cut_short_at_a_frame_boundary_is_refused(logs_dir: Path, tmp_path: Path) -> None:
    seal, sealed = _sealed(logs_dir, tmp_path, "r1", b"y" * ((1 << 20) + 10))  # two frames
    data = sealed.read_bytes()
    header_end = data.index(b"\n", len(MAGIC)) + 1
    first_frame = int.from_bytes(data[header_end : header_end + 4], "big")
    sealed.write_bytes(data[: header_end + 4 + first_frame])  # only the first frame left
    with pytest.raises(SealError, match="cut short"):
        seal.read(sealed)
