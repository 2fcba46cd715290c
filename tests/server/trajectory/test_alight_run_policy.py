"""`alight run` against the policy you will train: the config's own inference (`--config`), or an inference server
that needs a key (`--upstream` with `--upstream-key-file` / `--upstream-key-env`), and the hint when the key is missing.

Real parts throughout: the `alight` command in a fresh process, the tiny model in a real engine, the embedded
server and gateway on loopback, alight's inference app with its key guard. A refusal, which stops the command before
it starts anything, is checked on the same command in this process (a fresh one only cost each check a CPU-second).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from alight import envvars
from alight.cli import app
from alight.schemas import Trajectory
from alight_server.inference.engine import InferenceEngine
from alight_server.inference.server import create_inference_app
from alight_server.stacks.kinds import UPSTREAM_ID
from alight_server.stacks.server_thread import ServerThread
from alight_testing.tiny_run import tiny_run_config

pytestmark = pytest.mark.timeout(180)

KEY = "inference-api-key-for-the-test"
# One model call; the reward is 1 when the config's agent.env reached the agent, 0.5 otherwise.
AGENT = """
import os
import alight
from openai import OpenAI

@alight.rollout
def solve(task):
    OpenAI(max_retries=0).chat.completions.create(
        model="policy", messages=[{"role": "user", "content": task["question"]}], max_tokens=4
    )
    return 1.0 if os.environ.get("FROM_CONFIG") == "yes" else 0.5
"""


def alight_run(folder: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`alight run agent.py:solve ARGS` in a fresh process, in `folder`, with none of this shell's ALIGHT_* set."""
    (folder / "agent.py").write_text(AGENT)
    clean = {k: v for k, v in os.environ.items() if k not in envvars.ALL}
    return subprocess.run(
        [sys.executable, "-c", "from alight.cli import main; main()", "run", "agent.py:solve", *args],
        cwd=folder,
        env={**clean, "COLUMNS": "200", **(env or {})},
        capture_output=True,
        text=True,
        timeout=150,
    )


def refused(folder: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str]:
    """`alight run agent.py:solve ARGS` in this process, in `folder`, with no ALIGHT_* set: its exit code and stderr."""
    (folder / "agent.py").write_text(AGENT)
    monkeypatch.chdir(folder)
    for name in envvars.ALL:
        monkeypatch.delenv(name, raising=False)
    done = CliRunner().invoke(app, ["run", "agent.py:solve", *args], env={"COLUMNS": "200"})
    return done.exit_code, done.stderr


def assert_captured_with_token_ids(proc: subprocess.CompletedProcess[str], upstream: str) -> Trajectory:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    trajectory = Trajectory.model_validate_json(proc.stdout)
    [joined] = trajectory.calls
    call = joined.call
    assert (call.status_code, call.upstream) == (200, upstream)
    assert call.prompt_token_ids and call.response_token_ids
    assert len(call.response_logprobs) == len(call.response_token_ids)
    return trajectory


def test_alight_run_with_a_config_serves_its_policy_and_captures_token_ids(tmp_path: Path) -> None:
    raw = tiny_run_config(tmp_path, "agent.py:solve", [{"question": "hi"}], agent={"env": {"FROM_CONFIG": "yes"}})
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(raw))
    proc = alight_run(tmp_path, "--task", '{"question": "2+3?"}', "--config", "config.yaml", "--json")
    trajectory = assert_captured_with_token_ids(proc, UPSTREAM_ID)  # the embedded stack's policy, with its key
    assert trajectory.final_reward == 1.0  # the agent got the config's agent.env
    assert not (tmp_path / "run").exists()  # the training run's output_dir is left alone


def test_alight_run_refuses_a_config_beside_another_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, stderr = refused(
        tmp_path, monkeypatch, "--task", "{}", "--config", "config.yaml", "--upstream", "http://127.0.0.1:9/v1"
    )
    assert code == 2 and "--config serves the config's own policy" in stderr


@pytest.fixture(scope="module")
def keyed_upstream() -> Iterator[str]:
    """alight's inference server on the tiny model: every /v1 call needs KEY."""
    with (
        InferenceEngine.from_model_name("tiny", device="cpu", max_batch_size=4) as engine,
        ServerThread(create_inference_app(engine, api_key=KEY)) as url,
    ):
        yield f"{url}/v1"


def test_alight_run_without_the_upstream_s_key_names_the_key_flag_not_the_agent_s_environment(
    tmp_path: Path, keyed_upstream: str
) -> None:
    proc = alight_run(tmp_path, "--task", '{"question": "hi"}', "--upstream", keyed_upstream)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "upstream alight-run answered 401 to the gateway" in proc.stderr
    assert "the gateway's key for that upstream is missing or wrong" in proc.stderr
    assert "--upstream-key-file PATH" in proc.stderr and ".alight/inference/api.key" in proc.stderr
    assert "--inherit-env" not in proc.stderr


def test_alight_run_passes_the_upstream_s_key_from_a_file(tmp_path: Path, keyed_upstream: str) -> None:
    key_file = tmp_path / "keys" / "api.key"
    key_file.parent.mkdir()
    key_file.write_text(KEY + "\n")
    proc = alight_run(
        tmp_path, "--task", '{"question": "hi"}', "--upstream", keyed_upstream, "--upstream-key-file", "keys/api.key",
        "--json",
    )  # fmt: skip
    assert_captured_with_token_ids(proc, "alight-run")
    assert KEY not in proc.stdout + proc.stderr


def test_alight_run_passes_the_upstream_s_key_from_a_variable(tmp_path: Path, keyed_upstream: str) -> None:
    args = ["--task", '{"question": "hi"}', "--upstream", keyed_upstream, "--upstream-key-env", "MY_INFERENCE_KEY"]
    proc = alight_run(tmp_path, *args, "--json", env={"MY_INFERENCE_KEY": KEY})
    assert_captured_with_token_ids(proc, "alight-run")


def test_alight_run_refuses_a_key_it_cannot_read_before_starting_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream = ["--task", "{}", "--upstream", "http://127.0.0.1:9/v1"]
    code, stderr = refused(tmp_path, monkeypatch, *upstream, "--upstream-key-file", "no-such.key")
    assert code == 2 and "cannot read" in stderr and "--upstream-key-file" in stderr
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    code, stderr = refused(tmp_path, monkeypatch, *upstream, "--upstream-key-env", "NOT_SET_ANYWHERE")
    assert code == 2 and "$NOT_SET_ANYWHERE is not set" in stderr
    code, stderr = refused(tmp_path, monkeypatch, "--task", "{}", "--upstream-key-env", "HOME")
    assert code == 2 and "give that URL too" in stderr


def test_alight_run_sends_a_config_with_servers_of_yours_to_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = {"url": "http://127.0.0.1:9", "inference_url": "http://127.0.0.1:9"}
    raw = tiny_run_config(tmp_path, "agent.py:solve", [{"question": "hi"}], server=server)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(raw))
    code, stderr = refused(tmp_path, monkeypatch, "--task", "{}", "--config", "config.yaml")
    assert code == 2 and "runs against your servers" in stderr and "--server" in stderr
