"""Zero-change training: unmodified agents (no decorator, no alight import) trained by `alight train`.

Each agent script runs as the config's `command` (through dispatch.py, which execs the script its task
names, so one run trains all three), finds the gateway through the controller's environment (OPENAI_* or
ANTHROPIC_*), and gets its reward from the config's `evaluator`, which sees the task.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from alight import envvars
from alight.api_models import RolloutQuery
from alight.schemas import ApiFlavour, AttemptStart, FailureKind, Mode, RewardSource, RolloutCreate, RunnerSpec
from alight_server.http.auth import derive_token_secret, issue_attempt_token
from alight_server.stacks.run_store import open_run_store

HERE = Path(__file__).parent / "zero_change"
ALIGHT = str(Path(sys.executable).parent / "alight")
WORDS = ["apple", "river", "stone"]


# each unmodified agent script -> the API its client speaks; one run trains all three, a task (and group) each
AGENTS = {
    "agents_sdk_agent.py": ApiFlavour.RESPONSES,
    "anthropic_agent.py": ApiFlavour.MESSAGES,
    "langgraph_agent.py": ApiFlavour.CHAT,
}


def train(tmp_path: Path, command: list[str], tasks: list[dict[str, str]], **overrides: Any) -> dict[str, Any]:
    """`alight train` on a config for the tiny model with the test evaluator; returns the step-1 metrics."""
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(task) + "\n" for task in tasks))
    config = {
        "model": "tiny",
        "dataset": {"train": str(path)},
        "agent": {"command": command, "cwd": str(tmp_path)},
        "evaluator": f"{HERE / 'scoring.py'}:score",
        "group_size": 4,
        "tasks_per_step": len(tasks),
        "steps": 1,
        "rollout_timeout_s": 200,
        "max_attempts": 1,
        "output_dir": str(tmp_path / "run"),
        "checkpoint": {"every": 0},
        "metrics": {"tensorboard": False},
        "inference": {"device": "cpu", "torch_threads": 1},
        "controller": {"concurrency": 4},
        "review": {"audit_share": 0.0},  # an audited group would wait for a person, not train in this step
        **overrides,
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.run([ALIGHT, "train", str(path), "--quiet"], capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    steps = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    [step] = [s for s in steps if s.get("step") == 1]
    return step


def evaluator_score(task: dict[str, Any], text: str) -> float:
    return zlib.crc32(f"{task['word']}\n{text}".encode()) / 2**32  # scoring.py's formula, recomputed from the record


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_unmodified_agents_train_one_step_on_rewards_from_the_config_evaluator(tmp_path: Path) -> None:
    # One run, one task per agent: the command (dispatch.py) execs the script the task names, so each group
    # of two is one agent's, and the single optimizer step trains on all three groups. Two per group: each
    # agent process is 1-2 CPU-s of framework imports, and scoring.py's checksum keeps two replies apart.
    tasks = [{"word": word, "agent": script} for word, script in zip(WORDS, AGENTS, strict=True)]
    command = [sys.executable, str(HERE / "dispatch.py")]
    step = train(tmp_path, command, tasks, group_size=2, controller={"concurrency": 6})
    assert step["policy_version"] == 1, step  # one optimizer step
    assert step["train/groups"] == 3 and step["train/uniform_groups"] == 0, step  # every agent's group trained
    assert step["rollouts/rewarded"] == 6 and step["rollouts/missing_reward"] == 0, step

    store = open_run_store(tmp_path / "run")
    rollouts = [r for r in store.list_rollouts(RolloutQuery(limit=100)) if r.mode == Mode.TRAIN]
    assert len(rollouts) == 6, [r.id for r in rollouts]
    for script, flavour in AGENTS.items():
        own = [r for r in rollouts if r.task["agent"] == script]
        assert len(own) == 2 and len({r.group_id for r in own}) == 1, f"{script}: {[r.id for r in own]}"
        for rollout in own:
            calls = sorted(store.list_model_calls(rollout.id), key=lambda c: c.seq)
            assert calls and {c.flavour for c in calls} == {flavour}, f"{script} spoke {[c.flavour for c in calls]}"
            assert all(c.status_code == 200 and c.response_token_ids for c in calls), f"{script}: {calls}"
            [reward] = store.list_rewards(rollout.id)
            assert reward.source == RewardSource.EVALUATOR and reward.final, f"{script}: {reward}"
            from alight_server.trajectories.call_output import call_output

            expected = evaluator_score(rollout.task, call_output(calls[-1]).text)
            assert reward.value == pytest.approx(expected), f"{script}: the evaluator did not see its answer"
    store.close()


@pytest.mark.timeout(200)
def test_a_timed_out_attempt_gets_no_reward_from_the_evaluator_and_no_place_in_the_reward_metrics(
    tmp_path: Path,
) -> None:
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    step = train(tmp_path, sleeper, [{"word": WORDS[0]}], rollout_timeout_s=2, group_size=2)
    assert step["rollouts/timeout"] == 2 and step["rollouts/rewarded"] == 0
    assert "train/reward_mean" not in step  # nan: no rollout the agent finished, so no mean to report
    store = open_run_store(tmp_path / "run")
    for rollout in store.list_rollouts(RolloutQuery(limit=100)):
        assert [a.failure_kind for a in rollout.attempts] == [FailureKind.TIMEOUT]
        assert store.list_rewards(rollout.id) == []
    store.close()


# --- the attempt token goes only to alight


class _Probe(BaseHTTPRequestHandler):
    seen: list[tuple[str, str]]

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        type(self).seen.append((self.path, self.headers.get("authorization", "")))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def public_endpoint() -> Iterator[tuple[str, list[tuple[str, str]]]]:
    """A loopback HTTP server standing in for api.openai.com's trace ingest: (its URL, what reached it)."""
    handler = type("Probe", (_Probe,), {"seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/v1/traces/ingest", handler.seen
    server.shutdown()
    server.server_close()


def run_command_attempt(alight_stack: Any, argv: list[str], runner_env: dict[str, str], extra: dict[str, str]) -> str:
    """One attempt of `argv` under the controller's environment contract; returns the attempt token."""
    server = alight_stack.server
    rollout_id = f"zc-{uuid.uuid4().hex[:10]}"
    runner = RunnerSpec(command=argv, env=runner_env)
    server.store.create_rollouts([RolloutCreate(id=rollout_id, task={"word": "apple"}, runner=runner)])
    [(rollout, attempt)] = server.store.claim_attempts(1, ids=[rollout_id])
    token = issue_attempt_token(derive_token_secret(server.admin_key), rollout_id, attempt, ttl_s=600)
    start = AttemptStart(
        rollout=rollout, attempt=attempt, token=token,
        gateway_base_url=envvars.gateway_url(server.url, rollout_id, attempt),
        otlp_traces_endpoint=envvars.otlp_traces_url(server.url),
    )  # fmt: skip
    import os

    env = {k: v for k, v in os.environ.items() if k not in envvars.ALL}
    env.update(runner_env)
    env.update(envvars.attempt_env(start, server.url))  # what the local runner does, in its order
    env.update(extra)
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return token


def _probed_env(url: str) -> dict[str, str]:
    return {"PYTHONPATH": str(HERE / "redirect_trace_export"), "LEAK_PROBE_URL": url}


@pytest.mark.timeout(120)
def test_an_unmodified_agents_sdk_script_sends_its_attempt_token_to_no_host_but_the_gateway(
    alight_stack: Any, public_endpoint: tuple[str, list[tuple[str, str]]]
) -> None:
    url, seen = public_endpoint
    token = run_command_attempt(alight_stack, [sys.executable, str(HERE / "agents_sdk_agent.py")], {}, _probed_env(url))
    assert alight_stack.upstream.calls, "the agent's model call never reached the gateway"
    assert not [s for s in seen if token in s[1]], seen
    assert seen == []


@pytest.mark.timeout(120)
def test_a_rollout_that_opts_in_keeps_the_agents_sdk_trace_export(
    alight_stack: Any, public_endpoint: tuple[str, list[tuple[str, str]]]
) -> None:
    url, seen = public_endpoint
    opt_in = {envvars.OPENAI_AGENTS_DISABLE_TRACING: "false"}
    token = run_command_attempt(
        alight_stack, [sys.executable, str(HERE / "agents_sdk_agent.py")], opt_in, _probed_env(url)
    )
    assert ("/v1/traces/ingest", f"Bearer {token}") in seen  # the probe would have seen a leak
