"""Evaluator hooks: config.evaluator scores a finished attempt's trajectory; its rewards are stored."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from alight.schemas import RewardSource, RolloutCreate
from alight_server.app import create_app
from alight_server.config import ServerConfig
from alight_server.stacks.server_thread import ServerThread

pytestmark = pytest.mark.timeout(60)

EVALUATOR = """
import math

def score(trajectory):
    mode = TASKS[trajectory.rollout_id]
    if mode == "dict":
        return {"succeeded": float(trajectory.attempt_status == "succeeded"), "calls": float(len(trajectory.calls))}
    if mode == "nan":
        return math.nan
    if mode == "none":
        return None
    return 0.5

async def ascore(trajectory):
    return 2.0

TASKS = {"r-dict": "dict", "r-nan": "nan", "r-none": "none", "r-float": "float"}
"""


def serve(tmp_path: Path, sqlite_url: str, evaluator: str):
    (tmp_path / "scoring.py").write_text(EVALUATOR)
    config = ServerConfig(admin_key="alk_eval", db_url=sqlite_url, evaluator=f"{tmp_path / 'scoring.py'}:{evaluator}")
    return create_app(config)


def run_attempt(url: str, rollout_id: str, status: str = "succeeded") -> httpx.Response:
    headers = {"authorization": "Bearer alk_eval"}
    with httpx.Client(base_url=url, headers=headers, timeout=10) as client:
        client.post("/api/rollouts", json={"rollouts": [RolloutCreate(id=rollout_id).model_dump(mode="json")]})
        assert client.post("/api/attempts/claim", json={"limit": 1, "ids": [rollout_id]}).status_code == 200
        body = {"status": status, **({"failure_kind": "task", "exit_code": 1} if status == "failed" else {})}
        return client.post(f"/api/rollouts/{rollout_id}/attempts/1/finish", json=body)


def test_a_dict_becomes_named_final_rewards_seen_with_the_attempt_outcome(tmp_path, sqlite_url):
    app = serve(tmp_path, sqlite_url, "score")
    with ServerThread(app) as url:
        assert run_attempt(url, "r-dict", status="failed").status_code == 200
    rewards = {r.name: r for r in app.state.store.list_rewards("r-dict")}
    assert {n: r.value for n, r in rewards.items()} == {"succeeded": 0.0, "calls": 0.0}
    assert all(r.final and r.source == RewardSource.EVALUATOR and r.attempt == 1 for r in rewards.values())


def test_a_number_is_the_final_reward_and_async_evaluators_work(tmp_path, sqlite_url):
    app = serve(tmp_path, sqlite_url, "ascore")
    with ServerThread(app) as url:
        assert run_attempt(url, "r-float").status_code == 200
    [reward] = app.state.store.list_rewards("r-float")
    assert (reward.value, reward.name, reward.final) == (2.0, None, True)


@pytest.mark.parametrize("rollout_id", ["r-nan", "r-none"])
def test_nan_or_none_stores_no_reward_and_the_attempt_still_finishes(tmp_path, sqlite_url, rollout_id):
    app = serve(tmp_path, sqlite_url, "score")
    with ServerThread(app) as url:
        answer = run_attempt(url, rollout_id)
    assert answer.status_code == 200 and answer.json()["state"] == "succeeded"
    assert app.state.store.list_rewards(rollout_id) == []
    errors = app.state.store.list_events(rollout_id, kind="hook_error")
    assert len(errors) == (1 if rollout_id == "r-nan" else 0)
    if errors:
        assert "finite number" in errors[0].payload["error"]


def test_an_evaluator_that_cannot_be_loaded_stops_the_server_from_starting(tmp_path, sqlite_url):
    with pytest.raises(ValueError, match="no attribute 'missing'"):
        serve(tmp_path, sqlite_url, "missing")


TASK_EVALUATOR = """
def score(task, trajectory):
    return {"sees_task": float(task == {"answer": 42} and trajectory.task == task),
            "empty_text": float(trajectory.final_output.text == "")}
"""


def run_task_attempt(url: str, rollout_id: str, finish: dict, **create: object) -> httpx.Response:
    headers = {"authorization": "Bearer alk_eval"}
    rollout = RolloutCreate(id=rollout_id, task={"answer": 42}, **create).model_dump(mode="json")  # type: ignore[arg-type]
    with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
        client.post("/api/rollouts", json={"rollouts": [rollout]})
        assert client.post("/api/attempts/claim", json={"limit": 1, "ids": [rollout_id]}).status_code == 200
        return client.post(f"/api/rollouts/{rollout_id}/attempts/1/finish", json=finish)


def test_a_two_parameter_evaluator_gets_the_task_and_a_trajectory_with_no_calls(tmp_path, sqlite_url):
    (tmp_path / "scoring.py").write_text(TASK_EVALUATOR)
    app = create_app(ServerConfig(admin_key="alk_eval", db_url=sqlite_url, evaluator=f"{tmp_path}/scoring.py:score"))
    with ServerThread(app) as url:
        assert run_task_attempt(url, "r-task", {"status": "succeeded"}).status_code == 200
    rewards = {r.name: r.value for r in app.state.store.list_rewards("r-task")}
    assert rewards == {"sees_task": 1.0, "empty_text": 1.0}


@pytest.mark.parametrize("kind", ["timeout", "infra"])
def test_an_attempt_that_timed_out_or_failed_on_infra_gets_no_evaluator_reward(tmp_path, sqlite_url, kind):
    app = serve(tmp_path, sqlite_url, "ascore")
    with ServerThread(app) as url:
        answer = run_task_attempt(url, "r-float", {"status": "failed", "failure_kind": kind}, max_attempts=1)
    assert answer.status_code == 200 and answer.json()["state"] == "failed"
    assert app.state.store.list_rewards("r-float") == []


def test_a_task_failure_is_still_scored(tmp_path, sqlite_url):
    app = serve(tmp_path, sqlite_url, "ascore")
    with ServerThread(app) as url:
        run_task_attempt(url, "r-float", {"status": "failed", "failure_kind": "task", "exit_code": 1})
    assert [r.value for r in app.state.store.list_rewards("r-float")] == [2.0]


CHECK = """
import json, os, sys
payload = json.load(sys.stdin)
assert payload["task"] == json.loads(os.environ["ALIGHT_TASK"])
open("checked.txt", "w").write(str(payload["task"]["answer"]))
print("running the checks...")
sys.exit(0 if payload["task"]["answer"] == 42 else 1)
"""


def test_a_check_command_runs_in_the_attempts_working_directory_and_scores_by_exit_status(tmp_path, sqlite_url):
    import sys

    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "check.py").write_text(CHECK)
    command = [sys.executable, str(tmp_path / "check.py")]
    app = create_app(ServerConfig(admin_key="alk_eval", db_url=sqlite_url, evaluator=command))
    with ServerThread(app) as url:
        runner = {"command": ["true"], "cwd": str(work)}
        assert run_task_attempt(url, "r-check", {"status": "succeeded"}, runner=runner).status_code == 200
    assert [r.value for r in app.state.store.list_rewards("r-check")] == [1.0]
    assert (work / "checked.txt").read_text() == "42"


def test_a_check_command_that_prints_a_json_dict_gives_named_rewards(tmp_path, sqlite_url):
    import sys

    command = [sys.executable, "-c", "print('log line'); print('{\"tests\": 0.5}')"]
    app = create_app(ServerConfig(admin_key="alk_eval", db_url=sqlite_url, evaluator=command))
    with ServerThread(app) as url:
        run_task_attempt(url, "r-json", {"status": "succeeded"})
    assert [(r.name, r.value) for r in app.state.store.list_rewards("r-json")] == [("tests", 0.5)]
