"""Agents write only while their attempt runs; the credential, not the body, decides a reward's source."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from alight.schemas import AttemptFinish, FailureKind, RewardCreate, RewardSource
from alight_server.http import deps
from tests.server.otlp.test_ingest import otlp_json

if TYPE_CHECKING:
    from tests.conftest import LiveServer
    from tests.server.api.conftest import Claim, Create

_http = httpx.Client(timeout=30)


def _post(live_server: LiveServer, path: str, body: Any, token: str, content_type: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"}
    if content_type is None:
        return _http.post(live_server.url + path, json=body, headers=headers)
    return _http.post(live_server.url + path, content=body, headers={**headers, "content-type": content_type})


def _reward(live_server: LiveServer, token: str, **fields: Any) -> httpx.Response:
    return _post(live_server, "/api/rollouts/r1/rewards", {"attempt": 1, "value": 9.0, "final": True, **fields}, token)


def _event(live_server: LiveServer, token: str) -> httpx.Response:
    return _post(live_server, "/api/rollouts/r1/events", {"kind": "log", "payload": {"late": True}}, token)


def _otlp(live_server: LiveServer, token: str, span_id: str, with_reward: bool) -> httpx.Response:
    export = otlp_json("r1", value=9.0, span_id=span_id)
    if not with_reward:
        export["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["events"] = []
    return _post(live_server, "/v1/traces", json.dumps(export).encode(), token, "application/json")


def _finish(admin_client: httpx.Client, status: str = "succeeded") -> None:
    body = {"status": status} if status == "succeeded" else {"status": status, "failure_kind": "task"}
    answer = admin_client.post("/api/rollouts/r1/attempts/1/finish", json=body)
    assert answer.status_code == 200, answer.text


def test_rewards_and_events_after_the_attempt_finished_are_refused_with_409(
    live_server: LiveServer, running: dict[str, Any], admin_client: httpx.Client
) -> None:
    assert _reward(live_server, running["token"], value=0.0).status_code == 200
    _finish(admin_client)
    late = _reward(live_server, running["token"])
    assert late.status_code == 409
    assert "only while its attempt runs" in late.json()["error"]["message"]
    assert _event(live_server, running["token"]).status_code == 409
    assert [r.value for r in live_server.store.list_rewards("r1")] == [0.0]


def test_rewards_after_the_rollout_was_cancelled_are_refused_with_409(
    live_server: LiveServer, running: dict[str, Any], admin_client: httpx.Client
) -> None:
    assert admin_client.post("/api/rollouts/r1/cancel").status_code == 200
    late = _reward(live_server, running["token"])
    assert late.status_code == 409 and "ended (failed)" in late.json()["error"]["message"]
    assert live_server.store.list_rewards("r1") == []


def test_an_otlp_reward_after_the_attempt_ended_is_refused_but_its_spans_land_within_the_grace(
    live_server: LiveServer, running: dict[str, Any], admin_client: httpx.Client
) -> None:
    _finish(admin_client)
    assert _otlp(live_server, running["token"], "01" * 8, with_reward=False).status_code == 200
    late = _otlp(live_server, running["token"], "02" * 8, with_reward=True)
    assert late.status_code == 409, late.text
    assert live_server.store.list_rewards("r1") == []
    assert len(live_server.store.list_spans("r1")) == 2  # spans are telemetry; only the reward is refused


def test_a_retried_reward_stored_while_the_attempt_ran_is_still_acknowledged(
    live_server: LiveServer, running: dict[str, Any], admin_client: httpx.Client
) -> None:
    assert _reward(live_server, running["token"], id="final").status_code == 200
    _finish(admin_client)
    again = _reward(live_server, running["token"], id="final")
    assert again.status_code == 200 and again.json()["id"] == "final"


def test_the_token_of_an_attempt_that_ended_past_the_grace_is_refused_with_401(
    live_server: LiveServer, running: dict[str, Any], admin_client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    _finish(admin_client, "failed")
    monkeypatch.setattr(deps, "ENDED_ATTEMPT_GRACE_S", 0.0)
    for answer in (
        _otlp(live_server, running["token"], "03" * 8, with_reward=False),
        _event(live_server, running["token"]),
    ):
        assert answer.status_code == 401
        assert "has expired: the attempt ended (failed)" in answer.json()["error"]["message"]
    assert live_server.store.list_spans("r1") == []


@pytest.mark.parametrize("claimed", ["evaluator", "fallback"])
def test_an_agent_cannot_post_a_reward_under_another_source(
    live_server: LiveServer, running: dict[str, Any], claimed: str
) -> None:
    forged = _reward(live_server, running["token"], source=claimed)
    assert forged.status_code == 403 and "agent rewards only" in forged.json()["error"]["message"]
    assert live_server.store.list_rewards("r1") == []


def test_the_admin_key_posts_evaluator_rewards_whatever_the_body_says(
    live_server: LiveServer, running: dict[str, Any]
) -> None:
    assert _reward(live_server, live_server.admin_key, source="agent").json()["source"] == "evaluator"
    assert _reward(live_server, live_server.admin_key, id="fb", source="fallback").json()["source"] == "fallback"


def test_an_agent_reward_posted_after_the_evaluators_does_not_replace_it(
    live_server: LiveServer, create: Create, claim: Claim, admin_client: httpx.Client
) -> None:
    create({"id": "r1"})
    token = claim("r1")["token"]
    store = live_server.store
    store.add_reward("r1", RewardCreate(attempt=1, value=0.0, final=True, source=RewardSource.EVALUATOR))
    assert _reward(live_server, token, value=9.0).status_code == 200  # later, and still running
    store.finish_attempt("r1", 1, AttemptFinish(status="failed", failure_kind=FailureKind.TASK))
    trajectory = admin_client.get("/api/rollouts/r1/trajectory").json()
    assert trajectory["final_reward"] == 0.0
