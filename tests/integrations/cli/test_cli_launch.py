"""What a CLI harness hands its CLI, seen from inside the sandbox by a stand-in CLI (a shell script).

The stand-in only reports what it sees (its own folder, its environment) into the workspace, so these
run where the real CLIs are not installed; the real CLIs' boundary is test_cli_sandbox.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from alight.client import AlightClient
from alight.schemas import Trajectory
from alight_server.stacks.one_rollout import embedded_server

ALIGHT = str(Path(sys.executable).parent / "alight")
pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
REPORT = """#!/bin/bash
ls -A "$(dirname "$0")" > /workspace/siblings.txt
env > /workspace/env.txt
echo forged > /tmp/left-for-the-check
( setsid bash -c 'while sleep 0.1; do echo tick >> /workspace/ticks.txt; done' </dev/null >/dev/null 2>&1 & )
"""


def run_stand_in(
    tmp_path: Path, *, check: str = "test -f env.txt && echo 1", server: tuple[str, str] | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "secret.txt").write_text("next to the CLI, not part of it\n")
    cli = tools / "claude"
    cli.write_text(REPORT)
    cli.chmod(0o755)
    settings = {"ALIGHT_CLAUDE_BIN": str(cli), "ALIGHT_WORKSPACE_ROOT": str(tmp_path), **env}
    task = {"prompt": "report", "check": check}
    on = ["--server", server[0], "--admin-key", server[1]] if server else []
    return subprocess.run(
        [ALIGHT, "run", "alight_sandbox.harness.claude_code:episode", "--task", json.dumps(task), "--json", "--timeout", "60",
         *on, *(f"--env={name}={value}" for name, value in settings.items())],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip


def seen(tmp_path: Path, name: str) -> str:
    [work] = tmp_path.glob("claude-*/work")
    return (work / name).read_text()


# The check writes down what it sees (the workspace outlives the attempt) and scores 0.25: the ticks of the
# process the CLI left running, one second apart, and the check's own /tmp.
COUNT = "cat ticks.txt 2>/dev/null | wc -l"
SEEING_CHECK = f'a=$({COUNT}); sleep 1; echo "$a $({COUNT})" > check-ticks.txt; ls -A /tmp > check-tmp.txt; echo 0.25'


@dataclass
class Reported:
    folder: Path
    done: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> Reported:
    """One attempt of the stand-in that the tests of what the CLI and the check see all read (each such attempt
    costs a CLI start and two sandboxes): one host variable named for the CLI, one not."""
    folder = tmp_path_factory.mktemp("reported")
    done = run_stand_in(
        folder,
        check=SEEING_CHECK,
        NAMED_SETTING="passed",
        UNNAMED_SETTING="kept out",
        ALIGHT_HARNESS_INHERIT_ENV="NAMED_SETTING",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return Reported(folder, done)


def test_a_cli_outside_node_modules_is_mounted_alone_not_its_folder(reported: Reported) -> None:
    assert seen(reported.folder, "siblings.txt").split() == ["claude"]


def test_a_host_variable_reaches_the_cli_only_when_the_setting_names_it(reported: Reported) -> None:
    env = seen(reported.folder, "env.txt").splitlines()
    assert "NAMED_SETTING=passed" in env
    assert not [line for line in env if line.startswith(("UNNAMED_SETTING=", "ALIGHT_"))]


# Every variable that carries the attempt token in the agent's process, not only those named ALIGHT_*.
CONTRACT = ["ALIGHT_TOKEN", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"]


def test_naming_a_variable_of_the_attempt_contract_for_the_cli_fails_the_attempt_naming_the_setting(tmp_path):
    # One attempt names them all beside a harmless one: the refusal must list each of them, and only them.
    done = run_stand_in(tmp_path, ALIGHT_HARNESS_INHERIT_ENV=",".join(["LANG", *CONTRACT]))
    assert done.returncode != 0
    assert f"ALIGHT_HARNESS_INHERIT_ENV names {CONTRACT}" in done.stderr


def test_a_glob_that_matches_the_attempt_contracts_variables_passes_none_of_them(tmp_path):
    done = run_stand_in(tmp_path, NAMED_SETTING="passed", ALIGHT_HARNESS_INHERIT_ENV="*")
    assert done.returncode == 0, done.stderr[-3000:]
    env = seen(tmp_path, "env.txt")
    assert "NAMED_SETTING=passed" in env.splitlines()
    assert "alt1." not in env  # every attempt token starts so (alight_server.http.auth.TOKEN_PREFIX)


def test_the_check_does_not_see_what_the_cli_left_in_its_tmp(reported: Reported) -> None:
    assert Trajectory.model_validate_json(reported.done.stdout).final_reward == 0.25  # the check's own score
    assert "left-for-the-check" not in seen(reported.folder, "check-tmp.txt").split()


def test_a_process_the_cli_left_running_is_gone_before_the_check(reported: Reported) -> None:
    before, after = seen(reported.folder, "check-ticks.txt").split()
    assert before == after, (before, after)  # nothing ticked while the check waited a second


def test_a_score_outside_the_range_is_clamped_with_a_rollout_event_that_says_so(tmp_path):
    with embedded_server(tmp_path) as (url, key):
        done = run_stand_in(tmp_path, check="echo 7", server=(url, key))
        assert done.returncode == 0, done.stderr[-3000:]
        trajectory = Trajectory.model_validate_json(done.stdout)
        with AlightClient(url, key) as client:
            [event] = client.list_events(trajectory.rollout_id, kind="check_reward_clamped")
    assert trajectory.final_reward == 1.0
    assert event.payload == {"value": 7.0, "reward": 1.0, "range": [0.0, 1.0]}
