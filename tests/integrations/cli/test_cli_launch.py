"""What a CLI harness hands its CLI, seen from inside the sandbox by a stand-in CLI (a shell script).

The stand-in only reports what it sees (its own folder, its environment) into the workspace, so these
run where the real CLIs are not installed; the real CLIs' boundary is test_cli_sandbox.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ALIGHT = str(Path(sys.executable).parent / "alight")
pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
REPORT = """#!/bin/bash
ls -A "$(dirname "$0")" > /workspace/siblings.txt
env > /workspace/env.txt
"""


def run_stand_in(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "secret.txt").write_text("next to the CLI, not part of it\n")
    cli = tools / "claude"
    cli.write_text(REPORT)
    cli.chmod(0o755)
    variables = {**os.environ, "ALIGHT_CLAUDE_BIN": str(cli), "ALIGHT_WORKSPACE_ROOT": str(tmp_path), **env}
    task = {"prompt": "report", "check": "test -f env.txt && echo 1"}
    return subprocess.run(
        [ALIGHT, "run", "alight.harness.claude_code:episode", "--task", json.dumps(task), "--json", "--timeout", "60"],
        capture_output=True, text=True, env=variables, timeout=120, cwd=tmp_path,
    )  # fmt: skip


def seen(tmp_path: Path, name: str) -> str:
    [work] = tmp_path.glob("claude-*/work")
    return (work / name).read_text()


def test_a_cli_outside_node_modules_is_mounted_alone_not_its_folder(tmp_path):
    done = run_stand_in(tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert seen(tmp_path, "siblings.txt").split() == ["claude"]


def test_a_host_variable_reaches_the_cli_only_when_the_setting_names_it(tmp_path):
    done = run_stand_in(
        tmp_path, NAMED_SETTING="passed", UNNAMED_SETTING="kept out", ALIGHT_HARNESS_INHERIT_ENV="NAMED_SETTING"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    env = seen(tmp_path, "env.txt").splitlines()
    assert "NAMED_SETTING=passed" in env
    assert not [line for line in env if line.startswith(("UNNAMED_SETTING=", "ALIGHT_"))]


def test_naming_an_alight_variable_for_the_cli_fails_the_attempt_naming_the_setting(tmp_path):
    done = run_stand_in(tmp_path, ALIGHT_HARNESS_INHERIT_ENV="LANG,ALIGHT_TOKEN")
    assert done.returncode != 0
    assert "ALIGHT_HARNESS_INHERIT_ENV names ['ALIGHT_TOKEN']" in done.stderr
