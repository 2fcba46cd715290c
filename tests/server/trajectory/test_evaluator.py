"""Evaluator hooks: config.evaluator scores a finished attempt's trajectory; its rewards are stored."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from alight.schemas import RewardSource, RolloutCreate
from alight_server.app import create_app
from alight_server.config import ServerConfig
from alight_server.serving import ServerThread

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
