"""End to end: a plain-openai agent process, the gateway, the fake vLLM upstream, OTLP, and the join."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from alight import envvars, semconv
from alight.client import AlightClient
from alight.schemas import AttemptFinish, RolloutCreate, RunnerSpec, Trajectory, UpstreamCreate
from alight_server.stacks.server_thread import ServerThread
from alight_testing.fake_upstream import create_fake_upstream

pytestmark = pytest.mark.timeout(120)
HERE = Path(__file__).parent
AGENT = f"{HERE / 'openai_tool_agent.py'}:main"
TASK = {"question": 'What is 2 + 3? call add {"a": 2, "b": 3}', "answer": 5}


@pytest.fixture
def stack(live_server):
    """The live server with the fake vLLM-shaped upstream registered as the policy."""
    upstream = create_fake_upstream("policy-model")
    with ServerThread(upstream) as url:
        live_server.store.add_upstream(UpstreamCreate(id="policy", url=f"{url}/v1", model="policy-model"))
        yield live_server, url, upstream.state.fake


def agent_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in envvars.ALL}
    env.update(extra)
    return env


def test_plain_openai_agent_subprocess_yields_a_complete_linked_trajectory(stack):
    server, _, upstream = stack
    with AlightClient(server.url, server.admin_key) as client:
        client.create_rollouts([RolloutCreate(id="r-e2e", task=TASK, runner=RunnerSpec(entrypoint=AGENT))])
        [start] = client.claim_attempts(1, ids=["r-e2e"])
        argv = envvars.agent_argv(start.rollout.runner, sys.executable)
        proc = subprocess.run(
            argv, env=agent_env(envvars.attempt_env(start, server.url)), capture_output=True, text=True, timeout=90
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        client.finish_attempt("r-e2e", start.attempt, AttemptFinish(status="succeeded", exit_code=0))
        t = client.trajectory("r-e2e")

    # every call the upstream answered is in the trajectory, in order, with its tokens
    assert len(upstream.calls) == 2
    assert [c.call.seq for c in t.calls] == [0, 1]
    for joined, served in zip(t.calls, upstream.calls, strict=True):
        assert joined.call.status_code == 200
        assert joined.call.prompt_token_ids == served.response["prompt_token_ids"]
        assert joined.call.response_token_ids == served.response["choices"][0]["token_ids"]
        assert len(joined.call.response_logprobs) == len(joined.call.response_token_ids)
    # the right span parents: root -> agent -> turn n made call n
    assert [c.span_path for c in t.calls] == [
        [semconv.SPAN_ROLLOUT, "invoke_agent calculator", "turn 0"],
        [semconv.SPAN_ROLLOUT, "invoke_agent calculator", "turn 1"],
    ]
    assert [c.agent_name for c in t.calls] == ["calculator", "calculator"]
    # the tool ran between the two calls
    [tool] = t.tool_spans
    assert (tool.name, tool.after_call, tool.result) == ("execute_tool add", 0, "5")
    assert tool.span_path == [semconv.SPAN_ROLLOUT, "invoke_agent calculator", "execute_tool add"]
    # rewards: the step reward on the first call, the returned number as the final reward
    assert [[r.name for r in c.rewards] for c in t.calls] == [["used_tool"], []]
    assert t.final_reward == 1.0
    assert (t.state.value, t.attempt_status.value) == ("succeeded", "succeeded")


def test_a_crashing_agent_leaves_its_calls_and_the_traceback(stack, tmp_path):
    server, _, _ = stack
    (tmp_path / "crash.py").write_text(
        "import alight\nfrom openai import OpenAI\n\n"
        "@alight.rollout\ndef main(task):\n"
        "    OpenAI().chat.completions.create(model='m', messages=[{'role': 'user', 'content': 'hi'}])\n"
        "    raise RuntimeError('agent fell over')\n"
    )
    with AlightClient(server.url, server.admin_key) as client:
        client.create_rollouts([RolloutCreate(id="r-crash", task={})])
        [start] = client.claim_attempts(1, ids=["r-crash"])
        argv = envvars.agent_argv(RunnerSpec(entrypoint=f"{tmp_path / 'crash.py'}:main"), sys.executable)
        proc = subprocess.run(
            argv, env=agent_env(envvars.attempt_env(start, server.url)), capture_output=True, text=True, timeout=90
        )
        assert proc.returncode == 1 and "agent fell over" in proc.stderr
        client.finish_attempt("r-crash", 1, AttemptFinish(status="failed", failure_kind="task", exit_code=1))
        t = client.trajectory("r-crash")
    assert len(t.calls) == 1 and t.calls[0].span_path == [semconv.SPAN_ROLLOUT]
    assert (t.state.value, t.failure_kind.value, t.final_reward) == ("failed", "task", None)
    [root] = [s for s in server.store.list_spans("r-crash") if s.name == semconv.SPAN_ROLLOUT]
    assert any("agent fell over" in e["attributes"].get("exception.stacktrace", "") for e in root.events)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The `alight` command in a fresh process, on a wide terminal so tables do not fold."""
    return subprocess.run(
        [sys.executable, "-c", "from alight.cli import main; main()", *args],
        env=agent_env({"COLUMNS": "200"}),
        capture_output=True,
        text=True,
        timeout=90,
    )


def test_alight_run_against_a_server_prints_the_trajectory(stack):
    server, _, _ = stack
    proc = run_cli(
        "run", AGENT, "--task", json.dumps(TASK), "--server", server.url, "--admin-key", server.admin_key, "--json"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    t = Trajectory.model_validate_json(proc.stdout)
    assert len(t.calls) == 2 and t.final_reward == 1.0
    assert t.rollout_id.startswith("run-")


def test_alight_run_embedded_with_an_upstream_prints_tables(stack):
    _, upstream_url, _ = stack
    proc = run_cli(
        "run", AGENT, "--task", json.dumps(TASK), "--upstream", f"{upstream_url}/v1", "--model", "policy-model"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "2 model calls, 1 tool spans" in out
    assert "turn 0" in out and "add(" in out and "used_tool=0.1" in out
    assert "final reward 1" in out


def test_alight_run_embedded_without_an_upstream_shows_the_503(tmp_path):
    proc = run_cli("run", AGENT, "--task", '{"question": "hi", "answer": 1}')
    assert proc.returncode == 1
    assert "no --config or --upstream given" in proc.stderr
    assert "503" in proc.stdout


def test_alight_run_rejects_bad_input_with_a_message():
    proc = run_cli("run", "no_such_file.py:main", "--task", "{}")
    assert proc.returncode == 2 and "does not exist" in proc.stderr
    proc = run_cli("run", AGENT, "--task", "{not json")
    assert proc.returncode == 2 and "--task must be JSON" in proc.stderr


PLAIN_SCRIPT = """
import json, os
from openai import OpenAI

task = json.loads(os.environ["ALIGHT_TASK"])
OpenAI().chat.completions.create(model="m", messages=[{"role": "user", "content": task["question"]}])
"""


def test_alight_run_previews_a_command_agent_scored_by_an_evaluator(stack, tmp_path):
    _, upstream_url, _ = stack
    (tmp_path / "plain.py").write_text(PLAIN_SCRIPT)
    (tmp_path / "scoring.py").write_text("def score(task, trajectory):\n    return float(task['answer'])\n")
    proc = run_cli(
        "run", "--task", json.dumps(TASK), "--upstream", f"{upstream_url}/v1", "--model", "policy-model",
        "--evaluator", f"{tmp_path / 'scoring.py'}:score", "--json", "--", sys.executable, str(tmp_path / "plain.py"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    t = Trajectory.model_validate_json(proc.stdout)
    assert len(t.calls) == 1 and t.calls[0].span_path == []  # captured with no span: the script has none
    assert t.calls[0].output.text and t.final_reward == 5.0 and t.task == TASK


ENV_REPORT = """
import os, sys
print(" ".join(f"{k}={os.environ.get(k)}" for k in ("SHELL_SECRET", "NAMED_VAR", "GIVEN_VAR", "ALIGHT_ADMIN_KEY")))
sys.exit(3)
"""


def test_alight_run_gives_the_agent_only_the_shell_variables_it_names(tmp_path):
    (tmp_path / "report.py").write_text(ENV_REPORT)
    env = {**os.environ, "SHELL_SECRET": "s3cret", "NAMED_VAR": "named", "ALIGHT_ADMIN_KEY": "the-admin-key"}
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "alight"), "run", "--task", "{}", "--inherit-env", "NAMED_*",
         "--env", "GIVEN_VAR=given", "--", sys.executable, str(tmp_path / "report.py")],
        capture_output=True, text=True, env=env, timeout=90,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    assert "SHELL_SECRET=None NAMED_VAR=named GIVEN_VAR=given ALIGHT_ADMIN_KEY=None" in proc.stdout
    assert "pass it with --inherit-env NAME or --env NAME=VALUE" in proc.stderr
    assert "got only PATH, LANG, LC_*, TZ, HOME, TMPDIR, NAMED_* of this shell's variables" in proc.stderr


def test_alight_run_refuses_an_alight_variable_to_inherit_and_a_malformed_env():
    proc = run_cli("run", AGENT, "--task", "{}", "--inherit-env", "ALIGHT_ADMIN_KEY")
    assert proc.returncode == 2 and "agent.env" in proc.stderr
    proc = run_cli("run", AGENT, "--task", "{}", "--env", "NO_EQUALS_SIGN")
    assert proc.returncode == 2 and "NAME=VALUE" in proc.stderr
