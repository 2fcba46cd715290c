"""Attempt routes: claim hands out tokens and URLs, handles, finish with retries and finished-attempt hooks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx

from alight.schemas import AttemptFinish, RewardCreate, RewardSource, Rollout
from alight_server.http.auth import verify_attempt_token
from alight_server.store import Store

if TYPE_CHECKING:
    from tests.conftest import LiveServer
    from tests.server.api.conftest import Claim, Create


def test_claim_hands_out_a_scoped_token_and_the_attempt_urls(live_server: LiveServer, running: dict[str, Any]) -> None:
    assert running["attempt"] == 1 and running["rollout"]["state"] == "running"
    assert running["gateway_base_url"] == f"{live_server.url}/gw/r1/1/v1"
    assert running["otlp_traces_endpoint"] == f"{live_server.url}/v1/traces"
    claims = verify_attempt_token(live_server.app.state.token_secret, running["token"])
    assert (claims.rollout_id, claims.attempt) == ("r1", 1)


def test_claim_with_nothing_waiting_returns_no_attempts(admin_client: httpx.Client) -> None:
    assert admin_client.post("/api/attempts/claim", json={"limit": 3}).json() == {"attempts": []}


def test_runner_handle_is_recorded(admin_client: httpx.Client, running: dict[str, Any]) -> None:
    attempt = admin_client.post("/api/rollouts/r1/attempts/1/handle", json={"runner_handle": "local@h:123"}).json()
    assert attempt["runner_handle"] == "local@h:123"


def test_finish_succeeds_the_rollout(admin_client: httpx.Client, running: dict[str, Any]) -> None:
    rollout = admin_client.post("/api/rollouts/r1/attempts/1/finish", json={"status": "succeeded", "exit_code": 0})
    assert rollout.json()["state"] == "succeeded"


def test_infra_failure_makes_the_rollout_claimable_again(
    admin_client: httpx.Client, create: Create, claim: Claim
) -> None:
    create({"id": "r", "max_attempts": 2})
    claim("r")
    body = {"status": "failed", "failure_kind": "infra", "message": "image missing"}
    assert admin_client.post("/api/rollouts/r/attempts/1/finish", json=body).json()["state"] == "running"
    assert claim("r")["attempt"] == 2


def test_finishing_again_differently_is_409(admin_client: httpx.Client, running: dict[str, Any]) -> None:
    admin_client.post("/api/rollouts/r1/attempts/1/finish", json={"status": "succeeded"})
    response = admin_client.post("/api/rollouts/r1/attempts/1/finish", json={"status": "failed"})
    assert response.status_code == 409 and "already finished" in response.json()["error"]["message"]


def test_finished_attempt_hooks_run_once_before_the_end_is_recorded(
    live_server: LiveServer, admin_client: httpx.Client, running: dict[str, Any]
) -> None:
    seen: list[tuple[str, int, str]] = []

    def evaluator(store: Store, rollout: Rollout, attempt: int, finish: AttemptFinish) -> None:
        seen.append((rollout.state, attempt, finish.status))
        store.add_reward(
            rollout.id, RewardCreate(attempt=attempt, value=0.5, source=RewardSource.EVALUATOR, final=True)
        )

    live_server.app.state.attempt_finished_hooks.append(evaluator)
    for _ in range(2):
        admin_client.post("/api/rollouts/r1/attempts/1/finish", json={"status": "succeeded"})
    assert seen == [("running", 1, "succeeded")]
    assert [w["source"] for w in admin_client.get("/api/rollouts/r1/rewards").json()["rewards"]] == ["evaluator"]


def test_a_failing_hook_is_recorded_and_does_not_fail_the_finish(
    live_server: LiveServer, admin_client: httpx.Client, running: dict[str, Any]
) -> None:
    def broken(store: Store, rollout: Rollout, attempt: int, finish: AttemptFinish) -> None:
        raise RuntimeError("grader crashed")

    live_server.app.state.attempt_finished_hooks.append(broken)
    response = admin_client.post("/api/rollouts/r1/attempts/1/finish", json={"status": "succeeded"})
    assert response.status_code == 200 and response.json()["state"] == "succeeded"
    (event,) = live_server.store.list_events("r1", kind="hook_error")
    assert "grader crashed" in event.payload["error"]
