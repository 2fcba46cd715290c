"""The agent environment contract: what attempt_env sets, as OpenTelemetry and the SDK read it back."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from opentelemetry.sdk.resources import OTELResourceDetector
from opentelemetry.util.re import parse_env_headers

from alight import envvars, semconv
from alight.context import AttemptContext
from alight.schemas import AttemptStart, Mode, RunnerSpec
from alight_testing.attempts import attempt_start


def start_for(task: object, rollout_id: str = "r:1.a", mode: Mode = Mode.VAL) -> AttemptStart:
    return attempt_start(
        rollout_id, 2, task, mode=mode, runner=None, timeout_s=60, token="alt1.abc.def",
        gateway_base_url="ignored", otlp_traces_endpoint="ignored",
    )  # fmt: skip


def test_attempt_env_is_read_back_by_opentelemetry_and_the_sdk(monkeypatch):
    env = envvars.attempt_env(start_for({"q": "x"}), "http://srv:8700/")
    assert env[envvars.OPENAI_BASE_URL] == "http://srv:8700/gw/r:1.a/2/v1"
    assert env[envvars.OPENAI_API_KEY] == env[envvars.ALIGHT_TOKEN] == "alt1.abc.def"
    assert env[envvars.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT] == "http://srv:8700/v1/traces"
    assert parse_env_headers(env[envvars.OTEL_EXPORTER_OTLP_TRACES_HEADERS], liberal=True) == {
        "authorization": "Bearer alt1.abc.def"
    }
    monkeypatch.setenv(envvars.OTEL_RESOURCE_ATTRIBUTES, env[envvars.OTEL_RESOURCE_ATTRIBUTES])
    resource = OTELResourceDetector().detect().attributes
    assert (
        resource[semconv.RESOURCE_ROLLOUT_ID],
        resource[semconv.RESOURCE_ATTEMPT],
        resource[semconv.RESOURCE_MODE],
    ) == (
        "r:1.a",
        "2",
        "val",
    )
    ctx = AttemptContext.from_env(env)
    assert ctx is not None
    assert (ctx.rollout_id, ctx.attempt, ctx.mode, ctx.task, ctx.token) == (
        "r:1.a",
        2,
        "val",
        {"q": "x"},
        "alt1.abc.def",
    )
    assert ctx.gateway_base_url == env[envvars.OPENAI_BASE_URL]


def test_a_large_task_travels_in_a_file(tmp_path):
    task = {"doc": "x" * (envvars.TASK_INLINE_LIMIT + 1)}
    env = envvars.attempt_env(start_for(task), "http://srv", task_dir=tmp_path)
    assert envvars.ALIGHT_TASK not in env
    assert env[envvars.ALIGHT_TASK_FILE].startswith(str(tmp_path))
    assert envvars.read_task(env) == task


def test_a_broken_task_says_which_variable_is_wrong():
    with pytest.raises(RuntimeError, match="ALIGHT_TASK is not valid JSON"):
        envvars.read_task({envvars.ALIGHT_TASK: "{oops"})
    with pytest.raises(RuntimeError, match="ALIGHT_TASK_FILE"):
        envvars.read_task({envvars.ALIGHT_TASK_FILE: "/nonexistent/task.json"})


def test_agent_argv_wraps_entrypoints_and_keeps_commands():
    assert envvars.agent_argv(RunnerSpec(entrypoint="pkg.mod:main"), "/py") == [
        "/py",
        "-m",
        "alight.entry",
        "pkg.mod:main",
    ]
    assert envvars.agent_argv(RunnerSpec(command=["node", "agent.js"]), "/py") == ["node", "agent.js"]
    with pytest.raises(ValueError, match="neither"):
        envvars.agent_argv(RunnerSpec(), "/py")


AGENTS = """
import asyncio, json, os
import alight

@alight.rollout
def sync_agent(task):
    print(json.dumps({"task": task, "rollout": alight.current().rollout_id}))

async def plain_async(task):
    await asyncio.sleep(0)
    print(json.dumps({"async": task}))

def crash(task):
    raise ValueError("bad task " + json.dumps(task))

def leave(task):
    raise SystemExit(3)
"""


def entry(tmp_path, target: str, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "agents_mod.py").write_text(AGENTS)
    base = {"PATH": "/usr/bin:/bin", envvars.ALIGHT_ROLLOUT_ID: "r-entry", envvars.ALIGHT_TASK: '{"n": 1}'}
    return subprocess.run(
        [sys.executable, "-m", "alight.entry", target],
        cwd=tmp_path,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_entry_runs_module_and_file_targets_sync_and_async(tmp_path):
    proc = entry(tmp_path, "agents_mod:sync_agent")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"task": {"n": 1}, "rollout": "r-entry"}
    proc = entry(tmp_path, f"{tmp_path / 'agents_mod.py'}:plain_async")  # undecorated: entry wraps it
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"async": {"n": 1}}


def test_entry_exit_codes_follow_the_agent(tmp_path):
    proc = entry(tmp_path, "agents_mod:crash")
    assert proc.returncode == 1 and 'ValueError: bad task {"n": 1}' in proc.stderr
    assert entry(tmp_path, "agents_mod:leave").returncode == 3
    proc = entry(tmp_path, "agents_mod:missing")
    assert proc.returncode == 1 and "has no attribute 'missing'" in proc.stderr
    assert entry(tmp_path, "no-colon").returncode == 1


def test_anthropic_clients_get_the_gateway_without_v1_and_the_attempt_token():
    env = envvars.attempt_env(start_for({}), "http://srv:8700")
    # The anthropic SDK appends /v1/messages itself: the result is the gateway's messages route.
    assert env[envvars.ANTHROPIC_BASE_URL] + "/v1/messages" == env[envvars.OPENAI_BASE_URL] + "/messages"
    assert env[envvars.ANTHROPIC_API_KEY] == "alt1.abc.def"


def test_the_agents_sdk_trace_export_is_off_unless_the_rollouts_runner_env_opts_in():
    start = start_for({})
    assert envvars.attempt_env(start, "http://srv")[envvars.OPENAI_AGENTS_DISABLE_TRACING] == "1"
    runner = RunnerSpec(command=["agent"], env={envvars.OPENAI_AGENTS_DISABLE_TRACING: "false"})
    opted = start.model_copy(update={"rollout": start.rollout.model_copy(update={"runner": runner})})
    assert envvars.attempt_env(opted, "http://srv")[envvars.OPENAI_AGENTS_DISABLE_TRACING] == "false"
