"""A CLI task's check: run in the sandbox on the workspace, its score parsed strictly and clamped to the task's range.

The workspace is policy-written, so the check's output is an adversary's number: anything that reads as a
number but is not a finite decimal gives no reward (and an event, tested end to end in test_cli_sandbox.py).
"""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from alight_sandbox.harness.workspace import CliTask, check_reward, make_workspace

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **task: object) -> float | None:
    monkeypatch.setenv("ALIGHT_WORKSPACE_ROOT", str(tmp_path))
    cli_task = CliTask.parse({"prompt": "p", **task})
    return check_reward(cli_task, make_workspace(cli_task, "check"))


@pytest.mark.parametrize(
    ("line", "reward"),
    [("0.25", 0.25), ("1", 1.0), ("7", 1.0), ("-3", 0.0), ("1e-1", 0.1), ("+.5", 0.5), ("  0.5  ", 0.5)],
)
def test_a_score_on_the_last_line_is_clamped_to_the_default_range(tmp_path, monkeypatch, line, reward):
    assert verdict(tmp_path, monkeypatch, check=f"echo noise; echo '{line}'") == reward


def test_a_score_is_clamped_to_the_range_the_task_declares(tmp_path, monkeypatch):
    assert verdict(tmp_path, monkeypatch, check="echo 7.5", reward_range=[-10, 5]) == 5.0
    assert verdict(tmp_path, monkeypatch, check="echo -2.5", reward_range=[-10, 5]) == -2.5


@pytest.mark.parametrize("line", ["nan", "NaN", "-nan", "inf", "-Infinity", "1e999", "1_0", "0.5.1", "1e", "."])
def test_a_number_that_is_not_a_finite_decimal_gives_no_reward(tmp_path, monkeypatch, line):
    assert verdict(tmp_path, monkeypatch, check=f"echo '{line}'") is None


def test_a_last_line_that_is_no_number_falls_back_to_the_exit_status(tmp_path, monkeypatch):
    assert verdict(tmp_path, monkeypatch, check="echo '3 passed in 0.1s'") == 1.0
    assert verdict(tmp_path, monkeypatch, check="echo '1 failed'; exit 1") == 0.0


def test_the_score_is_read_from_stdout_not_stderr(tmp_path, monkeypatch):
    assert verdict(tmp_path, monkeypatch, check="echo 0.5; echo 0.9 >&2") == 0.5


def test_an_unordered_or_infinite_range_is_refused_with_the_field_named():
    for bad in ([1, 0], [0, float("inf")]):
        with pytest.raises(ValueError, match="reward_range"):
            CliTask.parse({"prompt": "p", "reward_range": bad})


def test_the_check_runs_on_the_workspace_without_network(tmp_path, monkeypatch):
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        check = f"test -f notes.txt && ! timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' && echo 0.5"
        assert verdict(tmp_path, monkeypatch, check=check, files={"notes.txt": "x"}) == 0.5


def test_the_checks_writes_outside_the_workspace_stay_in_the_sandbox(tmp_path, monkeypatch):
    outside = tmp_path / "outside.txt"
    assert verdict(tmp_path, monkeypatch, check=f"echo x > {outside}; echo 0.5") == 0.5
    assert not outside.exists()


def test_a_check_runs_the_interpreter_the_setting_names(tmp_path, monkeypatch):
    python = ROOT / ".venv" / "bin" / "python"  # pytest is installed there, not in the system's python3
    monkeypatch.setenv("ALIGHT_HARNESS_CHECK_PYTHON", str(python))
    check = "python -c 'import pytest, sys; print(0.5 if sys.prefix.endswith(\".venv\") else 0)'"
    assert verdict(tmp_path, monkeypatch, check=check) == 0.5


def test_a_check_past_its_timeout_gives_reward_zero(tmp_path, monkeypatch):
    assert verdict(tmp_path, monkeypatch, check="sleep 30; echo 1", check_timeout_s=1) == 0.0
