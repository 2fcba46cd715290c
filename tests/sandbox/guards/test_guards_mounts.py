"""The sandbox's mounts: what it sees of the host wherever the host keeps it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from alight_sandbox.guards.policy import SandboxPolicy
from alight_sandbox.guards.run import run_command

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap missing: apt-get install -y bubblewrap")


def test_an_interpreter_under_the_hosts_tmp_runs_in_the_sandbox(tmp_path: Path) -> None:
    # A checkout cloned under /tmp keeps its venvs there; the sandbox's own /tmp (the scratch) must not hide them.
    assert str(tmp_path).startswith("/tmp/"), f"this test needs a tmp_path under /tmp, got {tmp_path}"
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (tmp_path / "workspace").mkdir()
    (tmp_path / "scratch").mkdir()
    policy = SandboxPolicy(
        workspace=str(tmp_path / "workspace"), scratch=str(tmp_path / "scratch"), python=str(venv / "bin" / "python")
    )
    result = run_command(policy, ["python", "-c", "import sys; print(sys.prefix)"], timeout_s=60)
    assert (result.returncode, result.output.strip()) == (0, str(venv)), result.output


def test_the_sandbox_sees_no_host_accounts_or_identity_in_etc(tmp_path: Path) -> None:
    (tmp_path / "workspace").mkdir()
    (tmp_path / "scratch").mkdir()
    policy = SandboxPolicy(workspace=str(tmp_path / "workspace"), scratch=str(tmp_path / "scratch"))
    probe = "for f in shadow passwd hostname machine-id gitconfig; do test -e /etc/$f && echo seen:$f; done; echo done"
    result = run_command(policy, ["bash", "-c", probe], timeout_s=60)
    assert result.output.split() == ["done"], result.output
