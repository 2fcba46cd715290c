"""Admin changes reach the gateway at once: finished or cancelled rollouts, added or removed upstreams."""

from __future__ import annotations

import httpx

from alight.schemas import AttemptFinish

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}


def _chat(url: str, token: str) -> httpx.Response:
    return httpx.post(f"{url}/chat/completions", headers={"authorization": f"Bearer {token}"}, json=CHAT, timeout=30)


def test_finishing_an_attempt_over_the_api_refuses_its_next_call_at_once(gateway, attempt, admin_client):
    assert _chat(attempt.base_url, attempt.token).status_code == 200  # admission is now cached
    finish = AttemptFinish(status="succeeded").model_dump(mode="json")
    admin_client.post(f"/api/rollouts/{attempt.rollout_id}/attempts/1/finish", json=finish).raise_for_status()
    resp = _chat(attempt.base_url, attempt.token)
    assert resp.status_code == 409, resp.text
    assert "succeeded" in resp.json()["error"]["message"]
    assert len(gateway.server.store.list_model_calls(attempt.rollout_id)) == 1


def test_cancelling_over_the_api_refuses_the_next_call_at_once(gateway, attempt, admin_client):
    assert _chat(attempt.base_url, attempt.token).status_code == 200
    admin_client.post(f"/api/rollouts/{attempt.rollout_id}/cancel").raise_for_status()
    resp = _chat(attempt.base_url, attempt.token)
    assert resp.status_code == 409, resp.text
    assert "cancelled" in resp.json()["error"]["message"]


def test_upstream_removal_and_registration_apply_to_the_next_call(gateway, attempt, admin_client):
    assert _chat(attempt.base_url, attempt.token).status_code == 200  # the upstream list is now cached
    admin_client.delete("/api/upstreams/u1").raise_for_status()
    resp = _chat(attempt.base_url, attempt.token)
    assert resp.status_code == 503, resp.text
    assert "no upstream is registered" in resp.json()["error"]["message"]
    registration = {"id": "u2", "url": gateway.upstream.url, "model": gateway.upstream.model}
    admin_client.post("/api/upstreams", json=registration).raise_for_status()
    resp = _chat(attempt.base_url, attempt.token)
    assert resp.status_code == 200, resp.text
    assert [c.upstream for c in gateway.server.store.list_model_calls(attempt.rollout_id)] == ["u1", None, "u2"]
