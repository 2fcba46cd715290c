"""`alight controller` and `alight logs` as users run them."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from controller_testkit import create_rollout, wait_terminal, wait_until
from typer.testing import CliRunner

from alight.cli import app
from alight_server.controller.loop import Controller
from alight_server.store.keys.sealed_logs import open_attempt_log

ALIGHT = str(Path(sys.executable).parent / "alight")


def test_controller_command_runs_attempts_and_stops_on_sigterm(
    live_server: Any, admin_client: httpx.Client, logs_dir: Path
) -> None:
    argv = [ALIGHT, "controller", "--server", live_server.url, "--logs-dir", str(logs_dir), "--poll-interval", "0.05"]
    env_key = {"ALIGHT_ADMIN_KEY": live_server.admin_key, "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen(argv, env=env_key, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        create_rollout(admin_client, "cli-1", task={"say": "ran under the cli"})
        assert wait_terminal(admin_client, "cli-1")["state"] == "succeeded"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        proc.kill()
    assert proc.stdout is not None
    assert "up to 4 attempts" in proc.stdout.read()
    # Released, the attempt's output is kept sealed under the controller's KEK (here: its admin key's).
    assert not (logs_dir / "cli-1" / "1.log").exists()
    assert b"ran under the cli" not in (logs_dir / "cli-1" / "1.log.sealed").read_bytes()
    assert "ran under the cli" in open_attempt_log(logs_dir / "cli-1" / "1.log.sealed", live_server.admin_key)


def test_controller_command_refuses_a_wrong_admin_key(live_server: Any, logs_dir: Path) -> None:
    args = ["controller", "--server", live_server.url, "--admin-key", "alk_wrong", "--logs-dir", str(logs_dir)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    assert "refused the admin key" in result.output


def test_logs_command_prints_the_uploaded_output(
    live_server: Any, admin_client: httpx.Client, controllers: Callable[..., Controller], tmp_path: Path
) -> None:
    create_rollout(admin_client, "logs-1", task={"by_attempt": {"1": {"sleep": 60}}, "say": "second try"}, timeout_s=3)
    controllers().start()
    assert wait_terminal(admin_client, "logs-1")["state"] == "succeeded"
    server = ["--server", live_server.url, "--admin-key", live_server.admin_key]
    # A fresh directory: the text must come from the server, not from the controller's files.
    local = ["--logs-dir", str(tmp_path / "elsewhere")]
    result = CliRunner().invoke(app, ["logs", "logs-1", *server, *local])
    assert result.exit_code == 0, result.output
    assert "attempt 1 (failed, timeout" in result.output
    assert "attempt 2 (succeeded" in result.output and "second try" in result.output
    one = CliRunner().invoke(app, ["logs", "logs-1", "--attempt", "1", *server, *local])
    assert one.output == "agent attempt 1 starting\n"


def test_logs_command_reads_the_local_file_of_a_running_attempt(
    live_server: Any, admin_client: httpx.Client, controllers: Callable[..., Controller], logs_dir: Path
) -> None:
    create_rollout(admin_client, "logs-live", task={"sleep": 60})
    controllers().start()
    path = logs_dir / "logs-live" / "1.log"
    wait_until(lambda: path.exists() and path.read_text())
    server = ["--server", live_server.url, "--admin-key", live_server.admin_key]
    result = CliRunner().invoke(app, ["logs", "logs-live", *server, "--logs-dir", str(logs_dir)])
    assert result.exit_code == 0, result.output
    assert "attempt 1 (running" in result.output and "agent attempt 1 starting" in result.output


def test_logs_command_says_when_there_is_nothing(live_server: Any, logs_dir: Path) -> None:
    args = ["logs", "nope", "--server", live_server.url, "--admin-key", live_server.admin_key]
    result = CliRunner().invoke(app, [*args, "--logs-dir", str(logs_dir)])
    assert result.exit_code == 1
    assert "no captured output for rollout 'nope'" in result.output
