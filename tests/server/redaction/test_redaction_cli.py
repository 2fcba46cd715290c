"""The CLI's copies for people: `alight run` prints a redacted trajectory, `alight logs` redacted logs (--reveal: exact)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from alight import envvars
from alight.schemas import Trajectory, UpstreamCreate
from alight_server.stacks.server_thread import ServerThread
from alight_testing.fake_upstream import create_fake_upstream
from tests.server.redaction.planted import BLOCK, SECRETS, leaked
from tests.server.redaction.planted_rollout import ROLLOUT, plant_run

if TYPE_CHECKING:
    from tests.conftest import LiveServer

pytestmark = pytest.mark.timeout(180)
AGENT = f"{Path(__file__).parent / 'agents' / 'secret_agent.py'}:main"
TASK = json.dumps({"settings": BLOCK})


def alight_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The `alight` command in a fresh process, on a wide terminal, without this shell's ALIGHT_* variables."""
    env = {k: v for k, v in os.environ.items() if k not in envvars.ALL and k != "ALIGHT_ADMIN_KEY"}
    env["COLUMNS"] = "250"
    return subprocess.run(
        [sys.executable, "-c", "from alight.cli import main; main()", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
    )


@pytest.fixture
def fake_upstream_url() -> Iterator[str]:
    with ServerThread(create_fake_upstream("policy-model")) as url:
        yield f"{url}/v1"


def test_alight_run_json_prints_the_trajectory_with_every_secret_hidden(
    live_server: LiveServer, fake_upstream_url: str
) -> None:
    live_server.store.add_upstream(UpstreamCreate(id="policy", url=fake_upstream_url, model="policy-model"))
    proc = alight_cli(
        "run", AGENT, "--task", TASK, "--server", live_server.url, "--admin-key", live_server.admin_key, "--json"
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert leaked(proc.stdout) == [] and leaked(proc.stderr) == []
    trajectory = Trajectory.model_validate_json(proc.stdout)
    assert "[REDACTED:aws_access_key]" in json.dumps(trajectory.task)
    assert "[REDACTED:private_key]" in json.dumps(trajectory.calls[0].call.request)
    assert "[REDACTED:json_web_token]" in str(trajectory.tool_spans[0].result)
    stored = live_server.store.list_model_calls(trajectory.rollout_id)
    assert SECRETS["github_token"] in json.dumps(stored[0].request)  # the store keeps the exact data


def test_alight_run_reveal_prints_the_exact_trajectory(live_server: LiveServer, fake_upstream_url: str) -> None:
    live_server.store.add_upstream(UpstreamCreate(id="policy", url=fake_upstream_url, model="policy-model"))
    server = ("--server", live_server.url, "--admin-key", live_server.admin_key)
    proc = alight_cli("run", AGENT, "--task", TASK, *server, "--json", "--reveal")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    trajectory = Trajectory.model_validate_json(proc.stdout)
    assert set(leaked(json.dumps(trajectory.task))) == set(SECRETS)
    assert trajectory.calls[0].call.prompt_token_ids and "redacted" not in trajectory.calls[0].call.flags


def test_alight_run_tables_show_marks_not_secrets(fake_upstream_url: str) -> None:
    proc = alight_cli("run", AGENT, "--task", TASK, "--upstream", fake_upstream_url, "--model", "policy-model")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "1 model calls, 1 tool spans" in proc.stdout and "redacted" in proc.stdout  # the call's flag
    assert "-> export AWS_ACCESS_KEY_ID=[REDACTED:" in proc.stdout  # the tool's result, clipped to 80 characters
    assert leaked(proc.stdout) == []


def test_alight_logs_from_the_server_is_redacted_and_reveal_prints_it_exact(live_server: LiveServer) -> None:
    plant_run(live_server.store)
    base = (
        "logs",
        ROLLOUT,
        "--server",
        live_server.url,
        "--admin-key",
        live_server.admin_key,
        "--logs-dir",
        "/nonexistent",
    )
    shown = alight_cli(*base)
    assert shown.returncode == 0, shown.stderr
    assert leaked(shown.stdout) == [] and "[REDACTED:slack_token]" in shown.stdout and "agent: done" in shown.stdout
    exact = alight_cli(*base, "--reveal")
    assert exact.returncode == 0 and set(leaked(exact.stdout)) == set(SECRETS)


def test_alight_logs_redacts_a_log_read_from_local_disk(tmp_path: Path) -> None:
    folder = tmp_path / "logs" / "r-local"
    folder.mkdir(parents=True)
    (folder / "1.log").write_text(f"starting\n{BLOCK}\nfinished\n")
    shown = alight_cli("logs", "r-local", "--logs-dir", str(tmp_path / "logs"))
    assert shown.returncode == 0, shown.stderr
    assert "starting" in shown.stdout and "finished" in shown.stdout and "[REDACTED:card]" in shown.stdout
    assert leaked(shown.stdout) == ["employee_id"]  # no server config here: only the default detectors run
    exact = alight_cli("logs", "r-local", "--logs-dir", str(tmp_path / "logs"), "--reveal")
    assert set(leaked(exact.stdout)) == set(SECRETS)
