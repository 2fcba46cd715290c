"""The controller against a live server with real agent subprocesses: outcomes, retries, kills, restarts."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from controller_testkit import AGENTS, SCRIPTED, create_rollout, get_rollout, pid_alive, wait_terminal, wait_until

from alight.client import AlightClient
from alight_server.app import create_app
from alight_server.controller.local import LocalRunner
from alight_server.controller.loop import Controller, log_event_id
from alight_server.http.auth import derive_token_secret, verify_attempt_token
from alight_server.stacks.server_thread import ServerThread

Make = Callable[..., Controller]


def attempts_of(rollout: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(a["status"], a["failure_kind"]) for a in rollout["attempts"]]


def log_events(admin: httpx.Client, rollout_id: str) -> list[dict[str, Any]]:
    response = admin.get(f"/api/rollouts/{rollout_id}/events", params={"kind": "log"})
    assert response.status_code == 200, response.text
    body = response.json()
    return body["events"] if isinstance(body, dict) else body


def test_a_successful_agent_succeeds_the_rollout_and_uploads_its_output(
    controllers: Make, admin_client: httpx.Client
) -> None:
    create_rollout(admin_client, "ok-1", task={"say": "hello from the agent"})
    controller = controllers().start()
    rollout = wait_terminal(admin_client, "ok-1")
    assert rollout["state"] == "succeeded"
    assert attempts_of(rollout) == [("succeeded", None)]
    assert rollout["attempts"][0]["exit_code"] == 0
    assert rollout["attempts"][0]["runner_handle"] == f"{controller.runner.name}/ok-1/1"
    events = wait_until(lambda: log_events(admin_client, "ok-1"))
    assert events[0]["id"] == log_event_id("ok-1", 1) and events[0]["attempt"] == 1
    assert "hello from the agent" in events[0]["payload"]["text"]


def test_a_task_failure_fails_the_rollout_without_a_retry(controllers: Make, admin_client: httpx.Client) -> None:
    create_rollout(admin_client, "task-fail", task={"exit": 2, "say": "wrong answer"}, max_attempts=3)
    controllers().start()
    rollout = wait_terminal(admin_client, "task-fail")
    assert rollout["state"] == "failed"
    assert attempts_of(rollout) == [("failed", "task")]
    assert rollout["attempts"][0]["exit_code"] == 2
    assert "wrong answer" in rollout["attempts"][0]["message"]  # the log tail says why


def test_a_task_failure_naming_a_withheld_host_variable_names_the_setting_to_fix(
    controllers: Make, admin_client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HINT_PROBE_TOKEN", "value-never-shown")  # set where the controller runs, not passed on
    create_rollout(admin_client, "env-hint", task={"exit": 1, "say": "KeyError: 'HINT_PROBE_TOKEN'"})
    controllers().start()
    message = wait_terminal(admin_client, "env-hint")["attempts"][0]["message"]
    assert "HINT_PROBE_TOKEN" in message and "agent.inherit_env" in message and "agent.env" in message
    assert "value-never-shown" not in message


def test_an_agent_receives_its_runner_env_values_that_the_server_answers_masked(
    controllers: Make, admin_client: httpx.Client, tmp_path: Path
) -> None:
    env_out = tmp_path / "env.json"
    runner = {"command": SCRIPTED, "env": {"AGENT_DB_PASSWORD": "pw-real-5e1"}}
    create_rollout(admin_client, "sealed-env", task={"env_out": str(env_out)}, runner=runner)
    controllers().start()
    assert wait_terminal(admin_client, "sealed-env")["state"] == "succeeded"
    assert json.loads(env_out.read_text())["AGENT_DB_PASSWORD"] == "pw-real-5e1"
    assert get_rollout(admin_client, "sealed-env")["runner"]["env"] == {"AGENT_DB_PASSWORD": "***"}


def test_a_missing_executable_is_infra_and_retried_up_to_max_attempts(
    controllers: Make, admin_client: httpx.Client
) -> None:
    create_rollout(admin_client, "no-exe", runner={"command": ["/nonexistent/agent"]}, max_attempts=2)
    controllers().start()
    rollout = wait_terminal(admin_client, "no-exe")
    assert rollout["state"] == "failed"
    assert attempts_of(rollout) == [("failed", "infra"), ("failed", "infra")]
    assert "/nonexistent/agent" in rollout["attempts"][0]["message"]


def test_a_missing_cwd_is_infra_and_retried(controllers: Make, admin_client: httpx.Client, tmp_path: Path) -> None:
    runner = {"command": ["true"], "cwd": str(tmp_path / "gone")}
    create_rollout(admin_client, "no-cwd", runner=runner, max_attempts=3)
    controllers().start()
    rollout = wait_terminal(admin_client, "no-cwd")
    assert attempts_of(rollout) == [("failed", "infra")] * 3
    assert "not a directory" in rollout["attempts"][0]["message"]


def test_a_timeout_kills_the_whole_process_group(controllers: Make, admin_client: httpx.Client, tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    task = {"grandchild_pidfile": str(pidfile), "ignore_term": True, "sleep": 60}
    create_rollout(admin_client, "slow", task=task, timeout_s=2.0, max_attempts=1)
    controllers().start()
    grandchild = int(wait_until(lambda: pidfile.exists() and pidfile.read_text()))
    rollout = wait_terminal(admin_client, "slow")
    assert rollout["state"] == "failed"
    assert attempts_of(rollout) == [("failed", "timeout")]
    wait_until(lambda: not pid_alive(grandchild), timeout_s=15)


def test_a_timed_out_attempt_is_retried(controllers: Make, admin_client: httpx.Client) -> None:
    task = {"by_attempt": {"1": {"sleep": 60}}}
    create_rollout(admin_client, "retry-timeout", task=task, timeout_s=3.0, max_attempts=2)
    controllers().start()
    rollout = wait_terminal(admin_client, "retry-timeout")
    assert rollout["state"] == "succeeded"
    assert attempts_of(rollout) == [("failed", "timeout"), ("succeeded", None)]


def test_cancelling_a_rollout_kills_its_agent(controllers: Make, admin_client: httpx.Client, tmp_path: Path) -> None:
    pidfile = tmp_path / "agent.pid"
    create_rollout(admin_client, "cancel-me", task={"pidfile": str(pidfile), "sleep": 60})
    controller = controllers().start()
    agent = int(wait_until(lambda: pidfile.exists() and pidfile.read_text()))
    assert admin_client.post("/api/rollouts/cancel-me/cancel").status_code == 200
    wait_until(lambda: not pid_alive(agent), timeout_s=15)
    wait_until(lambda: not controller.running, timeout_s=15)
    assert get_rollout(admin_client, "cancel-me")["state"] == "cancelled"


def test_a_restarted_controller_adopts_a_running_attempt_and_finishes_it(
    controllers: Make, admin_client: httpx.Client, tmp_path: Path
) -> None:
    pidfile = tmp_path / "agent.pid"
    create_rollout(admin_client, "adopt-me", task={"pidfile": str(pidfile), "sleep": 3, "exit": 0})
    first = controllers().start()
    agent = int(wait_until(lambda: pidfile.exists() and pidfile.read_text()))
    first.stop(kill_running=False)
    assert pid_alive(agent)
    assert get_rollout(admin_client, "adopt-me")["state"] == "running"
    second = controllers().start()
    rollout = wait_terminal(admin_client, "adopt-me")
    assert rollout["state"] == "succeeded"
    assert attempts_of(rollout) == [("succeeded", None)]  # adopted, not started again
    wait_until(lambda: not second.running)


def test_an_attempt_that_died_while_the_controller_was_down_is_infra_and_retried(
    controllers: Make, admin_client: httpx.Client, logs_dir: Path, tmp_path: Path
) -> None:
    pidfile = tmp_path / "agent.pid"
    task = {"pidfile": str(pidfile), "by_attempt": {"1": {"sleep": 60}}}
    create_rollout(admin_client, "died", task=task, max_attempts=2)
    first = controllers().start()
    wait_until(lambda: pidfile.exists())
    first.stop(kill_running=False)
    state = json.loads((logs_dir / "died" / "1.state.json").read_text())
    os.killpg(state["pid"], signal.SIGKILL)  # the machine lost it: no exit status recorded anywhere
    wait_until(lambda: not pid_alive(state["pid"]))
    controllers().start()
    rollout = wait_terminal(admin_client, "died")
    assert rollout["state"] == "succeeded"
    assert attempts_of(rollout) == [("failed", "infra"), ("succeeded", None)]


def test_a_claimed_attempt_no_runner_holds_is_failed_on_recovery(controllers: Make, admin_client: httpx.Client) -> None:
    # A controller that died between recording the handle and starting the process.
    create_rollout(admin_client, "orphan", max_attempts=2)
    claimed = admin_client.post("/api/attempts/claim", json={"limit": 1, "ids": ["orphan"]}).json()["attempts"]
    assert [c["attempt"] for c in claimed] == [1]
    controller = controllers()
    handle = controller.runner.handle_for("orphan", 1)
    assert (
        admin_client.post("/api/rollouts/orphan/attempts/1/handle", json={"runner_handle": handle}).status_code == 200
    )
    controller.start()
    rollout = wait_terminal(admin_client, "orphan")
    assert attempts_of(rollout) == [("failed", "infra"), ("succeeded", None)]


def test_no_more_than_concurrency_attempts_run_at_once(
    controllers: Make, admin_client: httpx.Client, tmp_path: Path
) -> None:
    ids = [f"conc-{i}" for i in range(5)]
    for rollout_id in ids:
        create_rollout(admin_client, rollout_id, task={"sleep": 1.0, "interval_dir": str(tmp_path)})
    controllers(concurrency=2).start()
    for rollout_id in ids:
        assert wait_terminal(admin_client, rollout_id)["state"] == "succeeded"
    intervals = [json.loads(p.read_text()) for p in tmp_path.glob("conc-*.json")]
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    overlap = peak = 0
    for _, step in edges:
        overlap += step
        peak = max(peak, overlap)
    assert len(intervals) == 5
    assert peak == 2


def test_the_agent_gets_the_environment_contract(
    controllers: Make, admin_client: httpx.Client, live_server: Any, tmp_path: Path
) -> None:
    out = tmp_path / "env.json"
    create_rollout(admin_client, "env-1", task={"env_out": str(out), "n": 7}, mode="val")
    controllers().start()
    assert wait_terminal(admin_client, "env-1")["state"] == "succeeded"
    env = json.loads(out.read_text())
    base = live_server.url
    assert env["OPENAI_BASE_URL"] == f"{base}/gw/env-1/1/v1"
    assert env["OPENAI_API_KEY"] == env["ALIGHT_TOKEN"]
    claims = verify_attempt_token(derive_token_secret(live_server.admin_key), env["ALIGHT_TOKEN"])
    assert (claims.rollout_id, claims.attempt) == ("env-1", 1)
    assert (env["ALIGHT_ROLLOUT_ID"], env["ALIGHT_ATTEMPT"], env["ALIGHT_MODE"]) == ("env-1", "1", "val")
    assert json.loads(env["ALIGHT_TASK"]) == {"env_out": str(out), "n": 7}
    assert env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] == f"{base}/v1/traces"
    assert env["OTEL_EXPORTER_OTLP_TRACES_HEADERS"].startswith("authorization=Bearer%20alt1.")
    assert live_server.admin_key not in json.dumps(env)


def test_an_entrypoint_agent_runs_and_its_reward_arrives(controllers: Make, admin_client: httpx.Client) -> None:
    runner = {"entrypoint": f"{AGENTS / 'rollout_fn.py'}:main"}
    create_rollout(admin_client, "entry-1", task={"question": "2+2"}, runner=runner)
    controllers().start()
    rollout = wait_terminal(admin_client, "entry-1", timeout_s=60)
    assert rollout["state"] == "succeeded"
    rewards = admin_client.get("/api/rollouts/entry-1/rewards").json()
    rewards = rewards["rewards"] if isinstance(rewards, dict) else rewards
    assert [r["value"] for r in rewards] == [1.0]


def test_an_outcome_the_server_missed_while_down_is_reported_when_it_returns(
    server_config: Any, store: Any, logs_dir: Path, tmp_path: Path
) -> None:
    pidfile = tmp_path / "agent.pid"
    first = ServerThread(create_app(server_config, store=store), port=server_config.port)
    url = first.start()
    admin = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {server_config.admin_key}"}, timeout=10)
    client = AlightClient(url, admin_key=server_config.admin_key)
    controller = Controller(client, LocalRunner(logs_dir), poll_interval=0.05, kill_grace_s=0.3, watch_interval=0.1)
    try:
        create_rollout(admin, "server-away", task={"pidfile": str(pidfile), "sleep": 1.0, "say": "finished alone"})
        controller.start()
        agent = int(wait_until(lambda: pidfile.exists() and pidfile.read_text()))
        first.stop()
        wait_until(lambda: not pid_alive(agent))
        wait_until(lambda: (logs_dir / "server-away" / "1.exit.json").exists())
        second = ServerThread(create_app(server_config, store=store), port=server_config.port)
        with second:
            rollout = wait_terminal(admin, "server-away")
            assert attempts_of(rollout) == [("succeeded", None)]
            assert "finished alone" in wait_until(lambda: log_events(admin, "server-away"))[0]["payload"]["text"]
    finally:
        controller.stop()
        admin.close()


def test_stopping_a_controller_kills_its_agents_and_leaves_them_to_be_retried(
    controllers: Make, admin_client: httpx.Client, tmp_path: Path
) -> None:
    pidfile = tmp_path / "agent.pid"
    create_rollout(admin_client, "stopped", task={"pidfile": str(pidfile), "sleep": 60}, max_attempts=2)
    controller = controllers().start()
    agent = int(wait_until(lambda: pidfile.exists() and pidfile.read_text()))
    controller.stop()
    assert not pid_alive(agent)
    rollout = get_rollout(admin_client, "stopped")
    assert rollout["state"] == "running"  # claimable again: the next controller runs attempt 2
    assert attempts_of(rollout) == [("failed", "infra")]
    assert "controller stopped" in rollout["attempts"][0]["message"]
