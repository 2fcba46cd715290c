"""Run routes: a trainer reports its run and step metrics; bad reports are 4xx; the trainer's reporter never raises."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx

from alight.client import AlightClient
from alight_server.trainer.report.server import RunReporter

if TYPE_CHECKING:
    from tests.conftest import LiveServer


def test_a_reported_run_and_its_steps_read_back(admin_client: httpx.Client) -> None:
    assert (
        admin_client.post("/api/runs", json={"id": "r1", "config": {"model": "tiny"}, "steps_planned": 2}).status_code
        == 200
    )
    for step, metrics in ((0, {"val/score": 0.1}), (1, {"train/reward_mean": 0.3})):
        assert admin_client.post("/api/runs/r1/steps", json={"step": step, "metrics": metrics}).status_code == 200
    run = admin_client.get("/api/runs/r1").json()
    assert (run["status"], run["step"], run["steps_planned"]) == ("running", 1, 2)
    steps = admin_client.get("/api/runs/r1/steps").json()["steps"]
    assert [(s["step"], s["metrics"]) for s in steps] == [(0, {"val/score": 0.1}), (1, {"train/reward_mean": 0.3})]


def test_bad_run_reports_get_a_4xx_naming_the_problem(admin_client: httpx.Client) -> None:
    admin_client.post("/api/runs", json={"id": "r1"})
    cases = [
        ("/api/runs", {"id": "has space"}, 422, "id"),
        ("/api/runs", {"id": "r1", "status": "paused"}, 422, "status"),
        ("/api/runs/r1/steps", {"step": -1, "metrics": {}}, 422, "step"),
        ("/api/runs/r1/steps", {"step": 1, "metrics": {"x": "high"}}, 422, "metrics"),
        ("/api/runs/ghost/steps", {"step": 1, "metrics": {}}, 404, "no run with id 'ghost'"),
    ]
    for path, body, status, words in cases:
        response = admin_client.post(path, json=body)
        assert response.status_code == status, (body, response.text)
        assert words in response.json()["error"]["message"], response.text
    infinite = admin_client.post(
        "/api/runs/r1/steps",
        content=b'{"step": 1, "metrics": {"x": 1e999}}',
        headers={"Content-Type": "application/json"},
    )
    assert infinite.status_code == 422 and "finite" in infinite.json()["error"]["message"]


def test_an_attempt_token_cannot_report_or_read_runs(live_server: LiveServer, running: dict[str, object]) -> None:
    headers = {"Authorization": f"Bearer {running['token']}"}
    assert httpx.post(f"{live_server.url}/api/runs", json={"id": "r1"}, headers=headers).status_code == 403
    assert httpx.get(f"{live_server.url}/api/runs", headers=headers).status_code == 403


def test_the_reporter_stops_quietly_when_the_server_refuses(live_server: LiveServer) -> None:
    with AlightClient(live_server.url, live_server.admin_key) as client:
        reporter = RunReporter(client, "never-started", {}, 2)
        reporter.step(1, {"train/loss": 0.5})  # 404: the run was never reported
        assert not reporter.enabled
        reporter.finish(ok=True)  # a no-op now, and no exception either


def test_the_reporter_drops_non_finite_metrics(live_server: LiveServer) -> None:
    with AlightClient(live_server.url, live_server.admin_key) as client:
        reporter = RunReporter(client, "r2", {"model": "tiny"}, 1).start()
        reporter.step(1, {"train/loss": float("inf"), "train/reward_mean": 0.5})
        reporter.finish(ok=False)
    assert live_server.store.list_run_steps("r2")[0].metrics == {"train/reward_mean": 0.5}
    assert live_server.store.get_run("r2").status == "failed"
