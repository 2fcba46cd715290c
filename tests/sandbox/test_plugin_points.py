"""The server reaches the coding kit only through entry points: without alight-sandbox it still runs and says why."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from alight_sandbox.harness.workspace import CLI_WORKSPACES, workspace_name
from alight_server.store.purge import workspace_kinds
from tests.hidden_package import without

# Run first in the child: Python knows neither the module nor the distribution alight-sandbox.
WITHOUT_SANDBOX = without("alight_sandbox", "alight-sandbox")


def _run(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_SANDBOX + code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )


def test_the_installed_kit_declares_its_workspaces_to_the_purge() -> None:
    assert CLI_WORKSPACES in workspace_kinds()
    assert CLI_WORKSPACES.rollout_of(workspace_name("codex", "r-7", 2) + "-abcd1234") == "r-7"
    assert CLI_WORKSPACES.rollout_of("someone-elses-folder") is None


def test_without_the_kit_alight_data_clean_names_the_package_to_install(tmp_path: Path) -> None:
    argv = ["alight", "data", "clean", "tasks.jsonl", "--out-dir", "out"]
    done = _run(f"from alight.cli import main; sys.argv = {argv!r}; main()", tmp_path)
    assert done.returncode == 2, done.stderr
    assert "pip install alight-sandbox" in done.stderr
    assert not (tmp_path / "out").exists()


def test_without_the_kit_the_server_imports_and_a_purge_finds_no_workspace_kind(tmp_path: Path) -> None:
    code = """
import json, pkgutil, importlib, alight_server
from alight_server.store.purge import workspace_kinds
skip = ("alight_server.trainer.backends.verl",)  # its own venv (scripts/setup.sh --verl)
for info in pkgutil.walk_packages(alight_server.__path__, "alight_server."):
    if not info.name.startswith(skip):
        importlib.import_module(info.name)
print(json.dumps([len(workspace_kinds()), sorted(m for m in sys.modules if m.startswith("alight_sandbox"))]))
"""
    done = _run(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[0, []]"
